"""Settings a person can hold in their head: one name per core setting, earlier names as warned aliases,
one way to set QoS, and docs/nodes.md's parameter table generated from the declarations."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cbcl_pr_ros.core import LearnerConfig
from cbcl_pr_ros.core.learner import ROBOT_SETTINGS
from cbcl_pr_ros.settings import params
from cbcl_pr_ros.settings.params import EXTRACTOR, LEARNER, PARAMS, core_name, specs_for

REPO = Path(__file__).resolve().parents[2]
_DEFAULTS = {s.name: s.default for s in PARAMS}


def test_every_robot_setting_reaches_the_learner_under_its_core_name():
    fields = {f.name for f in dataclasses.fields(LearnerConfig)}
    reaching = {core_name(s) for s in specs_for(LEARNER) if core_name(s) in fields}
    assert set(ROBOT_SETTINGS) <= reaching, set(ROBOT_SETTINGS) - reaching
    assert set(ROBOT_SETTINGS) <= fields
    # each such parameter changes its field, and nothing else of the config
    base = params.learner_config(_DEFAULTS)
    changed = {"distance_threshold": 3.5, "max_clusters": 40, "covariance": "diagonal", "reduction": "remove",
               "classifier": "ncm", "open_set": "confidence", "unknown_distance_factor": 2.0,
               "min_confidence": 0.4, "seed": 9, "fit_threads": 2, "linear_sgd.rehearsal": "full",
               "linear_sgd.exemplars_per_class": 7, "negatives_capacity": 16, "negative_quantile": 0.2,
               "negative_margin": 0.9, "negative_rank": 6}
    assert set(changed) == {s.name for s in specs_for(LEARNER) if core_name(s) in fields}
    for name, value in changed.items():
        cfg = params.learner_config({**_DEFAULTS, name: value})
        diff = {f for f in fields if getattr(cfg, f) != getattr(base, f)}
        assert diff == {core_name(params._BY_NAME[name])}, (name, diff)


def test_head_only_settings_are_grouped_under_their_head():
    """rehearsal and exemplars_per_class do nothing under the default head: they live in linear_sgd."""
    names = {s.name for s in specs_for(LEARNER)}
    assert {"linear_sgd.rehearsal", "linear_sgd.exemplars_per_class"} <= names
    assert not {"rehearsal", "exemplars_per_class", "cluster_budget", "unknown_threshold"} & names
    assert "threads" not in names and "fit_threads" in names  # the extractor's threads are the backbone's


def test_earlier_names_are_read_with_a_warning_and_the_current_name_wins():
    values, warnings = params.resolve_aliases({"cluster_budget": 12, "unknown_threshold": 0.2, "threads": 3,
                                               "rehearsal": "full", "seed": 4}, LEARNER)
    assert values == {"max_clusters": 12, "min_confidence": 0.2, "fit_threads": 3,
                      "linear_sgd.rehearsal": "full", "seed": 4}
    assert len(warnings) == 4 and all("deprecated" in w for w in warnings)
    assert any("cluster_budget" in w and "max_clusters" in w for w in warnings)
    values, warnings = params.resolve_aliases({"cluster_budget": 12, "max_clusters": 30}, LEARNER)
    assert values == {"max_clusters": 30} and "ignored" in warnings[0]
    # nested YAML groups read as ROS reads them; the extractor keeps its own `threads`
    assert params.resolve_aliases({"linear_sgd": {"exemplars_per_class": 5}}, LEARNER)[0] == {
        "linear_sgd.exemplars_per_class": 5}
    assert params.resolve_aliases({"threads": 3}, EXTRACTOR) == ({"threads": 3}, [])


def test_qos_has_one_way_the_removed_knobs_name_their_replacement():
    assert not {s.name for s in PARAMS} & set(params.REMOVED)
    assert params.removed_parameters(_DEFAULTS) is None
    reason = params.removed_parameters([*_DEFAULTS, "reliability"])
    assert "reliability was removed" in reason and "qos_overrides.<topic>.subscription.reliability" in reason
    assert "qos_depth" not in reason
    both = params.removed_parameters(["qos_depth", "reliability"])
    assert "qos_overrides.<topic>.subscription.depth" in both and "subscription.reliability" in both


@pytest.mark.ros
def test_a_node_given_a_removed_qos_parameter_refuses_to_start_and_says_what_replaced_it():
    import rclpy
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import declare_parameters

    with domain() as dom:
        with isolated_context(dom, ["--ros-args", "-p", "qos_depth:=5"]) as ctx:
            node = rclpy.create_node("feature_extractor", context=ctx)
            try:
                with pytest.raises(ValueError, match=r"qos_depth was removed: set qos_overrides\.<topic>\."
                                                     r"subscription\.depth"):
                    declare_parameters(node, EXTRACTOR)
                assert not node.has_parameter("qos_depth") and not node.has_parameter("backbone")
            finally:
                node.destroy_node()
        with isolated_context(dom, ["--ros-args"]) as ctx:  # not given: the node starts, no trace of them
            node = rclpy.create_node("feature_extractor", context=ctx)
            try:
                declare_parameters(node, EXTRACTOR)
                assert node.has_parameter("backbone") and not node.has_parameter("reliability")
            finally:
                node.destroy_node()


def test_aliases_and_current_names_never_collide():
    for node in (EXTRACTOR, LEARNER):
        names = {s.name for s in specs_for(node)}
        aliases = params.aliases_for(node)
        assert not names & set(aliases), names & set(aliases)


@pytest.mark.ros
def test_a_node_given_an_earlier_name_at_start_uses_it_under_the_current_name():
    import rclpy
    from rclpy.exceptions import InvalidParameterValueException
    from rclpy.parameter import Parameter
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import declare_parameters, read_parameters

    with domain() as dom, isolated_context(dom) as ctx:
        node = rclpy.create_node("alias_probe", context=ctx, parameter_overrides=[
            Parameter("cluster_budget", value=25), Parameter("rehearsal", value="full"),
            Parameter("min_confidence", value=0.3), Parameter("unknown_threshold", value=0.9)])
        try:
            declare_parameters(node, LEARNER)
            p = read_parameters(node, LEARNER)
            assert p["max_clusters"] == 25 and p["linear_sgd.rehearsal"] == "full"
            assert p["min_confidence"] == 0.3  # the current name wins over the earlier one
            assert params.learner_config(p).max_clusters == 25
            # an earlier name is read at start only
            assert not node.set_parameters([Parameter("cluster_budget", value=3)])[0].successful
            # a bad value under an earlier name is refused like one under the current name
            bad = rclpy.create_node("alias_probe_bad", context=ctx,
                                    parameter_overrides=[Parameter("cluster_budget", value=-1)])
            with pytest.raises((ValueError, InvalidParameterValueException), match="max_clusters"):
                declare_parameters(bad, LEARNER)
            bad.destroy_node()
        finally:
            node.destroy_node()


def test_the_parameter_table_in_docs_is_generated_from_the_declarations():
    from cbcl_pr_ros.settings import doc_table

    doc = (REPO / "docs" / "nodes.md").read_text(encoding="utf-8")
    assert doc_table.updated(doc) == doc, ("docs/nodes.md's parameter table is out of date: run "
                                           "python -m cbcl_pr_ros.settings.doc_table docs/nodes.md")
    section = doc.split(doc_table.BEGIN)[1].split(doc_table.END)[0]
    blocks = section.split("**")
    for heading, specs in doc_table.TABLES:  # every node's declarations have their rows, under their heading
        block = blocks[blocks.index(heading) + 1]
        for spec in specs:
            assert f"\n| {spec.name} " in block, spec.name
            for alias in spec.aliases:
                assert f"| {alias} | {spec.name} |" in section
    # a changed declaration (here one default of the page) makes the document out of date
    changed = tuple((h, tuple(dataclasses.replace(s, default=81) if s.name == "jpeg_quality" else s for s in specs))
                    for h, specs in doc_table.TABLES)
    assert doc_table.updated(doc, changed) != doc
    with pytest.raises(ValueError, match="markers"):
        doc_table.updated("no table here")


def test_the_table_check_command_reports_a_stale_document(tmp_path):
    from cbcl_pr_ros.settings import doc_table

    stale = tmp_path / "nodes.md"
    stale.write_text(f"intro\n{doc_table.BEGIN}\n| old |\n{doc_table.END}\nrest\n", encoding="utf-8")
    assert doc_table.main([str(stale), "--check"]) == 1
    assert doc_table.main([str(stale)]) == 0 and doc_table.main([str(stale), "--check"]) == 0
    text = stale.read_text(encoding="utf-8")
    assert text.startswith("intro\n") and text.endswith("rest\n") and "| old |" not in text


@pytest.mark.ros
def test_the_shipped_yaml_and_an_old_one_reach_the_learner_alike(tmp_path):
    """config/cbcl_pr.yaml's nested linear_sgd block is read as ROS reads it, and a file written with
    the earlier names gives the same settings (names resolved, nothing lost)."""
    import rclpy
    from ros_testing import domain, isolated_context

    from cbcl_pr_ros.nodes.ros_params import declare_parameters, read_parameters

    old = tmp_path / "old.yaml"
    old.write_text("/**/learner:\n  ros__parameters:\n    cluster_budget: 300\n    unknown_threshold: 0.25\n"
                   "    threads: 2\n    rehearsal: full\n    exemplars_per_class: 12\n", encoding="utf-8")
    new = tmp_path / "new.yaml"
    new.write_text("/**/learner:\n  ros__parameters:\n    max_clusters: 300\n    min_confidence: 0.25\n"
                   "    fit_threads: 2\n    linear_sgd:\n      rehearsal: full\n      exemplars_per_class: 12\n",
                   encoding="utf-8")
    shipped = REPO / "config" / "cbcl_pr.yaml"
    got = {}
    with domain() as dom:
        # a user's own file replaces the shipped one (launch's config:=, teaching_session --config)
        for label, files in (("shipped", [shipped]), ("old", [old]), ("new", [new])):
            args = ["--ros-args"] + [a for f in files for a in ("--params-file", str(f))]
            with isolated_context(dom, args) as ctx:
                node = rclpy.create_node("learner", context=ctx)
                try:
                    declare_parameters(node, LEARNER)
                    got[label] = read_parameters(node, LEARNER)
                finally:
                    node.destroy_node()
    assert got["shipped"]["linear_sgd.rehearsal"] == "few_shot" and got["shipped"]["max_clusters"] == 0
    assert got["old"] == got["new"] != got["shipped"]
    assert params.learner_config(got["old"]) == LearnerConfig(
        max_clusters=300, min_confidence=0.25, fit_threads=2, rehearsal="full", exemplars_per_class=12)


def test_the_page_parameters_are_checked_like_the_robot_ones():
    """The page reads its parameters once: the shipped YAML fits them, a bad value stops the start."""
    import yaml

    from cbcl_pr_ros.settings.robot_params import PAGE_PARAMS, check_parameters

    shipped = yaml.safe_load((REPO / "config" / "teaching_page.yaml").read_text())["/**/teaching_page"][
        "ros__parameters"]
    assert set(shipped) == {s.name for s in PAGE_PARAMS}
    check_parameters(PAGE_PARAMS, shipped.__getitem__)
    for name, bad in (("jpeg_quality", 5), ("max_fps", 0.0), ("port", 70000), ("call_timeout_s", "10")):
        with pytest.raises(ValueError, match=name):
            check_parameters(PAGE_PARAMS, {**shipped, name: bad}.__getitem__)


def test_the_teach_mode_comment_users_read_names_the_declared_teach_from_default():
    """`ros2 interface show` prints the srv's comments: MODE_DEFAULT's must name teach_from's default
    and only existing choices."""
    spec = next(p for p in PARAMS if p.name == "teach_from")
    srv = (REPO / "srv" / "TeachClass.srv").read_text(encoding="utf-8")
    start = srv.index("uint8 MODE_DEFAULT=0")
    comment = srv[start:srv.index("uint8 MODE_OBJECT=1")]
    assert f"({spec.default} unless changed" in comment
    quoted = [w.strip('"') for w in comment.split() if w.startswith('"')]
    assert all(w in spec.choices for w in quoted), quoted


def test_a_wrong_type_refusal_writes_an_array_as_the_list_it_was_given():
    """rclpy hands an integer array set with `ros2 param set ... "[1, 2]"` over as array('q', ...)."""
    import array

    from cbcl_pr_ros.settings.params import specs_for, wrong_type, LEARNER

    spec = next(s for s in specs_for(LEARNER) if s.name == "teach_num_frames")
    assert wrong_type(spec, array.array("q", [1, 2])) == \
        "teach_num_frames must be an integer from 1 to 10000, got [1, 2] (a list)"
