"""Memory files a peer may name: resolved inside one directory, regular files only, size-capped.

SaveMemory and LoadMemory take a *name* (or "" for the default file).  A :class:`MemoryStore`
resolves it inside ``memory_dir``, which is fixed when the node starts:

* a name is one path component of ``[A-Za-z0-9_-][A-Za-z0-9._-]*`` (at most 128 characters): no
  separators, no ``..``, no hidden files, nothing expanded (``~`` and ``$VAR`` are not special, and
  are refused by that pattern);
* the directory is opened once; every file operation is relative to that descriptor and opens with
  ``O_NOFOLLOW``, so neither a renamed directory nor a symlink leads out of it;
* only regular files are read (a FIFO or device is refused without blocking: ``O_NONBLOCK``), and
  only up to ``max_bytes``, checked with ``fstat`` before reading;
* a save never replaces anything but a regular file, never writes more than ``max_bytes`` (a file it
  could not read back), and writes through a temporary file that is renamed (atomic); temporary
  files left by a killed save are removed by :meth:`remove_stale_temp`;
* error messages name the file as the caller gave it and nothing else.

An absolute path is accepted only when the operator allows it (``allow_absolute_paths``); it gets
the same file checks but may be anywhere the process can write.
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["MemoryAccessError", "MemoryStore", "Target", "NAME_PATTERN", "default_memory_dir",
           "TEMP_SUFFIX", "earlier_memory_note", "memory_dir_for", "store_from_params"]

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
TEMP_SUFFIX = ".tmp"
_NAMESPACE_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
_TEMP_PATTERN = re.compile(r"\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}\.[0-9a-f]{16}\.tmp")


class MemoryAccessError(ValueError):
    """A memory file name or file is refused; the message is fit for a service response."""


def default_memory_dir(namespace: str = "") -> str:
    """``$ROS_HOME/cbcl_pr_ros`` (``~/.ros/cbcl_pr_ros`` without ROS_HOME), as ROS places its logs; a
    learner in a namespace gets a folder of its own below it (``/robot1`` -> ``.../cbcl_pr_ros/robot1``),
    so two robots on one machine never share what they learned."""
    home = os.environ.get("ROS_HOME") or str(Path.home() / ".ros")  # the user's home, never a request's path
    parts = [p for p in namespace.split("/") if p]
    if any(not _NAMESPACE_PART.fullmatch(p) for p in parts):
        raise ValueError(f"namespace {namespace[:80]!r} is not a ROS namespace")
    return os.path.join(home, "cbcl_pr_ros", *parts)


@dataclass(frozen=True)
class Target:
    """A resolved file: directory descriptor + entry name, and how to name it in messages."""

    dir_fd: int
    name: str
    shown: str
    owned_fd: bool = False  # True when dir_fd was opened for this target (absolute paths)


class MemoryStore:
    """The memory directory of one learner and the checked file operations inside it.

    Parameters
    ----------
    memory_dir : absolute directory (created with mode 0700 when missing).
    default_name : the file used when a request names none ("" = no default: RAM only).
    allow_absolute : accept absolute paths in requests (off by default).
    max_bytes : largest memory file that is read.
    """

    def __init__(self, memory_dir: str, default_name: str = "memory.safetensors", *,
                 allow_absolute: bool = False, max_bytes: int = 256 * 1024 * 1024) -> None:
        if not memory_dir or not os.path.isabs(memory_dir):
            raise ValueError(f"memory_dir must be an absolute directory, got {memory_dir!r}")
        if default_name and not NAME_PATTERN.fullmatch(default_name):
            raise ValueError(f"default memory file name {default_name!r} is not a plain file name")
        os.makedirs(memory_dir, mode=0o700, exist_ok=True)
        self.memory_dir = os.path.realpath(memory_dir)
        self.default_name = default_name
        self.allow_absolute = bool(allow_absolute)
        self.max_bytes = int(max_bytes)
        self._dir_fd = os.open(self.memory_dir, os.O_RDONLY | os.O_DIRECTORY)

    def close(self) -> None:
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1

    @property
    def default_path(self) -> str:
        """The default file's full path (for the status message; "" when RAM only)."""
        return os.path.join(self.memory_dir, self.default_name) if self.default_name else ""

    # ------------------------------------------------------------------ resolution
    def resolve(self, requested: str) -> Target:
        """The target for a request's path field; MemoryAccessError when refused."""
        if not isinstance(requested, str):
            raise MemoryAccessError("the memory file name must be a string")
        if requested == "":
            if not self.default_name:
                raise MemoryAccessError("no memory file configured (memory_path is '') and none named")
            return Target(self._dir_fd, self.default_name, self.default_name)
        if requested.startswith("/"):
            if not self.allow_absolute:
                raise MemoryAccessError("absolute paths are refused (parameter allow_absolute_paths is "
                                        "off): give a file name inside the memory directory")
            return self._absolute(requested)
        if not NAME_PATTERN.fullmatch(requested):
            raise MemoryAccessError(
                f"memory file name {_shown(requested)} refused: use 1-128 characters of letters, digits, "
                "'.', '_' or '-', not starting with '.', and no path separators")
        return Target(self._dir_fd, requested, requested)

    def _absolute(self, path: str) -> Target:
        norm = os.path.normpath(path)
        parent, name = os.path.split(norm)
        if not NAME_PATTERN.fullmatch(name):
            raise MemoryAccessError(f"file name {_shown(name)} refused (letters, digits, '.', '_', '-')")
        try:
            fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise MemoryAccessError(f"directory of {_shown(norm)} cannot be opened: {exc.strerror}") from None
        return Target(fd, name, norm, owned_fd=True)

    # ------------------------------------------------------------------ operations
    def read(self, requested: str) -> tuple[bytes, str]:
        """(bytes, shown name) of a regular file of at most ``max_bytes``; MemoryAccessError otherwise."""
        t = self.resolve(requested)
        try:
            try:
                fd = os.open(t.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             dir_fd=t.dir_fd)
            except FileNotFoundError:
                raise MemoryAccessError(f"no memory file {_shown(t.shown)}") from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise MemoryAccessError(f"{_shown(t.shown)} is a symbolic link; links are not "
                                            "followed") from None
                raise MemoryAccessError(f"cannot open {_shown(t.shown)}: {exc.strerror}") from None
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise MemoryAccessError(f"{_shown(t.shown)} is not a regular file")
                if st.st_size > self.max_bytes:
                    raise MemoryAccessError(f"{_shown(t.shown)} has {st.st_size} bytes; the most read is "
                                            f"{self.max_bytes} (parameter max_memory_file_bytes)")
                with os.fdopen(os.dup(fd), "rb") as fh:
                    blob = fh.read(self.max_bytes + 1)
                if len(blob) > self.max_bytes:
                    raise MemoryAccessError(f"{_shown(t.shown)} grew beyond {self.max_bytes} bytes while read")
                return blob, t.shown
            finally:
                os.close(fd)
        finally:
            _release(t)

    def exists(self, requested: str) -> bool:
        t = self.resolve(requested)
        try:
            os.stat(t.name, dir_fd=t.dir_fd, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False
        finally:
            _release(t)

    def write(self, requested: str, blob: bytes) -> tuple[int, str]:
        """Atomically replace (or create) the file with ``blob``; (bytes written, shown name)."""
        if len(blob) > self.max_bytes:  # never write a file this store would refuse to read back
            raise MemoryAccessError(f"the memory needs {len(blob)} bytes, above the {self.max_bytes} that are "
                                    "read back (parameter max_memory_file_bytes): raise that cap, set "
                                    "max_clusters to bound the memory, or forget classes")
        t = self.resolve(requested)
        try:
            try:
                st = os.stat(t.name, dir_fd=t.dir_fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    raise MemoryAccessError(f"{_shown(t.shown)} exists and is not a regular file; "
                                            "it is left alone")
            except FileNotFoundError:
                pass
            tmp = f".{t.name}.{secrets.token_hex(8)}{TEMP_SUFFIX}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o600, dir_fd=t.dir_fd)
            except OSError as exc:
                raise MemoryAccessError(f"cannot write {_shown(t.shown)}: {exc.strerror}") from None
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(blob)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, t.name, src_dir_fd=t.dir_fd, dst_dir_fd=t.dir_fd)
            except BaseException as exc:
                try:
                    os.unlink(tmp, dir_fd=t.dir_fd)
                except OSError:
                    pass
                if isinstance(exc, OSError):
                    raise MemoryAccessError(f"cannot write {_shown(t.shown)}: {exc.strerror}") from None
                raise
            try:
                os.fsync(t.dir_fd)
            except OSError:
                pass
            return len(blob), t.shown
        finally:
            _release(t)

    def move_aside(self, requested: str, suffix: str) -> str:
        """Rename a refused file to ``<name>.<suffix>`` in the same directory (never deleted)."""
        t = self.resolve(requested)
        try:
            new = f"{t.name}.{suffix}"
            os.replace(t.name, new, src_dir_fd=t.dir_fd, dst_dir_fd=t.dir_fd)
            return new
        finally:
            _release(t)

    def remove_stale_temp(self) -> list[str]:
        """Delete temporary files of saves that never finished (a killed process); their names.

        Only entries of this store's own temp pattern that are regular files are removed.  Call it at
        start-up, before the node saves anything (one learner per memory directory).
        """
        removed = []
        for entry in os.listdir(self._dir_fd):
            if not _TEMP_PATTERN.fullmatch(entry):
                continue
            try:
                st = os.stat(entry, dir_fd=self._dir_fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    os.unlink(entry, dir_fd=self._dir_fd)
                    removed.append(entry)
            except OSError:
                continue
        return removed


def _shown(text: str) -> str:
    s = str(text)
    return repr(s[:80] + ("..." if len(s) > 80 else ""))


def _release(t: Target) -> None:
    if t.owned_fd:
        os.close(t.dir_fd)


def memory_dir_for(memory_dir: str, memory_path: str, namespace: str = "") -> tuple[str, str]:
    """(directory, default file name) from the two parameters.

    ``memory_path`` is a plain name inside ``memory_dir``, or an absolute path (operator
    configuration) whose directory then is the memory directory when ``memory_dir`` is "".
    ``memory_dir`` "" means :func:`default_memory_dir` of the learner's ``namespace``.  Nothing is expanded.
    """
    if memory_dir and not os.path.isabs(memory_dir):
        raise ValueError(f"memory_dir must be an absolute path or '', got {memory_dir!r}")
    if memory_path.startswith("/"):
        parent, name = os.path.split(os.path.normpath(memory_path))
        if memory_dir and os.path.realpath(parent) != os.path.realpath(memory_dir):
            raise ValueError(f"memory_path {memory_path!r} is not inside memory_dir {memory_dir!r}")
        return (memory_dir or parent), name
    if memory_path and not NAME_PATTERN.fullmatch(memory_path):
        raise ValueError(f"memory_path must be a plain file name or an absolute path, got {memory_path!r}")
    return (memory_dir or default_memory_dir(namespace)), memory_path


def earlier_memory_note(p: Mapping[str, Any], namespace: str) -> str:
    """For a learner in a namespace that starts without a memory file: where the memory of the
    learner without a namespace is, which it shared before memories were kept per namespace."""
    name = p["memory_path"]
    if p["memory_dir"] or not name or name.startswith("/") or not namespace.strip("/"):
        return ""
    old = os.path.join(default_memory_dir(), name)
    new = os.path.join(default_memory_dir(namespace), name)
    if os.path.isfile(old) and not os.path.exists(new):
        return f"; the memory of the learner without a namespace is {old}: copy it to {new} to start from it"
    return ""


def store_from_params(p: Mapping[str, Any], namespace: str = "") -> MemoryStore | None:
    """The learner's store from its parameters (``settings.params`` names) and its ROS namespace; None
    when ``memory_path`` is "" (the memory lives in RAM only)."""
    if not p["memory_path"]:
        return None
    memory_dir, default_name = memory_dir_for(p["memory_dir"], p["memory_path"], namespace)
    return MemoryStore(memory_dir, default_name, allow_absolute=p["allow_absolute_paths"],
                       max_bytes=p["max_memory_file_bytes"])
