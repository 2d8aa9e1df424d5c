"""Data-set loaders (one per on-disk format) and discovery of which data sets are present."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .bags import load_bag_sessions
from .base import ArrayImages, FileImages, ImageDataset, read_image, to_rgb
from .cifar import load_cifar100
from .folders import load_caltech101, load_class_folders, load_core50, load_image_folder
from .idx import FASHION_MNIST_CLASSES, load_fashion_mnist, read_idx

__all__ = ["ImageDataset", "ArrayImages", "FileImages", "read_image", "to_rgb", "read_idx",
           "load_fashion_mnist", "load_image_folder", "load_class_folders", "load_caltech101", "load_core50",
           "load_cifar100", "load_bag_sessions", "FASHION_MNIST_CLASSES", "DatasetSpec", "KNOWN_DATASETS",
           "discover", "load_dataset"]


@dataclass(frozen=True)
class DatasetSpec:
    """A named data set: its loader and where it is looked for (relative to the data root)."""

    name: str
    loader: Callable[[Path], ImageDataset]
    candidates: tuple[str, ...]
    how_to_get: str

    def locate(self, data_root: Path) -> Path | None:
        for c in self.candidates:
            p = Path(c) if c.startswith("/") else data_root / c
            if self._looks_present(p):
                return p
        return None

    def _looks_present(self, p: Path) -> bool:
        if not p.exists():
            return False
        if self.name == "fashion-mnist":
            return (p / "train-images-idx3-ubyte.gz").is_file() or (p / "train-images-idx3-ubyte").is_file()
        if self.name == "rendered-objects":
            return (p / "train").is_dir() and (p / "test").is_dir()
        return True


KNOWN_DATASETS: dict[str, DatasetSpec] = {s.name: s for s in (
    DatasetSpec("fashion-mnist", load_fashion_mnist, ("fashion-mnist", "/usr/share/datasets/fashion-mnist"),
                "scripts/get-fashion-mnist (Debian package dataset-fashion-mnist)"),
    DatasetSpec("rendered-objects", lambda p: load_image_folder(p, "rendered-objects"),
                ("rendered-objects", "rendered", "rendered_objects"),
                "render it: cbcl-render-dataset data/rendered-objects --seed 0 (22 classes, a few minutes)"),
    DatasetSpec("cifar-100", load_cifar100, ("cifar-100-python", "cifar-100"),
                "not obtainable offline here; put cifar-100-python/ under the data root"),
    DatasetSpec("caltech-101", load_caltech101, ("caltech-101", "101_ObjectCategories", "caltech101"),
                "not obtainable offline here; put 101_ObjectCategories/ under the data root"),
    DatasetSpec("core50", load_core50, ("core50_128x128", "core50"),
                "not obtainable offline here; put core50_128x128/ under the data root"),
    DatasetSpec("teaching-bags", load_bag_sessions, ("bags/teaching", "teaching.bag", "bags"),
                "record one: cbcl-bag-record --simulate data/bags/teaching (a simulated session), or "
                "record_session data/bags/teaching beside a teaching session"),
)}


def discover(data_root: str | Path, overrides: dict[str, str] | None = None) -> tuple[dict[str, Path], dict[str, str]]:
    """(present name → path, missing name → how to get it). ``overrides`` maps names to explicit paths;
    an override name that is not a known data set is read as a generic class-folder/ImageFolder set."""
    data_root = Path(data_root)
    present, missing = {}, {}
    overrides = dict(overrides or {})
    for name, spec in KNOWN_DATASETS.items():
        if name in overrides:
            p = Path(overrides.pop(name))
            if not p.exists():
                raise FileNotFoundError(f"data set {name}: {p} does not exist")
            present[name] = p
            continue
        p = spec.locate(data_root)
        if p is None:
            missing[name] = spec.how_to_get
        else:
            present[name] = p
    for name, path in overrides.items():
        p = Path(path)
        if not p.is_dir():
            raise FileNotFoundError(f"data set {name}: {p} is not a directory")
        present[name] = p
    return present, missing


def load_dataset(name: str, path: str | Path) -> ImageDataset:
    """Load a known data set by name, or any folder (ImageFolder train/test or one folder per class)."""
    path = Path(path)
    if name in KNOWN_DATASETS:
        ds = KNOWN_DATASETS[name].loader(path)
    elif (path / "train").is_dir() and (path / "test").is_dir():
        ds = load_image_folder(path, name)
    else:
        ds = load_class_folders(path, name=name)
    return ds
