"""Extractor and learner as separate processes on a real ROS graph (rclpy, Fast DDS, own domain).

One scenario, step by step, because each step needs the state the previous one built: teach three
classes from images, classify frames published on the camera topic, check status and debug image,
restart the learner and classify again, forget a class, and the bad-input answers of a live node.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.slow]

CLASSES = ("cat", "coffee", "rocket")
START_TIMEOUT = 120.0  # a cold CI machine may export the ONNX model at the first start


def _teach_images(h, cli, label, imgs, seed_ns=0):
    from cbcl_pr_ros.srv import TeachClass

    req = TeachClass.Request()
    req.label = label
    req.images = [h.image_msg(im, seed_ns + i) for i, im in enumerate(imgs)]
    return cli.call(TeachClass, "teach_class", req, timeout=90.0)


def _publish_frames(h, cli, frames, labels, rate_hz=10.0, start_ns=1_000_000_000):
    """Publish frames (sensor-data QoS, as a camera does); returns {stamp_ns: true label}."""
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    pub = cli.node.create_publisher(Image, "image", qos_profile_sensor_data)
    h.wait_until(lambda: pub.get_subscription_count() >= 1, 20.0)
    truth = {}
    for i, (im, lab) in enumerate(zip(frames, labels)):
        ns = start_ns + i * 10_000_000
        truth[ns] = lab
        pub.publish(h.image_msg(im, ns))
        time.sleep(1.0 / rate_hz)
    return truth


def _stream_accuracy(preds, truth):
    from cbcl_pr_ros.nodes.conversions import stamp_to_ns

    hits = [p.label == truth[stamp_to_ns(p.header.stamp)] for p in preds
            if stamp_to_ns(p.header.stamp) in truth]
    return (sum(hits) / len(hits) if hits else 0.0), len(hits)


def test_separate_processes_teach_classify_restart_forget(helpers, domain_id, tmp_path):
    from cbcl_pr_ros.msg import LearnerStatus, Prediction
    from cbcl_pr_ros.nodes.qos import status_qos
    from cbcl_pr_ros.srv import Classify, ExtractFeatures, ForgetClass, ListClasses, TeachClass
    from sensor_msgs.msg import Image

    h = helpers
    memory = tmp_path / "memory.safetensors"
    lp = {"memory_path": str(memory), "status_period_s": 0.5}
    extractor = h.start_node("feature_extractor_node", domain_id, tmp_path, {"no_frame_warning_s": 2.0})
    learner = h.start_node("learner_node", domain_id, tmp_path, lp)
    cli = h.Client(domain_id)
    procs = [extractor, learner]
    try:
        assert cli.wait_for_service(ExtractFeatures, "extract_features", START_TIMEOUT, extractor), extractor.output()
        assert cli.wait_for_service(TeachClass, "teach_class", START_TIMEOUT, learner), learner.output()

        # nothing taught yet: a clear answer, no crash
        r = cli.call(Classify, "classify", Classify.Request())
        assert not r.success and "nothing learned yet" in r.message

        # teach three classes from images sent in the request (features via the extractor service)
        for k, label in enumerate(CLASSES):
            r = _teach_images(h, cli, label, h.views(label, 5, seed=k, size=(240, 320)))
            assert r.success, r.message
            assert not r.extended_existing and r.num_examples == 5 and r.num_classes == k + 1
            assert r.learning_time_s > 0
        assert memory.exists(), "memory not saved after teaching"

        # a label already taken extends the class, saying so
        r = _teach_images(h, cli, "cat", h.views("cat", 2, seed=10, size=(240, 320)))
        assert r.success and r.extended_existing and "extended" in r.message and r.num_classes == 3

        # bad input: empty label, wrong encoding -> clear message, nothing changes
        version = r.model_version
        r = _teach_images(h, cli, "  ", h.views("cat", 1, seed=11, size=(120, 160)))
        assert not r.success and "empty label" in r.message
        bad = TeachClass.Request(label="broken")
        img = h.image_msg(h.views("cat", 1, seed=12, size=(120, 160))[0])
        img.encoding = "yuv422_weird"
        bad.images = [img]
        r = cli.call(TeachClass, "teach_class", bad)
        assert not r.success and "yuv422_weird" in r.message
        r = cli.call(ListClasses, "list_classes", ListClasses.Request())
        assert sorted(c.name for c in r.classes) == sorted(CLASSES) and r.model_version == version

        # stream: frames published on the camera topic -> predictions, debug image, status
        preds = cli.collect(Prediction, "prediction")
        debug = cli.collect(Image, "debug_image")
        status = cli.collect(LearnerStatus, "status", status_qos())
        h.wait_until(lambda: learner.output().count("debug image on") >= 1, 10.0)
        frames, labels = [], []
        for k, label in enumerate(CLASSES):
            for im in h.views(label, 4, seed=100 + k):
                frames.append(im)
                labels.append(label)
        truth = _publish_frames(h, cli, frames, labels)
        h.wait_until(lambda: len(preds) >= len(frames) - 2, 15.0)
        acc, n = _stream_accuracy(preds, truth)
        assert n >= len(frames) // 2, f"only {n} of {len(frames)} frames predicted\n{extractor.output()[-2000:]}"
        assert acc >= 0.8, f"stream accuracy {acc:.2f} over {n} frames"
        assert h.wait_until(lambda: len(debug) > 0, 5.0), "no debug image"
        d = debug[-1]
        assert (d.width, d.height, d.encoding) == (640, 480, "rgb8")
        from cbcl_pr_ros.nodes.conversions import stamp_to_ns

        assert stamp_to_ns(d.header.stamp) in truth
        assert h.wait_until(lambda: status and status[-1].num_classes == 3, 5.0)
        st = status[-1]
        assert st.last_save_ok and sorted(st.class_names) == sorted(CLASSES)
        assert st.backbone == "efficientnet_lite0" and st.feature_dimension == 1280
        assert st.memory_path == str(memory)

        # classify the latest camera frame (no image in the request)
        r = cli.call(Classify, "classify", Classify.Request())
        assert r.success and r.label == labels[-1], r.message

        # teach from the stream with no frames arriving: times out with a message
        r = cli.call(TeachClass, "teach_class", TeachClass.Request(label="mug", num_frames=3, timeout_s=1.0))
        assert not r.success and "no camera frames arrived" in r.message

        # restart the learner: the memory comes back from disk
        assert learner.stop() == 0, learner.output()[-3000:]
        learner = h.start_node("learner_node", domain_id, tmp_path, lp, tag="_restarted")
        procs[1] = learner
        assert cli.wait_for_service(Classify, "classify", START_TIMEOUT, learner), learner.output()
        r = cli.call(ListClasses, "list_classes", ListClasses.Request())
        assert sorted(c.name for c in r.classes) == sorted(CLASSES), learner.output()[-2000:]
        correct = 0
        for k, label in enumerate(CLASSES):
            for im in h.views(label, 2, seed=200 + k, size=(240, 320)):
                req = Classify.Request(image=h.image_msg(im))
                r = cli.call(Classify, "classify", req)
                assert r.success, r.message
                correct += r.label == label
        assert correct >= 5, f"{correct}/6 correct after restart"

        # forget one class
        r = cli.call(ForgetClass, "forget_class", ForgetClass.Request(label="rocket"))
        assert r.success and r.num_classes == 2, r.message
        r = cli.call(ForgetClass, "forget_class", ForgetClass.Request(label="rocket"))
        assert not r.success and "no class 'rocket'" in r.message
        r = cli.call(Classify, "classify", Classify.Request(image=h.image_msg(h.views("rocket", 1, seed=7)[0])))
        assert r.success and r.label != "rocket" and "rocket" not in r.top_labels

        for p in procs:
            assert p.stop() == 0, p.output()[-3000:]
        assert "Traceback" not in extractor.output() + learner.output()
    finally:
        for p in procs:
            p.stop()
        cli.close()
