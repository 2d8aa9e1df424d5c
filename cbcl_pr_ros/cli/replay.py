"""Replay a teaching-session bag into running nodes (needs rclpy): ``python -m
cbcl_pr_ros.cli.replay BAG [--rate R | --fast]``; same as ``ros2 run cbcl_pr_ros replay_session``.
See :mod:`cbcl_pr_ros.nodes.replay` for the options."""
from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    try:
        from cbcl_pr_ros.nodes.replay import main as replay_main
    except ImportError as exc:
        print(f"replay: needs rclpy and the built package ({exc}); for an evaluation without ROS "
              "use cbcl-bag-eval", file=sys.stderr)
        return 2
    return replay_main(["replay_session", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
