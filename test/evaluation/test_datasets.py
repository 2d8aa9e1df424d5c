"""Loaders on tiny files of each format, made here."""
from __future__ import annotations

import gzip
import pickle
import struct

import numpy as np
import pytest

from cbcl_pr_ros.evaluation.datasets import (
    discover, load_bag_sessions, load_caltech101, load_cifar100, load_class_folders, load_core50,
    load_dataset, load_fashion_mnist, load_image_folder, read_idx,
)

from .conftest import write_png


def _idx_bytes(arr: np.ndarray) -> bytes:
    return bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.astype(np.uint8).tobytes()


def _write_fmnist(root, rng, n_tr=12, n_te=6, gz=True):
    root.mkdir(parents=True, exist_ok=True)
    parts = {"train-images-idx3-ubyte": rng.integers(0, 256, (n_tr, 28, 28)),
             "train-labels-idx1-ubyte": np.arange(n_tr) % 10,
             "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_te, 28, 28)),
             "t10k-labels-idx1-ubyte": (np.arange(n_te) * 3) % 10}
    for name, arr in parts.items():
        data = _idx_bytes(np.asarray(arr))
        if gz:
            (root / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (root / name).write_bytes(data)
    return parts


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_idx_roundtrip(tmp_path, rng, gz):
    parts = _write_fmnist(tmp_path / "fm", rng, gz=gz)
    ds = load_fashion_mnist(tmp_path / "fm")
    assert len(ds.classes) == 10 and ds.classes[0] == "T-shirt/top"
    assert np.array_equal(ds.train_labels, parts["train-labels-idx1-ubyte"])
    img = ds.train_images[3]
    assert img.shape == (28, 28, 3) and img.dtype == np.uint8
    assert np.array_equal(img[:, :, 0], parts["train-images-idx3-ubyte"][3])
    assert np.array_equal(ds.test_images[5][:, :, 2], parts["t10k-images-idx3-ubyte"][5])


def test_idx_rejects_truncated_and_bad_magic(tmp_path):
    p = tmp_path / "x.idx"
    p.write_bytes(_idx_bytes(np.zeros((3, 2, 2)))[:-1])
    with pytest.raises(ValueError, match="body"):
        read_idx(p)
    p.write_bytes(b"\x01\x02\x08\x01" + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(ValueError, match="magic"):
        read_idx(p)


def test_image_folder_layout(tmp_path, rng):
    for split, n in (("train", 3), ("test", 2)):
        for c in ("mug", "ball"):
            for i in range(n):
                write_png(tmp_path / "r" / split / c / f"{i}.png", rng.integers(0, 256, (8, 10, 3), dtype=np.uint8))
    ds = load_image_folder(tmp_path / "r")
    assert ds.classes == ("ball", "mug")
    assert np.bincount(ds.train_labels).tolist() == [3, 3] and np.bincount(ds.test_labels).tolist() == [2, 2]
    assert ds.train_images[0].shape == (8, 10, 3)


def test_png_channel_order_is_rgb(tmp_path):
    img = np.zeros((4, 4, 3), np.uint8)
    img[..., 0] = 200  # pure red
    for split in ("train", "test"):
        write_png(tmp_path / "r" / split / "red" / "a.png", img)
    ds = load_image_folder(tmp_path / "r")
    assert ds.train_images[0][0, 0].tolist() == [200, 0, 0]


def test_image_folder_test_class_without_train_is_an_error(tmp_path, rng):
    write_png(tmp_path / "r" / "train" / "a" / "0.png", rng.integers(0, 256, (4, 4, 3), dtype=np.uint8))
    write_png(tmp_path / "r" / "test" / "b" / "0.png", rng.integers(0, 256, (4, 4, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="no train folder"):
        load_image_folder(tmp_path / "r")


def test_class_folders_split_is_seeded_and_disjoint(tmp_path, rng):
    for c in ("a", "b"):
        for i in range(10):
            write_png(tmp_path / "f" / c / f"{i}.png", rng.integers(0, 256, (4, 4), dtype=np.uint8))
    d1 = load_class_folders(tmp_path / "f", 0.2, seed=1)
    d2 = load_class_folders(tmp_path / "f", 0.2, seed=1)
    assert [str(p) for p in d1.test_images.paths] == [str(p) for p in d2.test_images.paths]
    assert not set(d1.train_images.paths) & set(d1.test_images.paths)
    assert np.bincount(d1.test_labels).tolist() == [2, 2]
    assert d1.train_images[0].shape == (4, 4, 3)


def test_caltech101_skips_background(tmp_path, rng):
    root = tmp_path / "101_ObjectCategories"
    for c in ("BACKGROUND_Google", "accordion", "airplanes"):
        for i in range(5):
            write_png(root / c / f"image_{i:04d}.jpg".replace(".jpg", ".png"), rng.integers(0, 256, (6, 6, 3), dtype=np.uint8))
    ds = load_caltech101(tmp_path)
    assert ds.classes == ("accordion", "airplanes")
    assert len(ds.train_labels) + len(ds.test_labels) == 10


def test_core50_sessions_split(tmp_path, rng):
    root = tmp_path / "core50_128x128"
    for s in (1, 2, 3):
        for o in (1, 2, 6):
            for i in range(2):
                write_png(root / f"s{s}" / f"o{o}" / f"C_{s:02d}_{o:02d}_{i:03d}.png",
                          rng.integers(0, 256, (5, 5, 3), dtype=np.uint8))
    ds = load_core50(tmp_path)
    assert ds.classes == ("o1", "o2", "o6")
    assert len(ds.test_labels) == 3 * 2  # session 3 only
    assert all("/s3/" in str(p) for p in ds.test_images.paths)
    cat = load_core50(tmp_path, level="category")
    assert cat.classes == ("c1", "c2")
    with pytest.raises(ValueError, match="level"):
        load_core50(tmp_path, level="pose")


def test_cifar100_pickle(tmp_path, rng):
    root = tmp_path / "cifar-100-python"
    root.mkdir()
    imgs = rng.integers(0, 256, (4, 3, 32, 32), dtype=np.uint8)
    for split in ("train", "test"):
        with open(root / split, "wb") as fh:
            pickle.dump({b"data": imgs.reshape(4, -1), b"fine_labels": [0, 1, 2, 1], b"coarse_labels": [0, 0, 1, 1]}, fh)
    with open(root / "meta", "wb") as fh:
        pickle.dump({b"fine_label_names": [b"apple", b"bear", b"cup"], b"coarse_label_names": [b"x", b"y"]}, fh)
    ds = load_cifar100(tmp_path)
    assert ds.classes == ("apple", "bear", "cup")
    assert np.array_equal(ds.train_images[2], imgs[2].transpose(1, 2, 0))
    assert load_cifar100(tmp_path, "coarse").classes == ("x", "y")


def test_bag_hook_uses_the_given_reader(tmp_path, rng):
    bag = tmp_path / "teach.bag"
    bag.mkdir()
    images = rng.integers(0, 256, (10, 6, 6, 3), dtype=np.uint8)
    taught = {"mug": list(images[:5]), "cup": list(images[5:])}
    ds = load_bag_sessions(bag, test_fraction=0.4, reader=lambda p: (taught, {}))
    assert ds.classes == ("cup", "mug")
    assert np.bincount(ds.test_labels).tolist() == [2, 2] and len(ds.train_labels) == 6
    ds = load_bag_sessions(bag, reader=lambda p: (taught, {"cup": [images[0]]}))
    assert ds.meta["split"] == "as recorded" and len(ds.train_labels) == 10 and ds.test_labels.tolist() == [0]
    with pytest.raises(FileNotFoundError):
        load_bag_sessions(tmp_path / "nope", reader=lambda p: (taught, {}))


def test_discover_reports_missing_and_generic_folders(tmp_path, rng):
    _write_fmnist(tmp_path / "fashion-mnist", rng)
    for split in ("train", "test"):
        write_png(tmp_path / "mine" / split / "a" / "0.png", rng.integers(0, 256, (4, 4, 3), dtype=np.uint8))
    present, missing = discover(tmp_path, {"mine": str(tmp_path / "mine")})
    assert "fashion-mnist" in present and "mine" in present
    assert "cifar-100" in missing and "caltech-101" in missing
    assert load_dataset("mine", present["mine"]).classes == ("a",)
    with pytest.raises(FileNotFoundError):
        discover(tmp_path, {"other": str(tmp_path / "absent")})


def test_bag_layer_never_imports_the_evaluation():
    """evaluation.datasets.bags reads bags through the bag layer; the reverse import would make a circle."""
    import ast
    from pathlib import Path

    import cbcl_pr_ros.bags as bags

    for src in Path(bags.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(src.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.startswith("cbcl_pr_ros.evaluation") for n in names), f"{src.name} imports {names}"


def test_cifar100_files_cannot_run_code(tmp_path, rng):
    """A CIFAR file is a pickle, and load_cifar100 unpickled it as such: a data set folder handed
    over by anyone ran whatever function its file named (here: one that writes a file)."""
    import os

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    root = tmp_path / "cifar-100-python"
    root.mkdir()
    imgs = rng.integers(0, 256, (2, 3072), dtype=np.uint8)
    with open(root / "train", "wb") as fh:
        pickle.dump({b"data": imgs, b"fine_labels": [0, 1], b"x": Payload()}, fh)
    with open(root / "test", "wb") as fh:
        pickle.dump({b"data": imgs, b"fine_labels": [0, 1]}, fh, protocol=2)
    with open(root / "meta", "wb") as fh:
        pickle.dump({b"fine_label_names": [b"a", b"b"]}, fh, protocol=5)
    with pytest.raises(ValueError, match="not a CIFAR python file.*system"):
        load_cifar100(tmp_path)
    assert not marker.exists()
    for bad in (b"", b"\x80\x04not a pickle", pickle.dumps([1, 2])):
        (root / "train").write_bytes(bad)
        with pytest.raises(ValueError, match="not a CIFAR python file"):
            load_cifar100(tmp_path)
    for proto in (2, 4, 5):  # numpy arrays as each protocol writes them still load
        with open(root / "train", "wb") as fh:
            pickle.dump({b"data": imgs, b"fine_labels": [0, 1]}, fh, protocol=proto)
        assert load_cifar100(tmp_path).classes == ("a", "b")
