"""A segmenter whose answer is known, for the tests of the learned proposals' path (the network's
figures are the bench's: bench/bench_segmenter.py)."""
from __future__ import annotations

import numpy as np

from cbcl_pr_ros.perception.segmenter import CHANNELS, layer_shapes


def protrusion_weights() -> dict[str, np.ndarray]:
    """Weights of a network that calls "inside" what stands out of its surroundings (the protrusion
    channel), and far from a border the more it stands out, through the first and last blocks, every other
    path zero: a segmenter whose answer is known."""
    w = {name: np.zeros(shape, np.float32) for name, shape in layer_shapes().items()}
    w["enc1a.weight"][0, CHANNELS.index("protrusion"), 1, 1] = 1.0
    w["enc1b.weight"][0, 0, 1, 1] = 1.0
    up_channels = layer_shapes()["dec2b.bias"][0]  # dec1a reads [upsampled dec2, enc1]
    w["dec1a.weight"][0, up_channels, 1, 1] = 1.0
    w["dec1b.weight"][0, 0, 1, 1] = 1.0
    w["head.weight"][1, 0, 0, 0] = 20.0
    w["head.weight"][3, 0, 0, 0] = 5.0
    w["head.bias"][:] = [1.0, 0.0, -5.0, 0.0]
    return w
