"""A headless PyBullet world: a Baxter at a table of household-like objects, seen by a hand camera.

Frames follow ROS conventions: positions in metres in Baxter's base frame (``base``: x forward,
y left, z up); the camera's optical frame has z forward, x right, y down. The world is
deterministic under its seed: the same seed and the same calls give the same images.

The world has no physics stepping: objects are placed, not dropped, and joints are set (or
interpolated) kinematically, which is what a teaching demo needs and keeps it fast and exact.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from . import baxter
from .assets import CATALOGUE, TEXTURES, ObjectModel, baxter_urdf, mesh_extent, robosuite_assets_dir
from .native_quiet import import_pybullet, native_output_silenced

# What PlaceObject accepts (a peer's request): plain names that cannot forge a log line or look like a
# path, and a bound on the objects on the table (each one is a PyBullet body rendered every frame).
OBJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_OBJECTS = 64


def _short(value: object, limit: int = 60) -> str:
    """repr of a request value cut to ``limit`` characters (refusals never echo a long value)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."

__all__ = [
    "CameraConfig",
    "WorldConfig",
    "ObjectInstance",
    "SceneObject",
    "Frame",
    "SimWorld",
    "sample_instances",
    "look_at_quaternion",
    "random_light",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CameraConfig:
    """Pinhole camera; 640×480 at 60° vertical field of view by default."""

    width: int = 640
    height: int = 480
    fov_deg: float = 60.0
    near: float = 0.02
    far: float = 3.0

    def __post_init__(self) -> None:
        if not (16 <= int(self.width) <= 4096 and 16 <= int(self.height) <= 4096):
            raise ValueError(f"camera size must be 16..4096 pixels, got {self.width}x{self.height}")
        if not 1.0 <= float(self.fov_deg) <= 170.0:
            raise ValueError(f"fov_deg must be in [1, 170], got {self.fov_deg}")
        if not 0 < self.near < self.far:
            raise ValueError(f"need 0 < near < far, got near={self.near}, far={self.far}")

    def intrinsics(self) -> np.ndarray:
        """3×3 camera matrix K (square pixels, principal point at the image centre)."""
        fy = 0.5 * self.height / math.tan(math.radians(self.fov_deg) / 2)
        return np.array([[fy, 0.0, (self.width - 1) / 2], [0.0, fy, (self.height - 1) / 2], [0.0, 0.0, 1.0]])


@dataclass(frozen=True)
class WorldConfig:
    """What the world contains. ``table_height`` is the table top's z in the base frame (Baxter's
    base sits about 0.93 m above the floor, so a 0.75 m table is at about -0.18)."""

    camera: CameraConfig = field(default_factory=CameraConfig)
    with_robot: bool = True
    camera_side: str = "right"
    table_height: float = -0.18
    table_center: tuple[float, float] = (0.72, -0.05)
    table_size: tuple[float, float] = (0.9, 1.3)
    table_texture: str | None = None  # one of TEXTURES; None: chosen from the seed
    shadows: bool = True

    def __post_init__(self) -> None:
        baxter.check_side(self.camera_side)
        if self.table_texture is not None and self.table_texture not in TEXTURES:
            raise ValueError(f"table_texture must be one of {TEXTURES}, got {self.table_texture!r}")


@dataclass(frozen=True)
class ObjectInstance:
    """One physical object: a category's mesh with its own scale and colour."""

    name: str
    category: str
    model_index: int
    scale: float
    rgba: tuple[float, float, float, float]

    @property
    def model(self) -> ObjectModel:
        return CATALOGUE[self.category][self.model_index]


@dataclass
class SceneObject:
    """An object placed in the world."""

    instance: ObjectInstance
    body_id: int
    position: np.ndarray  # centre of its bounding box, base frame
    yaw: float
    half_extents: np.ndarray

    @property
    def name(self) -> str:
        return self.instance.name

    @property
    def category(self) -> str:
        return self.instance.category


@dataclass(frozen=True)
class Frame:
    """One camera frame. ``segmentation`` holds, per pixel, the index into ``object_names`` of the
    object seen there, or -1 (table, robot, background)."""

    rgb: np.ndarray
    depth: np.ndarray
    segmentation: np.ndarray
    K: np.ndarray
    camera_position: np.ndarray
    camera_quaternion: np.ndarray  # x, y, z, w of the optical frame in the base frame
    object_names: tuple[str, ...]
    stamp: float


def sample_instances(category: str, n: int, rng: np.random.Generator, prefix: str | None = None) -> list[ObjectInstance]:
    """``n`` distinct objects of a category: its meshes in turn, each with a scale and tint."""
    if category not in CATALOGUE:
        raise ValueError(f"unknown category {category!r}; known: {sorted(CATALOGUE)}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    models = CATALOGUE[category]
    out = []
    for i in range(n):
        mi = i % len(models)
        model = models[mi]
        base = np.array(model.rgba[:3])
        tint = rng.uniform(-model.tint, model.tint, size=3)
        rgb = np.clip(base + tint, 0.05, 1.0)
        out.append(ObjectInstance(f"{prefix or category}_{i:02d}", category, mi, float(rng.uniform(0.8, 1.2)),
                                  (float(rgb[0]), float(rgb[1]), float(rgb[2]), 1.0)))
    return out


def random_light(rng: np.random.Generator) -> dict:
    """A light direction and intensities drawn from ``rng`` (varied lighting of views)."""
    az = rng.uniform(-math.pi, math.pi)
    el = rng.uniform(0.5, 1.4)
    return {"direction": (math.cos(az) * math.cos(el), math.sin(az) * math.cos(el), math.sin(el)),
            "ambient": float(rng.uniform(0.4, 0.7)), "diffuse": float(rng.uniform(0.35, 0.7)),
            "specular": float(rng.uniform(0.0, 0.3))}


def look_at_quaternion(eye: Sequence[float], target: Sequence[float], up_hint: Sequence[float] = (1.0, 0.0, 0.0)) -> np.ndarray:
    """Quaternion (x, y, z, w) of an optical frame at ``eye`` whose z axis points at ``target``."""
    z = np.asarray(target, float) - np.asarray(eye, float)
    nz = np.linalg.norm(z)
    if nz < 1e-9:
        raise ValueError("eye and target coincide")
    z /= nz
    hint = np.asarray(up_hint, float)
    if abs(float(np.dot(hint, z))) > 0.99:
        hint = np.array([0.0, 1.0, 0.0]) if abs(z[1]) < 0.9 else np.array([1.0, 0.0, 0.0])
    # image "up" (-y) follows the hint
    y = -(hint - np.dot(hint, z) * z)
    y /= np.linalg.norm(y)
    x = np.cross(y, z)
    return _matrix_to_quaternion(np.column_stack([x, y, z]))


def _matrix_to_quaternion(R: np.ndarray) -> np.ndarray:
    t = np.trace(R)
    if t > 0:
        s = math.sqrt(t + 1.0) * 2
        q = [(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = math.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k]) * 2
        q = [0.0, 0.0, 0.0, (R[k, j] - R[j, k]) / s]
        q[i] = 0.25 * s
        q[j] = (R[j, i] + R[i, j]) / s
        q[k] = (R[k, i] + R[i, k]) / s
    q = np.array(q)
    return q / np.linalg.norm(q)


def quaternion_to_matrix(q: Sequence[float]) -> np.ndarray:
    """3×3 rotation of a unit quaternion (x, y, z, w)."""
    x, y, z, w = (float(v) for v in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


class SimWorld:
    """The simulated scene. Create, place objects, move joints, render; ``close()`` when done.

    Parameters
    ----------
    config : WorldConfig
    seed : int
        Chooses the table texture and the lighting sequence; object placement uses the
        generators its callers pass, so scenes are reproducible.
    """

    def __init__(self, config: WorldConfig | None = None, seed: int = 0) -> None:
        p = import_pybullet()  # imported here so that importing the package stays cheap

        self.config = config or WorldConfig()
        self.seed = int(seed)
        self._p = p
        self._rng = np.random.default_rng(self.seed)
        self._cid = p.connect(p.DIRECT)
        self._objects: dict[str, SceneObject] = {}
        self._visual_cache: dict[tuple, int] = {}
        self._texture_cache: dict[str, int] = {}
        self._time = 0.0
        self._free_camera: tuple[np.ndarray, np.ndarray] | None = None
        self.light = self._default_light()
        texture = self.config.table_texture or TEXTURES[int(self._rng.integers(len(TEXTURES)))]
        self._build_table(texture)
        self.robot_id = -1
        self._joint_index: dict[str, int] = {}
        self._joint_limits: dict[str, tuple[float, float]] = {}
        self._link_index: dict[str, int] = {}
        if self.config.with_robot:
            self._load_robot()

    # ------------------------------------------------------------------ construction
    def _default_light(self) -> dict:
        return {"direction": (0.4, -0.3, 1.0), "ambient": 0.55, "diffuse": 0.55, "specular": 0.1}

    def _texture(self, name: str) -> int:
        if name not in self._texture_cache:
            path = robosuite_assets_dir() / "textures" / name
            self._texture_cache[name] = self._p.loadTexture(str(path), physicsClientId=self._cid)
        return self._texture_cache[name]

    def _build_table(self, texture: str) -> None:
        p, c = self._p, self.config
        sx, sy = c.table_size
        thick = 0.04
        vis = p.createVisualShape(p.GEOM_BOX, halfExtents=[sx / 2, sy / 2, thick / 2], rgbaColor=[1, 1, 1, 1],
                                  physicsClientId=self._cid)
        self.table_id = p.createMultiBody(0, -1, vis, [c.table_center[0], c.table_center[1], c.table_height - thick / 2],
                                          physicsClientId=self._cid)
        self.set_table_texture(texture)
        floor = p.createVisualShape(p.GEOM_BOX, halfExtents=[3, 3, 0.01], rgbaColor=[0.45, 0.45, 0.48, 1],
                                    physicsClientId=self._cid)
        p.createMultiBody(0, -1, floor, [0, 0, -0.94], physicsClientId=self._cid)

    def set_table_texture(self, texture: str) -> None:
        """Change the table top's texture (the background the camera sees)."""
        if texture not in TEXTURES:
            raise ValueError(f"texture must be one of {TEXTURES}, got {texture!r}")
        self.table_texture = texture
        self._p.changeVisualShape(self.table_id, -1, textureUniqueId=self._texture(texture), physicsClientId=self._cid)

    def _load_robot(self) -> None:
        p = self._p

        with native_output_silenced():  # "No inertial data for link" for Baxter's massless links
            self.robot_id = p.loadURDF(str(baxter_urdf()), useFixedBase=True, physicsClientId=self._cid)
        for j in range(p.getNumJoints(self.robot_id, physicsClientId=self._cid)):
            info = p.getJointInfo(self.robot_id, j, physicsClientId=self._cid)
            self._link_index[info[12].decode()] = j
            if info[2] == p.JOINT_REVOLUTE:
                name = info[1].decode()
                self._joint_index[name] = j
                self._joint_limits[name] = (float(info[8]), float(info[9]))
        # Baxter's untucked "neutral" pose, arms forward above the table.
        neutral = {"s0": 0.0, "s1": -0.55, "e0": 0.0, "e1": 0.75, "w0": 0.0, "w1": 1.26, "w2": 0.0}
        self.set_joint_positions({f"{side}_{j}": (v if side == "right" or j not in ("s0", "e0", "w0", "w2") else -v)
                                  for side in ("left", "right") for j, v in neutral.items()})

    # ------------------------------------------------------------------ robot
    @property
    def joint_names(self) -> list[str]:
        """Baxter's arm and head joints present in the model (left_*, right_*, head_pan)."""
        return list(self._joint_index)

    @property
    def joint_limits(self) -> dict[str, tuple[float, float]]:
        return dict(self._joint_limits)

    def _require_robot(self) -> None:
        if self.robot_id < 0:
            raise RuntimeError("this world was made with with_robot=False")

    def joint_positions(self, names: Iterable[str] | None = None) -> dict[str, float]:
        """Current joint positions by name."""
        self._require_robot()
        names = list(names) if names is not None else self.joint_names
        out = {}
        for n in names:
            if n not in self._joint_index:
                raise ValueError(f"unknown joint {n!r}")
            out[n] = float(self._p.getJointState(self.robot_id, self._joint_index[n], physicsClientId=self._cid)[0])
        return out

    def check_joint_command(self, positions: Mapping[str, float]) -> dict[str, float]:
        """Validate a command (names known, values finite and within limits) without applying it."""
        self._require_robot()
        checked = {}
        for n, v in positions.items():
            if n not in self._joint_index:
                raise ValueError(f"unknown joint {n!r}; known: {self.joint_names}")
            v = float(v)
            if not math.isfinite(v):
                raise ValueError(f"joint {n!r} command is not finite: {v}")
            lo, hi = self._joint_limits[n]
            if not lo - 1e-6 <= v <= hi + 1e-6:
                raise ValueError(f"joint {n!r} command {v:.4f} outside its limits [{lo:.4f}, {hi:.4f}]")
            checked[n] = min(max(v, lo), hi)
        return checked

    def set_joint_positions(self, positions: Mapping[str, float]) -> None:
        """Move joints to positions at once. Everything is checked first: a bad command moves nothing."""
        checked = self.check_joint_command(positions)
        for n, v in checked.items():
            self._p.resetJointState(self.robot_id, self._joint_index[n], v, physicsClientId=self._cid)

    def step_towards(self, targets: Mapping[str, float], dt: float, max_velocity: float = 1.0) -> bool:
        """Move each joint at most ``max_velocity*dt`` towards its target, as a position-controlled arm
        would in one control period. Returns True when all targets are reached."""
        checked = self.check_joint_command(targets)
        now = self.joint_positions(checked)
        step = max_velocity * float(dt)
        new = {n: now[n] + float(np.clip(v - now[n], -step, step)) for n, v in checked.items()}
        self.set_joint_positions(new)
        self._time += float(dt)
        return all(abs(new[n] - checked[n]) < 1e-6 for n in checked)

    def link_pose(self, link: str) -> tuple[np.ndarray, np.ndarray]:
        """Position and quaternion (x, y, z, w) of a robot link in the base frame."""
        self._require_robot()
        if link not in self._link_index:
            raise ValueError(f"unknown link {link!r}")
        st = self._p.getLinkState(self.robot_id, self._link_index[link], computeForwardKinematics=True,
                                  physicsClientId=self._cid)
        return np.array(st[4]), np.array(st[5])

    # ------------------------------------------------------------------ objects
    def _visual(self, inst: ObjectInstance) -> tuple[int, np.ndarray]:
        key = (inst.category, inst.model_index, round(inst.scale, 6), inst.rgba)
        if key in self._visual_cache:
            return self._visual_cache[key]
        p = self._p
        model = inst.model
        lo, hi = mesh_extent(str(model.mesh_path()))
        R = quaternion_to_matrix(p.getQuaternionFromEuler(model.up_euler))
        corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]) @ R.T
        ext = corners.max(0) - corners.min(0)
        s = model.size_m / float(ext.max()) * inst.scale
        cmin, cmax = corners.min(0) * s, corners.max(0) * s
        centre = (cmin + cmax) / 2
        vis = p.createVisualShape(p.GEOM_MESH, fileName=str(model.mesh_path()), meshScale=[s, s, s],
                                  rgbaColor=list(inst.rgba), specularColor=[0.2, 0.2, 0.2],
                                  visualFramePosition=list(-centre),
                                  visualFrameOrientation=p.getQuaternionFromEuler(model.up_euler),
                                  physicsClientId=self._cid)
        self._visual_cache[key] = (vis, (cmax - cmin) / 2)
        return self._visual_cache[key]

    def add_object(self, instance: ObjectInstance, xy: Sequence[float], yaw: float = 0.0, lift: float = 0.0) -> SceneObject:
        """Place an object standing on the table at ``xy`` (base frame), rotated by ``yaw``."""
        if instance.name in self._objects:
            raise ValueError(f"an object named {instance.name!r} is already in the world")
        vis, half = self._visual(instance)
        pos = np.array([float(xy[0]), float(xy[1]), self.config.table_height + float(half[2]) + float(lift)])
        body = self._p.createMultiBody(0, -1, vis, pos.tolist(), self._p.getQuaternionFromEuler([0, 0, yaw]),
                                       physicsClientId=self._cid)
        obj = SceneObject(instance, body, pos, float(yaw), half)
        self._objects[instance.name] = obj
        return obj

    def move_object(self, name: str, xy: Sequence[float], yaw: float = 0.0, lift: float = 0.0) -> SceneObject:
        """Move a placed object to a new place and heading."""
        obj = self._get(name)
        obj.position = np.array([float(xy[0]), float(xy[1]), self.config.table_height + float(obj.half_extents[2]) + float(lift)])
        obj.yaw = float(yaw)
        self._p.resetBasePositionAndOrientation(obj.body_id, obj.position.tolist(),
                                                self._p.getQuaternionFromEuler([0, 0, yaw]), physicsClientId=self._cid)
        return obj

    def remove_object(self, name: str) -> None:
        obj = self._objects.pop(self._get(name).name)
        self._p.removeBody(obj.body_id, physicsClientId=self._cid)

    def clear_objects(self) -> None:
        for name in list(self._objects):
            self.remove_object(name)

    def _get(self, name: str) -> SceneObject:
        if name not in self._objects:
            raise ValueError(f"no object named {_short(name)} in the world; present: {_short(sorted(self._objects), 200)}")
        return self._objects[name]

    @property
    def objects(self) -> list[SceneObject]:
        return list(self._objects.values())

    def arrange(self, names: Sequence[str], rng: np.random.Generator, region: tuple[float, float, float, float] | None = None,
                min_gap: float = 0.03) -> None:
        """Shuffle objects onto the table without overlaps, inside ``region`` (x0, x1, y0, y1)."""
        x0, x1, y0, y1 = region or (0.55, 0.85, -0.45, 0.15)
        if not all(math.isfinite(float(v)) for v in (x0, x1, y0, y1)):
            raise ValueError(f"region must be 4 finite numbers, got {[float(v) for v in (x0, x1, y0, y1)]}")
        self._check_on_table((x0, y0))
        self._check_on_table((x1, y1))
        objs = [self._get(n) for n in names]
        for _attempt in range(50):  # restart the whole layout when a late object finds no room
            placed: list[tuple[np.ndarray, float]] = []
            for obj in objs:
                r = float(np.linalg.norm(obj.half_extents[:2]))
                for _ in range(200):
                    xy = np.array([rng.uniform(x0, x1), rng.uniform(y0, y1)])
                    if all(np.linalg.norm(xy - q) > r + rq + min_gap for q, rq in placed):
                        placed.append((xy, r))
                        break
                else:
                    break
            if len(placed) == len(objs):
                for obj, (xy, _) in zip(objs, placed):
                    self.move_object(obj.name, xy, float(rng.uniform(-math.pi, math.pi)))
                return
        raise ValueError(f"cannot fit {len(names)} objects into region {(x0, x1, y0, y1)} without overlap")

    def free_spot(self, instance: ObjectInstance, rng: np.random.Generator,
                  region: tuple[float, float, float, float] | None = None, min_gap: float = 0.02,
                  tries: int = 500) -> np.ndarray:
        """A table position (x, y) where ``instance`` stands clear of every placed object; ValueError if none."""
        x0, x1, y0, y1 = region or (0.55, 0.85, -0.45, 0.15)
        _, half = self._visual(instance)
        r = float(np.linalg.norm(half[:2]))
        others = [(o.position[:2], float(np.linalg.norm(o.half_extents[:2]))) for o in self._objects.values()]
        for _ in range(int(tries)):
            xy = np.array([rng.uniform(x0, x1), rng.uniform(y0, y1)])
            if all(np.linalg.norm(xy - q) > r + rq + min_gap for q, rq in others):
                return xy
        raise ValueError(f"no free spot for {instance.name!r} in region {(x0, x1, y0, y1)}: "
                         f"{len(others)} objects already there; clear some first")

    def place(self, category: str, instance: int = 0, name: str = "", xy: Sequence[float] | None = None,
              yaw: float = 0.0, rng: np.random.Generator | None = None, seed: int = 0,
              instance_seed: Sequence[int] = ()) -> SceneObject:
        """Put instance ``instance`` of a catalogue category on the table (the PlaceObject service).

        The instance is the same for the same (seed, category, instance), or, with ``instance_seed`` (a
        seed sequence), the ``instance``-th of ``sample_instances`` drawn from it; ``xy`` None = a random
        free spot. Every argument is checked first (ValueError naming it): nothing is placed on bad input.
        """
        if len(instance_seed) > 8 or any(int(v) < 0 for v in instance_seed):
            raise ValueError(f"seed must be at most 8 numbers >= 0, got {len(instance_seed)} numbers")
        if category not in CATALOGUE:
            raise ValueError(f"unknown category {_short(category)}; known: {', '.join(sorted(CATALOGUE))}")
        if isinstance(instance, bool) or not 0 <= int(instance) < 1000:
            raise ValueError(f"instance must be in [0, 1000), got {instance!r}")
        name = (name or f"{category}_{int(instance)}").strip()
        if not OBJECT_NAME.fullmatch(name):
            raise ValueError(f"object name {_short(name)} refused: use 1-64 letters, digits, '_', '-' or '.', "
                             "starting with a letter or digit")
        if len(self._objects) >= MAX_OBJECTS:
            raise ValueError(f"the table already holds {len(self._objects)} objects, the most placed at once "
                             f"(MAX_OBJECTS): clear some first")
        if name in self._objects:
            raise ValueError(f"an object named {name!r} is already on the table; clear it or pick another name")
        if not math.isfinite(float(yaw)):
            raise ValueError(f"yaw must be finite, got {yaw!r}")
        cat_rng = np.random.default_rng([int(v) for v in instance_seed] if len(instance_seed)
                                        else [int(seed), sorted(CATALOGUE).index(category)])
        inst = sample_instances(category, int(instance) + 1, cat_rng)[-1]
        inst = ObjectInstance(name, inst.category, inst.model_index, inst.scale, inst.rgba)
        if xy is None:
            xy = self.free_spot(inst, rng or np.random.default_rng())
        else:
            xy = np.asarray(xy, float).reshape(-1)
            if xy.size != 2 or not np.all(np.isfinite(xy)):
                raise ValueError(f"position must be two finite numbers (x, y), got {xy.tolist()}")
            self._check_on_table(xy)
        return self.add_object(inst, xy, float(yaw))

    def _check_on_table(self, xy: Sequence[float]) -> None:
        (cx, cy), (sx, sy) = self.config.table_center, self.config.table_size
        if not (abs(xy[0] - cx) <= sx / 2 and abs(xy[1] - cy) <= sy / 2):
            raise ValueError(f"({xy[0]:.3g}, {xy[1]:.3g}) is not on the table (x {cx - sx / 2:.2f}..{cx + sx / 2:.2f}, "
                             f"y {cy - sy / 2:.2f}..{cy + sy / 2:.2f} in the base frame)")

    # ------------------------------------------------------------------ camera
    def randomize_light(self, rng: np.random.Generator) -> None:
        """New light direction and intensity (varied lighting of views)."""
        self.light = random_light(rng)

    def set_light(self, direction: Sequence[float], ambient: float, diffuse: float, specular: float) -> None:
        """Set the light (the SetLight service); ValueError naming the bad value, and the light stays."""
        d = np.asarray(direction, float).reshape(-1)
        if d.size != 3 or not np.all(np.isfinite(d)) or not np.linalg.norm(d) > 1e-9:
            raise ValueError(f"light direction must be 3 finite numbers, not all zero, got {d[:3].tolist()}")
        coeffs = {"ambient": ambient, "diffuse": diffuse, "specular": specular}
        for name, v in coeffs.items():
            if not (math.isfinite(float(v)) and 0.0 <= float(v) <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {float(v):.4g}")
        self.light = {"direction": tuple(float(v) for v in d), **{k: float(v) for k, v in coeffs.items()}}

    def move_objects(self, names: Sequence[str], poses: Sequence[Sequence[float]]) -> None:
        """Move named objects to (x, y, yaw) on the table; every name and pose is checked before any moves."""
        if len(names) != len(poses):
            raise ValueError(f"{len(names)} names but {len(poses)} poses")
        for n, pose in zip(names, poses):
            self._get(n)
            x, y, yaw = (float(v) for v in pose)
            if not all(math.isfinite(v) for v in (x, y, yaw)):
                raise ValueError(f"pose of {_short(n)} must be finite, got {(x, y, yaw)}")
            self._check_on_table((x, y))
        for n, (x, y, yaw) in zip(names, poses):
            self.move_object(n, (x, y), yaw)

    def set_free_camera(self, eye: Sequence[float], target: Sequence[float],
                        up_hint: Sequence[float] = (1.0, 0.0, 0.0)) -> None:
        """Render from a camera not attached to the robot (data sets, overview pictures).

        ``up_hint`` is the base-frame direction that appears as "up" in the image: the default suits a
        camera looking down on the table; pass (0, 0, 1) for a view from the side.
        """
        self._free_camera = (np.asarray(eye, float), look_at_quaternion(eye, target, up_hint))

    def use_hand_camera(self) -> None:
        """Render from the robot's hand camera again (the default when there is a robot)."""
        self._free_camera = None

    def camera_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Optical frame (z forward, x right, y down) of the active camera in the base frame."""
        if self._free_camera is not None:
            return self._free_camera
        self._require_robot()
        return self.link_pose(f"{self.config.camera_side}_hand_camera")

    def render(self, camera: CameraConfig | None = None) -> Frame:
        """Render RGB, metric depth and object segmentation from the active camera."""
        p = self._p
        cam = camera or self.config.camera
        pos, quat = self.camera_pose()
        R = quaternion_to_matrix(quat)
        view = p.computeViewMatrix(pos.tolist(), (pos + R[:, 2]).tolist(), (-R[:, 1]).tolist())
        proj = p.computeProjectionMatrixFOV(cam.fov_deg, cam.width / cam.height, cam.near, cam.far)
        L = self.light
        _, _, rgba, zbuf, seg = p.getCameraImage(
            cam.width, cam.height, view, proj, renderer=p.ER_TINY_RENDERER, shadow=int(self.config.shadows),
            lightDirection=list(L["direction"]), lightAmbientCoeff=L["ambient"], lightDiffuseCoeff=L["diffuse"],
            lightSpecularCoeff=L["specular"], physicsClientId=self._cid)
        rgb = np.asarray(rgba, np.uint8).reshape(cam.height, cam.width, 4)[:, :, :3].copy()
        z = np.asarray(zbuf, np.float32).reshape(cam.height, cam.width)
        depth = (cam.far * cam.near / (cam.far - (cam.far - cam.near) * z)).astype(np.float32)
        seg = np.asarray(seg, np.int64).reshape(cam.height, cam.width) & ((1 << 24) - 1)
        names = tuple(self._objects)
        body_to_idx = {o.body_id: i for i, o in enumerate(self._objects.values())}
        lut = np.full(int(max([seg.max(), *body_to_idx.keys(), 0])) + 2, -1, np.int32)
        for b, i in body_to_idx.items():
            lut[b] = i
        segmentation = lut[np.where(seg < 0, -1, seg)]
        return Frame(rgb, depth, segmentation, cam.intrinsics(), pos, quat, names, self._time)

    def advance(self, dt: float) -> None:
        """Advance the world clock (stamps of frames)."""
        self._time += float(dt)

    def close(self) -> None:
        if self._cid >= 0:
            self._p.disconnect(physicsClientId=self._cid)
            self._cid = -1

    def __enter__(self) -> "SimWorld":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass
