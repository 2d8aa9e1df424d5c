"""Record a teaching session into a rosbag2 bag.

``--simulate`` renders a session in the robot world and writes it directly (no ROS graph; usable
for tests and data sets)::

    python -m cbcl_pr_ros.cli.record --simulate /tmp/session --classes 5 --shots 5 --test-views 3

Live recording is the ROS node ``ros2 run cbcl_pr_ros record_session /tmp/live --topics
/camera/image_raw`` (:mod:`cbcl_pr_ros.nodes.recorder`): this module, like everything outside
``nodes``, imports no node.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from cbcl_pr_ros.bags.config import load_bag_defaults
from cbcl_pr_ros.bags.writer import STORAGES

__all__ = ["main"]


def _simulate(argv: list[str]) -> int:
    # local: the simulator (pybullet's world) loads only for --simulate
    from cbcl_pr_ros.bags.simulate import SessionPlan, default_categories, simulate_session

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--bag-config", default=None)
    d = load_bag_defaults("simulate", pre.parse_known_args(argv)[0].bag_config)
    ap = argparse.ArgumentParser(prog="cbcl-bag-record --simulate",
                                 description="Render a teaching session in the simulated world into a bag.")
    ap.add_argument("output", help="new bag directory")
    ap.add_argument("--bag-config", default=None, help="defaults file (default: config/bags.yaml)")
    ap.add_argument("--classes", type=int, default=int(d.get("classes", 5)), help="number of object categories (catalogue order)")
    ap.add_argument("--categories", nargs="+", default=None, help="explicit categories (overrides --classes)")
    ap.add_argument("--shots", type=int, default=int(d.get("shots", 5)), help="views per class when teaching")
    ap.add_argument("--test-views", type=int, default=int(d.get("test_views", 3)), help="views per learned class in each test phase")
    ap.add_argument("--classes-per-increment", type=int, default=int(d.get("classes_per_increment", 1)))
    ap.add_argument("--image-size", type=int, default=int(d.get("image_size", 224)))
    ap.add_argument("--rate", type=float, default=float(d.get("rate_hz", 10.0)), help="camera rate in Hz (frame spacing)")
    ap.add_argument("--seed", type=int, default=int(d.get("seed", 0)))
    ap.add_argument("--storage", choices=sorted(STORAGES), default=d.get("storage", "mcap"))
    ap.add_argument("--camera-topic", default="/camera/image_raw")
    ap.add_argument("--mode", choices=("default", "object", "frame"), default="default",
                    help="what the events teach and classify: the learner's default, the object in view, the whole frame")
    opts = ap.parse_args(argv)
    try:
        cats = opts.categories or default_categories(opts.classes)
        plan = SessionPlan(tuple(cats), opts.shots, opts.test_views, opts.classes_per_increment,
                           opts.image_size, opts.rate, opts.seed, ("default", "object", "frame").index(opts.mode))
        summary = simulate_session(opts.output, plan, storage=opts.storage, camera_topic=opts.camera_topic)
    except (ValueError, FileExistsError) as exc:
        print(f"record --simulate: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--simulate" in argv:
        argv.remove("--simulate")
        try:
            return _simulate(argv)
        except ValueError as exc:  # the defaults file (--bag-config): unreadable, or a value of the wrong type
            print(f"record --simulate: {exc}", file=sys.stderr)
            return 2
    if "-h" in argv or "--help" in argv:
        print("usage: cbcl-bag-record --simulate OUTPUT [--classes N] [--shots N] [--test-views N] [...]\n"
              "       (cbcl-bag-record --simulate --help lists every option)\n\n" + (__doc__ or "").strip() + "\n\n"
              "Live recording (needs ROS 2): record_session OUTPUT --topics /camera/image_raw")
        return 0
    print("record: live recording is a ROS node: `ros2 run cbcl_pr_ros record_session OUTPUT ...` "
          "(or `python -m cbcl_pr_ros.nodes.recorder`); use --simulate for a ROS-free bag", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
