"""The first minute of a new user, over ROS: a simulated table with a mug, a duck and a can; the mug is
taught by its track (as a tap on the teaching page does); in the next 30 frames the duck and the can
stay unknown; the duck is taught; then the mug and the duck carry their names and the can stays unknown.

Nodes: ``sim_world`` (its own process) and ``teaching_session`` with the extractor and the learner (one
process), the shipped config; no browser.
"""
from __future__ import annotations

import sys

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]
pytest.importorskip("rclpy")

START_TIMEOUT = 120.0
FRAMES = 30
# base frame (m): the middle of the table the sim camera starts looking at, and 12 cm to either side
SPOTS = {"mug": (0.70, -0.04), "duck": (0.70, -0.16), "can": (0.70, -0.28)}


def _world(h, domain_id: int, log_dir):
    import yaml

    over = log_dir / "sim_world.params.yaml"
    over.write_text(yaml.safe_dump({"/**/sim_world": {"ros__parameters": {
        "rate_hz": 3.0, "width": 320, "height": 240, "shadows": False}}}))
    args = [sys.executable, str(h.installed_executable("sim_world_node")), "--ros-args", "--params-file", str(over)]
    return h.Proc(args, h.ros_env(domain_id), log_dir / "sim_world_node.log")


def _frames_after(got: list, start: int, n: int, timeout: float, h) -> list:
    assert h.wait_until(lambda: len(got) >= start + n, timeout), f"{len(got) - start} of {n} detections frames"
    return got[start:start + n]


def _new_track(h, got: list, known: set[int], timeout: float) -> int:
    """The id of the one track that appears beside ``known`` in a detections frame."""
    def found() -> bool:
        return bool(got) and len({o.id for o in got[-1].objects} - known) == 1

    assert h.wait_until(found, timeout), [[(o.id, o.label) for o in m.objects] for m in got[-3:]]
    return next(iter({o.id for o in got[-1].objects} - known))


def test_what_was_not_taught_stays_unknown_from_the_first_teach(helpers, domain_id, tmp_path):
    from cbcl_pr_ros.msg import Detections
    from cbcl_pr_ros.srv import PlaceObject, TeachClass

    h = helpers
    world = _world(h, domain_id, tmp_path)
    sess = h.start_node("teaching_session", domain_id, tmp_path, {"memory_path": str(tmp_path / "mem.safetensors")},
                        extra=["--nodes", "extractor,learner", "--config", str(h.CONFIG)])
    cli = h.Client(domain_id)
    try:
        assert cli.wait_for_service(PlaceObject, "place_object", START_TIMEOUT, world), world.output()[-3000:]
        assert cli.wait_for_service(TeachClass, "teach_class", START_TIMEOUT, sess), sess.output()[-3000:]
        got = cli.collect(Detections, "detections")
        tracks: dict[str, int] = {}
        for category, (x, y) in SPOTS.items():
            r = cli.call(PlaceObject, "place_object", PlaceObject.Request(category=category, instance=1, x=x, y=y),
                         timeout=30.0)
            assert r.success, r.message
            tracks[category] = _new_track(h, got, set(tracks.values()), 90.0)

        r = cli.call(TeachClass, "teach_class", TeachClass.Request(label="mug", track_id=tracks["mug"]), timeout=90.0)
        assert r.success, r.message
        after = _frames_after(got, len(got), FRAMES, 120.0, h)
        by_id = {v: k for k, v in tracks.items()}
        seen = {"duck": 0, "can": 0}
        for m in after:
            assert m.model_version >= r.model_version
            for o in m.objects:
                name = by_id.get(o.id)
                if name in seen:
                    seen[name] += 1
                    assert not o.known and o.label == "", (name, o.label, o.confidence)
                    assert o.confidence < 0.5, (name, o.confidence)  # an unknown answer is never sure
        assert min(seen.values()) >= FRAMES // 2, seen

        r = cli.call(TeachClass, "teach_class", TeachClass.Request(label="duck", track_id=tracks["duck"]), timeout=90.0)
        assert r.success and r.num_classes == 2, r.message
        after = _frames_after(got, len(got), FRAMES, 120.0, h)
        named = {"mug": [], "duck": [], "can": []}
        for m in after:
            for o in m.objects:
                if o.id in by_id:
                    named[by_id[o.id]].append(o.label)
        assert all(len(v) >= FRAMES // 2 for v in named.values()), named
        assert named["mug"].count("mug") >= 0.9 * len(named["mug"]), named
        assert named["duck"].count("duck") >= 0.9 * len(named["duck"]), named
        assert named["can"].count("") >= 0.9 * len(named["can"]), named
    finally:
        cli.close()
        for p in (sess, world):
            p.stop()
    for p in (sess, world):
        assert "Traceback" not in p.output(), p.output()[-3000:]
