"""A real rclpy service round trip between two processes, with images in a TeachClass request."""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.ros

SERVER = Path(__file__).with_name("_echo_teach_server.py")


def test_teach_request_with_images_crosses_processes_intact() -> None:
    import rclpy
    from rclpy.node import Node
    from sensor_msgs.msg import Image

    from cbcl_pr_ros.srv import TeachClass

    from ros_testing import fresh_domain, ros_env

    env = ros_env(fresh_domain())
    server = subprocess.Popen([sys.executable, str(SERVER)], env=env, stdout=subprocess.PIPE,
                              text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.environ["ROS_DOMAIN_ID"] = env["ROS_DOMAIN_ID"]
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    rng = np.random.default_rng(0)
    images, digest = [], hashlib.sha256()
    for i in range(3):
        pixels = rng.integers(0, 256, size=(224, 224, 3), dtype=np.uint8)
        img = Image(height=224, width=224, encoding="rgb8", step=224 * 3, data=pixels.tobytes())
        img.header.frame_id = f"cam{i}"
        images.append(img)
        digest.update(f"rgb8:224x224:{224 * 3}:".encode())
        digest.update(pixels.tobytes())
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(env["ROS_DOMAIN_ID"]))
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        node = Node("roundtrip_client", context=context)
        client = node.create_client(TeachClass, "teach_class")
        assert client.wait_for_service(timeout_sec=20.0), "TeachClass server never appeared"
        future = client.call_async(TeachClass.Request(label="mug", images=images))
        executor = rclpy.executors.SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + 20.0
        while not future.done() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        response = future.result()
        assert response is not None and response.success
        assert response.num_examples == 3
        assert response.message == digest.hexdigest()
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
        server.send_signal(signal.SIGINT)
        try:
            code = server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert code == 0, f"server exited with {code} on SIGINT"
