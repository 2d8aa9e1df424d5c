"""Where the simulator's models live, and the catalogue of household-like objects built from them.

Nothing is downloaded: every mesh ships inside the installed ``pybullet_data`` and ``robosuite``
packages. The Baxter URDF of robosuite names its meshes with ``package://`` paths, which PyBullet
cannot resolve, so a copy with absolute paths is written to a cache directory at run time.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = [
    "ObjectModel",
    "CATALOGUE",
    "TEXTURES",
    "pybullet_data_dir",
    "robosuite_assets_dir",
    "baxter_urdf",
    "mesh_extent",
]


# How to get each package the simulated world reads models from. robosuite is installed without its
# dependencies (we read its URDF and meshes only; its own dependencies are large and unneeded).
_INSTALL_HINT = {
    "robosuite": "pip install --no-deps robosuite==1.5.2 (it holds the Baxter and object models; README, "
                 "'Without ROS')",
    "pybullet_data": "pip install pybullet==3.2.7 (requirements/core.txt)",
}


def _package_dir(name: str) -> Path:
    """Directory of an installed package without importing it (robosuite's import pulls heavy deps)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        hint = _INSTALL_HINT.get(name, "see requirements/core.txt")
        raise FileNotFoundError(f"package {name!r} is not installed, and the simulated world needs it: {hint}")
    return Path(list(spec.submodule_search_locations)[0])


@lru_cache(maxsize=None)
def pybullet_data_dir() -> Path:
    """Directory of the ``pybullet_data`` models."""
    return _package_dir("pybullet_data")


@lru_cache(maxsize=None)
def robosuite_assets_dir() -> Path:
    """Directory of robosuite's model assets (Baxter URDF, textured household meshes, textures)."""
    return _package_dir("robosuite") / "models" / "assets"


def _cache_dir() -> Path:
    root = os.environ.get("CBCL_PR_CACHE") or os.path.join(tempfile.gettempdir(), f"cbcl_pr_ros-{os.getuid()}")
    path = Path(root) / "robot"
    path.mkdir(parents=True, exist_ok=True)
    return path


_VISUAL_OR_COLLISION = re.compile(r"<(visual|collision)\b.*?</\1>", re.DOTALL)


@lru_cache(maxsize=None)
def baxter_urdf(kinematics_only: bool = False) -> Path:
    """Path of a Baxter URDF that PyBullet can load.

    ``kinematics_only`` drops visual and collision geometry: the model then loads in milliseconds
    instead of about 1.7 s, which is all inverse kinematics needs.
    """
    src_path = robosuite_assets_dir() / "bullet_data" / "baxter_description" / "urdf" / "baxter_arm.urdf"
    text = src_path.read_text()
    mesh_root = (src_path.parent.parent).as_posix() + "/"
    text = text.replace("package://baxter_description/", mesh_root)
    if kinematics_only:
        text = _VISUAL_OR_COLLISION.sub("", text)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    out = _cache_dir() / f"baxter_{'kin' if kinematics_only else 'full'}_{digest}.urdf"
    if not out.exists():
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, out)
    return out


@lru_cache(maxsize=None)
def mesh_extent(path: str) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """Axis-aligned bounds (min, max) of an OBJ mesh's vertices, read from the file."""
    lo = [float("inf")] * 3
    hi = [float("-inf")] * 3
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("v "):
                xyz = [float(v) for v in line.split()[1:4]]
                for i in range(3):
                    lo[i] = min(lo[i], xyz[i])
                    hi[i] = max(hi[i], xyz[i])
    if lo[0] == float("inf"):
        raise ValueError(f"mesh {path!r} has no vertices")
    return (lo[0], lo[1], lo[2]), (hi[0], hi[1], hi[2])


@dataclass(frozen=True)
class ObjectModel:
    """One mesh usable as an object of a category.

    ``up_euler`` rotates the mesh so that its natural "up" is +z; ``size_m`` is the largest
    extent the mesh is scaled to (before per-instance scale variation); ``tintable`` says whether
    a colour tint keeps the object recognisable as its category (a lemon stays yellowish).
    """

    category: str
    mesh: str  # path relative to its root
    root: str  # "pybullet_data" or "robosuite"
    size_m: float
    up_euler: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rgba: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    tint: float = 0.35  # how far per-instance colours may move from rgba (0 = fixed colour)

    def mesh_path(self) -> Path:
        base = pybullet_data_dir() if self.root == "pybullet_data" else robosuite_assets_dir() / "objects" / "meshes"
        return base / self.mesh


_H = 1.5707963267948966

