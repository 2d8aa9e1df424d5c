"""The nodes' pure helpers and every bad-input answer, without a ROS graph."""
from __future__ import annotations

import array
import ast
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ conversions
def _header(sec=3, nsec=5, frame="cam"):
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    return Header(stamp=Time(sec=sec, nanosec=nsec), frame_id=frame)


def test_image_round_trip_and_bad_encoding():
    from cbcl_pr_ros.nodes.conversions import image_msg_to_rgb, rgb_to_image_msg, stamp_key

    rgb = np.random.default_rng(0).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    msg = rgb_to_image_msg(rgb, _header())
    assert (msg.width, msg.height, msg.step, msg.encoding) == (5, 7, 15, "rgb8")
    assert stamp_key(msg.header) == (3, 5, "cam")
    np.testing.assert_array_equal(image_msg_to_rgb(msg), rgb)
    msg.encoding = "yuv422_weird"
    with pytest.raises(ValueError, match="yuv422_weird"):
        image_msg_to_rgb(msg)
    msg.encoding, msg.step = "rgb8", 14
    with pytest.raises(ValueError, match="step"):
        image_msg_to_rgb(msg)


def test_feature_message_round_trip_and_refusals():
    from cbcl_pr_ros.nodes.conversions import features_from_msgs, make_feature_msg

    v = np.arange(6, dtype=np.float32)
    m = make_feature_msg(_header(), "bb", "pre", v)
    assert (m.backbone, m.preprocessing, m.dimension, m.header.frame_id) == ("bb", "pre", 6, "cam")
    np.testing.assert_array_equal(features_from_msgs([m, m], "bb", 6), np.stack([v, v]))
    with pytest.raises(ValueError, match="no feature vectors"):
        features_from_msgs([])
    with pytest.raises(ValueError, match="backbone 'bb'"):
        features_from_msgs([m], "other")
    with pytest.raises(ValueError, match="does not match the learner's 7"):
        features_from_msgs([m], "bb", 7)
    with pytest.raises(ValueError, match="different dimensions"):
        features_from_msgs([m, make_feature_msg(_header(), "bb", "pre", v[:3])])
    bad = make_feature_msg(_header(), "bb", "pre", np.array([1.0, np.nan], np.float32))
    with pytest.raises(ValueError, match="NaN"):
        features_from_msgs([bad])
    lying = make_feature_msg(_header(), "bb", "pre", v)
    lying.dimension = 9
    with pytest.raises(ValueError, match="says dimension 9"):
        features_from_msgs([lying])


def test_prediction_status_and_class_info_messages():
    from cbcl_pr_ros.core import ClassInfo, Prediction
    from cbcl_pr_ros.service.controller import StatusSnapshot
    from cbcl_pr_ros.nodes.conversions import class_info_msgs, make_status_msg, prediction_to_msg

    p = Prediction("mug", 0.9, True, ("mug", "cup"), (0.9, 0.1))
    msg = prediction_to_msg(_header(), p, 4)
    assert (msg.label, msg.known, msg.model_version) == ("mug", True, 4)
    assert list(msg.class_labels) == ["mug", "cup"] and msg.scores[1] == pytest.approx(0.1)
    infos = class_info_msgs([ClassInfo("mug", 3, 10, 100)])
    assert (infos[0].name, infos[0].num_clusters, infos[0].num_examples) == ("mug", 3, 10)
    snap = StatusSnapshot(["a", "b"], 5, 0, 123, "bb", 16, 2, False, "/x", False)
    st = make_status_msg(snap)
    assert st.num_classes == 2 and not st.last_save_ok and list(st.class_names) == ["a", "b"]


# ------------------------------------------------------------------ controller (bad input)
D = 16


def _blob(rng, centre, n=8):
    return (rng.normal(0, 0.3, (n, D)) + centre).astype(np.float32)


