"""bench/train_adapter.py: the adapter trains deterministically under its seed and pulls views of one
instance together relative to other instances (synthetic vectors; no rendering)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _data(seed: int = 0, n_inst: int = 24, views: int = 5) -> dict:
    """Instances as directions in a 1280-d non-negative space, views as heavy noise around them."""
    rng = np.random.default_rng(seed)
    centres = rng.gamma(1.0, 1.0, (n_inst, 1280)).astype(np.float32)
    X = np.concatenate([c + rng.gamma(1.0, 1.5, (views, 1280)).astype(np.float32) for c in centres])
    inst = np.repeat(np.arange(n_inst), views)
    return {"X": X, "inst": inst, "cat": inst // 4, "names": np.array([f"o{i}" for i in range(n_inst)])}


def _ratio(Z: np.ndarray, inst: np.ndarray) -> float:
    d = np.sqrt(((Z[:, None] - Z[None]) ** 2).sum(-1))
    same = (inst[:, None] == inst[None]) & ~np.eye(len(inst), dtype=bool)
    return float(d[same].mean() / d[inst[:, None] != inst[None]].mean())


def test_same_seed_same_weights_and_views_of_one_instance_come_closer():
    import train_adapter as ta  # bench/ is on the tests' path (pytest.ini)

    data = _data()
    a, log_a = ta.train(data, "mlp", 32, 64, epochs=15, seed=3, p=8, k=4)
    b, log_b = ta.train(data, "mlp", 32, 64, epochs=15, seed=3, p=8, k=4)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    assert log_a == log_b and log_a[-1]["loss"] < log_a[0]["loss"]
    Z = ta.adapt(a, data["X"])
    assert Z.shape == (len(data["X"]), 32) and np.allclose(np.linalg.norm(Z, axis=1), 1.0, atol=1e-5)
    assert _ratio(Z, data["inst"]) < _ratio(ta.tukey_l2(data["X"]), data["inst"])


def test_residual_adapter_starts_as_the_plain_space_and_its_anchor_keeps_it_near():
    import train_adapter as ta

    data = _data(1)
    untrained = ta.build("residual", 16, 0)
    assert np.allclose(ta.adapt(untrained, data["X"]), ta.tukey_l2(data["X"]), atol=1e-6)
    free, _ = ta.train(data, "residual", 16, 0, epochs=10, seed=2, p=8, k=4)
    held, _ = ta.train(data, "residual", 16, 0, epochs=10, seed=2, p=8, k=4, anchor=10.0)
    size = [float((m.up.weight @ m.down.weight).pow(2).sum()) for m in (free, held)]
    assert 0.0 < size[1] < size[0]
