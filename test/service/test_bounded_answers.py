"""Answers to a stranger's mistakes stay short and say what is true, whatever the memory holds.

A refusal is sent back and logged once per request: with a thousand classes, or a memory file
carrying megabytes of text in a field, it must not grow with them."""
from __future__ import annotations

import numpy as np

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.service.controller import LearnerController
from cbcl_pr_ros.service.memory_files import MemoryStore

from .test_hardening import _rewrite

D = 8
LONG = "x" * 120


def _controller(tmp_path) -> LearnerController:
    store = MemoryStore(str(tmp_path), "memory.safetensors")
    return LearnerController(lambda d: CBCLPRLearner(LearnerConfig(seed=0), backbone="synthetic", feature_dim=d),
                             "synthetic", D, store)


def _many(tmp_path, n: int = 40) -> LearnerController:
    c = _controller(tmp_path)
    rng = np.random.default_rng(0)
    for i in range(n):
        feats = (rng.normal(0, 0.3, (3, D)) + rng.normal(0, 30, D)).astype(np.float32)
        assert c.teach(f"c{i:03d}_{LONG}", feats).success
    return c


def test_refusing_an_unknown_class_names_a_few_classes_not_all(tmp_path):
    c = _many(tmp_path)
    version, classes = c.model_version, c.classes
    for out in (c.forget("nope"), c.rename("nope", "other")):
        assert not out.success
        assert len(out.message) < 2000, len(out.message)  # 40 names of 124 characters: 5 KB before
        assert "40 classes known, none is named like it; ListClasses lists them all" in out.message
        assert not any(name in out.message for name in classes)
    assert c.model_version == version and c.classes == classes


def test_a_mistyped_name_in_a_large_memory_is_answered_with_the_nearest_names(tmp_path):
    """The refusal named the first ten classes taught: at a thousand, never the one meant. Now the
    count and the nearest few, as a reader sees the names (case and fullwidth letters folded)."""
    c = _many(tmp_path, 30)
    for name in ("red mug", "red cup", "blue box"):
        assert c.teach(name, np.random.default_rng(len(name)).normal(90, 0.3, (3, D)).astype(np.float32)).success
    version, classes = c.model_version, c.classes
    for out in (c.forget("red mgu"), c.rename("red mgu", "cup"), c.forget("ＲＥＤ ＭＵＧＳ")):
        assert not out.success and "33 classes known, nearest: red mug" in out.message, out.message
        assert "blue box" not in out.message and classes[0] not in out.message and len(out.message) < 1000
    assert c.model_version == version and c.classes == classes


def test_a_small_memory_lists_every_class_it_has(tmp_path):
    c = _controller(tmp_path)
    assert "(known: none)" in c.forget("mug").message and "(known: none)" in c.rename("mug", "cup").message
    rng = np.random.default_rng(1)
    for name, centre in (("mug", 0.0), ("box", 40.0)):
        assert c.teach(name, rng.normal(centre, 0.3, (3, D)).astype(np.float32)).success
    assert "no class 'bxo' to forget (known: mug, box)" in c.forget("bxo").message


def test_renaming_a_class_to_its_own_name_is_refused_without_advice_to_forget_it(tmp_path):
    c = _many(tmp_path, 2)
    name = c.classes[0]
    version, blob = c.model_version, (tmp_path / "memory.safetensors").read_bytes()
    out = c.rename(name, f"  {name} ")  # the same name once stripped
    assert not out.success and "already has that name" in out.message and "forget" not in out.message
    assert c.model_version == version and (tmp_path / "memory.safetensors").read_bytes() == blob


def test_a_memory_file_with_megabytes_of_text_in_a_field_gets_a_short_refusal(tmp_path):
    c = _many(tmp_path, 2)
    blob = (tmp_path / "memory.safetensors").read_bytes()
    for key in ("backbone", "model_version"):  # refused by the file checks (MemoryFileError)
        (tmp_path / "forged").write_bytes(_rewrite(blob, lambda t, m, k=key: m.__setitem__(k, "a" * 100_000)))
        out = c.load("forged")
        assert not out.success and len(out.message) < 800, (key, len(out.message))
        assert "100" in out.message  # how long the reason was
    classes = c.classes  # refused by the learner's rebuild (ValueError)
    (tmp_path / "forged").write_bytes(_rewrite(blob, lambda t, m: m["config"].__setitem__("classifier", "b" * 100_000)))
    out = c.load("forged")
    assert not out.success and len(out.message) < 800 and "inconsistent" in out.message
    assert c.classes == classes


def test_an_image_encoding_name_of_any_length_gets_a_short_refusal():
    """The decoder's refusal quotes the encoding: a 100,000-character name came back whole in the
    TeachClass, Classify and ExtractFeatures answers (the same check guards all three)."""
    from types import SimpleNamespace

    import pytest

    from cbcl_pr_ros.request_checks import RequestError, RequestLimits, decode_request_images

    for name in ("x" * 100_000, "rgb8\n" * 1000):
        image = SimpleNamespace(encoding=name, height=4, width=4, step=12, data=b"\x01" * 48, is_bigendian=0)
        with pytest.raises(RequestError, match="names an encoding of") as err:
            decode_request_images([image], RequestLimits())
        assert len(str(err.value)) < 200
    short = SimpleNamespace(encoding="x" * 32, height=4, width=4, step=12, data=b"\x01" * 48, is_bigendian=0)
    with pytest.raises(ValueError, match="unsupported image encoding") as err:  # a short name: the decoder's reason
        decode_request_images([short], RequestLimits())
    assert len(str(err.value)) < 400