def _controller(path="", **kw):
    """A controller over synthetic D-wide vectors; ``path`` = its default memory file ("" = RAM only)."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.service.controller import LearnerController
    from cbcl_pr_ros.service.memory_files import MemoryStore

    def make(dim):
        return CBCLPRLearner(LearnerConfig(seed=0), backbone="synthetic", feature_dim=dim)

    store = MemoryStore(str(Path(path).parent), Path(path).name) if str(path) else None
    return LearnerController(make, "synthetic", D, store, **kw)


@pytest.fixture
def taught(tmp_path):
    rng = np.random.default_rng(0)
    c = _controller(tmp_path / "m.safetensors")
    centres = {"mug": np.full(D, 3.0), "box": np.full(D, -3.0), "cup": np.r_[np.full(8, 3.0), np.full(8, -3.0)]}
    for label, centre in centres.items():
        assert c.teach(label, _blob(rng, centre)).success
    return c, centres, rng


def test_classify_before_teaching_says_nothing_learned():
    from cbcl_pr_ros.service.controller import NOTHING_LEARNED

    out = _controller().classify(np.zeros((1, D)))
    assert not out.success and out.message == NOTHING_LEARNED and "nothing learned yet" in out.message


def test_teach_bad_inputs_change_nothing(taught):
    c, _, _ = taught
    v, classes = c.model_version, c.classes
    for label, feats, reason in [
        ("", np.zeros((2, D)), "empty label"),
        ("   ", np.zeros((2, D)), "empty label"),
        ("x", np.zeros((0, D)), "n >= 1"),
        ("x", np.zeros((2, D + 1)), "does not match"),
        ("x", np.full((1, D), 3e38), "most accepted"),
        ("a\nb", np.zeros((2, D)), "unprintable"),
        ("x" * 200, np.zeros((2, D)), "the most is 128"),
        ("x", np.full((2, D), np.nan), "NaN"),
    ]:
        out = c.teach(label, feats)
        assert not out.success and reason in out.message, out.message
    assert c.model_version == v and c.classes == classes


def test_teach_known_label_extends_and_says_so(taught):
    c, centres, rng = taught
    out = c.teach(" mug ", _blob(rng, centres["mug"], 4))
    assert out.success and out.extended_existing and "extended known class 'mug'" in out.message
    assert out.num_classes == 3 and out.num_examples == 4 and out.num_clusters >= 1


def test_classify_forget_rename(taught):
    c, centres, rng = taught
    out = c.classify(_blob(rng, centres["box"], 1), top_k=2)
    assert out.success and out.predictions[0].label == "box" and len(out.predictions[0].top_labels) == 2
    assert not c.forget("plate").success and "no class 'plate'" in c.forget("plate").message
    assert not c.rename("mug", "box").success and "already a learned class" in c.rename("mug", "box").message
    assert not c.rename("mug", " ").success
    assert not c.rename("plate", "dish").success
    assert c.rename("mug", "blue mug").success and "blue mug" in c.classes
    out = c.forget("box")
    assert out.success and out.num_classes == 2 and "box" not in c.classes
    wrong = c.classify(np.zeros((1, D + 2)))
    assert not wrong.success and "dimension" in wrong.message


def test_restart_loses_nothing(taught, tmp_path):
    c, centres, rng = taught
    again = _controller(tmp_path / "m.safetensors")
    assert "loaded 3 classes" in again.load_at_startup()
    assert again.classes == c.classes
    assert again.classify(_blob(rng, centres["mug"], 1)).predictions[0].label == "mug"


def test_unwritable_memory_file_refuses_the_change_and_keeps_what_is_on_disk(tmp_path):
    """A success is a promise: a teach that cannot be saved is undone and refused, not kept in RAM."""
    rng = np.random.default_rng(1)
    c = _controller(tmp_path / "m.safetensors")
    os.mkfifo(tmp_path / "m.safetensors")  # the default file is something a save must not replace
    v0 = c.model_version
    out = c.teach("mug", _blob(rng, 3.0))
    assert not out.success and "could not be saved" in out.message and "not a regular file" in out.message
    assert c.classes == [] and c.last_save_ok_ and c.model_version > v0  # undone; versions never go back
    ok, msg, path, size = c.save()
    assert not ok and "not a regular file" in msg and size == 0
    os.unlink(tmp_path / "m.safetensors")  # the operator repairs it: the same teach now succeeds
    assert c.teach("mug", _blob(rng, 3.0)).success and c.teach("box", _blob(rng, -3.0)).success
    os.replace(tmp_path / "m.safetensors", tmp_path / "keep")
    os.mkfifo(tmp_path / "m.safetensors")
    for out in (c.forget("mug"), c.rename("box", "crate")):
        assert not out.success and "could not be saved" in out.message, out.message
    assert c.classes == ["mug", "box"]
    assert c.classify(_blob(rng, -3.0, 1)).predictions[0].label == "box"


def test_ram_only_answers_say_nothing_is_saved():
    rng = np.random.default_rng(2)
    c = _controller("")
    out = c.teach("mug", _blob(rng, 3.0))
    assert out.success and "RAM only" in out.message, out.message


def test_memory_above_its_file_cap_refuses_the_teach_with_the_fix(tmp_path):
    """The cap is reached in long use (max_clusters 0 = unbounded): the teach is refused, the classes
    already saved stay, and a restart serves exactly them."""
    from cbcl_pr_ros.service.memory_files import MemoryStore

    rng = np.random.default_rng(3)
    c = _controller(tmp_path / "m.safetensors")
    c.store = MemoryStore(str(tmp_path), "m.safetensors", max_bytes=6000)
    taught, refused = [], []
    for i in range(40):
        out = c.teach(f"c{i}", _blob(rng, 4.0 * i))
        (taught if out.success else refused).append((f"c{i}", out.message))
        if refused:
            break
    assert taught and refused, "the cap was never reached"
    msg = refused[0][1]
    assert "max_memory_file_bytes" in msg and "max_clusters" in msg and "forget classes" in msg, msg
    assert c.classes == [name for name, _ in taught]
    again = _controller(tmp_path / "m.safetensors")
    again.store = MemoryStore(str(tmp_path), "m.safetensors", max_bytes=6000)
    again.load_at_startup(move_aside=False)
    assert again.classes == c.classes


def test_corrupt_or_foreign_memory_files_are_refused(taught, tmp_path):
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig

    c, _, _ = taught
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(b"\x00" * 5)
    v = c.model_version
    out = c.load("corrupt.safetensors")
    assert not out.success and "current memory stays in use" in out.message and c.model_version == v
    foreign = tmp_path / "foreign.safetensors"
    other = CBCLPRLearner(LearnerConfig(), backbone="resnet18", feature_dim=D)
    other.teach("x", np.random.default_rng(0).normal(size=(4, D)))
    other.save(foreign)
    out = c.load("foreign.safetensors")
    assert not out.success and "resnet18" in out.message and len(c.classes) == 3
    assert not c.load("missing").success
    assert out.num_classes == 3 and out.model_version == v
    # a corrupt file at start-up is moved aside (never overwritten) and the learner starts empty
    fresh = _controller(corrupt)
    msg = fresh.load_at_startup()
    assert "moved to" in msg and not corrupt.exists() and fresh.classes == []
    assert list(tmp_path.glob("corrupt.safetensors.unreadable-*"))


def test_classify_answers_while_a_teach_is_held(taught, monkeypatch):
    """Fails if classify waits for a teach: the teach cannot finish until classify has answered."""
    from held_retrain import blocked_retrains

    c, centres, rng = taught
    version = c.model_version
    with blocked_retrains(monkeypatch) as (entered, release):
        t = threading.Thread(target=c.teach, args=("pot", _blob(rng, np.full(D, 9.0), 20)), daemon=True)
        t.start()
        assert entered.wait(60.0), "the teach never reached its retrain"
        answers: list = []
        q = threading.Thread(target=lambda: answers.append(c.classify(_blob(rng, centres["box"], 1))), daemon=True)
        q.start()
        q.join(60.0)  # a deadlock, not a speed, is what this detects: the teach is held until release
        classify_waited = q.is_alive()
        assert c.status().training and c.model_version == version
        release.set()
        t.join(60.0)
        q.join(60.0)
    assert not classify_waited, "classify waited for the teach to finish"
    assert answers[0].success and answers[0].predictions[0].label == "box"
    assert answers[0].model_version == version  # the model served before the teach
    assert "pot" in c.classes and c.model_version > version


# ------------------------------------------------------------------ params
def test_parameter_validation():
    from cbcl_pr_ros.settings.params import validate_parameter

    assert validate_parameter("teach_from", "object") is None
    assert "one of" in validate_parameter("teach_from", "sometimes")
    assert ">= 0.0" in validate_parameter("distance_threshold", -1.0)
    assert validate_parameter("distance_threshold", 0) is None  # int accepted for a float
    assert "finite" in validate_parameter("max_prediction_rate", float("inf"))
    assert "max_clusters must be an integer from 0 to" in validate_parameter("max_clusters", 1.5)
    assert "got 1.5 (a number)" in validate_parameter("max_clusters", 1.5)
    assert "debug_image must be true or false, got 1 (an integer)" in validate_parameter("debug_image", 1)
    assert "<= 1.0" in validate_parameter("min_confidence", 1.5)
    assert "empty" in validate_parameter("backbone", " ")
    assert validate_parameter("use_sim_time", True) is None


def test_yaml_holds_every_parameter_and_valid_values():
    from cbcl_pr_ros.settings.params import EXTRACTOR, LEARNER, REMOVED, flatten, specs_for, validate_parameter

    cfg = yaml.safe_load((REPO / "config" / "cbcl_pr.yaml").read_text())
    shared = flatten(cfg["/**"]["ros__parameters"])
    for node in (EXTRACTOR, LEARNER):
        own = flatten(cfg[f"/**/{node}"]["ros__parameters"])
        values = {**shared, **own}
        current = specs_for(node)
        names = {s.name for s in current}
        assert names - set(values) == set(), f"{node}: missing in YAML"
        assert set(own) - names == set(), f"{node}: unknown in YAML"
        assert not set(REMOVED) & set(values), f"{node}: removed parameter in YAML"
        for s in current:
            assert type(values[s.name]) is type(s.default), f"{s.name}: YAML type differs"
            assert validate_parameter(s.name, values[s.name]) is None


def test_choices_match_the_core_and_config_builds():
    from cbcl_pr_ros.core import learner as core_learner
    from cbcl_pr_ros.core.clustering import COVARIANCE_MODES
    from cbcl_pr_ros.core.memory import REDUCTIONS
    from cbcl_pr_ros.core.open_set import OPEN_SET_MODES
    from cbcl_pr_ros.core.rehearsal import REHEARSAL_MODES
    from cbcl_pr_ros.settings import params

    assert params.CLASSIFIERS == tuple(core_learner.CLASSIFIERS)
    assert params.COVARIANCE_MODES == tuple(COVARIANCE_MODES)
    assert params.REDUCTIONS == tuple(REDUCTIONS)
    assert params.REHEARSAL_MODES == tuple(REHEARSAL_MODES)
    assert params.OPEN_SET_MODES == tuple(OPEN_SET_MODES)
    p = {s.name: s.default for s in params.PARAMS}
    p.update(distance_threshold=12.5, max_clusters=300)
    cfg = params.learner_config(p)
    assert cfg.distance_threshold == 12.5 and cfg.max_clusters == 300
    assert params.learner_config({**p, "distance_threshold": 0.0, "max_clusters": 0}).max_clusters is None
    assert params.learner_factory(p)(8).feature_dim == 8


def test_declared_parameters_have_ranges_and_reject_bad_values():
    import rclpy
    from rclpy.parameter import Parameter
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import declare_parameters
    from cbcl_pr_ros.settings.params import LEARNER

    with domain() as dom, isolated_context(dom) as ctx:
        node = rclpy.create_node("params_probe", context=ctx)
        declare_parameters(node, LEARNER)
        d = node.describe_parameter("min_confidence")
        assert d.floating_point_range[0].to_value == 1.0 and d.description
        assert node.describe_parameter("max_clusters").integer_range[0].from_value == 0
        r = node.set_parameters([Parameter("max_prediction_rate", value=-3.0)])[0]
        assert not r.successful
        r = node.set_parameters([Parameter("max_prediction_rate", value=10.0)])[0]
        assert r.successful and node.get_parameter("max_prediction_rate").value == 10.0
        assert not node.set_parameters([Parameter("backbone", value="resnet18")])[0].successful  # read-only
        node.destroy_node()


def test_a_parameter_of_the_wrong_type_is_refused_in_words_and_changes_nothing():
    """`ros2 param set /learner teach_num_frames abc` (and a string where a number is expected, a list
    where a number is) used to answer rclpy's "Wrong parameter type, expected 'Type.INTEGER' got 'Type.STRING'",
    without the parameter's name, its range or the value given; the refusal now says all three."""
    import rclpy
    from rclpy.parameter import Parameter
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import declare_parameters, declare_read_only
    from cbcl_pr_ros.settings.params import LEARNER
    from cbcl_pr_ros.settings.robot_params import PAGE_PARAMS

    with domain() as dom, isolated_context(dom) as ctx:
        node = rclpy.create_node("params_probe", context=ctx)
        declare_parameters(node, LEARNER)
        before = {n: node.get_parameter(n).value for n in ("teach_num_frames", "teach_timeout_s", "debug_image")}
        cases = (("teach_num_frames", "abc", ("teach_num_frames", "an integer from 1 to 10000", "'abc'")),
                 ("teach_timeout_s", "high", ("teach_timeout_s", "a number from 0.1 to 3600.0", "'high'")),
                 ("debug_image", "yes", ("debug_image", "true or false", "'yes'")),
                 ("teach_num_frames", [1, 2], ("teach_num_frames", "an integer", "[1, 2]")))
        for name, value, words in cases:
            r = node.set_parameters([Parameter(name, value=value)])[0]
            assert not r.successful and all(w in r.reason for w in words), r.reason
            assert "Type." not in r.reason
        assert {n: node.get_parameter(n).value for n in before} == before
        # a whole number for a decimal one is that number, as a decimal
        assert node.set_parameters([Parameter("teach_timeout_s", value=30)])[0].successful
        assert node.get_parameter("teach_timeout_s").value == 30.0
        assert isinstance(node.get_parameter("teach_timeout_s").value, float)
        assert node.set_parameters([Parameter("teach_num_frames", value=3)])[0].successful  # the right type sets
        r = node.set_parameters([Parameter("max_clusters", value="abc")])[0]  # read-only: said so, as before
        assert not r.successful and "read-only" in r.reason
        node.destroy_node()
        # at start, from a YAML file or a launch override: the same words, and the node does not start
        for kind, name, value, words in ((LEARNER, "max_clusters", "abc", ("an integer from 0 to", "'abc'")),
                                         (LEARNER, "max_clusters", -1, ("max_clusters", ">= 0", "-1")),
                                         (None, "port", "http", ("port", "an integer from 0 to 65535", "'http'"))):
            probe = rclpy.create_node("start_probe", context=ctx,
                                      parameter_overrides=[Parameter(name, value=value)])
            with pytest.raises(ValueError) as err:
                declare_parameters(probe, kind) if kind else declare_read_only(probe, PAGE_PARAMS)
            assert name in str(err.value) and all(w in str(err.value) for w in words), str(err.value)
            probe.destroy_node()
        probe = rclpy.create_node("start_probe", context=ctx, parameter_overrides=[Parameter("max_fps", value=5)])
        value = declare_read_only(probe, PAGE_PARAMS)  # 5 for 5.0 starts
        assert value("max_fps") == 5.0 and isinstance(value("max_fps"), float)
        probe.destroy_node()


