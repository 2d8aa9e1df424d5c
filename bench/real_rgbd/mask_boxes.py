"""Check that every box labelled from a source's own mask comes out of that mask again.

For the sources with instance masks (``mask_kind`` in labels.json) the boxes were taken from the masks,
not drawn: this derives them again from the git snapshots at the recorded commits and prints any box
that differs (a box split by eye out of a mask part of touching objects must lie inside that part).

    python -P bench/real_rgbd/mask_boxes.py --snapshots DIR     # exit status 1 when a box differs
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # bench/real_rgbd_set.py
from real_rgbd_set import mask_checks  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", required=True, help="directory with the sources' git checkouts")
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    args = ap.parse_args()
    checks = mask_checks(args.labels, args.snapshots)
    bad = [c for c in checks if not c.ok]
    for c in bad:
        print(f"{c.frame} {c.name}: labelled {list(c.box)}, mask gives {list(c.derived) if c.derived else None}"
              f"{'' if c.exact else ' (must lie inside)'}")
    print(f"{len(checks) - len(bad)} of {len(checks)} mask-derived boxes reproduced")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
