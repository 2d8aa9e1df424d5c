"""CIFAR-100 in its python pickle format (``cifar-100-python/{train,test,meta}``)."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from .base import ArrayImages, ImageDataset

__all__ = ["load_cifar100"]


# What CIFAR's pickles hold besides dicts, lists, bytes and numbers: numpy arrays (as numpy 1 and 2
# and Python 2's cPickle write them) and protocol 2's bytes. Nothing else is imported or called, so
# a dataset file handed over by anyone cannot run code (a pickle may name any function).
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
            ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}


class _DataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: ANN201 - pickle's own signature
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"it names {module[:60]}.{name[:60]}, which a data set never holds")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict:
    """The dict of one CIFAR file; ValueError when it is not one (or names anything but data)."""
    try:
        with open(path, "rb") as fh:
            d = _DataUnpickler(fh, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, MemoryError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a CIFAR python file ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path} is not a CIFAR python file (holds {type(d).__name__}, not a dict)")
    return d


def _get(d: dict, key: str):
    for k in (key.encode(), key):
        if k in d:
            return d[k]
    raise KeyError(f"key {key!r} missing (keys: {list(d)[:6]})")


def load_cifar100(root: str | Path, label: str = "fine") -> ImageDataset:
    """CIFAR-100: 50k train and 10k test 32×32 RGB images, 100 fine (or 20 coarse) classes."""
    if label not in ("fine", "coarse"):
        raise ValueError(f"label must be 'fine' or 'coarse', got {label!r}")
    root = Path(root)
    if (root / "cifar-100-python").is_dir():
        root = root / "cifar-100-python"
    for f in ("train", "test", "meta"):
        if not (root / f).is_file():
            raise FileNotFoundError(f"CIFAR-100 file {root / f} missing")
    parts = {}
    for split in ("train", "test"):
        d = _unpickle(root / split)
        data = np.asarray(_get(d, "data"), dtype=np.uint8)
        if data.ndim != 2 or data.shape[1] != 3072:
            raise ValueError(f"{root / split}: data must be (n, 3072) uint8, got {data.shape}")
        imgs = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        parts[split] = (np.ascontiguousarray(imgs), np.asarray(_get(d, f"{label}_labels"), dtype=np.int64))
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in _get(_unpickle(root / "meta"),
                                                                           f"{label}_label_names")]
    return ImageDataset("cifar-100", tuple(names), ArrayImages(parts["train"][0]), parts["train"][1],
                        ArrayImages(parts["test"][0]), parts["test"][1],
                        meta={"source": str(root), "format": "cifar-python", "label": label})