def test_parameters_on_set_agree_with_their_descriptions():
    """Issue 22 / 21: teach_views 1 refused; the stream-teach defaults refused above their request
    caps (not clamped); detect_objects takes YAML's on/off booleans; refusals echo a short prefix;
    the arm's and the world's parameters are validated by the same kind of callback."""
    import rclpy
    from rclpy.parameter import Parameter
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import declare_parameters, install_validation, parameter
    from cbcl_pr_ros.settings.params import EXTRACTOR, LEARNER, validate_parameter
    from cbcl_pr_ros.settings.robot_params import SIM_WORLD_PARAMS, on_set_check

    assert "one view measures no spread" in validate_parameter("teach_views", 1)
    assert validate_parameter("teach_views", 0) is None and validate_parameter("teach_views", 2) is None
    long = validate_parameter("memory_dir", "x" * 1_000_000)
    assert len(long) < 300 and "1000000 characters" in long
    with domain() as dom, isolated_context(dom) as ctx:
        node = rclpy.create_node("params_probe", context=ctx)
        declare_parameters(node, LEARNER)
        for name, value, why in (("teach_views", 1, "no spread"), ("teach_timeout_s", 61.0, "max_teach_timeout_s"),
                                 ("teach_num_frames", 101, "max_teach_frames")):
            r = node.set_parameters([Parameter(name, value=value)])[0]
            assert not r.successful and why in r.reason, (name, r.reason)
        assert node.set_parameters([Parameter("teach_timeout_s", value=60.0)])[0].successful
        assert node.set_parameters([Parameter("teach_num_frames", value=100)])[0].successful
        node.destroy_node()
        ex = rclpy.create_node("extractor_probe", context=ctx)
        declare_parameters(ex, EXTRACTOR)
        for value, seen in ((True, "on"), (False, "off"), ("auto", "auto"), ("on", "on")):
            assert ex.set_parameters([Parameter("detect_objects", value=value)])[0].successful, value
            assert parameter(ex, "detect_objects") == seen
        for bad in ("maybe", 3):
            r = ex.set_parameters([Parameter("detect_objects", value=bad)])[0]
            assert not r.successful and "detect_objects" in r.reason
        ex.destroy_node()
        world = rclpy.create_node("world_probe", context=ctx, automatically_declare_parameters_from_overrides=False)
        world.declare_parameter("rate_hz", 5.0)  # settable here, to reach the callback
        install_validation(world, SIM_WORLD_PARAMS, on_set_check(SIM_WORLD_PARAMS))
        r = world.set_parameters([Parameter("rate_hz", value=1e9)])[0]
        assert not r.successful and "rate_hz must be <=" in r.reason
        assert world.set_parameters([Parameter("rate_hz", value=30.0)])[0].successful
        world.destroy_node()