# 22 categories, as many as the paper's robot experiment; a few have more than one mesh.
CATALOGUE: dict[str, tuple[ObjectModel, ...]] = {
    "mug": (ObjectModel("mug", "objects/mug.obj", "pybullet_data", 0.11, (0, 0, 0), (0.85, 0.2, 0.2, 1)),),
    "duck": (ObjectModel("duck", "duck.obj", "pybullet_data", 0.10, (_H, 0, 0), (1, 1, 1, 1), 0.2),),
    "teddy": (ObjectModel("teddy", "teddy2_VHACD_CHs.obj", "pybullet_data", 0.14, (_H, 0, 0), (0.65, 0.42, 0.25, 1)),),
    "bunny": (ObjectModel("bunny", "bunny.obj", "pybullet_data", 0.11, (_H, 0, 0), (0.85, 0.8, 0.7, 1)),),
    "ball": (
        ObjectModel("ball", "soccerball.obj", "pybullet_data", 0.10, (0, 0, 0), (1, 1, 1, 1), 0.2),
        ObjectModel("ball", "textured_sphere_smooth.obj", "pybullet_data", 0.09, (0, 0, 0), (1, 1, 1, 1), 0.5),
    ),
    "lego": (ObjectModel("lego", "lego/lego.obj", "pybullet_data", 0.07, (0, 0, 0), (0.1, 0.35, 0.9, 1), 0.6),),
    "wooden_block": (ObjectModel("wooden_block", "jenga/jenga.obj", "pybullet_data", 0.08, (0, 0, 0), (1, 1, 1, 1), 0.2),),
    "domino": (ObjectModel("domino", "domino/domino.obj", "pybullet_data", 0.08, (0, 0, 0), (1, 1, 1, 1), 0.2),),
    "torus": (ObjectModel("torus", "torus/torus_textured.obj", "pybullet_data", 0.11, (_H, 0, 0), (1, 1, 1, 1), 0.4),),
    "tray": (ObjectModel("tray", "tray/tray_textured.obj", "pybullet_data", 0.20, (0, 0, 0), (1, 1, 1, 1), 0.3),),
    "toy_cube": (ObjectModel("toy_cube", "toys/cube.obj", "pybullet_data", 0.06, (0, 0, 0), (0.9, 0.75, 0.1, 1), 0.6),),
    "toy_cylinder": (ObjectModel("toy_cylinder", "toys/cylinder.obj", "pybullet_data", 0.07, (0, 0, 0), (0.2, 0.7, 0.3, 1), 0.6),),
    "toy_prism": (ObjectModel("toy_prism", "toys/prism.obj", "pybullet_data", 0.07, (0, 0, 0), (0.6, 0.2, 0.7, 1), 0.6),),
    "shape_sorter": (ObjectModel("shape_sorter", "toys/shape_sorter.obj", "pybullet_data", 0.14, (0, 0, 0), (0.8, 0.55, 0.3, 1), 0.3),),
    "handle": (ObjectModel("handle", "handles.obj", "robosuite", 0.12, (0, 0, 0), (0.7, 0.7, 0.72, 1), 0.3),),
    "bottle": (ObjectModel("bottle", "bottle.obj", "robosuite", 0.18, (0, 0, 0), (0.3, 0.6, 0.3, 1), 0.4),),
    "bread": (ObjectModel("bread", "bread.obj", "robosuite", 0.11, (0, 0, 0), (1, 1, 1, 1), 0.15),),
    "can": (ObjectModel("can", "can.obj", "robosuite", 0.11, (0, 0, 0), (1, 1, 1, 1), 0.3),),
    "cereal": (ObjectModel("cereal", "cereal.obj", "robosuite", 0.16, (0, 0, 0), (1, 1, 1, 1), 0.2),),
    "lemon": (ObjectModel("lemon", "lemon.obj", "robosuite", 0.08, (0, 0, 0), (1, 1, 1, 1), 0.1),),
    "milk": (ObjectModel("milk", "milk.obj", "robosuite", 0.15, (0, 0, 0), (1, 1, 1, 1), 0.25),),
    # pybullet_data's random_urdfs hold 1000 procedurally made blobs; ten of them make one
    # category with real shape variation between its objects.
    "pebble": tuple(
        ObjectModel("pebble", f"random_urdfs/{i:03d}/{i:03d}.obj", "pybullet_data", 0.07, (0, 0, 0), (0.55, 0.5, 0.45, 1), 0.3)
        for i in range(10)
    ),
}

# Table-top textures (backgrounds) shipped with robosuite.
TEXTURES: tuple[str, ...] = (
    "light-wood.png", "dark-wood.png", "gray-woodgrain.png", "wood-tiles.png", "white-plaster.png",
    "gray-plaster.png", "cream-plaster.png", "gray-felt.png", "light-gray-floor-tile.png", "blue-wood.png",
)
