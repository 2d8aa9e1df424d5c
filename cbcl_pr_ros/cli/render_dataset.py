"""``cbcl-render-dataset``: render the simulated multi-view household-object data set to disk.

Example: ``python -m cbcl_pr_ros.cli.render_dataset data/sim_objects --seed 0``
(22 classes x 30 views at 224x224, ImageFolder layout plus manifest.json).
"""
from __future__ import annotations

import argparse
import logging
import sys

from ..robot.assets import CATALOGUE
from ..robot.dataset import MAX_OBJECTS_PER_CLASS, MAX_POSES_PER_OBJECT, DatasetSpec, class_subset, render_dataset
from .arg_types import int_in

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cbcl-render-dataset", description=__doc__.splitlines()[0])
    ap.add_argument("root", help="output directory (train/<class>/, test/<class>/, manifest.json)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", nargs="*", help=f"class names (default: all {len(CATALOGUE)})")
    ap.add_argument("--num-classes", type=int, default=None, help="use the first N classes of the catalogue")
    ap.add_argument("--objects-per-class", type=int_in(1, MAX_OBJECTS_PER_CLASS), default=15,
                    help=f"distinct objects drawn per class (1-{MAX_OBJECTS_PER_CLASS})")
    ap.add_argument("--poses-per-object", type=int_in(1, MAX_POSES_PER_OBJECT), default=2,
                    help=f"views rendered of each object (1-{MAX_POSES_PER_OBJECT})")
    ap.add_argument("--train-per-class", type=int, default=10, help="views per class in train/; the rest go to test/")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument("--list-classes", action="store_true", help="print the catalogue and exit")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    if args.list_classes:
        for name, models in CATALOGUE.items():
            print(f"{name:14s} {len(models)} mesh(es): {', '.join(m.mesh for m in models[:3])}{' ...' if len(models) > 3 else ''}")
        return 0
    try:
        spec = DatasetSpec(classes=class_subset(args.classes, args.num_classes), objects_per_class=args.objects_per_class,
                           poses_per_object=args.poses_per_object, train_per_class=args.train_per_class,
                           image_size=args.image_size, seed=args.seed)
        m = render_dataset(args.root, spec, overwrite=args.overwrite, progress=True)
    except (ValueError, FileExistsError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(m['classes'])} classes, {m['num_train']} train + {m['num_test']} test images "
          f"in {m['render_seconds']:.1f} s -> {args.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
