"""What the page asks of the robot, as a plain interface (no ROS, no HTTP)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Outcome", "TeachingClient", "Box"]

Box = tuple[int, int, int, int]  # x, y, width, height in image pixels


@dataclass(frozen=True)
class Outcome:
    """The answer to one page action: ``ok`` and one sentence for the person at the page; a teach also
    says which object it used (its track id, -1 when none, and its box x0, y0, x1, y1) so the page
    can highlight it."""
    ok: bool
    message: str
    track_id: int = -1
    box: tuple[int, int, int, int] | None = None


class TeachingClient(Protocol):
    """The robot side of the page. Every method blocks until the robot answered (or timed out) and
    never raises for a refusal: a refusal is an ``Outcome(False, why)``."""

    def teach_track(self, label: str, track_id: int) -> Outcome:
        """Learn ``label`` from the recent views of one tracked object."""

    def teach_box(self, label: str, box: Box) -> Outcome:
        """Learn ``label`` from the object inside ``box`` in the next camera frames."""

    def rename(self, old: str, new: str) -> Outcome: ...

    def forget(self, label: str) -> Outcome: ...

    def point_at(self, label: str) -> Outcome: ...

    def look_at_table(self) -> Outcome:
        """Aim the hand camera at the table again (after pointing)."""

    def place_objects(self) -> Outcome:
        """Put a few objects on the simulated table."""
