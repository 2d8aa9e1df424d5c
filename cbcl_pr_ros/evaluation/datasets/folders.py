"""Image folders: ImageFolder train/test layout, one folder per class, Caltech-101, CORe50."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .base import IMAGE_SUFFIXES, FileImages, ImageDataset
from cbcl_pr_ros.plurals import counted

__all__ = ["load_image_folder", "load_class_folders", "load_caltech101", "load_core50",
           "CORE50_TEST_SESSIONS"]

# The standard CORe50 split (Lomonaco & Maltoni 2017): sessions 3, 7 and 10 are the test set.
CORE50_TEST_SESSIONS = (3, 7, 10)


def _images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _class_dirs(root: Path, exclude: tuple[str, ...] = ()) -> list[Path]:
    dirs = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and d.name not in exclude)
    return [d for d in dirs if _images(d)]


def load_image_folder(root: str | Path, name: str | None = None) -> ImageDataset:
    """``root/train/<class>/*.png`` and ``root/test/<class>/*.png`` (the rendered object set's layout)."""
    root = Path(root)
    tr, te = root / "train", root / "test"
    if not tr.is_dir() or not te.is_dir():
        raise FileNotFoundError(f"{root} needs train/ and test/ sub-folders")
    classes = tuple(d.name for d in _class_dirs(tr))
    if not classes:
        raise ValueError(f"no class folders with images under {tr}")
    index = {c: i for i, c in enumerate(classes)}
    split: dict[str, tuple[list[Path], list[int]]] = {}
    for part, folder in (("train", tr), ("test", te)):
        paths, labels = [], []
        for d in _class_dirs(folder):
            if d.name not in index:
                raise ValueError(f"test class {d.name!r} has no train folder in {tr}")
            files = _images(d)
            paths += files
            labels += [index[d.name]] * len(files)
        split[part] = (paths, labels)
    return ImageDataset(name or root.name, classes, FileImages(split["train"][0]), np.array(split["train"][1]),
                        FileImages(split["test"][0]), np.array(split["test"][1]),
                        meta={"source": str(root), "format": "imagefolder"})


def _split_per_class(files_by_class: list[list[Path]], test_fraction: float, seed: int):
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    tr_p, tr_y, te_p, te_y = [], [], [], []
    for label, files in enumerate(files_by_class):
        if len(files) < 2:
            raise ValueError(f"class {label} has {counted(len(files), 'image')}; need at least 2 to split")
        perm = rng.permutation(len(files))
        n_test = min(len(files) - 1, max(1, int(round(test_fraction * len(files)))))
        for j, k in enumerate(perm):
            (te_p if j < n_test else tr_p).append(files[k])
            (te_y if j < n_test else tr_y).append(label)
    return tr_p, tr_y, te_p, te_y


def load_class_folders(root: str | Path, test_fraction: float = 0.2, seed: int = 0, name: str | None = None,
                       exclude: tuple[str, ...] = ()) -> ImageDataset:
    """Any ``root/<class>/*`` folder, split per class into train/test with a fixed seed."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    dirs = _class_dirs(root, exclude)
    if not dirs:
        raise ValueError(f"no class folders with images under {root}")
    tr_p, tr_y, te_p, te_y = _split_per_class([_images(d) for d in dirs], test_fraction, seed)
    return ImageDataset(name or root.name, tuple(d.name for d in dirs), FileImages(tr_p), np.array(tr_y),
                        FileImages(te_p), np.array(te_y),
                        meta={"source": str(root), "format": "class-folders", "test_fraction": test_fraction,
                              "split_seed": seed})


def load_caltech101(root: str | Path, seed: int = 0) -> ImageDataset:
    """Caltech-101 (``101_ObjectCategories/<class>/*.jpg``): 80/20 split per class, background class left out
    so that 101 object classes remain (the paper's Table 1 uses 100 of them; ``classes`` lets a protocol cap it)."""
    root = Path(root)
    if (root / "101_ObjectCategories").is_dir():
        root = root / "101_ObjectCategories"
    ds = load_class_folders(root, 0.2, seed, name="caltech-101", exclude=("BACKGROUND_Google",))
    ds.meta["format"] = "caltech-101"
    return ds


def load_core50(root: str | Path, level: str = "object", test_sessions: tuple[int, ...] = CORE50_TEST_SESSIONS,
                ) -> ImageDataset:
    """CORe50 full-size or 128×128 images (``s<session>/o<object>/*.png``).

    level="object" gives 50 classes; level="category" groups o1–o5, o6–o10, … into 10 classes.
    """
    if level not in ("object", "category"):
        raise ValueError(f"level must be 'object' or 'category', got {level!r}")
    root = Path(root)
    if (root / "core50_128x128").is_dir():
        root = root / "core50_128x128"
    sessions = sorted((d for d in root.iterdir() if d.is_dir() and re.fullmatch(r"s\d+", d.name)),
                      key=lambda d: int(d.name[1:]))
    if not sessions:
        raise ValueError(f"no s<N>/ session folders in {root}")
    records = []
    for s in sessions:
        for o in s.iterdir():
            if o.is_dir() and re.fullmatch(r"o\d+", o.name):
                obj = int(o.name[1:])
                records += [(int(s.name[1:]), obj, p) for p in _images(o)]
    objs = sorted({r[1] for r in records})
    if level == "object":
        classes = tuple(f"o{o}" for o in objs)
        label_of = {o: i for i, o in enumerate(objs)}
    else:
        cats = sorted({(o - 1) // 5 for o in objs})
        classes = tuple(f"c{c + 1}" for c in cats)
        label_of = {o: cats.index((o - 1) // 5) for o in objs}
    tr = [(p, label_of[o]) for s, o, p in records if s not in test_sessions]
    te = [(p, label_of[o]) for s, o, p in records if s in test_sessions]
    if not tr or not te:
        raise ValueError(f"CORe50 at {root}: empty train or test split (test sessions {test_sessions})")
    return ImageDataset("core50", classes, FileImages([p for p, _ in tr]), np.array([y for _, y in tr]),
                        FileImages([p for p, _ in te]), np.array([y for _, y in te]),
                        meta={"source": str(root), "format": "core50", "level": level,
                              "test_sessions": list(test_sessions)})