def test_use_sim_time_is_not_switched_on_a_running_node():
    """Any process may call a node's parameter service: use_sim_time switched on at run time stopped a
    learner's timers until someone published /clock. Now it is refused once the node runs, with the
    reason; set at start (as a launch file or -p does) it is taken, and setting the same value is fine."""
    import rclpy
    from rclpy.parameter import Parameter
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import SIM_TIME_AT_START, declare_parameters, declare_read_only
    from cbcl_pr_ros.settings.params import LEARNER
    from cbcl_pr_ros.settings.robot_params import ARM_PARAMS

    with domain() as dom, isolated_context(dom) as ctx:
        for name, declare in (("learner_probe", lambda n: declare_parameters(n, LEARNER)),
                              ("arm_probe", lambda n: declare_read_only(n, ARM_PARAMS))):
            node = rclpy.create_node(name, context=ctx)
            declare(node)
            r = node.set_parameters([Parameter("use_sim_time", value=True)])[0]
            assert not r.successful and r.reason == SIM_TIME_AT_START
            assert node.get_parameter("use_sim_time").value is False
            assert node.set_parameters([Parameter("use_sim_time", value=False)])[0].successful
            node.destroy_node()
        started = rclpy.create_node("sim_probe", context=ctx, parameter_overrides=[Parameter("use_sim_time", value=True)])
        declare_parameters(started, LEARNER)
        assert started.get_parameter("use_sim_time").value is True and started.get_clock().ros_time_is_active
        assert not started.set_parameters([Parameter("use_sim_time", value=False)])[0].successful
        started.destroy_node()


