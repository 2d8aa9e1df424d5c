"""The extractor with ``object_proposals: learned`` (or hybrid): the segmenter (``segmenter_weights``; here one whose
answer is known) is loaded once at start and finds the frame's objects; weights the loader refuses stop the start with one line, and the value cannot
be changed on a running node (the weights are loaded at start). Callbacks are called directly (no spin)."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.ros
rclpy = pytest.importorskip("rclpy")


@pytest.mark.parametrize("method", ["learned", "hybrid"])
def test_learned_proposals_are_what_the_node_sends_and_the_method_is_fixed_at_start(tmp_path, method):
    from extractor_table import MeanColourBackbone, extractor, show, two_objects
    from known_segmenter import protrusion_weights
    from rclpy.parameter import Parameter
    from safetensors.numpy import save_file

    from cbcl_pr_ros.perception.segmenter import propose_hybrid, propose_learned

    rgb, depth, k = two_objects()
    weights = tmp_path / "seg.safetensors"
    save_file(protrusion_weights(), str(weights))
    sent = []
    with extractor(MeanColourBackbone(), k, object_proposals=method, segmenter_weights=str(weights),
                   reuse_still_crops=False) as node:
        assert node.segmenter is not None
        node.objects_pub.publish = sent.append
        show(node, rgb, depth, 0)
        millimetres = (np.round(depth * 1000) / 1000).astype(np.float32)  # as the 16UC1 message carries it
        want = (propose_hybrid if method == "hybrid" else propose_learned)(node.segmenter, rgb, millimetres, k)
        assert len(sent) == 1 and len(sent[0].objects) == len(want) == 2
        assert sorted((o.x0, o.y0, o.x1, o.y1) for o in sent[0].objects) == sorted(p.box for p in want)
        assert not node.set_parameters([Parameter("object_proposals", value="depth")])[0].successful
    with extractor(MeanColourBackbone(), k) as node:  # the default: the shipped weights, the geometry as referee
        assert node.segmenter is not None and node.proposal_referee
    with extractor(MeanColourBackbone(), k, object_proposals="depth") as node:
        assert node.segmenter is None and not node.proposal_referee


@pytest.mark.parametrize("weights", ["missing", "garbage"])
def test_weights_the_loader_refuses_stop_the_start_with_one_line(tmp_path, weights):
    from extractor_table import MeanColourBackbone, extractor

    from cbcl_pr_ros.nodes.ros_params import ParameterRefused

    path = tmp_path / "seg.safetensors"
    if weights == "garbage":
        path.write_bytes(b"not safetensors")
    with pytest.raises(ParameterRefused, match="object_proposals learned") as err:
        with extractor(MeanColourBackbone(), (0, 0), object_proposals="learned", segmenter_weights=str(path)):
            pass
    assert "\n" not in str(err.value) and str(path) in str(err.value)
