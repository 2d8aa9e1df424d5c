"""Render a multi-view object data set, the way a robot's hand camera sees objects on a table.

Like the paper's robot set: each class has several distinct objects (meshes, scales, colours),
each seen in a few poses, about 30 images per class, with backgrounds (table textures) and
lighting varied from view to view. Written in the ImageFolder layout
``root/{train,test}/<class>/<file>.png`` with ``root/manifest.json`` describing every image.
Deterministic under the seed: every class draws from its own generator seeded by (seed, class).
"""
from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .assets import CATALOGUE, TEXTURES
from .world import CameraConfig, SimWorld, WorldConfig, sample_instances

__all__ = ["DatasetSpec", "render_views", "render_dataset", "MANIFEST", "MAX_OBJECTS_PER_CLASS", "MAX_POSES_PER_OBJECT"]

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


#: objects drawn per class and views rendered per object: enough for any data set the evaluation uses
#: (15 x 2 by default), while a mistyped count refuses at once instead of rendering for days
MAX_OBJECTS_PER_CLASS = 1000
MAX_POSES_PER_OBJECT = 100


@dataclass(frozen=True)
class DatasetSpec:
    """What to render. ``objects_per_class * poses_per_object`` views per class; ``train_per_class`` of
    them (chosen at random) go to ``train/``, the rest are held out in ``test/``."""

    classes: tuple[str, ...] = tuple(CATALOGUE)
    objects_per_class: int = 15
    poses_per_object: int = 2
    train_per_class: int = 10
    image_size: int = 224
    fov_deg: float = 50.0
    seed: int = 0
    # camera distance in multiples of the object's largest half extent, so that small and large
    # objects fill a similar part of the image (a hand camera is brought close to small things)
    camera: dict = field(default_factory=lambda: {"distance_rel": [3.2, 5.5], "min_distance_m": 0.12,
                                                  "elevation_deg": [35.0, 80.0]})

    def __post_init__(self) -> None:
        unknown = [c for c in self.classes if c not in CATALOGUE]
        if unknown:
            raise ValueError(f"unknown classes {unknown}; known: {sorted(CATALOGUE)}")
        if len(set(self.classes)) != len(self.classes) or not self.classes:
            raise ValueError(f"classes must be non-empty and distinct, got {self.classes}")
        if not (1 <= self.objects_per_class <= MAX_OBJECTS_PER_CLASS
                and 1 <= self.poses_per_object <= MAX_POSES_PER_OBJECT):
            raise ValueError(f"objects_per_class must be in [1, {MAX_OBJECTS_PER_CLASS}] and poses_per_object in "
                             f"[1, {MAX_POSES_PER_OBJECT}], got {self.objects_per_class} and {self.poses_per_object}")
        views = self.objects_per_class * self.poses_per_object
        if not 0 <= self.train_per_class < views:
            raise ValueError(f"train_per_class must be in [0, {views - 1}] (views per class = {views}), got {self.train_per_class}")
        if not 32 <= self.image_size <= 1024:
            raise ValueError(f"image_size must be in [32, 1024], got {self.image_size}")

    @property
    def views_per_class(self) -> int:
        return self.objects_per_class * self.poses_per_object


def _class_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(index), 7919]))


