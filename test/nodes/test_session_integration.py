"""`teaching_session`: extractor and learner in one process, taught from images and from the stream."""
from __future__ import annotations

import threading
import time

import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_one_process_session_teaches_from_images_and_stream(helpers, domain_id, tmp_path):
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from cbcl_pr_ros.srv import Classify, TeachClass

    h = helpers
    memory = tmp_path / "mem.safetensors"
    # teach_views: each request image goes through the backbone with 2 jittered copies (docs/core.md, Levers)
    sess = h.start_node("teaching_session", domain_id, tmp_path, {"memory_path": str(memory), "teach_views": 2},
                        extra=["--nodes", "extractor,learner", "--config", str(h.CONFIG)])
    cli = h.Client(domain_id)
    try:
        assert cli.wait_for_service(TeachClass, "teach_class", 120.0, sess), sess.output()
        for k, label in enumerate(("cat", "coffee")):
            req = TeachClass.Request(label=label)
            req.images = [h.image_msg(im, i) for i, im in enumerate(h.views(label, 4, seed=k, size=(240, 320)))]
            r = cli.call(TeachClass, "teach_class", req, timeout=90.0)
            assert r.success and r.num_classes == k + 1, r.message
            # the 4 images are the examples; their views went through the backbone as the class's spread
            assert r.num_examples == 4 and "4 images + 2 views each" in r.message, r.message

        # teach "rocket" from the next 3 camera frames while a camera streams
        pub = cli.node.create_publisher(Image, "image", qos_profile_sensor_data)
        frames = [h.image_msg(im, 10_000 + i) for i, im in enumerate(h.views("rocket", 12, seed=5))]
        stop = threading.Event()

        def stream() -> None:
            i = 0
            while not stop.is_set():
                pub.publish(frames[i % len(frames)])
                i += 1
                time.sleep(0.1)

        t = threading.Thread(target=stream, daemon=True)
        t.start()
        try:
            r = cli.call(TeachClass, "teach_class", TeachClass.Request(label="rocket", num_frames=3,
                                                                        timeout_s=30.0), timeout=60.0)
            assert r.success and r.num_examples == 3 and "camera frames" in r.message, r.message
            time.sleep(0.5)
            r = cli.call(Classify, "classify", Classify.Request())  # the latest camera frame
            assert r.success and r.label == "rocket", r.message
        finally:
            stop.set()
            t.join(2.0)
        r = cli.call(Classify, "classify", Classify.Request(image=h.image_msg(h.views("coffee", 1, seed=9)[0])))
        assert r.success and r.label == "coffee", r.message
        assert memory.exists()
        # Ctrl-C while frames flow: the nodes stop before the context does, so nothing publishes
        # into a dead context ("publisher's context is invalid") and no callback is left behind
        stop.clear()
        t = threading.Thread(target=stream, daemon=True)
        t.start()
        try:
            time.sleep(1.0)
            assert sess.stop() == 0, sess.output()[-3000:]
        finally:
            stop.set()
            t.join(2.0)
        out = sess.output()
        assert "in one process" in out and "Traceback" not in out
        for bad in ("context is invalid", "never retrieved", "destruction was requested"):
            assert bad not in out, out[-3000:]
    finally:
        sess.stop()
        cli.close()
