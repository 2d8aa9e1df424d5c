"""Domain-randomised synthetic RGB-D table scenes with instance masks, rendered with PyBullet.

The training data of the learned proposal segmenter (``cbcl_pr_ros/perception/segmenter.py``): a table,
board or bin on a floor before a wall, with 2-18 objects of many shapes (boxes, cylinders lying or
standing, spheres, capsules, bowls, procedural blobs, flat tools made of two crossing bars, the
catalogue's meshes), free, touching, stacked or heaped; random colours and textures (the asset
textures and procedural ones), lighting and shadows; a camera 0.3-1.2 m away, looking down 30-90
degrees. Depth gets a depth camera's faults: noise growing with z^2, disparity quantisation, holes at
depth edges (one side shadowed, as a projector's), dropped patches and dark pixels, and a far cut-off.
With ``variety`` (``--variety``) the scenes also hold what the real frames showed the network missing:
see-through objects (the colour of what lies behind, tinted, dark rims and glints; the depth read
through them or lost), blotches of objects' surfaces unread, toy clutter (many small objects, mostly
touching, often printed) and many-coloured print textures.

Every scene is made from its own seed (``SeedSequence([seed, index])``), so scene ``i`` is the same
whatever the number of scenes or the order they are made in. Run alone it writes one ``.npz``::

    python -P bench/segmenter_data.py --scenes 3000 --out runs/bench/segmenter/scenes.npz
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import out_path  # noqa: E402

from cbcl_pr_ros.robot.assets import CATALOGUE, TEXTURES, mesh_extent, robosuite_assets_dir  # noqa: E402
from cbcl_pr_ros.robot.native_quiet import import_pybullet  # noqa: E402

W, H = 160, 120
IGNORE = -2  # instance id of pixels of objects too small to learn from (neither object nor background)
_MIN_VISIBLE_PX = 12


def _procedural_textures(folder: Path, n: int = 25, prints: bool = True) -> list[Path]:
    """``n`` small procedural textures (stripes, checks, blotches, print-like blocks, many-coloured toy
    prints; without ``prints`` the first four kinds only), made from a fixed seed."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(12345)
    paths = []
    for i in range(n):
        size = 64
        c1, c2 = rng.integers(0, 256, 3), rng.integers(0, 256, 3)
        yy, xx = np.mgrid[0:size, 0:size]
        kind = i % 5 if prints else i % 4
        if kind == 0:
            t = (np.sin(xx * rng.uniform(0.2, 1.2) + yy * rng.uniform(-0.5, 0.5)) > 0)
        elif kind == 1:
            k = int(rng.integers(4, 16))
            t = ((xx // k + yy // k) % 2) == 0
        elif kind == 2:
            t = cv2.GaussianBlur(rng.random((size, size)).astype(np.float32), (0, 0), rng.uniform(2, 6)) > 0.5
        elif kind == 3:
            t = np.zeros((size, size), bool)
            for _ in range(6):
                x0, y0 = rng.integers(0, size - 8, 2)
                t[y0:y0 + int(rng.integers(4, 20)), x0:x0 + int(rng.integers(4, 30))] = True
        if kind == 4:  # a toy's or a packet's print: saturated patches and a few dark strokes on a base colour
            img = np.empty((size, size, 3), np.uint8)
            img[:] = c1
            for _ in range(int(rng.integers(3, 9))):
                col = tuple(int(v) for v in rng.integers(0, 256, 3))
                if rng.random() < 0.5:
                    cv2.circle(img, tuple(int(v) for v in rng.integers(0, size, 2)), int(rng.integers(3, 16)), col, -1)
                else:
                    x0, y0 = (int(v) for v in rng.integers(0, size - 4, 2))
                    cv2.rectangle(img, (x0, y0), (x0 + int(rng.integers(3, 30)), y0 + int(rng.integers(3, 20))), col, -1)
            for _ in range(int(rng.integers(0, 4))):
                cv2.line(img, tuple(int(v) for v in rng.integers(0, size, 2)), tuple(int(v) for v in rng.integers(0, size, 2)),
                         (20, 20, 20), int(rng.integers(1, 3)))
        else:
            img = np.where(t[..., None], c1, c2).astype(np.uint8)
        img = np.clip(img + rng.normal(0, 8, img.shape), 0, 255).astype(np.uint8)
        path = folder / f"proc_{i:02d}.png"
        cv2.imwrite(str(path), img)
        paths.append(path)
    return paths


def _blob_mesh(rng: np.random.Generator, radius: float, squash: float, rings: int = 8, segs: int = 12,
               bowl: bool = False) -> tuple[list, list, float]:
    """A closed lat-long mesh: a blob (radius perturbed by low-frequency noise) or a bowl (an open
    hemisphere with a wall thickness). Returns (vertices, indices, half height)."""
    verts, idx = [], []
    amp = rng.uniform(0.0, 0.35, 3)
    ph = rng.uniform(0, 2 * math.pi, 3)
    if not bowl:
        for i in range(rings + 1):
            th = math.pi * i / rings
            for j in range(segs):
                phi = 2 * math.pi * j / segs
                r = radius * (1 + amp[0] * math.sin(2 * phi + ph[0]) * math.sin(th)
                              + amp[1] * math.cos(3 * th + ph[1]) + amp[2] * 0.5 * math.sin(3 * phi + ph[2]))
                verts.append([r * math.sin(th) * math.cos(phi), r * math.sin(th) * math.sin(phi), squash * r * math.cos(th)])
        for i in range(rings):
            for j in range(segs):
                a, b = i * segs + j, i * segs + (j + 1) % segs
                c, d = a + segs, b + segs
                idx += [a, c, b, b, c, d]
        zs = [v[2] for v in verts]
        return verts, idx, (max(zs) - min(zs)) / 2
    # bowl: outer and inner hemispheres joined at the rim, opening upwards
    inner = 0.85
    half = rings // 2 + 1
    for shell in (1.0, inner):
        for i in range(half):
            th = math.pi / 2 + (math.pi / 2) * i / (half - 1)
            for j in range(segs):
                phi = 2 * math.pi * j / segs
                r = radius * shell
                verts.append([r * math.sin(th) * math.cos(phi), r * math.sin(th) * math.sin(phi), squash * r * math.cos(th)])
    n = half * segs
    for s, flip in ((0, False), (n, True)):
        for i in range(half - 1):
            for j in range(segs):
                a, b = s + i * segs + j, s + i * segs + (j + 1) % segs
                c, d = a + segs, b + segs
                idx += ([a, b, c, b, d, c] if flip else [a, c, b, b, c, d])
    for j in range(segs):  # the rim
        a, b = j, (j + 1) % segs
        idx += [a, b, n + a, b, n + b, n + a]
    zs = [v[2] for v in verts]
    for v in verts:
        v[2] -= (max(zs) + min(zs)) / 2
    return verts, idx, (max(zs) - min(zs)) / 2


class SceneMaker:
    """One PyBullet connection making scenes one after another (bodies removed between scenes)."""

    def __init__(self, texture_dir: Path, variety: bool = False) -> None:
        self.variety = variety
        self.p = import_pybullet()
        self.cid = self.p.connect(self.p.DIRECT)
        tex_root = robosuite_assets_dir() / "textures"
        files = [tex_root / t for t in TEXTURES] + [tex_root / t for t in ("metal.png", "ceramic.png", "soda.png",
                                                                              "cereal.png", "bread.png", "can.png",
                                                                              "white-bricks.png", "clay.png")]
        files += _procedural_textures(texture_dir, 25 if variety else 12, variety)
        self.textures = [self.p.loadTexture(str(f), physicsClientId=self.cid) for f in files if f.exists()]
        self._mesh_cache: dict[tuple, tuple[int, np.ndarray]] = {}
        self.models = [m for ms in CATALOGUE.values() for m in ms]
        self.bodies: list[int] = []

    def close(self) -> None:
        self.p.disconnect(physicsClientId=self.cid)

    # ---------------------------------------------------------------- bodies
    def _body(self, vis: int, pos, quat) -> int:
        b = self.p.createMultiBody(0, -1, vis, list(map(float, pos)), list(map(float, quat)), physicsClientId=self.cid)
        self.bodies.append(b)
        return b

    def _colour(self, rng) -> list[float]:
        if rng.random() < 0.15:  # greys, whites, blacks: objects the colour of the table
            g = float(rng.uniform(0.05, 0.95))
            return [g, g, g, 1.0]
        return [*map(float, rng.uniform(0.05, 1.0, 3)), 1.0]

    def _visual(self, kind: str, dims: tuple, rgba: list[float], mesh=None) -> int:
        p, c = self.p, self.cid
        spec = [0.1, 0.1, 0.1]
        if kind == "box":
            return p.createVisualShape(p.GEOM_BOX, halfExtents=list(dims), rgbaColor=rgba, specularColor=spec, physicsClientId=c)
        if kind == "cylinder":
            return p.createVisualShape(p.GEOM_CYLINDER, radius=dims[0], length=dims[1], rgbaColor=rgba, specularColor=spec,
                                       physicsClientId=c)
        if kind == "sphere":
            return p.createVisualShape(p.GEOM_SPHERE, radius=dims[0], rgbaColor=rgba, specularColor=spec, physicsClientId=c)
        if kind == "capsule":
            return p.createVisualShape(p.GEOM_CAPSULE, radius=dims[0], length=dims[1], rgbaColor=rgba, specularColor=spec,
                                       physicsClientId=c)
        verts, idx = mesh
        return p.createVisualShape(p.GEOM_MESH, vertices=verts, indices=idx, rgbaColor=rgba, specularColor=spec,
                                   physicsClientId=c)

    def _catalogue(self, rng) -> tuple[int, np.ndarray, tuple]:
        """A catalogue mesh (visual shape cached per model and scale step), its half extents and up rotation."""
        m = self.models[int(rng.integers(len(self.models)))]
        step = int(rng.integers(0, 3))
        key = (m.mesh, m.root, step)
        if key not in self._mesh_cache:
            p = self.p
            lo, hi = mesh_extent(str(m.mesh_path()))
            q = p.getQuaternionFromEuler(m.up_euler)
            R = np.array(p.getMatrixFromQuaternion(q)).reshape(3, 3)
            corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]) @ R.T
            s = m.size_m * (0.8 + 0.25 * step) / float(np.ptp(corners, axis=0).max())
            cmin, cmax = corners.min(0) * s, corners.max(0) * s
            vis = p.createVisualShape(p.GEOM_MESH, fileName=str(m.mesh_path()), meshScale=[s, s, s], rgbaColor=[1, 1, 1, 1],
                                      specularColor=[0.2, 0.2, 0.2], visualFramePosition=list(-(cmin + cmax) / 2),
                                      visualFrameOrientation=q, physicsClientId=self.cid)
            self._mesh_cache[key] = (vis, (cmax - cmin) / 2)
        return self._mesh_cache[key]

    def _object(self, rng, inst: int, placed: list, table: tuple, heap: bool, scale: float = 1.0,
                texture_p: float = 0.4) -> None:
        """One object placed free, touching a placed one, or stacked on one; ``placed`` gets
        (instance, x, y, footprint radius, top z, flat top) and its bodies go to ``self.inst_of``.
        ``scale`` shrinks the made shapes (toy clutter); ``texture_p``: the chance of a texture."""
        p = self.p
        kinds = ["box", "box", "cylinder", "cylinder_lying", "sphere", "capsule", "blob", "blob", "bowl", "tool", "flat",
                 "catalogue", "catalogue", "catalogue"]
        kind = kinds[int(rng.integers(len(kinds)))]
        rgba = self._colour(rng)
        yaw = float(rng.uniform(-math.pi, math.pi))
        parts = []  # (visual, local offset xyz, local euler)
        flat_top = False
        if kind == "box":
            he = rng.uniform(0.012, 0.09, 3) * scale
            if rng.random() < 0.3:
                he[2] = rng.uniform(0.005, 0.02) * scale  # a book, a flat packet
            parts.append((self._visual("box", tuple(he), rgba), (0, 0, 0), (0, 0, 0)))
            half, radius, flat_top = (he[0], he[1], he[2]), float(np.hypot(he[0], he[1])), True
        elif kind == "cylinder":
            r, ln = rng.uniform(0.015, 0.055) * scale, rng.uniform(0.03, 0.24) * scale
            parts.append((self._visual("cylinder", (r, ln), rgba), (0, 0, 0), (0, 0, 0)))
            half, radius, flat_top = (r, r, ln / 2), r, True
        elif kind == "cylinder_lying":
            r, ln = rng.uniform(0.012, 0.045) * scale, rng.uniform(0.05, 0.22) * scale
            parts.append((self._visual("cylinder", (r, ln), rgba), (0, 0, 0), (math.pi / 2, 0, 0)))
            half, radius = (r, ln / 2, r), ln / 2
        elif kind == "sphere":
            r = rng.uniform(0.02, 0.06) * scale
            parts.append((self._visual("sphere", (r,), rgba), (0, 0, 0), (0, 0, 0)))
            half, radius = (r, r, r), r
        elif kind == "capsule":
            r, ln = rng.uniform(0.01, 0.035) * scale, rng.uniform(0.03, 0.15) * scale
            parts.append((self._visual("capsule", (r, ln), rgba), (0, 0, 0), (math.pi / 2, 0, 0)))
            half, radius = (r, ln / 2 + r, r), ln / 2 + r
        elif kind in ("blob", "bowl"):
            r = rng.uniform(0.025, 0.07) * scale
            verts, idx, hz = _blob_mesh(rng, r, rng.uniform(0.35, 1.0) if kind == "bowl" else rng.uniform(0.3, 1.2),
                                        bowl=kind == "bowl")
            parts.append((self._visual("mesh", (), rgba, (verts, idx)), (0, 0, 0), (0, 0, 0)))
            half, radius = (r, r, hz), r * 1.2
        elif kind == "tool":  # two thin bars crossing or in a V: pliers, scissors, clamps
            ln, wd, th = rng.uniform(0.05, 0.11) * scale, rng.uniform(0.005, 0.015), rng.uniform(0.004, 0.015)
            ang = rng.uniform(0.15, 0.8)
            for s in (-1, 1):
                parts.append((self._visual("box", (ln, wd, th), rgba), (0, 0, 0), (0, 0, s * ang / 2)))
            half, radius = (ln, ln * math.sin(ang / 2) + wd, th), ln
        elif kind == "flat":  # a thin bar or a strap: a knife, a marker, a cable
            ln, wd, th = rng.uniform(0.04, 0.12) * scale, rng.uniform(0.004, 0.02), rng.uniform(0.003, 0.02)
            parts.append((self._visual("box", (ln, wd, th), rgba), (0, 0, 0), (0, 0, 0)))
            half, radius = (ln, wd, th), ln
        else:
            vis, he = self._catalogue(rng)
            parts.append((vis, (0, 0, 0), (0, 0, 0)))
            half, radius = tuple(float(v) for v in he), float(np.hypot(he[0], he[1]))
            rgba = None
        # where: touching a placed object, stacked on a flat-topped one, or free on the surface
        x0, x1, y0, y1, top = table
        mode = rng.random()
        base = top
        if placed and mode < (0.45 if heap else 0.3):
            q = placed[int(rng.integers(len(placed)))]
            a = rng.uniform(-math.pi, math.pi)
            d = (q[3] + radius) * rng.uniform(0.75, 1.0)
            x, y = q[1] + d * math.cos(a), q[2] + d * math.sin(a)
        elif placed and mode < (0.6 if heap else 0.42):
            q = placed[int(rng.integers(len(placed)))]
            x, y = q[1] + rng.uniform(-0.4, 0.4) * q[3], q[2] + rng.uniform(-0.4, 0.4) * q[3]
            base = q[4] if q[5] else q[4] - 0.3 * (q[4] - top)  # on a flat top, or sunk into a round one
        else:
            for _ in range(20):
                mx, my = min(radius, (x1 - x0) / 2), min(radius, (y1 - y0) / 2)
                x = rng.uniform(x0 + mx, max(x1 - mx, x0 + mx))  # (a region narrower than the object: its middle)
                y = rng.uniform(y0 + my, max(y1 - my, y0 + my))
                if all(math.hypot(x - q[1], y - q[2]) > q[3] + radius for q in placed):
                    break
        x, y = float(np.clip(x, x0, x1)), float(np.clip(y, y0, y1))
        z = base + half[2]
        tilt = rng.normal(0, 0.08, 2) if rng.random() < 0.3 else (0.0, 0.0)
        bodies = []
        for vis, off, eul in parts:
            q = p.multiplyTransforms([x, y, z], p.getQuaternionFromEuler([float(tilt[0]), float(tilt[1]), yaw]),
                                     list(off), p.getQuaternionFromEuler(list(eul)))
            b = self._body(vis, q[0], q[1])
            if rgba is None:  # a catalogue mesh: its own texture, or a colour / texture of ours
                if rng.random() < 0.5:
                    p.changeVisualShape(b, -1, rgbaColor=self._colour(rng), physicsClientId=self.cid)
            elif rng.random() < texture_p:
                p.changeVisualShape(b, -1, textureUniqueId=self.textures[int(rng.integers(len(self.textures)))],
                                    rgbaColor=[1, 1, 1, 1], physicsClientId=self.cid)
            bodies.append(b)
        for b in bodies:
            self.inst_of[b] = inst
        placed.append((inst, x, y, radius, z + half[2], flat_top))

    def _surface(self, rng, size, centre, top, thick, texture: bool) -> int:
        p = self.p
        vis = p.createVisualShape(p.GEOM_BOX, halfExtents=[size[0] / 2, size[1] / 2, thick / 2],
                                  rgbaColor=self._colour(rng) if not texture else [1, 1, 1, 1], specularColor=[0.05] * 3,
                                  physicsClientId=self.cid)
        b = self._body(vis, [centre[0], centre[1], top - thick / 2], [0, 0, 0, 1])
        if texture:
            p.changeVisualShape(b, -1, textureUniqueId=self.textures[int(rng.integers(len(self.textures)))],
                                physicsClientId=self.cid)
        return b

    # ---------------------------------------------------------------- one scene
    def scene(self, seed: int, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(rgb uint8 HxWx3, depth float32 metres with NaN holes, instance ids int16 (-1 background,
        ``IGNORE`` too small), intrinsics (fx, fy, cx, cy)) of scene ``index``."""
        p, c = self.p, self.cid
        rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
        for b in self.bodies:
            p.removeBody(b, physicsClientId=c)
        self.bodies, self.inst_of = [], {}
        # the support: a table, a board on it, or a bin; a floor below and often a wall behind
        tx, ty = rng.uniform(0.5, 1.6), rng.uniform(0.4, 1.0)
        top = 0.0
        self._surface(rng, (tx, ty), (0, 0), top, 0.04, rng.random() < 0.6)
        floor_z = -rng.uniform(0.45, 0.8)
        self._surface(rng, (8, 8), (0, 0), floor_z, 0.02, rng.random() < 0.5)
        if rng.random() < 0.6:
            wy = ty / 2 + rng.uniform(0.05, 1.5)
            vis = p.createVisualShape(p.GEOM_BOX, halfExtents=[4, 0.02, 1.5], rgbaColor=self._colour(rng), physicsClientId=c)
            self._body(vis, [0, wy, floor_z + 1.5], [0, 0, 0, 1])
        if rng.random() < 0.3:  # a second piece of furniture beside the table, at another height
            self._surface(rng, (rng.uniform(0.3, 0.8), rng.uniform(0.3, 0.8)),
                          (rng.choice([-1, 1]) * (tx / 2 + rng.uniform(0.2, 0.5)), rng.uniform(-0.3, 0.3)),
                          rng.uniform(floor_z + 0.2, 0.3), 0.04, rng.random() < 0.5)
        region = (-min(tx / 2, 0.35), min(tx / 2, 0.35), -min(ty / 2, 0.3), min(ty / 2, 0.3))
        heap = rng.random() < 0.25
        clutter = self.variety and rng.random() < 0.2  # toy clutter: many small, often printed objects, mostly touching
        if heap:
            region = tuple(v * 0.5 for v in region)
        elif clutter:
            shrink = rng.uniform(0.4, 0.8)
            region = tuple(v * shrink for v in region)
        if rng.random() < 0.3:  # a board or tray lying on the table: the objects stand on it
            bt = rng.uniform(0.005, 0.03)
            self._surface(rng, (region[1] - region[0] + 0.1, region[3] - region[2] + 0.1), (0, 0), top + bt, bt,
                          rng.random() < 0.4)
            top += bt
        if rng.random() < 0.15:  # a bin's walls around the objects
            wh, col = rng.uniform(0.03, 0.12), self._colour(rng)
            x0, x1, y0, y1 = (v * 1.2 for v in region)
            for cx, cy, hx, hy in (((x0 + x1) / 2, y0, (x1 - x0) / 2, 0.01), ((x0 + x1) / 2, y1, (x1 - x0) / 2, 0.01),
                                   (x0, (y0 + y1) / 2, 0.01, (y1 - y0) / 2), (x1, (y0 + y1) / 2, 0.01, (y1 - y0) / 2)):
                vis = p.createVisualShape(p.GEOM_BOX, halfExtents=[hx, hy, wh / 2], rgbaColor=col, physicsClientId=c)
                self._body(vis, [cx, cy, top + wh / 2], [0, 0, 0, 1])
        n = int(rng.integers(2, 19)) if rng.random() < 0.85 else int(rng.integers(0, 3))
        scale, texture_p = 1.0, 0.4 if self.variety else 0.3
        if clutter:
            n, scale, texture_p = int(rng.integers(6, 20)), float(rng.uniform(0.4, 0.75)), 0.65
        placed: list = []
        for i in range(n):
            self._object(rng, i, placed, (*region, top), heap or clutter, scale, texture_p)
        # see-through objects (glass, clear plastic): which, of the scenes that have them
        glass = {i for i in range(n) if rng.random() < 0.5} if self.variety and rng.random() < 0.2 else set()
        # the camera: distance, elevation, azimuth about a point near the objects; fov; a little roll
        dist, elev = rng.uniform(0.3, 1.2), math.radians(rng.uniform(30, 89))
        az = rng.uniform(-math.pi, math.pi) if rng.random() < 0.5 else rng.uniform(-math.pi / 2 - 0.8, -math.pi / 2 + 0.8)
        target = np.array([rng.uniform(-0.12, 0.12), rng.uniform(-0.1, 0.1), top])
        eye = target + dist * np.array([math.cos(elev) * math.cos(az), math.cos(elev) * math.sin(az), math.sin(elev)])
        fwd = (target - eye) / dist
        roll = rng.normal(0, 0.1)
        right = np.cross(fwd, [0, 0, 1.0]) if abs(fwd[2]) < 0.999 else np.array([1.0, 0, 0])
        right /= np.linalg.norm(right)
        down = np.cross(fwd, right)
        up = -(math.cos(roll) * down + math.sin(roll) * right)
        fov = rng.uniform(42, 62)
        near, far = 0.05, 6.0
        view = p.computeViewMatrix(eye.tolist(), target.tolist(), up.tolist())
        proj = p.computeProjectionMatrixFOV(fov, W / H, near, far)
        az_l, el_l = rng.uniform(-math.pi, math.pi), rng.uniform(0.4, 1.5)
        light = dict(shadow=int(rng.random() < 0.5),
                     lightDirection=[math.cos(az_l) * math.cos(el_l), math.sin(az_l) * math.cos(el_l), math.sin(el_l)],
                     lightAmbientCoeff=float(rng.uniform(0.3, 0.8)), lightDiffuseCoeff=float(rng.uniform(0.2, 0.8)),
                     lightSpecularCoeff=float(rng.uniform(0.0, 0.4)))
        rgb, depth, seg = self._render(view, proj, near, far, light)
        inst = np.full((H, W), -1, np.int16)
        for b, i in self.inst_of.items():
            inst[seg == b] = i
        for i in np.unique(inst[inst >= 0]):
            if (inst == i).sum() < _MIN_VISIBLE_PX:
                inst[inst == i] = IGNORE
        see_through = np.isin(inst, list(glass)) if glass else np.zeros((H, W), bool)
        if see_through.any():  # what lies behind, seen through them: the scene again without them
            for b in [b for b, i in self.inst_of.items() if i in glass]:
                p.removeBody(b, physicsClientId=c)
                self.bodies.remove(b)
            behind_rgb, behind_depth, _ = self._render(view, proj, near, far, light)
            rgb, depth = _see_through(rgb, depth, behind_rgb, behind_depth, see_through, inst, rng)
        f = 0.5 * H / math.tan(math.radians(fov) / 2)
        K = np.array([f, f, (W - 1) / 2, (H - 1) / 2], np.float32)
        rgb = _colour_faults(rgb, rng)
        depth = depth_faults(depth, rgb, f, rng)
        return rgb, _unread_surfaces(depth, inst, see_through, rng) if self.variety else depth, inst, K

    def _render(self, view, proj, near: float, far: float, light: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rgb, exact depth in metres, body id per pixel, -1 for none) of the bodies now in the world."""
        p = self.p
        _, _, rgba, zbuf, seg = p.getCameraImage(W, H, view, proj, renderer=p.ER_TINY_RENDERER, physicsClientId=self.cid,
                                                 **light)
        rgb = np.asarray(rgba, np.uint8).reshape(H, W, 4)[:, :, :3].copy()
        zb = np.asarray(zbuf, np.float64).reshape(H, W)
        depth = (far * near / (far - (far - near) * zb)).astype(np.float32)
        seg = np.asarray(seg, np.int64).reshape(H, W)
        return rgb, depth, np.where(seg < 0, -1, seg & ((1 << 24) - 1))


def _smooth_field(shape: tuple[int, int], rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Smooth noise of unit spread: where a surface's reading fails comes in blotches, not single pixels."""
    f = cv2.GaussianBlur(rng.normal(0, 1, shape), (0, 0), sigma)
    return f / max(float(f.std()), 1e-9)


def _see_through(rgb: np.ndarray, depth: np.ndarray, behind_rgb: np.ndarray, behind_depth: np.ndarray,
                 glass: np.ndarray, inst: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Glass and clear plastic: the colour mostly what lies behind, tinted, with dark rims and bright glints;
    the depth camera reads through them (the depth behind) except in blotches and along the rims where it
    reads their surface. The instance mask still holds them: they are objects to find."""
    alpha = rng.uniform(0.08, 0.4)
    x = np.where(glass[..., None], (1 - alpha) * behind_rgb.astype(np.float32) + alpha * rgb.astype(np.float32),
                 rgb.astype(np.float32))
    rim = np.zeros(glass.shape, bool)
    for i in np.unique(inst[glass]):
        m = (inst == i).astype(np.uint8)
        rim |= (m - cv2.erode(m, np.ones((3, 3), np.uint8))) > 0
    x[rim] *= rng.uniform(0.45, 0.9)
    glint = glass & (_smooth_field(glass.shape, rng, 1.0) > rng.uniform(1.8, 2.6))
    x[glint] = np.maximum(x[glint], rng.uniform(200, 255))
    surface = rim & (rng.random(glass.shape) < rng.uniform(0.2, 0.8))
    surface |= glass & (_smooth_field(glass.shape, rng, 2.0) > rng.uniform(0.8, 2.0))
    d = np.where(glass & ~surface, behind_depth, depth)
    return np.clip(x, 0, 255).astype(np.uint8), d.astype(np.float32)


def _unread_surfaces(depth: np.ndarray, inst: np.ndarray, glass: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Holes inside objects: most of a see-through object's reading lost, and in some scenes blotches of
    shiny, black or mesh-like objects' surfaces unread."""
    out = depth.copy()
    if glass.any():
        out[glass & (_smooth_field(depth.shape, rng, 2.5) < rng.uniform(-0.5, 1.5))] = np.nan
    if rng.random() < 0.25:
        field = _smooth_field(depth.shape, rng, 2.0)
        for i in np.unique(inst[(inst >= 0) & ~glass]):
            if rng.random() < 0.3:
                out[(inst == i) & (field > rng.uniform(-0.5, 1.0))] = np.nan
    return out


def _colour_faults(rgb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exposure, white balance, sensor noise and blur of a cheap colour camera."""
    x = rgb.astype(np.float32)
    x = x * rng.uniform(0.6, 1.3) * rng.uniform(0.85, 1.15, 3) + rng.uniform(-25, 25)
    x += rng.normal(0, rng.uniform(1, 8), x.shape)
    if rng.random() < 0.4:
        x = cv2.GaussianBlur(x, (0, 0), rng.uniform(0.4, 1.0))
    return np.clip(x, 0, 255).astype(np.uint8)


def depth_faults(depth: np.ndarray, rgb: np.ndarray, f: float, rng: np.random.Generator) -> np.ndarray:
    """A depth camera's reading of exact ``depth``: noise sigma = s z^2 (s per scene), a smooth wobble,
    disparity quantisation, holes where the depth jumps (wider on one side, the projector's shadow),
    dropped patches, dark pixels unread, and nothing beyond a far limit. ``f``: focal length in pixels."""
    z = depth.astype(np.float64)
    h, w = z.shape
    s = rng.uniform(0.0008, 0.005)
    z = z + rng.normal(0, 1, z.shape) * s * z * z
    wobble = cv2.GaussianBlur(rng.normal(0, 1, (h, w)), (0, 0), 6) * 6
    z = z + wobble * 0.5 * s * z * z
    fb = 4 * f * rng.uniform(0.04, 0.08)  # the full-resolution focal length times the baseline
    step = 1.0 / rng.choice([4, 8, 16])
    z = fb / np.maximum(np.round(fb / z / step) * step, step)
    out = z.astype(np.float32)
    # holes at depth edges: pixels beside a jump, more on the far side to the left (shadow)
    dz = np.zeros_like(z)
    dz[:, 1:] = np.maximum(dz[:, 1:], np.abs(np.diff(z, axis=1)))
    dz[1:, :] = np.maximum(dz[1:, :], np.abs(np.diff(z, axis=0)))
    edge = dz > 0.02 * z
    k = int(rng.integers(1, 4))
    edge = cv2.dilate(edge.astype(np.uint8), np.ones((k, k + int(rng.integers(0, 3))), np.uint8)) > 0
    holes = edge & (rng.random(z.shape) < rng.uniform(0.2, 0.8))
    for _ in range(int(rng.integers(0, 6))):  # dropped patches (glare, black or shiny surfaces)
        cx, cy = rng.integers(0, w), rng.integers(0, h)
        m = np.zeros((h, w), np.uint8)
        cv2.ellipse(m, (int(cx), int(cy)), (int(rng.integers(2, 14)), int(rng.integers(2, 10))), float(rng.uniform(0, 180)),
                    0, 360, 1, -1)
        holes |= m > 0
    grey = rgb.mean(axis=2)
    holes |= (grey < rng.uniform(0, 30)) & (rng.random(z.shape) < 0.5)
    holes |= rng.random(z.shape) < rng.uniform(0, 0.01)
    holes |= z > rng.uniform(1.6, 5.0)
    out[holes] = np.nan
    return out


def make_scenes(n: int, seed: int = 0, start: int = 0, texture_dir: Path | None = None,
                progress: bool = False, variety: bool = False) -> dict[str, np.ndarray]:
    """Scenes ``start .. start + n - 1`` of the set made from ``seed``, stacked: rgb (n, H, W, 3) uint8,
    depth (n, H, W) float16 metres, inst (n, H, W) int16, K (n, 4) float32. With ``variety`` also
    see-through objects, unread blotches inside objects, toy clutter and print textures; without, the
    scenes the shipped weights were trained on."""
    maker = SceneMaker(texture_dir or out_path("segmenter/textures"), variety)
    rgb = np.zeros((n, H, W, 3), np.uint8)
    depth = np.zeros((n, H, W), np.float16)
    inst = np.zeros((n, H, W), np.int16)
    K = np.zeros((n, 4), np.float32)
    t0 = time.time()
    try:
        for i in range(n):
            r, d, m, k = maker.scene(seed, start + i)
            rgb[i], depth[i], inst[i], K[i] = r, d.astype(np.float16), m, k
            if progress and (i + 1) % 250 == 0:
                print(f"  {i + 1}/{n} scenes, {time.time() - t0:.0f} s", flush=True)
    finally:
        maker.close()
    return {"rgb": rgb, "depth": depth, "inst": inst, "K": K}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--preview", type=Path, default=None, help="write a picture of the first 12 scenes here")
    ap.add_argument("--variety", action="store_true", help="see-through objects, unread blotches, toy clutter, prints")
    args = ap.parse_args()
    data = make_scenes(args.scenes, args.seed, progress=True, variety=args.variety)
    out = args.out or out_path("segmenter/scenes.npz")
    np.savez(out, **data)
    print(f"wrote {out}")
    if args.preview:
        tiles = []
        for i in range(min(12, args.scenes)):
            d = np.nan_to_num(data["depth"][i].astype(np.float32), nan=0.0)
            d = (255 * d / max(float(d.max()), 1e-6)).astype(np.uint8)
            m = data["inst"][i]
            col = np.where(m[..., None] >= 0, (np.stack([m * 53 % 255, m * 97 % 255, m * 151 % 255], -1) + 60) % 255, 0)
            tiles.append(np.hstack([data["rgb"][i][..., ::-1], cv2.cvtColor(d, cv2.COLOR_GRAY2BGR), col.astype(np.uint8)]))
        cv2.imwrite(str(args.preview), np.vstack(tiles))


if __name__ == "__main__":
    main()
