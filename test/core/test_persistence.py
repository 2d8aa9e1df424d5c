"""One-file memory: round trip, corruption/truncation/backbone refused, atomic save."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cbcl_pr_ros.core import (
    CBCLPRLearner, CorruptMemoryFileError, IncompatibleMemoryFileError, LearnerConfig, MemoryFileError,
    read_metadata,
)
from cbcl_pr_ros.core import persistence

from .conftest import blobs, fingerprint

D = 10


@pytest.fixture(params=["full", "diagonal"])
def learner(request, rng):
    train, _ = blobs(rng, 3, 8, D)
    L = CBCLPRLearner(LearnerConfig(covariance=request.param), backbone="bb", feature_dim=D)
    L.teach_increment(train)
    return L


def test_round_trip_identical(learner, tmp_path, rng):
    path = learner.save(tmp_path / "mem.cbclpr")
    back = CBCLPRLearner.load(path, expected_backbone="bb", expected_feature_dim=D)
    assert fingerprint(back) == fingerprint(learner)
    x = rng.normal(0, 3, (5, D))
    np.testing.assert_array_equal(back.predict_scores(x), learner.predict_scores(x))
    assert back.config == learner.config and back.backbone == "bb"
    meta = read_metadata(path)
    assert meta["classes"] == list(learner.classes_) and meta["format_version"] == persistence.FORMAT_VERSION
    back.teach("more", rng.normal(0, 1, (3, D)))  # a loaded learner keeps learning
    assert back.classes_[-1] == "more"


def test_round_trip_sgd_head(tmp_path, rng):
    train, _ = blobs(rng, 2, 5, D)
    L = CBCLPRLearner(LearnerConfig(classifier="linear_sgd", epochs=2), "bb", D)
    L.teach_increment(train)
    back = CBCLPRLearner.load(L.save(tmp_path / "m"))
    x = rng.normal(0, 1, (3, D))
    np.testing.assert_allclose(back.predict_scores(x), L.predict_scores(x))


def test_byte_flip_refused(learner, tmp_path):
    path = learner.save(tmp_path / "m")
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x40  # inside the tensor bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptMemoryFileError, match="checksum"):
        CBCLPRLearner.load(path)


def test_header_garbage_and_truncation_refused(learner, tmp_path):
    path = learner.save(tmp_path / "m")
    data = path.read_bytes()
    (tmp_path / "t").write_bytes(data[: len(data) // 2])
    (tmp_path / "g").write_bytes(data[:8] + b"{" * 20 + data[28:])
    (tmp_path / "e").write_bytes(b"")
    for name in ("t", "g", "e"):
        with pytest.raises(CorruptMemoryFileError):
            CBCLPRLearner.load(tmp_path / name)
    with pytest.raises(MemoryFileError):
        CBCLPRLearner.load(tmp_path / "missing")


def test_wrong_backbone_dim_or_newer_format_refused(learner, tmp_path, monkeypatch):
    path = learner.save(tmp_path / "m")
    with pytest.raises(IncompatibleMemoryFileError, match="backbone"):
        CBCLPRLearner.load(path, expected_backbone="resnet18")
    with pytest.raises(IncompatibleMemoryFileError, match="feature_dim"):
        CBCLPRLearner.load(path, expected_feature_dim=D + 1)
    monkeypatch.setattr(persistence, "FORMAT_VERSION", persistence.FORMAT_VERSION + 1)
    newer = learner.save(tmp_path / "n")
    monkeypatch.setattr(persistence, "FORMAT_VERSION", persistence.FORMAT_VERSION - 1)
    with pytest.raises(IncompatibleMemoryFileError, match="format version"):
        CBCLPRLearner.load(newer)


def test_failed_load_leaves_caller_learner_in_use(learner, tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"not a memory file at all")
    before = fingerprint(learner)
    current = learner
    try:
        current = CBCLPRLearner.load(bad)
    except MemoryFileError:
        pass
    assert current is learner and fingerprint(learner) == before


def test_crash_during_save_keeps_old_file(learner, tmp_path, monkeypatch, rng):
    path = learner.save(tmp_path / "m")
    old = path.read_bytes()
    learner.teach("another", rng.normal(0, 1, (3, D)))

    def boom(fd):
        raise OSError("disk on fire")

    monkeypatch.setattr(persistence.os, "fsync", boom)
    with pytest.raises(OSError, match="disk on fire"):
        learner.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == old
    assert os.listdir(tmp_path) == ["m"]  # no temp file left behind
    assert CBCLPRLearner.load(path).classes_ == tuple(c for c in learner.classes_ if c != "another")
