"""The ONNX fast path of the default backbone: export once, check, reuse."""

from __future__ import annotations

import json

import numpy as np

from cbcl_pr_ros.features import backbones, make_backbone


def _frames(n, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    # smooth, photo-like frames at camera resolution
    import cv2

    return [cv2.resize(np.roll(base, 7 * i, axis=1), (640, 480), interpolation=cv2.INTER_CUBIC) for i in range(n)]


def test_onnx_matches_torch_on_real_efficientnet_lite0(effnet_onnx, effnet_torch):
    assert effnet_onnx.feature_dim == effnet_torch.feature_dim == 1280
    assert effnet_onnx.preprocessing_id == effnet_torch.preprocessing_id
    assert effnet_onnx.weights_sha256 == effnet_torch.weights_sha256
    frames = _frames(3)
    a = effnet_onnx.extract(frames)
    b = effnet_torch.extract(frames)
    assert a.shape == (3, 1280) and a.dtype == np.float32
    assert float(np.abs(a - b).max()) < 1e-4
    assert float(np.abs(b).max()) > 0.1  # the comparison is not between two near-zero outputs


def test_export_is_recorded_and_keyed(effnet_onnx, onnx_cache_dir):
    path = effnet_onnx.onnx_path
    assert path.parent == onnx_cache_dir
    name = path.name
    assert name.startswith("efficientnet_lite0-w" + effnet_onnx.weights_sha256[:16]) and "opset17" in name
    assert "torch" in name and name.endswith(".onnx")
    report = json.loads(path.with_suffix(".json").read_text())
    assert report["max_abs_diff"] == effnet_onnx.max_abs_diff < 1e-4
    assert report["weights_sha256"] == effnet_onnx.weights_sha256
    assert not [p for p in onnx_cache_dir.iterdir() if p.name.endswith(".tmp")]


def test_second_backbone_reuses_the_export_without_torch_model(effnet_onnx, onnx_cache_dir, monkeypatch):
    mtime = effnet_onnx.onnx_path.stat().st_mtime_ns

    def no_build(*a, **k):
        raise AssertionError("the cached export should have been reused")

    monkeypatch.setattr(backbones, "build_torch_model", no_build)
    again = make_backbone("efficientnet_lite0", runtime="onnx", device="cpu", threads=1, cache_dir=onnx_cache_dir)
    assert again.onnx_path == effnet_onnx.onnx_path and again.onnx_path.stat().st_mtime_ns == mtime
    frames = _frames(1, seed=5)
    np.testing.assert_allclose(again.extract(frames), effnet_onnx.extract(frames), atol=1e-6)


def test_changed_weights_hash_gives_a_new_export_name():
    from cbcl_pr_ros.features.onnx_export import onnx_file_name

    assert onnx_file_name("resnet18", "a" * 64) != onnx_file_name("resnet18", "b" * 64)
    assert onnx_file_name("resnet18", "a" * 64, torch_version="2.13.0") != onnx_file_name(
        "resnet18", "a" * 64, torch_version="2.14.0")


def test_export_that_disagrees_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    import pytest
    import torch

    from cbcl_pr_ros.features import onnx_export

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    ok = onnx_export.export_and_check(model, tmp_path / "ok.onnx", input_size=16)
    assert ok < 1e-5 and (tmp_path / "ok.onnx").is_file()
    monkeypatch.setattr(onnx_export, "MAX_ALLOWED_DIFF", -1.0)
    with pytest.raises(RuntimeError, match="disagrees with PyTorch"):
        onnx_export.export_and_check(model, tmp_path / "bad.onnx", input_size=16)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.onnx"]


def test_prepare_command_reports_the_cached_export(effnet_onnx, onnx_cache_dir, capsys):
    from cbcl_pr_ros.features.prepare import main

    assert main(["--cache-dir", str(onnx_cache_dir)]) == 0
    out = capsys.readouterr().out
    assert str(effnet_onnx.onnx_path) in out and "max abs diff" in out


def test_prepare_command_fails_cleanly_without_weights(tmp_path, monkeypatch, capsys):
    from cbcl_pr_ros.features.prepare import main

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    assert main(["--backbone", "resnet18", "--cache-dir", str(tmp_path)]) == 1
    assert "resnet18-*.pth" in capsys.readouterr().err
