"""Cluttered table scenes with ground truth, for the per-object perception benchmarks and demos.

A scene is 3-10 objects of chosen categories placed close together on the table (a negative
``min_gap`` lets neighbours touch; an oblique camera makes near ones hide parts of far ones), seen
from a few nearby camera poses, the way a hand camera glides over a table. Every frame comes with
per-object ground truth read from PyBullet's segmentation mask: the visible box, the visible pixel
count and the object's bounding-box centre in the camera's optical frame.

Objects for scenes are drawn with a ``prefix`` and a generator of their own, so they are other
instances (scale, tint, and mesh where a category has several) than the ones used for teaching.
Deterministic under the generator passed in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .world import CameraConfig, Frame, ObjectInstance, SimWorld, WorldConfig, quaternion_to_matrix, sample_instances

__all__ = ["GroundTruthObject", "SceneFrame", "SceneSpec", "make_scene", "render_scene_views", "render_object_views",
           "ground_truth", "table_world"]


@dataclass(frozen=True)
class GroundTruthObject:
    """One object as seen in one frame."""

    name: str
    category: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 of its visible pixels, half-open
    pixels: int  # visible pixel count
    centre_cam: np.ndarray  # (3,) its bounding-box centre in the camera optical frame, metres
    size: np.ndarray  # (3,) full extents of its (yaw-free) bounding box, metres


@dataclass(frozen=True)
class SceneFrame:
    """A rendered frame and the objects visible in it."""

    frame: Frame
    objects: tuple[GroundTruthObject, ...]


@dataclass(frozen=True)
class SceneSpec:
    """How scenes look. Distances in metres, angles in degrees."""

    n_objects: tuple[int, int] = (3, 10)  # inclusive range
    min_gap: float = -0.015  # negative: circumscribed circles may overlap, so objects can touch
    region_half: tuple[float, float] = (0.17, 0.24)  # half size (x, y) of the placement region
    camera_height: tuple[float, float] = (0.45, 0.6)  # above the table top
    camera_back: tuple[float, float] = (0.15, 0.35)  # horizontal offset of the eye from the target
    view_step_deg: float = 4.0  # azimuth step between successive views of one scene
    min_visible_px: int = 150  # objects with fewer visible pixels are not in the ground truth
    camera: CameraConfig = field(default_factory=CameraConfig)

    def __post_init__(self) -> None:
        lo, hi = self.n_objects
        if not 1 <= lo <= hi:
            raise ValueError(f"n_objects must be a range 1 <= lo <= hi, got {self.n_objects}")
        if self.min_visible_px < 1:
            raise ValueError(f"min_visible_px must be >= 1, got {self.min_visible_px}")


def table_world(seed: int = 0, camera: CameraConfig | None = None) -> SimWorld:
    """A robot-free world (a table and a floor), the only thing scenes need."""
    return SimWorld(WorldConfig(camera=camera or CameraConfig(), with_robot=False, shadows=True), seed=seed)


def make_scene(world: SimWorld, categories: Sequence[str], rng: np.random.Generator, spec: SceneSpec | None = None,
               prefix: str = "scene") -> list[ObjectInstance]:
    """Clear the table and place ``n`` objects (n drawn from ``spec.n_objects``) of the given categories.

    Categories are drawn without replacement while there are enough, so a scene rarely holds two
    objects of one class. Returns the placed instances.
    """
    spec = spec or SceneSpec()
    if not categories:
        raise ValueError("categories must not be empty")
    world.clear_objects()
    n = int(rng.integers(spec.n_objects[0], spec.n_objects[1] + 1))
    cats: list[str] = []
    while len(cats) < n:
        cats += [categories[i] for i in rng.permutation(len(categories))]
    cats = cats[:n]
    placed = []
    for i, cat in enumerate(cats):
        # a fresh instance: its own scale, tint and (where the category has several) mesh
        inst = sample_instances(cat, int(rng.integers(1, 4)), rng, prefix=f"{prefix}{i}_{cat}")[-1]
        world.add_object(inst, world.config.table_center, 0.0)
        placed.append(inst)
    cx, cy = world.config.table_center
    hx, hy = spec.region_half
    region = (cx - hx, cx + hx, cy - hy, cy + hy)
    gap = spec.min_gap
    for _ in range(8):  # widen the gap budget when a crowded draw does not fit
        try:
            world.arrange([p.name for p in placed], rng, region=region, min_gap=gap)
            break
        except ValueError:
            region = (region[0] - 0.03, region[1] + 0.03, region[2] - 0.04, region[3] + 0.04)
    else:
        raise ValueError(f"cannot arrange {n} objects on the table")
    return placed


def _camera_frame(frame: Frame) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(frame.camera_position, float), quaternion_to_matrix(frame.camera_quaternion)


def ground_truth(world: SimWorld, frame: Frame, min_visible_px: int = 150) -> tuple[GroundTruthObject, ...]:
    """Objects visible in ``frame`` with at least ``min_visible_px`` pixels."""
    pos, R = _camera_frame(frame)
    by_name = {o.name: o for o in world.objects}
    seg = frame.segmentation
    out = []
    counts = np.bincount(seg[seg >= 0].ravel(), minlength=len(frame.object_names))
    for idx, name in enumerate(frame.object_names):
        if counts[idx] < min_visible_px or name not in by_name:
            continue
        ys, xs = np.nonzero(seg == idx)
        obj = by_name[name]
        c, s = math.cos(obj.yaw), math.sin(obj.yaw)
        # full extents of the yawed box, in the base frame's axes
        hx = abs(c) * obj.half_extents[0] + abs(s) * obj.half_extents[1]
        hy = abs(s) * obj.half_extents[0] + abs(c) * obj.half_extents[1]
        out.append(GroundTruthObject(
            name, obj.category, (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1), int(counts[idx]),
            R.T @ (np.asarray(obj.position, float) - pos), 2 * np.array([hx, hy, obj.half_extents[2]]),
        ))
    return tuple(out)


def render_scene_views(world: SimWorld, rng: np.random.Generator, n_views: int = 1,
                       spec: SceneSpec | None = None) -> list[SceneFrame]:
    """Render the current scene from ``n_views`` nearby poses (an arc of ``view_step_deg`` steps)."""
    spec = spec or SceneSpec()
    if n_views < 1:
        raise ValueError(f"n_views must be >= 1, got {n_views}")
    objs = world.objects
    centre = np.mean([o.position for o in objs], axis=0) if objs else np.r_[world.config.table_center, world.config.table_height]
    target = np.array([centre[0], centre[1], world.config.table_height]) + np.r_[rng.normal(0, 0.02, 2), 0.0]
    height = float(rng.uniform(*spec.camera_height))
    back = float(rng.uniform(*spec.camera_back))
    az0 = math.pi + float(rng.uniform(-0.6, 0.6))  # from the robot's side of the table, roughly
    out = []
    for v in range(n_views):
        az = az0 + math.radians(spec.view_step_deg) * (v - (n_views - 1) / 2)
        eye = target + np.array([back * math.cos(az), back * math.sin(az), height])
        world.set_free_camera(eye, target)
        frame = world.render(spec.camera)
        out.append(SceneFrame(frame, ground_truth(world, frame, spec.min_visible_px)))
        world.advance(1.0 / 15.0)
    return out


def render_object_views(world: SimWorld, instance: ObjectInstance, n_views: int, rng: np.random.Generator,
                        camera: CameraConfig | None = None, distance_rel: tuple[float, float] = (3.2, 5.5),
                        elevation_deg: tuple[float, float] = (35.0, 80.0)) -> list[SceneFrame]:
    """Teaching views: ``instance`` alone on the cleared table, seen from a hand camera brought close.

    Camera distance is in multiples of the object's largest half extent (as in the rendered data
    set), so small and large objects fill a similar part of the frame.
    """
    world.clear_objects()
    centre = np.asarray(world.config.table_center, float)
    obj = world.add_object(instance, centre, 0.0)
    cam = camera or CameraConfig()
    out = []
    for _ in range(int(n_views)):
        world.move_object(instance.name, centre + rng.uniform(-0.01, 0.01, 2), float(rng.uniform(-math.pi, math.pi)))
        world.randomize_light(rng)
        dist = max(float(rng.uniform(*distance_rel)) * float(obj.half_extents.max()), 0.12)
        elev = math.radians(float(rng.uniform(*elevation_deg)))
        az = float(rng.uniform(-math.pi, math.pi))
        target = obj.position + np.r_[rng.normal(0, 0.008, 2), 0.0]
        eye = target + dist * np.array([math.cos(elev) * math.cos(az), math.cos(elev) * math.sin(az), math.sin(elev)])
        world.set_free_camera(eye, target)
        frame = world.render(cam)
        out.append(SceneFrame(frame, ground_truth(world, frame, 1)))
    world.clear_objects()
    return out
