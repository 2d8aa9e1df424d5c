"""The simulated world's scene services over real rclpy (issue 23: what the main job's scripted teacher
uses instead of the node's insides), the world node in a child process: arrange_objects (given poses
and a seeded shuffle), set_light, render_view (the view and its ground truth) and pause_camera; bad
requests are answered with success=false and change nothing."""
from __future__ import annotations

import math
import time

import numpy as np

from .conftest import fresh_domain, wait_until
from .test_detections_ros import _overrides, _start


def _positions(c, render) -> dict[str, tuple[float, float]]:
    from cbcl_pr_ros.srv import RenderView

    res = c.request(render, RenderView.Request(), timeout=60)
    assert res.success, res.message
    return {n: (round(p.x, 6), round(p.y, 6)) for n, p in zip(res.names, res.positions)}


def test_scene_services_move_light_render_and_pause(tmp_path, ros_client):
    from geometry_msgs.msg import Vector3
    from sensor_msgs.msg import Image
    from std_srvs.srv import SetBool

    from cbcl_pr_ros.srv import ArrangeObjects, PlaceObject, RenderView, SetLight

    dom = fresh_domain()
    proc = _start(tmp_path, dom, "sim_world", _overrides(tmp_path))
    try:
        c = ros_client(dom)
        mk = c.node.create_client
        place, arrange = mk(PlaceObject, "place_object"), mk(ArrangeObjects, "arrange_objects")
        light, render, pause = mk(SetLight, "set_light"), mk(RenderView, "render_view"), mk(SetBool, "pause_camera")
        for cat, xy in (("mug", (0.70, -0.06)), ("duck", (0.70, -0.26))):
            res = c.request(place, PlaceObject.Request(category=cat, instance=1, x=xy[0], y=xy[1]), timeout=90)
            assert res.success, (res.message, proc.output())

        # given poses: the object goes there; a bad request (unknown name, off the table, NaN,
        # lengths that disagree, a layout that cannot fit) moves nothing
        res = c.request(arrange, ArrangeObjects.Request(names=["mug_1"], x=[0.66], y=[-0.10], yaw=[0.5]), timeout=30)
        assert res.success and [round(res.positions[0].x, 6), round(res.positions[0].y, 6)] == [0.66, -0.10], res.message
        before = _positions(c, render)
        for req, why in ((ArrangeObjects.Request(names=["mug_1", "ghost"], x=[0.6, 0.7], y=[0.0, 0.0], yaw=[0.0, 0.0]), "ghost"),
                         (ArrangeObjects.Request(names=["mug_1"], x=[3.0], y=[0.0], yaw=[0.0]), "not on the table"),
                         (ArrangeObjects.Request(names=["mug_1"], x=[math.nan], y=[0.0], yaw=[0.0]), "finite"),
                         (ArrangeObjects.Request(names=["mug_1"], x=[0.6, 0.7], y=[0.0], yaw=[0.0]), "2 x, 1 y"),
                         (ArrangeObjects.Request(names=["mug_1", "duck_1"], region=[0.6, 0.61, 0.0, 0.01]), "cannot fit"),
                         (ArrangeObjects.Request(names=["mug_1"], region=[5.0, 6.0, 0.0, 0.1]), "not on the table"),
                         (ArrangeObjects.Request(names=["mug_1"], seed=[-1]), "seed"),
                         (ArrangeObjects.Request(names=["mug_1"], seed=[1] * 9), "8 seed numbers")):
            res = c.request(arrange, req, timeout=30)
            assert not res.success and why in res.message and "nothing moved" in res.message, res.message
        assert _positions(c, render) == before
        # a seeded shuffle is the same for the same seed, whatever the objects' places before
        shuffles = []
        for _ in range(2):
            res = c.request(arrange, ArrangeObjects.Request(names=["mug_1", "duck_1"], region=[0.6, 0.8, -0.3, 0.0],
                                                            min_gap=0.01, seed=[4, 2]), timeout=30)
            assert res.success, res.message
            shuffles.append([(p.x, p.y) for p in res.positions] + list(res.yaws))
        assert shuffles[0] == shuffles[1] and all(0.6 <= p[0] <= 0.8 for p in shuffles[0][:2])

        # the light changes the view; a bad light is refused and the view stays
        view = c.request(render, RenderView.Request(), timeout=60)
        assert view.success and view.image.encoding == "rgb8" and len(view.image.data) == 320 * 240 * 3
        assert len(view.names) == 2 and set(view.categories) == {"mug", "duck"}
        res = c.request(light, SetLight.Request(direction=Vector3(x=0.0, y=0.0, z=0.0), ambient=0.5), timeout=30)
        assert not res.success and "direction" in res.message
        res = c.request(light, SetLight.Request(direction=Vector3(x=0.0, y=0.0, z=1.0), ambient=2.0), timeout=30)
        assert not res.success and "ambient" in res.message
        assert bytes(c.request(render, RenderView.Request(), timeout=60).image.data) == bytes(view.image.data)
        res = c.request(light, SetLight.Request(direction=Vector3(x=0.3, y=0.2, z=1.0), ambient=0.9, diffuse=0.1),
                        timeout=30)
        assert res.success, res.message
        assert bytes(c.request(render, RenderView.Request(), timeout=60).image.data) != bytes(view.image.data)

        # paused: no camera frames; running again: frames
        frames: list[Image] = []
        c.node.create_subscription(Image, "image", frames.append, 10)
        assert wait_until(lambda: len(frames) > 0, 60), proc.output()
        assert c.request(pause, SetBool.Request(data=True), timeout=30).success
        time.sleep(1.0)  # a frame already on its way may still arrive
        n = len(frames)
        time.sleep(1.5)
        assert len(frames) == n
        assert c.request(pause, SetBool.Request(data=False), timeout=30).success
        assert wait_until(lambda: len(frames) > n, 30)
        assert "Traceback" not in proc.output()
    finally:
        proc.stop()
