"""Export a PyTorch feature model to ONNX once, check it, and keep it in a cache directory.

The file name holds everything the graph depends on (backbone, weights hash, opset, torch
version), so a changed weights file or torch upgrade makes a new export instead of reusing a
stale one. The export is written to a temporary file and renamed, so a crash or a concurrent
process never leaves a half-written model behind; a sidecar JSON records the measured
ONNX-vs-PyTorch difference.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["ONNX_OPSET", "MAX_ALLOWED_DIFF", "onnx_file_name", "ensure_onnx", "export_and_check"]

_LOG = logging.getLogger(__name__)
ONNX_OPSET = 17
# Relative to the largest feature magnitude: float32 reordering gives ~1e-6; 1e-3 means a wrong graph.
MAX_ALLOWED_DIFF = 1e-3


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # pragma: no cover - torch is a dependency
        import torch

        return str(torch.__version__)


def onnx_file_name(name: str, weights_sha256: str, opset: int = ONNX_OPSET, torch_version: str | None = None) -> str:
    """Cache file name: ``<backbone>-w<weights hash>-opset<N>-torch<version>.onnx``."""
    tv = (torch_version or _torch_version()).replace("+", "_")
    return f"{name}-w{weights_sha256[:16]}-opset{opset}-torch{tv}.onnx"


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def export_and_check(model: Any, path: Path, input_size: int = 224, opset: int = ONNX_OPSET) -> float:
    """Export ``model`` ((n,3,s,s) -> (n,d)) to ``path`` atomically; return max |ONNX - torch| on a test batch."""
    import onnxruntime as ort
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    model = model.to("cpu").eval()
    dummy = torch.zeros(2, 3, input_size, input_size)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem + ".", suffix=".onnx.tmp")
    os.close(fd)
    try:
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            # dynamo=False on purpose: the TorchScript exporter needs no onnxscript and its graphs
            # run fast in ORT; its deprecation and tracer warnings are noise here.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            warnings.simplefilter("ignore", UserWarning)  # constant-folding notes from the exporter
            torch.onnx.export(
                model, (dummy,), tmp, input_names=["input"], output_names=["features"],
                dynamic_axes={"input": {0: "n"}, "features": {0: "n"}}, opset_version=opset, dynamo=False,
            )
        rng = np.random.default_rng(0)
        x = rng.uniform(-2.0, 2.0, size=(3, 3, input_size, input_size)).astype(np.float32)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(tmp, so, providers=["CPUExecutionProvider"])
        got = sess.run(None, {"input": x})[0]
        with torch.no_grad():
            ref = model(torch.from_numpy(x)).numpy()
        diff = float(np.max(np.abs(got - ref)))
        scale = max(1.0, float(np.max(np.abs(ref))))
        if not np.isfinite(diff) or diff > MAX_ALLOWED_DIFF * scale:
            raise RuntimeError(
                f"ONNX export of {path.name} disagrees with PyTorch: max abs diff {diff:.3g} > "
                f"{MAX_ALLOWED_DIFF} x max|feature| {scale:.3g}; use runtime='torch'"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return diff


def ensure_onnx(
    name: str,
    weights_file: Path,
    weights_sha256: str,
    cache_dir: Path,
    build: Callable[[], Any],
    input_size: int = 224,
    opset: int = ONNX_OPSET,
) -> tuple[Path, dict[str, Any]]:
    """Return (path to the cached .onnx, its export report), exporting with ``build()`` if absent."""
    cache_dir = Path(cache_dir)
    path = cache_dir / onnx_file_name(name, weights_sha256, opset)
    side = path.with_suffix(".json")
    if path.is_file() and side.is_file():
        try:
            report = json.loads(side.read_text())
            _LOG.debug("reusing ONNX export %s (max abs diff %.3g)", path, report["max_abs_diff"])
            return path, report
        except (ValueError, KeyError) as exc:
            _LOG.warning("unreadable ONNX sidecar %s (%s); exporting again", side, exc)
    t0 = time.perf_counter()
    # the first use takes tens of seconds on a small CPU: say what happens, in two known steps
    from tqdm import tqdm

    with tqdm(total=2, unit="step", file=sys.stderr, leave=True,
              desc=f"first use of {name}: exporting to ONNX once (cached in {cache_dir})") as bar:
        bar.set_postfix_str("building the PyTorch model")
        model = build()
        bar.update(1)
        bar.set_postfix_str("exporting and checking against PyTorch")
        diff = export_and_check(model, path, input_size=input_size, opset=opset)
        bar.update(1)
        bar.set_postfix_str(f"done, max abs diff {diff:.2g}")
    import onnxruntime as ort

    report = {
        "backbone": name,
        "weights_file": str(weights_file),
        "weights_sha256": weights_sha256,
        "opset": opset,
        "torch_version": _torch_version(),
        "onnxruntime_version": ort.__version__,
        "input_size": input_size,
        "max_abs_diff": diff,
        "export_seconds": round(time.perf_counter() - t0, 2),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    _atomic_write_text(side, json.dumps(report, indent=2))
    _LOG.info("exported %s to %s: max abs diff vs PyTorch %.3g", name, path, diff)
    return path, report
