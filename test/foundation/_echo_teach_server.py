"""A TeachClass server used by test_service_roundtrip: answers with a digest of the images it got."""
from __future__ import annotations

import hashlib
import sys

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from cbcl_pr_ros.srv import TeachClass


def _digest(request: TeachClass.Request) -> str:
    h = hashlib.sha256()
    for img in request.images:
        h.update(f"{img.encoding}:{img.height}x{img.width}:{img.step}:".encode())
        h.update(bytes(img.data))
    return h.hexdigest()


def main() -> None:
    rclpy.init(args=sys.argv)
    node = Node("echo_teach_server")

    def handle(request: TeachClass.Request, response: TeachClass.Response) -> TeachClass.Response:
        response.success = True
        response.message = _digest(request)
        response.num_examples = len(request.images)
        response.num_classes = 1
        return response

    node.create_service(TeachClass, "teach_class", handle)
    print("ready", flush=True)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
