"""Child process of test_arm_node_ros.py: asks the arm node to point, records Baxter JointCommands.

Runs in an environment that sources the fixture's baxter_core_msgs install. Prints one JSON line.
"""
from __future__ import annotations

import json
import sys
import time

import rclpy
from baxter_core_msgs.msg import JointCommand

from cbcl_pr_ros.srv import PointAt


def main() -> int:
    label, listen_s = sys.argv[1], float(sys.argv[2])
    rclpy.init()
    node = rclpy.create_node("baxter_listener")
    got: list[tuple[float, int, list[str], list[float]]] = []
    node.create_subscription(JointCommand, "/robot/limb/right/joint_command",
                             lambda m: got.append((time.monotonic(), m.mode, list(m.names), list(m.command))), 50)
    client = node.create_client(PointAt, "point_at")
    out: dict = {"constants": [JointCommand.POSITION_MODE, JointCommand.VELOCITY_MODE, JointCommand.TORQUE_MODE,
                               JointCommand.RAW_POSITION_MODE]}
    if not client.wait_for_service(timeout_sec=60.0):
        out["error"] = "point_at not available"
    else:
        # let the subscription match before the stream starts
        t0 = time.monotonic()
        while node.count_publishers("/robot/limb/right/joint_command") == 0 and time.monotonic() - t0 < 20:
            rclpy.spin_once(node, timeout_sec=0.05)
        time.sleep(0.5)
        fut = client.call_async(PointAt.Request(label=label))
        rclpy.spin_until_future_complete(node, fut, timeout_sec=60.0)
        res = fut.result()
        out.update(success=bool(res and res.success), message=res.message if res else "no answer",
                   joint_names=list(res.joint_names) if res else [], joint_positions=list(res.joint_positions) if res else [])
        t0 = time.monotonic()
        while time.monotonic() - t0 < listen_s:
            rclpy.spin_once(node, timeout_sec=0.02)
    out["messages"] = [{"t": t, "mode": m, "names": n, "command": c} for t, m, n, c in got]
    print(json.dumps(out))
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
