"""The learner's memory from its parameters and at cleanup, without ROS (issue 23: the node only logs).

``store_from_params`` builds the memory store the node's configure hands the controller;
``LearnerController.release`` is the node's cleanup: it frees the memory only once every class is
on disk, and refuses (RuntimeError, nothing freed) while a save fails, except at shutdown, where the
line it returns says that the memory is lost (issue 22's durability rule).
"""
from __future__ import annotations

import numpy as np
import pytest

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
from cbcl_pr_ros.service.controller import LearnerController
from cbcl_pr_ros.service.memory_files import MemoryStore, store_from_params

D = 8


def _params(tmp_path, memory_path="m.safetensors", **kw):
    p = {"memory_path": memory_path, "memory_dir": str(tmp_path), "allow_absolute_paths": False,
         "max_memory_file_bytes": 1 << 20}
    return {**p, **kw}


def _controller(store):
    def make(dim):
        return CBCLPRLearner(LearnerConfig(seed=0), backbone="synthetic", feature_dim=dim)

    return LearnerController(make, "synthetic", D, store)


def _taught(store):
    c = _controller(store)
    out = c.teach("mug", np.random.default_rng(0).normal(3, 0.3, (6, D)).astype(np.float32))
    assert out.success, out.message
    return c


def test_no_memory_path_means_ram_only(tmp_path):
    assert store_from_params(_params(tmp_path, memory_path="")) is None


def test_store_carries_the_parameters(tmp_path):
    store = store_from_params(_params(tmp_path, allow_absolute_paths=True, max_memory_file_bytes=5000))
    try:
        assert isinstance(store, MemoryStore)
        assert (store.memory_dir, store.default_name) == (str(tmp_path.resolve()), "m.safetensors")
        assert store.allow_absolute and store.max_bytes == 5000
    finally:
        store.close()


def test_bad_memory_path_is_refused_with_the_parameter_named(tmp_path):
    with pytest.raises(ValueError, match="memory_path"):
        store_from_params(_params(tmp_path, memory_path="../outside"))


def test_release_of_a_saved_memory_frees_it(tmp_path):
    c = _taught(MemoryStore(str(tmp_path), "m.safetensors"))
    ok, line = c.release(final=False)
    assert ok and line == "memory released from RAM: its 1 class stays saved in 'm.safetensors'"
    assert c.store._dir_fd == -1  # noqa: SLF001 (the directory was let go)


def test_a_first_teach_answers_in_the_singular():
    """After the first teach the answer read "(1 clusters, 1 classes known ...)"."""
    c = _controller(None)
    out = c.teach("mug", np.full((1, D), 3.0, np.float32))
    assert out.success and out.message.startswith(
        "learned new class 'mug' from 1 feature vector (1 cluster, 1 class known, ")
    out = c.teach("box", np.random.default_rng(1).normal(-3, 0.3, (6, D)).astype(np.float32))
    assert out.success and "from 6 feature vectors (" in out.message and ", 2 classes known, " in out.message
    assert c.forget("box").message.startswith("forgot 'box' (1 class left)")


def test_release_in_ram_only_says_what_is_dropped():
    c = _taught(None)
    assert c.release(final=False) == (
        True, "memory released from RAM: it lived in RAM only (memory_path ''), so its 1 class is dropped")


def test_release_refuses_while_the_last_save_failed(tmp_path):
    c = _taught(MemoryStore(str(tmp_path), "m.safetensors"))
    c.last_save_ok_ = False  # the last autosave failed ...
    c.store.max_bytes = 10  # ... and the retry fails too (the file would be above the cap)
    with pytest.raises(RuntimeError, match="cleanup refused so that no class is lost"):
        c.release(final=False)
    assert c.classes == ["mug"] and c.store._dir_fd >= 0  # noqa: SLF001 (nothing freed)
    c.store.max_bytes = 1 << 20  # fixed: the next cleanup saves, then frees
    ok, line = c.release(final=False)
    assert ok and line.startswith("memory released from RAM: saved 1 class to ")


def test_release_at_shutdown_says_the_memory_is_lost(tmp_path):
    c = _taught(MemoryStore(str(tmp_path), "m.safetensors"))
    c.last_save_ok_, c.store.max_bytes = False, 10
    ok, line = c.release(final=True)
    assert not ok and line.endswith("; the memory is lost with this process"), line
    assert c.store._dir_fd == -1  # noqa: SLF001
