"""Build the real RGB-D table set from git snapshots of its source repositories.

The frames are not committed (most sources' licences do not allow it); this copies them out of each source
at the commit recorded in labels.json and writes data/real_rgbd/<id>-color.png and <id>-depth.png (16-bit mm).

    python -P bench/real_rgbd/assemble.py --snapshots DIR [--out data/real_rgbd]

DIR holds one git checkout or snapshot per source: ``owner+name/repo`` (as fetched snapshots are laid
out), ``owner+name`` or ``name`` (``git clone https://github.com/owner/name``). Sources and licences:
bench/real_rgbd/README.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # bench/real_rgbd_set.py
from real_rgbd_set import assemble  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", required=True, help="directory with the sources' git checkouts")
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--out", default=str(ROOT / "data/real_rgbd"))
    args = ap.parse_args()
    ids = assemble(args.labels, args.snapshots, args.out)
    print(f"wrote {len(ids)} frames to {args.out}")


if __name__ == "__main__":
    main()
