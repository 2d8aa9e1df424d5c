"""Which runtime reaches which device, the precision policy, and what goes into the cache key."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from cbcl_pr_ros.features import FeatureCache, make_backbone, select_runtime

CPU_ORT = ("AzureExecutionProvider", "CPUExecutionProvider")
GPU_ORT = ("CUDAExecutionProvider", "CPUExecutionProvider")


@pytest.mark.parametrize(
    "runtime, device, torch_cuda, providers, expected",
    [
        ("onnx", "auto", False, CPU_ORT, ("onnx", "cpu")),
        ("onnx", "auto", False, GPU_ORT, ("onnx", "cuda")),
        ("onnx", "auto", True, GPU_ORT, ("onnx", "cuda")),
        ("onnx", "auto", True, CPU_ORT, ("torch", "cuda")),  # the default config on a GPU robot
        ("onnx", "cuda", True, CPU_ORT, ("torch", "cuda")),
        ("onnx", "cpu", True, GPU_ORT, ("onnx", "cpu")),
        ("torch", "auto", True, CPU_ORT, ("torch", "cuda")),
        ("torch", "auto", False, GPU_ORT, ("torch", "cpu")),
        ("torch", "cpu", True, CPU_ORT, ("torch", "cpu")),
    ],
)
def test_select_runtime(runtime, device, torch_cuda, providers, expected):
    got_runtime, got_device, note = select_runtime(runtime, device, torch_cuda, providers)
    assert (got_runtime, got_device) == expected
    if got_runtime != runtime:
        assert "onnxruntime-gpu" in note and "CUDAExecutionProvider" in note
    else:
        assert note == ""


def test_cuda_without_any_cuda_runtime_says_what_to_install():
    with pytest.raises(ValueError, match=r"onnxruntime-gpu.*CUDA build of torch"):
        select_runtime("onnx", "cuda", False, CPU_ORT)
    with pytest.raises(ValueError, match="CUDA build of torch"):
        select_runtime("torch", "cuda", False, GPU_ORT)


def test_auto_falls_back_when_onnxruntime_gpu_does_not_load(monkeypatch, tmp_path, caplog):
    """onnxruntime-gpu lists its CUDA provider even when CUDA libraries are missing, then runs on
    the CPU: an explicit 'cuda' is refused, 'auto' falls back and says so, never a mislabelled device."""
    import onnxruntime as ort
    import torch

    if torch.cuda.is_available() or "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("simulates a broken onnxruntime-gpu on a machine without CUDA")
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(GPU_ORT))
    with pytest.raises(RuntimeError, match="CUDAExecutionProvider did not load"), pytest.warns(UserWarning):
        make_backbone("efficientnet_lite0", runtime="onnx", device="cuda", cache_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="cbcl_pr_ros.features.backbones"), pytest.warns(UserWarning):
        bb = make_backbone("efficientnet_lite0", runtime="onnx", device="auto", cache_dir=tmp_path)
    assert (bb.runtime, bb.device) == ("onnx", "cpu")
    assert "did not load" in caplog.text


def test_precision_policy_on_a_cpu(resnet18_weights, caplog):
    with pytest.raises(ValueError, match="precision must be one of fp32, tf32, fp16"):
        make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, precision="int8")
    for runtime in ("torch", "onnx"):
        with pytest.raises(ValueError, match="'fp16' needs a CUDA device"):
            make_backbone("resnet18", runtime=runtime, weights_path=resnet18_weights, device="cpu", precision="fp16")
    with caplog.at_level(logging.INFO, logger="cbcl_pr_ros.features.backbones"):
        bb = make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, device="cpu", precision="tf32")
    assert bb.precision == "fp32" and "only exists on CUDA" in caplog.text
    assert bb.describe() == {"backbone": "resnet18", "runtime": "torch", "device": "cpu", "precision": "fp32"}
    assert "precision='fp32'" in repr(bb)


class _Ident:
    name, feature_dim, preprocessing_id, weights_sha256 = "resnet18", 512, "imagenet:x", "ab" * 32

    def __init__(self, runtime="onnx", device="cpu", precision="fp32"):
        from cbcl_pr_ros.features.backbones import Backbone

        self.runtime, self.device, self.precision = runtime, device, precision
        self.numerics_id = Backbone.numerics_id.fget(self)


def test_cache_key_holds_device_runtime_and_precision_where_they_change_numbers():
    cpu_onnx, cpu_torch = FeatureCache.key(_Ident("onnx"), "d"), FeatureCache.key(_Ident("torch"), "d")
    assert cpu_onnx == cpu_torch  # ONNX and PyTorch agree to ~1e-6 on a CPU: one entry
    # float32 on a CPU keeps the key of earlier versions (computed with them), so existing caches stay valid
    assert cpu_onnx == "resnet18-ea4d6078c7fdf3c0b5fbc62ff90d56a1"
    gpu = {FeatureCache.key(_Ident(r, "cuda", p), "d") for r in ("onnx", "torch") for p in ("fp32", "tf32", "fp16")}
    assert len(gpu) == 6 and cpu_onnx not in gpu


def test_cache_meta_records_device_and_precision(resnet18_weights, tmp_path):
    import json

    bb = make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, device="cpu")
    cache = FeatureCache(tmp_path)
    cache.features_for_arrays(bb, [np.zeros((30, 40, 3), np.uint8)])
    meta = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert (meta["device"], meta["precision"], meta["runtime"]) == ("cpu", "fp32", "torch")