# ------------------------------------------------------------------ small pieces
def test_qos_profiles():
    from cbcl_pr_ros.nodes.qos import describe_qos, image_qos, status_qos

    assert describe_qos(image_qos()) == "best_effort/keep_last(2)/volatile"
    assert describe_qos(image_qos("reliable", 3)) == "reliable/keep_last(3)/volatile"
    assert describe_qos(status_qos()) == "reliable/keep_last(1)/transient_local"
    with pytest.raises(ValueError, match="reliability"):
        image_qos("maybe")
    with pytest.raises(ValueError, match="depth"):
        image_qos("reliable", 0)


def test_annotate_draws_a_banner_only():
    from cbcl_pr_ros.nodes.debug_image import annotate, caption

    rgb = np.full((480, 640, 3), 30, np.uint8)
    out = annotate(rgb, "mug", 0.93, True)
    assert out.shape == rgb.shape and rgb[0, 0, 0] == 30  # input untouched
    assert np.any(out[:20] != 30) and np.all(out[100:] == 30)
    assert caption("mug", 0.93, True) == "mug 0.93"
    assert caption("", 0.2, False) == "unknown"
    with pytest.raises(ValueError, match="uint8"):
        annotate(rgb.astype(np.float32), "x", 1.0, True)


def test_the_debug_caption_writes_names_as_the_teaching_page_does():
    """An unknown answer is "unknown" (its nearest class's name and score would read as an answer); a
    known one below the page's confidence for a guess is "mug?", with the page's one threshold."""
    from cbcl_pr_ros.nodes.debug_image import caption
    from cbcl_pr_ros.teaching_page.state import UNSURE

    assert caption("mug", 0.3, False) == "unknown"  # a label with known False: still unknown
    assert caption("mug", 0.45, True) == "mug? 0.45"
    assert caption("mug", UNSURE, True) == f"mug {UNSURE:.2f}"
    assert caption("mug", float("nan"), True).startswith("mug? ")


