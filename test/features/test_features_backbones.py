"""Backbone construction, weights lookup and errors, ResNet through torchvision, batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cbcl_pr_ros.features import (
    WeightsMismatchError,
    WeightsNotFoundError,
    available_backbones,
    make_backbone,
)
from cbcl_pr_ros.features.torchvision_compat import import_torchvision
from cbcl_pr_ros.features.weights import file_sha256


def _images(n, seed=0, shape=(120, 160, 3)):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]


def test_available_backbones():
    assert available_backbones() == ["efficientnet_lite0", "efficientnet_lite1", "efficientnet_lite2",
                                     "resnet18", "resnet34"]


def test_resnet18_with_saved_weights_gives_torchvision_avgpool_features(resnet18_weights):
    bb = make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, threads=2, device="cpu")
    assert (bb.name, bb.feature_dim, bb.runtime, bb.device) == ("resnet18", 512, "torch", "cpu")
    assert bb.weights_sha256 == file_sha256(resnet18_weights)
    imgs = _images(3)
    feats = bb.extract(imgs)
    assert feats.shape == (3, 512) and feats.dtype == np.float32 and np.isfinite(feats).all()
    # same numbers as torchvision's own model cut before fc, on the same preprocessed batch
    ref = import_torchvision().models.resnet18(weights=None)
    ref.load_state_dict(torch.load(resnet18_weights, weights_only=True))
    ref.fc = torch.nn.Identity()
    ref.eval()
    with torch.no_grad():
        expected = ref(torch.from_numpy(bb.preprocess(imgs))).numpy()
    np.testing.assert_allclose(feats, expected, atol=1e-4, rtol=1e-4)
    assert bb.head is not None and bb.logits(feats).shape == (3, 1000)


def test_resnet18_onnx_matches_torch(resnet18_weights, tmp_path):
    tb = make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, device="cpu")
    ob = make_backbone("resnet18", runtime="onnx", weights_path=resnet18_weights, device="cpu", cache_dir=tmp_path)
    imgs = _images(2, seed=3)
    assert np.abs(ob.extract(imgs) - tb.extract(imgs)).max() < 1e-4
    assert ob.max_abs_diff < 1e-4


def test_resnet_found_in_torch_hub_cache(resnet18_weights, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    ckpt = tmp_path / "hub" / "checkpoints"
    ckpt.mkdir(parents=True)
    target = ckpt / "resnet18-f37072fd.pth"
    target.write_bytes(resnet18_weights.read_bytes())
    bb = make_backbone("resnet18", runtime="torch", device="cpu")
    assert bb.weights_file == target


def test_missing_resnet_weights_say_what_and_where(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(WeightsNotFoundError) as err:
        make_backbone("resnet34", runtime="torch")
    msg = str(err.value)
    assert "resnet34-*.pth" in msg and str(tmp_path / "hub" / "checkpoints") in msg and "weights_path" in msg
    with pytest.raises(WeightsNotFoundError, match="resnet18 weights file not found: .*nope.pth"):
        make_backbone("resnet18", runtime="torch", weights_path=tmp_path / "nope.pth")
    assert isinstance(err.value, FileNotFoundError)


def test_mismatched_weights_file_is_named(tmp_path):
    wrong = tmp_path / "resnet34.pth"
    torch.save(import_torchvision().models.resnet34(weights=None).state_dict(), wrong)
    with pytest.raises(WeightsMismatchError, match=r"does not fit resnet18: .*unexpected keys"):
        make_backbone("resnet18", runtime="torch", weights_path=wrong)
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"this is not a checkpoint")
    with pytest.raises(WeightsMismatchError, match="not a loadable torch state_dict"):
        make_backbone("resnet18", runtime="torch", weights_path=garbage)
    with pytest.raises(WeightsMismatchError, match="does not fit efficientnet_lite0"):
        make_backbone("efficientnet_lite0", runtime="torch", weights_path=wrong)


def test_wrapped_and_headless_state_dicts_load(resnet18_weights, tmp_path):
    state = torch.load(resnet18_weights, weights_only=True)
    wrapped = tmp_path / "wrapped.pth"
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}}, wrapped)
    headless = tmp_path / "headless.pth"
    torch.save({k: v for k, v in state.items() if not k.startswith("fc.")}, headless)
    imgs = _images(1)
    a = make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights).extract(imgs)
    b = make_backbone("resnet18", runtime="torch", weights_path=wrapped).extract(imgs)
    hb = make_backbone("resnet18", runtime="torch", weights_path=headless)
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(a, hb.extract(imgs), atol=1e-6)
    assert hb.head is None
    with pytest.raises(ValueError, match="no ImageNet head"):
        hb.logits(a)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"name": "vgg16"}, "unknown backbone 'vgg16'"),
        ({"runtime": "tensorrt"}, "runtime must be"),
        ({"device": "tpu"}, "device must be"),
        ({"threads": 0}, "threads must be"),
        ({"batch_size": 0}, "batch_size must be"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_backbone(**kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when no CUDA device exists")
def test_cuda_requested_without_cuda_is_an_error(resnet18_weights):
    with pytest.raises(ValueError, match="device='cuda'"):
        make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, device="cuda")


# Batched vs one-by-one on one device: float32 reassociation on a CPU; on CUDA, different kernels
# per batch size (TF32 is off in the default precision, so still near float32 rounding).
_BATCH_TOL = {"cpu": 1e-5, "cuda": 1e-4}


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_extract_validates_and_batches(resnet18_weights, device):
    bb = make_backbone("resnet18", runtime="torch", weights_path=resnet18_weights, batch_size=2, device=device)
    assert (bb.device, bb.precision) == (device, "fp32")
    tol = _BATCH_TOL[device]
    imgs = _images(5, seed=7, shape=(64, 80, 3))
    batched = bb.extract(imgs)
    one_by_one = np.vstack([bb.extract([im]) for im in imgs])
    scale = max(1.0, float(np.abs(batched).max()))
    np.testing.assert_allclose(batched, one_by_one, atol=tol * scale)
    np.testing.assert_allclose(bb.extract(np.stack(imgs)), batched, atol=tol * scale)
    assert bb.extract([]).shape == (0, 512)
    with pytest.raises(ValueError, match="wrap it in a list"):
        bb.extract(imgs[0])
    with pytest.raises(TypeError, match="image 1: .*uint8"):
        bb.extract([imgs[0], imgs[1].astype(np.float64)])
    with pytest.raises(TypeError, match="list of arrays"):
        bb.extract("not images")
    with pytest.raises(ValueError, match=r"\(n, 3, 224, 224\)"):
        bb.extract_preprocessed(np.zeros((1, 3, 100, 100), np.float32))


def test_import_torchvision_reraises_unrelated_errors(monkeypatch):
    import builtins
    import sys

    from cbcl_pr_ros.features import torchvision_compat

    real_import = builtins.__import__

    def failing(name, *a, **k):
        if name == "torchvision":
            raise RuntimeError("some other torchvision failure")
        return real_import(name, *a, **k)

    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    monkeypatch.setattr(builtins, "__import__", failing)
    with pytest.raises(RuntimeError, match="some other torchvision failure"):
        torchvision_compat.import_torchvision()


def test_import_torchvision_gives_working_model_builders():
    tv = import_torchvision()
    assert tv is import_torchvision()  # second call reuses the module
    assert tv.models.resnet34(weights=None).fc.in_features == 512
