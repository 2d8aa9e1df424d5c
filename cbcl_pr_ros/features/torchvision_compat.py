"""Import torchvision on installs where its compiled operators do not load.

A CUDA build of torchvision beside a CPU-only torch fails at import with
``RuntimeError: operator torchvision::nms does not exist``: its Python side registers fake
kernels for ``torchvision::nms``/``qnms`` whose schemas the C++ library (which failed to load)
should have defined. Defining the two schemas ourselves lets the pure-Python parts (model
builders, transforms) work; ``torchvision.ops.nms`` and the image codecs stay unavailable.
On a normal install the first import succeeds and nothing is touched.
"""

from __future__ import annotations

import logging
import sys
from types import ModuleType

__all__ = ["import_torchvision"]

_LOG = logging.getLogger(__name__)
_SCHEMAS = {
    "nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_patched = False


def _is_missing_op_error(exc: BaseException) -> bool:
    return "torchvision::" in str(exc) and "does not exist" in str(exc)


def import_torchvision() -> ModuleType:
    """Return the ``torchvision`` module, registering the missing operator schemas only if needed."""
    global _patched
    try:
        import torchvision

        return torchvision
    except RuntimeError as exc:
        if not _is_missing_op_error(exc) or _patched:
            raise
        first_error = exc
    import torch

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]  # drop the half-imported package before retrying
    for op, schema in _SCHEMAS.items():
        try:
            torch.library.define(f"torchvision::{op}", schema)
        except RuntimeError as exc:  # already defined by someone else: fine
            _LOG.debug("torchvision::%s already defined: %s", op, exc)
    _patched = True
    _LOG.info(
        "torchvision's compiled operators did not load (%s); registered the nms/qnms schemas so "
        "model builders work (torchvision.ops.nms is unavailable)",
        first_error,
    )
    import torchvision

    return torchvision
