"""bench/eval_render_whitening.py: the renders' within-object scatter is what the transforms remove
(synthetic vectors; no rendering, no real set)."""
from __future__ import annotations

import numpy as np


def _renders(tmp_path, d: int = 1280):
    """4 objects, 3 views each, 2 crops per view: views differ along channel 1, a view's crops along
    channel 2 (more strongly), objects along their own channel."""
    rows, inst, view = [], [], []
    for o in range(4):
        for v in range(3):
            for c in range(2):
                x = np.full(d, 0.01)
                x[10 + o] = 4.0
                x[1] = 1.0 + 0.5 * v
                x[2] = 1.0 + 2.0 * c
                rows.append(x)
                inst.append(o)
                view.append(v)
    path = tmp_path / "renders.npz"
    np.savez(path, X=np.array(rows, np.float32), inst=np.array(inst), cat=np.array(inst), view=np.array(view))
    return path


def test_scatter_directions_follow_the_views_and_the_copies(tmp_path):
    from eval_render_whitening import render_basis

    path = _renders(tmp_path)
    every, info = render_basis(path, copies=True)
    views, info_v = render_basis(path, copies=False)
    assert info["deviations"] == 24 and info_v["deviations"] == 12
    assert np.argmax(np.abs(every.vt[0])) == 2  # the copies' channel moves most
    assert np.argmax(np.abs(views.vt[0])) == 1  # one crop per view: only the views' channel
    assert abs(views.vt[0][1]) > 5 * abs(views.vt[0][2])  # (L2 couples the channels a little)


def test_projection_removes_the_view_direction_and_no_shrinkage_is_the_plain_space(tmp_path):
    from eval_nuisance import tukey_l2
    from eval_render_whitening import render_basis

    basis, _ = render_basis(_renders(tmp_path), copies=False)
    x = tukey_l2(np.load(_renders(tmp_path))["X"])
    projected = basis.apply(("nap", 1), x)
    assert np.allclose(np.linalg.norm(projected, axis=1), 1.0, atol=1e-5)
    assert np.abs(projected @ basis.vt[0]).max() < 1e-5
    assert np.allclose(basis.apply(("wccn", 1.0), x), x, atol=1e-5)