def test_frame_buffer_and_collector():
    from cbcl_pr_ros.runtime.frame_buffer import FrameBuffer
    from cbcl_pr_ros.service.frame_waiters import FrameCollector

    b = FrameBuffer(3)
    for i in range(5):
        b.put(i, i * 10)
    assert len(b) == 3 and b.pop(0) is None and b.pop(4) == 40 and b.pop(4) is None
    c = FrameCollector(2)
    assert not c.wait(0.01) and c.frames == []
    threading.Timer(0.05, lambda: [c.offer(1), c.offer(2), c.offer(3)]).start()
    assert c.wait(5.0) and c.frames == [1, 2]
    with pytest.raises(ValueError):
        FrameCollector(0)


def test_a_crawling_clock_cannot_hold_a_frame_wait_forever(monkeypatch):
    """Anyone on the domain may publish /clock: one that creeps on never reaches the teach's timeout,
    and before the cap the wall-time fallback restarted at every tick (the service thread held for good)."""
    from types import SimpleNamespace

    from cbcl_pr_ros.service import frame_waiters

    wall = [0.0]

    def monotonic() -> float:  # wall time as the waiter reads it: 1 ms per look
        wall[0] += 0.001
        return wall[0]

    monkeypatch.setattr(frame_waiters, "time", SimpleNamespace(monotonic=monotonic))
    sim = [0.0]

    def now() -> float:  # a /clock that ticks at every look, by a nanosecond
        sim[0] += 1e-9
        return sim[0]

    c = frame_waiters.FrameCollector(2)
    assert not c.wait(0.01, now=now)  # returned: without the cap 10 million looks
    assert wall[0] <= frame_waiters.SLOWEST_CLOCK * 0.01 + 0.01 and c.frames == []


def test_frame_buffer_bounds_the_bytes_it_holds():
    """Camera frames come in any size: with a byte budget the oldest fall out while the frames held
    take more than it (the newest always stays), and a popped frame gives its bytes back."""
    from cbcl_pr_ros.runtime.frame_buffer import FrameBuffer

    b = FrameBuffer(64, max_bytes=100, size=len)
    for i in range(10):
        b.put(i, b"x" * 30)
    assert len(b) == 3 and b.bytes_held == 90 and b.pop(6) is None and b.pop(9) == b"x" * 30
    assert b.bytes_held == 60
    b.put(10, b"y" * 500)  # larger than the budget alone: kept, the others go
    assert len(b) == 1 and b.bytes_held == 500 and b.pop(10) == b"y" * 500 and b.bytes_held == 0
    b.put(11, b"z" * 10)
    b.put(11, b"z" * 20)  # the same stamp again replaces, not adds
    assert len(b) == 1 and b.bytes_held == 20
    with pytest.raises(ValueError):
        FrameBuffer(4, max_bytes=10)


def test_no_frame_hints_name_the_cause():
    from cbcl_pr_ros.nodes.feature_extractor import no_frame_hint

    qos = "reliable/keep_last(2)/volatile"
    assert "Nobody publishes" in no_frame_hint("/image", 5, qos, "sensor_msgs/Image", [])
    hint = no_frame_hint("/image", 5, qos, "sensor_msgs/Image", [("cam", "sensor_msgs/Image", "best_effort")])
    assert "QoS mismatch" in hint and "qos_overrides./image.subscription.reliability:=best_effort" in hint
    assert "type mismatch" in no_frame_hint("/image", 5, qos, "sensor_msgs/Image",
                                            [("cam", "sensor_msgs/CompressedImage", "reliable")])
    assert "is the camera streaming" in no_frame_hint("/image", 5, qos, "sensor_msgs/Image",
                                                      [("cam", "sensor_msgs/Image", "reliable")])


def test_frame_fingerprint_tells_frames_apart():
    from cbcl_pr_ros.nodes.conversions import rgb_to_image_msg
    from cbcl_pr_ros.nodes.feature_extractor import frame_fingerprint

    a = np.zeros((4, 4, 3), np.uint8)
    b = a.copy()
    b[0, 0, 0] = 1
    assert frame_fingerprint(rgb_to_image_msg(a, _header())) == frame_fingerprint(rgb_to_image_msg(a, _header()))
    assert frame_fingerprint(rgb_to_image_msg(a, _header())) != frame_fingerprint(rgb_to_image_msg(b, _header()))
    assert frame_fingerprint(rgb_to_image_msg(a, _header(nsec=6))) != frame_fingerprint(rgb_to_image_msg(a, _header()))


def test_local_feature_source_runs_the_backbone_on_decoded_arrays():
    from cbcl_pr_ros.nodes.feature_source import FeatureSourceError, LocalFeatureSource

    class Fake:
        name, preprocessing_id = "fake", "p0"

        def extract(self, imgs):
            return np.array([[float(im.mean()), 1.0] for im in imgs], np.float32)

    src = LocalFeatureSource(Fake())
    out = src.extract([np.full((4, 4, 3), 9, np.uint8), np.full((4, 4, 3), 3, np.uint8)])
    assert out.features.shape == (2, 2) and out.backbone == "fake" and out.features[:, 0].tolist() == [9.0, 3.0]
    with pytest.raises(FeatureSourceError, match="no images"):
        src.extract([])
    with pytest.raises(TypeError, match="lacks"):
        LocalFeatureSource(object())


