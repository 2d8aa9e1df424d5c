"""``cbcl-bag-eval``: evaluate a recorded teaching session offline, straight from the bag.

No ROS graph: the bag is read with rosbags, features are computed once by the configured backbone,
and the events drive the same learner the learner node runs. Prints accuracy per increment;
``--json`` writes the full report (every prediction). ``--info`` only shows the bag's topics.

    cbcl-bag-eval /tmp/session
    cbcl-bag-eval /tmp/session --config config/cbcl_pr.yaml --set classifier=ncm --json report.json
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import yaml

from cbcl_pr_ros.bags.config import checked_output_file
from cbcl_pr_ros.bags.errors import BagFormatError
from cbcl_pr_ros.bags.reader import bag_info

__all__ = ["main"]


def _overrides(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects name=value, got {item!r}")
        out[key] = yaml.safe_load(value)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cbcl-bag-eval", description=__doc__.split("\n\n")[0])
    ap.add_argument("bag")
    ap.add_argument("--config", default=None, help="parameters YAML (default: config/cbcl_pr.yaml)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a learner parameter (repeatable)")
    ap.add_argument("--camera-topic", default=None)
    ap.add_argument("--events-topic", default="/teaching_events")
    ap.add_argument("--json", default=None, help="write the full report here")
    ap.add_argument("--info", action="store_true", help="print the bag's metadata and exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="errors only")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="also log each stage (backbone, teaching, memory) before the table")
    opts = ap.parse_args(sys.argv[1:] if argv is None else argv)
    level = logging.ERROR if opts.quiet else logging.INFO if opts.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        out = checked_output_file(opts.json) if opts.json else None
        if opts.info:
            info = bag_info(opts.bag)
            print(f"bag {info.path}: {info.storage}, rosbag2 v{info.version}, {info.message_count} "
                  f"messages, {info.duration_ns * 1e-9:.2f} s")
            for topic, t in sorted(info.topics.items()):
                print(f"  {topic:32s} {t.msgtype:34s} {t.count:6d}  {t.type_hash}")
            return 0
        from cbcl_pr_ros.bags.offline_eval import evaluate_bag  # local: the learner loads only for an evaluation

        report = evaluate_bag(opts.bag, config=opts.config, overrides=_overrides(opts.set),
                              camera_topic=opts.camera_topic, events_topic=opts.events_topic)
    except (BagFormatError, ValueError, FileNotFoundError) as exc:
        print(f"cbcl-bag-eval: {exc}", file=sys.stderr)
        return 2
    print(f"{report.bag}: backbone {report.backbone}, {report.n_events} events, "
          f"{report.n_frames_extracted} images through the backbone ({report.feature_seconds:.1f} s features, "
          f"{report.learner_seconds:.1f} s learner)")
    print(f"{'inc':>3s} {'taught':30s} {'known':>5s} {'tests':>5s} {'accuracy':>8s}")
    for inc in report.increments:
        acc = "-" if inc.accuracy is None else f"{inc.accuracy:.3f}"
        print(f"{inc.index:3d} {','.join(inc.taught)[:30]:30s} {len(inc.classes_known):5d} "
              f"{inc.n_test:5d} {acc:>8s}")
    if report.accuracy is not None:
        print(f"overall accuracy: {report.accuracy:.3f}")
    if report.agreement_with_recording is not None:
        print(f"agreement with the live answers recorded in the bag: {report.agreement_with_recording:.3f}")
    for failure in report.teach_failures:
        print(f"warning: {failure}", file=sys.stderr)
    if out is not None:
        try:
            out.write_text(json.dumps(report.to_dict(), indent=2), encoding="utf8")
        except OSError as exc:
            print(f"cbcl-bag-eval: cannot write the report to {out}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
