"""Shared, session-wide backbones for the feature tests: exporting EfficientNet-Lite0 once is ~10 s.

Tests marked ``cuda`` run only where torch sees a CUDA device and are skipped elsewhere, saying so.
"""

from __future__ import annotations

import pytest

from cbcl_pr_ros.features import make_backbone

NO_CUDA_REASON = ("needs a CUDA GPU (torch.cuda.is_available() is False here); on a GPU machine run "
                  "scripts/gpu-features-check run tests (docs/features.md, 'On a GPU machine')")


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=NO_CUDA_REASON)
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def onnx_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx_cache")


@pytest.fixture(scope="session")
def effnet_onnx(onnx_cache_dir):
    return make_backbone("efficientnet_lite0", runtime="onnx", threads=2, device="cpu", cache_dir=onnx_cache_dir)


@pytest.fixture(scope="session")
def effnet_torch():
    return make_backbone("efficientnet_lite0", runtime="torch", threads=2, device="cpu")


@pytest.fixture(scope="session")
def resnet18_weights(tmp_path_factory):
    """A randomly initialised ResNet-18 state_dict saved the way torchvision ships its weights."""
    import torch

    from cbcl_pr_ros.features.torchvision_compat import import_torchvision

    tv = import_torchvision()
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "resnet18-random.pth"
    torch.save(tv.models.resnet18(weights=None).state_dict(), path)
    return path