def test_a_refusal_from_the_extract_service_is_quoted_cut():
    """Whoever serves extract_features answers the learner: its refusal came back whole in the TeachClass
    answer and its log line (a megabyte, newlines and all)."""
    from types import SimpleNamespace

    from cbcl_pr_ros.nodes import service_call
    from cbcl_pr_ros.nodes.feature_source import FeatureSourceError, ServiceFeatureSource

    class Future:
        def add_done_callback(self, fn):
            fn(self)

        def result(self):
            return SimpleNamespace(success=False, message="refused\nERROR forged " + "x" * 1_000_000, features=[])

    class Client:  # weakly referenced by wait_ready, as rclpy's clients are
        srv_name = "/extract_features"

        def wait_for_service(self, timeout_sec):
            return True

        def call_async(self, req):
            return Future()

    client = Client()
    service_call._first_seen[client] = 0.0  # noqa: SLF001 (seen long ago: no settling wait)
    source = ServiceFeatureSource(SimpleNamespace(create_client=lambda *a, **k: client), "extract_features")
    with pytest.raises(FeatureSourceError) as refused:
        source.extract([np.zeros((4, 4, 3), np.uint8)])
    text = str(refused.value)
    assert len(text) < 500 and "\n" not in text and "refused" in text and "1000021 characters" in text


def test_extractor_feature_source_follows_the_extractors_lifecycle():
    """In one process the learner uses whatever backbone the extractor holds now (none before configure)."""
    import threading
    import types

    from cbcl_pr_ros.nodes.feature_source import ExtractorFeatureSource, FeatureSourceError

    class Fake:
        name, preprocessing_id = "fake", "p0"

        def extract(self, imgs):
            return np.ones((len(imgs), 3), np.float32)

    extractor = types.SimpleNamespace(backbone=None, backbone_lock=threading.Lock(), phase="unconfigured")
    src = ExtractorFeatureSource(extractor)
    img = np.full((4, 4, 3), 9, np.uint8)
    with pytest.raises(FeatureSourceError, match="unconfigured: no backbone loaded"):
        src.extract([img])
    extractor.backbone, extractor.phase = Fake(), "inactive"  # configured later
    assert src.extract([img]).features.shape == (1, 3)


# ------------------------------------------------------------------ session, launch, Fast DDS profile
def test_session_options_and_registry():
    from cbcl_pr_ros.nodes import session

    opts = session.parse_args(["--nodes", "extractor,learner,world", "--camera-topic", "/cam/raw",
                               "--namespace", "robot1"])
    assert opts.nodes == "extractor,learner,world" and opts.namespace == "robot1"
    args = session.build_ros_args(["/c.yaml", "/arm.yaml"], "/cam/raw", ["--ros-args", "--log-level", "debug"])
    assert args[:6] == ["teaching_session", "--ros-args", "--params-file", "/c.yaml", "--params-file", "/arm.yaml"]
    assert "image:=/cam/raw" in args and args[-2:] == ["--log-level", "debug"]
    assert list(session.NODE_FACTORIES)[:2] == ["extractor", "learner"]
    assert {"world", "arm"} <= set(session.NODE_FACTORIES)
    with pytest.raises(ValueError, match="unknown node kind"):
        session.build_nodes(["camera9"], session.SessionContext())
    files = session.session_params_files(opts, ["extractor", "learner", "world"])
    assert [Path(f).name for f in files] == ["cbcl_pr.yaml", "sim_world.yaml"] and all(Path(f).is_file() for f in files)
    assert session.main(["teaching_session", "--nodes", "bogus"]) == 2
    assert session.main(["teaching_session", "--config", "/nonexistent.yaml"]) == 2


@pytest.mark.parametrize("name", ["teaching_session.launch.py", "perception.launch.py"])
def test_launch_files_compile_and_name_existing_executables(name):
    src = (REPO / "launch" / name).read_text()
    tree = ast.parse(src)
    compile(tree, name, "exec")
    assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    args = {n.args[0].value for n in calls if getattr(n.func, "id", "") == "DeclareLaunchArgument"}
    assert {"camera_topic", "namespace", "config"} <= args
    exes = [kw.value.value for n in calls if getattr(n.func, "id", "") == "Node"
            for kw in n.keywords if kw.arg == "executable"]
    for exe in exes:
        path = REPO / "bin" / exe
        assert path.is_file() and os.access(path, os.X_OK), f"{name} names missing executable {exe}"
    if name == "perception.launch.py":
        assert set(exes) == {"feature_extractor_node", "learner_node"}


def test_bin_scripts_call_main():
    for exe, module in [("feature_extractor_node", "feature_extractor"), ("learner_node", "learner"),
                        ("teaching_session", "session")]:
        text = (REPO / "bin" / exe).read_text()
        assert f"cbcl_pr_ros.nodes.{module} import main" in text and len(text.strip().splitlines()) == 2


_PROBE = ("import rclpy; rclpy.init(); n = rclpy.create_node('xml_probe'); "
          "n.destroy_node(); rclpy.shutdown(); print('ok')")


def _probe_profile(path: Path) -> subprocess.CompletedProcess:
    from ros_testing import domain, ros_env

    with domain() as dom:
        env = ros_env(dom, {"FASTDDS_DEFAULT_PROFILES_FILE": str(path)})
        return subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=60)


