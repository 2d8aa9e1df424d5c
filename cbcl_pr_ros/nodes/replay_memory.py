"""A replay into running nodes teaches a temporary memory: the learner's memory as it was is saved to
a file of its own before the first teaching event and loaded back when the replay ends.

A recorded session's classes (an example bag's mug and duck) are not the robot's: replayed into a
running learner they used to stay in its memory file for good, without a word. ``--keep-taught``
keeps them. A learner that keeps its memory in RAM only cannot save a copy: the replay then says
that its classes stay until the learner restarts.
"""
from __future__ import annotations

import time
from typing import Any, Callable

__all__ = ["TemporaryMemory", "backup_name"]

Call = Callable[[str, Any], Any]  # (service "save_memory" | "load_memory", request) -> response


def backup_name(now: float | None = None) -> str:
    """The file (inside the learner's memory directory) that holds its memory during a replay."""
    return time.strftime("before-replay-%Y%m%d-%H%M%S.safetensors", time.gmtime(time.time() if now is None else now))


class TemporaryMemory:
    """Context manager around a replay: saves the learner's memory first, loads it back at the end
    (also after an error or Ctrl-C). ``call`` sends one request to the learner and returns its answer;
    ``make`` builds a request of a service; ``say`` tells the person (a log line)."""

    def __init__(self, call: Call, make: Callable[[str], Any], say: Callable[[str], None], name: str = "") -> None:
        self.call, self.make, self.say = call, make, say
        self.name = name or backup_name()
        self.saved_path = ""
        self.restored: bool | None = None  # None: nothing to restore (RAM only)
        self.message = ""

    def __enter__(self) -> "TemporaryMemory":
        req = self.make("save_memory")
        req.path = self.name
        res = self.call("save_memory", req)
        if res.success:
            self.saved_path = str(res.path) or self.name
            self.say(f"replaying into a temporary memory: the learner's memory is kept in '{self.saved_path}' "
                     "and loaded back when the replay ends (--keep-taught keeps what the replay teaches)")
        else:
            self.say(f"the learner's memory could not be saved before the replay ({str(res.message)[:200]}): "
                     "what the replay teaches stays in the learner until it restarts or loads another memory")
        return self

    def __exit__(self, *_exc: Any) -> None:
        if not self.saved_path:
            return
        req = self.make("load_memory")
        req.path = self.name
        try:
            res = self.call("load_memory", req)
            self.restored, self.message = bool(res.success), str(res.message)
        except Exception as exc:  # noqa: BLE001 - the person must hear how to restore it by hand
            self.restored, self.message = False, f"{type(exc).__name__}: {exc}"
        if self.restored:
            self.say(f"the learner's memory is back as before the replay (from '{self.saved_path}')")
        else:
            self.say(f"the learner's memory was NOT restored ({self.message[:200]}): load it by hand with the "
                     f"load_memory service, path '{self.name}'")