def render_views(world: SimWorld, category: str, spec: DatasetSpec, class_index: int) -> list[tuple[np.ndarray, dict]]:
    """All views of one class: (rgb, record) pairs, in a deterministic order."""
    rng = _class_rng(spec.seed, class_index)
    cam = CameraConfig(spec.image_size, spec.image_size, spec.fov_deg, 0.02, 3.0)
    d0, d1 = spec.camera["distance_rel"]
    e0, e1 = spec.camera["elevation_deg"]
    out = []
    for inst in sample_instances(category, spec.objects_per_class, rng):
        centre_xy = np.array(world.config.table_center)
        obj = world.add_object(inst, centre_xy, 0.0)
        try:
            for pose in range(spec.poses_per_object):
                yaw = float(rng.uniform(-math.pi, math.pi))
                world.move_object(inst.name, centre_xy + rng.uniform(-0.01, 0.01, 2), yaw)
                texture = TEXTURES[int(rng.integers(len(TEXTURES)))]
                world.set_table_texture(texture)
                world.randomize_light(rng)
                dist = max(float(rng.uniform(d0, d1)) * float(obj.half_extents.max()), spec.camera["min_distance_m"])
                elev = math.radians(float(rng.uniform(e0, e1)))
                az = float(rng.uniform(-math.pi, math.pi))
                target = obj.position + np.r_[rng.normal(0, 0.008, 2), 0.0]
                eye = target + dist * np.array([math.cos(elev) * math.cos(az), math.cos(elev) * math.sin(az), math.sin(elev)])
                world.set_free_camera(eye, target)
                frame = world.render(cam)
                out.append((frame.rgb, {
                    "class": category, "object": inst.name, "mesh": inst.model.mesh, "scale": round(inst.scale, 4),
                    "rgba": [round(v, 4) for v in inst.rgba], "pose": pose, "yaw": round(yaw, 4),
                    "texture": texture, "distance_m": round(dist, 4), "elevation_deg": round(math.degrees(elev), 2),
                    "azimuth_deg": round(math.degrees(az), 2),
                }))
        finally:
            world.remove_object(inst.name)
    return out


def render_dataset(root: str | Path, spec: DatasetSpec | None = None, overwrite: bool = False,
                   progress: bool = False) -> dict:
    """Render the data set under ``root`` and return its manifest (also written to ``root/manifest.json``).
    ``progress``: a bar over the classes on stderr (the command-line tool shows it)."""
    import cv2
    from tqdm import tqdm

    spec = spec or DatasetSpec()
    root = Path(root)
    if (root / MANIFEST).exists() and not overwrite:
        raise FileExistsError(f"{root / MANIFEST} exists; pass overwrite=True (--overwrite) to replace it")
    t0 = time.perf_counter()
    world = SimWorld(WorldConfig(with_robot=False, shadows=True), seed=spec.seed)
    images = []
    try:
        bar = tqdm(spec.classes, desc=f"rendering {len(spec.classes)} classes x {spec.views_per_class} views",
                   unit="class", disable=not progress)
        for ci, category in enumerate(bar):
            views = render_views(world, category, spec, ci)
            order = _class_rng(spec.seed, 10_000 + ci).permutation(len(views))
            train = set(order[: spec.train_per_class].tolist())
            for vi, (rgb, rec) in enumerate(views):
                split = "train" if vi in train else "test"
                rel = Path(split) / category / f"{rec['object']}_p{rec['pose']}.png"
                (root / rel.parent).mkdir(parents=True, exist_ok=True)
                if not cv2.imwrite(str(root / rel), np.ascontiguousarray(rgb[:, :, ::-1])):
                    raise OSError(f"could not write {root / rel}")
                images.append({"file": rel.as_posix(), "split": split, **rec})
    finally:
        world.close()
    elapsed = time.perf_counter() - t0
    manifest = {
        "format": "imagefolder", "generator": "cbcl_pr_ros.robot.dataset", "spec": asdict(spec),
        "camera": {"width": spec.image_size, "height": spec.image_size, "fov_deg": spec.fov_deg,
                   "K": CameraConfig(spec.image_size, spec.image_size, spec.fov_deg).intrinsics().round(4).tolist()},
        "classes": list(spec.classes), "views_per_class": spec.views_per_class,
        "num_train": sum(1 for r in images if r["split"] == "train"),
        "num_test": sum(1 for r in images if r["split"] == "test"),
        "render_seconds": round(elapsed, 3), "images": images,
    }
    tmp = root / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    tmp.replace(root / MANIFEST)
    log.info("rendered %d images of %d classes in %.1f s into %s", len(images), len(spec.classes), elapsed, root)
    return manifest


def class_subset(names: Sequence[str] | None, n: int | None) -> tuple[str, ...]:
    """Pick classes by name, or the first ``n`` of the catalogue."""
    if names:
        return tuple(names)
    all_ = tuple(CATALOGUE)
    if n is not None and not 1 <= int(n) <= len(all_):  # -1 used to slice off the last class silently
        raise ValueError(f"the number of classes must be in [1, {len(all_)}] (the catalogue), got {n}")
    return all_ if n is None else all_[: int(n)]