def test_fastdds_profile_is_accepted(tmp_path):
    import xml.etree.ElementTree as ET

    prof = REPO / "config" / "fastdds_profile.xml"
    root = ET.parse(prof).getroot()
    ns = {"d": "http://www.eprosima.com"}
    seg = root.find(".//d:transport_descriptor[d:type='SHM']/d:segment_size", ns)
    assert int(seg.text) >= 640 * 480 * 3 * 8
    good = _probe_profile(prof)
    assert good.returncode == 0 and "ok" in good.stdout
    assert "XMLPARSER" not in good.stderr and "Error" not in good.stderr, good.stderr
    # the check can fail: a broken profile makes Fast DDS complain
    broken = tmp_path / "broken.xml"
    broken.write_text(prof.read_text().replace("<segment_size>", "<segment_sise>"))
    bad = _probe_profile(broken)
    assert "XMLPARSER" in bad.stderr, bad.stderr


# ------------------------------------------------------------------ hardening (issue 11)
def test_guard_turns_exceptions_into_error_answers_with_one_log_line():
    from types import SimpleNamespace

    from cbcl_pr_ros.nodes.guard import guard_callback, guard_service

    lines = []

    class Logger:
        def error(self, msg, **kw):
            lines.append(msg)

    node = SimpleNamespace(get_logger=lambda: Logger())

    def boom(req, resp):
        raise KeyError("evil\nforged line")

    resp = guard_service(node, boom, "teach_class")(None, SimpleNamespace(success=True, message=""))
    assert resp.success is False and "internal error in teach_class (KeyError)" in resp.message
    assert len(lines) == 1 and "\n" not in lines[0] and "teach_class failed" in lines[0]
    assert guard_callback(node, lambda m: 1 / 0, "features")("msg") is None and len(lines) == 2
    ok = guard_service(node, lambda req, resp: "fine", "x")(None, None)
    assert ok == "fine" and len(lines) == 2


def test_malformed_depth_images_are_refused_not_fatal():
    from sensor_msgs.msg import Image

    from cbcl_pr_ros.nodes.detections_msgs import depth_msg_to_array as depth_array

    good = Image(height=2, width=3, step=12, encoding="32FC1")
    good.data = np.arange(6, dtype="<f4").tobytes()
    np.testing.assert_array_equal(depth_array(good), np.arange(6, dtype=np.float32).reshape(2, 3))
    for h, w, step, n, enc in [(2, 3, 12, 20, "32FC1"), (2, 3, 5, 24, "32FC1"), (0, 3, 12, 0, "32FC1"),
                               (2, 3, 12, 24, "rgb8"), (100000, 100000, 400000, 24, "32FC1")]:
        bad = Image(height=h, width=w, step=step, encoding=enc)
        bad.data = bytes(n)
        with pytest.raises(ValueError):
            depth_array(bad)


# ------------------------------------------------------------------ service calls
class _FakeClient:
    """A client whose server is there; the first ``lost`` answers never come back."""

    srv_name = "/fake"

    def __init__(self, lost: int) -> None:
        from rclpy.task import Future

        self._future_type, self.lost, self.sent, self.dropped = Future, lost, 0, 0

    def wait_for_service(self, timeout_sec: float) -> bool:
        return True

    def call_async(self, request):
        self.sent += 1
        fut = self._future_type()
        if self.sent > self.lost:
            fut.set_result(("answer", request))
        return fut

    def remove_pending_request(self, fut) -> None:
        self.dropped += 1


def test_call_service_sends_again_only_when_allowed():
    from cbcl_pr_ros.nodes.service_call import ServiceUnavailable, call_service

    once = _FakeClient(lost=1)
    with pytest.raises(ServiceUnavailable, match="'/fake' did not answer within 0.05 s"):
        call_service(once, "req", 0.05)
    assert (once.sent, once.dropped) == (1, 1)
    twice = _FakeClient(lost=1)
    assert call_service(twice, "req", 0.05, attempts=2) == ("answer", "req")
    assert (twice.sent, twice.dropped) == (2, 1)
    never = _FakeClient(lost=5)
    with pytest.raises(ServiceUnavailable, match=r"\(3 tries\)"):
        call_service(never, "req", 0.05, attempts=3)
    assert never.sent == 3


def test_call_service_names_a_missing_server_in_plain_words():
    """Without ``what`` a missing server read "no its server answers '/fake'"."""
    from cbcl_pr_ros.nodes.service_call import ServiceUnavailable, call_service

    absent = _FakeClient(lost=0)
    absent.wait_for_service = lambda timeout_sec: False
    with pytest.raises(ServiceUnavailable) as refused:
        call_service(absent, "req", 0.05)
    assert str(refused.value).startswith("no server answers '/fake'") and absent.sent == 0


def test_call_service_sees_an_answer_whose_done_callback_never_runs():
    """An answer that came before the done callback was added runs it as an executor task; a busy
    executor must not turn a delivered answer into a timeout."""
    from cbcl_pr_ros.nodes.service_call import call_service

    class QuietFuture:
        def __init__(self, value):
            self.value = value

        def add_done_callback(self, callback) -> None:  # queued on an executor that never gets to it
            pass

        def done(self) -> bool:
            return True

        def result(self):
            return self.value

    client = _FakeClient(lost=0)
    client.call_async = lambda request: QuietFuture(("answer", request))
    assert call_service(client, "req", 5.0) == ("answer", "req")
