"""Finding, hashing and loading backbone weights without ever downloading them.

The machines this runs on may have no internet, so weights come from a file a user names, a
package that ships them, or a torch hub cache the user already has; anything else is an error
that says what was expected and where we looked.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

__all__ = [
    "WeightsNotFoundError",
    "WeightsMismatchError",
    "file_sha256",
    "hub_checkpoint_dir",
    "find_hub_checkpoint",
    "load_state_dict_file",
    "load_into",
]

_HASH_MEMO: dict[tuple[str, int, int], str] = {}


class WeightsNotFoundError(FileNotFoundError):
    """No weights file where the backbone looked for one."""


class WeightsMismatchError(ValueError):
    """A weights file exists but does not fit the backbone's architecture."""


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file, memoised on (path, size, mtime) so it is computed once."""
    p = os.path.abspath(os.fspath(path))
    st = os.stat(p)
    key = (p, st.st_size, st.st_mtime_ns)
    if key not in _HASH_MEMO:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _HASH_MEMO[key] = h.hexdigest()
    return _HASH_MEMO[key]


def hub_checkpoint_dir() -> Path:
    """Where torch hub keeps downloaded checkpoints ($TORCH_HOME/hub/checkpoints or ~/.cache/torch/...)."""
    import torch.hub

    return Path(torch.hub.get_dir()) / "checkpoints"


def find_hub_checkpoint(arch: str) -> Path | None:
    """The newest ``<arch>-<hash>.pth`` in the torch hub cache, or None (nothing is downloaded)."""
    d = hub_checkpoint_dir()
    if not d.is_dir():
        return None
    hits = sorted(d.glob(f"{arch}-*.pth"), key=lambda p: p.stat().st_mtime, reverse=True)
    return hits[0] if hits else None


def load_state_dict_file(path: str | os.PathLike[str], arch: str) -> dict[str, Any]:
    """Load a state_dict (plain, or wrapped under 'state_dict'/'model', with optional 'module.' prefixes)."""
    import torch

    p = Path(path)
    if not p.is_file():
        raise WeightsNotFoundError(f"{arch} weights file not found: {p}")
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle errors come in many types
        raise WeightsMismatchError(
            f"{p} is not a loadable torch state_dict for {arch} ({type(exc).__name__}: {exc})"
        ) from exc
    if isinstance(obj, dict):
        for wrapper in ("state_dict", "model"):
            if wrapper in obj and isinstance(obj[wrapper], dict):
                obj = obj[wrapper]
                break
    if not isinstance(obj, dict) or not all(isinstance(k, str) for k in obj):
        raise WeightsMismatchError(f"{p} does not hold a state_dict for {arch} (got {type(obj).__name__})")
    return {k[len("module.") :] if k.startswith("module.") else k: v for k, v in obj.items()}


def load_into(
    module: Any, state: dict[str, Any], arch: str, source: Path, optional_prefixes: tuple[str, ...] = ()
) -> None:
    """Strictly load ``state`` into ``module``; keys under ``optional_prefixes`` may be absent or differ.

    Raises WeightsMismatchError listing missing/unexpected keys and shape mismatches.
    """
    own = module.state_dict()

    def optional(k: str) -> bool:
        return any(k.startswith(pfx) for pfx in optional_prefixes)

    missing = [k for k in own if k not in state and not optional(k)]
    unexpected = [k for k in state if k not in own]
    shapes = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
        for k in own
        if k in state and hasattr(state[k], "shape") and tuple(state[k].shape) != tuple(own[k].shape)
        and not optional(k)
    ]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing keys (e.g. {missing[:3]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected keys (e.g. {unexpected[:3]})")
        if shapes:
            parts.append(f"{len(shapes)} shape mismatches (e.g. {shapes[:2]})")
        raise WeightsMismatchError(f"weights file {source} does not fit {arch}: " + "; ".join(parts))
    usable = {
        k: v
        for k, v in state.items()
        if k in own and tuple(getattr(v, "shape", ())) == tuple(own[k].shape)
    }
    module.load_state_dict(usable, strict=False)
