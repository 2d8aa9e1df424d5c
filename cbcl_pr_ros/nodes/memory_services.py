"""The learner's memory as its services reach it: the state gate and the six memory services.

Every service reaches the controller through :meth:`MemoryServices.controller_for` (read-only
requests) or :meth:`MemoryServices.committing` (changes): the node's lifecycle state must allow the
request and the memory must be loaded, else the answer says why and nothing changes. A change is
made under the node's commit lock, so a transition never overtakes it (docs/nodes.md "Lifecycle").

ListClasses and SaveMemory answer while inactive (they change no class); ForgetClass, RenameClass,
LoadMemory and MergeMemory need the node active. Each callback copies the request's fields into one
controller call and fills the response from the outcome.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from cbcl_pr_ros.nodes.conversions import class_info_msgs
from cbcl_pr_ros.nodes.lifecycle import ACTIVE, INACTIVE
from cbcl_pr_ros.service.controller import LearnerController, Outcome

__all__ = ["MemoryServices"]


class MemoryServices:
    """Gate and service callbacks over ``node.controller`` (None while the node is unconfigured)."""

    def __init__(self, node: Any) -> None:
        self.node = node

    def controller_for(self, what: str, need: str) -> tuple[Any, str | None]:
        """(controller, None) when the node's state allows ``what``, else (controller or None, refusal)."""
        refused = self.node.refusal(what, need)
        c = self.node.controller
        if refused is None and c is None:
            refused = f"{what} refused: the memory is not loaded (the node is between transitions)"
        return c, refused

    @contextmanager
    def committing(self, what: str, need: str = ACTIVE,
                   expected: Any = None) -> Iterator[tuple[Any, str | None]]:
        """(controller, refusal) under the commit lock: a change made inside is done before any
        transition goes on; ``expected``: the controller the request started with (a request that
        waited across cleanup/configure is refused rather than taught into a freed memory)."""
        with self.node.committing(what, need) as refused:
            c = self.node.controller
            if refused is None and c is None:
                refused = f"{what} refused: the memory is not loaded (the node is between transitions)"
            if refused is None and expected is not None and c is not expected:
                refused = (f"{what} refused: the node was cleaned up and configured again while the request "
                           "gathered its examples; nothing was changed, send it again")
            yield c, refused

    def on_list(self, req: Any, resp: Any) -> Any:
        c, refused = self.controller_for("list_classes", INACTIVE)
        if refused:  # an empty list that says why (the classes are on disk, not lost)
            resp.message = refused
            return resp
        resp.classes = class_info_msgs(c.class_info())
        resp.model_version = c.model_version
        return resp

    def on_forget(self, req: Any, resp: Any) -> Any:
        return self._change("forget_class", lambda c: c.forget(req.label), resp)

    def on_rename(self, req: Any, resp: Any) -> Any:
        return self._change("rename_class", lambda c: c.rename(req.old_label, req.new_label), resp)

    # rclpy binds a severity to each logging call site: success and failure log from separate lines
    def on_save(self, req: Any, resp: Any) -> Any:
        with self.committing("save_memory", INACTIVE) as (c, refused):  # changes no class: also inactive
            if refused:
                resp.success, resp.message = False, refused
                return resp
            ok, message, path, size = c.save(req.path)
        if ok:
            self.node.get_logger().info(message)
        else:  # a refused name or a full disk: the answer says what to do
            self.node.get_logger().warning(message)
        resp.success, resp.message, resp.path, resp.bytes_written = ok, message, path, size
        return resp

    def on_load(self, req: Any, resp: Any) -> Any:
        return self._change("load_memory", lambda c: c.load(req.path), resp)

    def on_merge(self, req: Any, resp: Any) -> Any:
        return self._change("merge_memory", lambda c: c.merge(req.path), resp)

    def _change(self, what: str, call: Callable[[LearnerController], Outcome], resp: Any) -> Any:
        """Forget, rename, load, merge: ``call(controller)`` while active, committed before the answer."""
        with self.committing(what) as (c, refused):
            if refused:
                state = (c.model_version, len(c.classes)) if c is not None else (0, 0)
                out = Outcome(False, refused, *state)
            else:
                out = call(c)
        if not refused and out.success:  # rclpy binds a severity to each logging call site: one per line
            self.node.get_logger().info(out.message)
        elif not refused:  # a user's mistake (unknown class, refused file): the answer says what to do
            self.node.get_logger().warning(out.message)
        resp.success, resp.message, resp.model_version = out.success, out.message, out.model_version
        if hasattr(resp, "num_classes"):  # RenameClass has none
            resp.num_classes = out.num_classes
        return resp
