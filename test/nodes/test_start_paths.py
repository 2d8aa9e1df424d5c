"""Every way of starting the nodes gives each node its own YAML (the parameters it ends up with).

Paths: the launch files (``ros2 launch``; evaluated here with a small stand-in for ``launch`` and
``launch_ros``, which are not part of ROS 2 from PyPI wheels), ``teaching_session`` (one process)
and the main job ``run_demo_session``. For each node, rcl itself resolves the parameter files of
that path: a probe node with the node's name and namespace is created from the same arguments
with ``automatically_declare_parameters_from_overrides``, so what it holds is what the real node
would be handed. It must hold every value of its own YAML section, and none of the parameters it
declares may come from another node's file.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

rclpy = pytest.importorskip("rclpy")
from cbcl_pr_ros.settings.node_configs import NODE_KINDS  # noqa: E402
from cbcl_pr_ros.settings.params import EXTRACTOR, LEARNER, specs_for  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config"
OWN_FILE = {kind.node_name: kind.default_file for kind in NODE_KINDS.values()}


def _declared(node_name: str) -> set[str]:
    """Parameter names the real node declares."""
    if node_name in (EXTRACTOR, LEARNER):
        return {p.name for p in specs_for(node_name)}
    from cbcl_pr_ros.settings.robot_params import ARM_PARAMS, PAGE_PARAMS, SIM_WORLD_PARAMS

    specs = {"arm": ARM_PARAMS, "sim_world": SIM_WORLD_PARAMS, "teaching_page": PAGE_PARAMS}[node_name]
    return {p.name for p in specs}


def _from_files(files: list[str], name: str, namespace: str) -> dict[str, Any]:
    """What the node's own YAML files alone give it (later files win), resolved by rcl too."""
    args = ["--ros-args"]
    for f in files:
        args += ["--params-file", f]
    return _probe(args, name, namespace)


def _probe(ros_args: list[str], name: str, namespace: str) -> dict[str, Any]:
    """The parameter overrides rcl gives a node named ``name`` in ``namespace`` with these arguments."""
    context = rclpy.Context()
    rclpy.init(args=["probe", *ros_args], context=context)
    try:
        node = rclpy.create_node(name, namespace=namespace or None, context=context, start_parameter_services=False,
                                 automatically_declare_parameters_from_overrides=True)
        try:
            values = {n: node.get_parameter(n).value for n in node._parameters}  # noqa: SLF001
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    values.pop("use_sim_time", None)
    return values


def _check_node(got: dict[str, Any], name: str, namespace: str, expected_files: list[str]) -> None:
    expected = _from_files(expected_files, name, namespace)
    assert expected, f"{name}: its own YAML ({expected_files}) sets nothing for it"
    for key, value in expected.items():
        assert got.get(key) == value, f"{name}: {key} is {got.get(key)!r}, its own YAML says {value!r}"
    foreign = sorted((set(got) - set(expected)) & _declared(name))
    assert not foreign, f"{name}: parameters {foreign} come from another node's file"


# ------------------------------------------------------------------ the launch files
class _Config:
    def __init__(self, name: str) -> None:
        self.name = name


class _Entity:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    @property
    def name(self) -> Any:  # a DeclareLaunchArgument's name
        return self.args[0] if self.args else None


def _fake_launch_modules(share: Path) -> dict[str, types.ModuleType]:
    """Stand-ins for the names the launch files import; they only record what they are given."""
    mods: dict[str, types.ModuleType] = {}

    def mod(name: str, **attrs: Any) -> None:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        mods[name] = m

    kinds = {n: type(n, (_Entity,), {}) for n in ("LaunchDescription", "DeclareLaunchArgument", "IncludeLaunchDescription",
                                                 "OpaqueFunction", "IfCondition", "PythonLaunchDescriptionSource", "Node")}
    mod("launch", LaunchDescription=kinds["LaunchDescription"])
    mod("launch.actions", **{k: kinds[k] for k in ("DeclareLaunchArgument", "IncludeLaunchDescription", "OpaqueFunction")})
    mod("launch.conditions", IfCondition=kinds["IfCondition"])
    mod("launch.launch_description_sources", PythonLaunchDescriptionSource=kinds["PythonLaunchDescriptionSource"])
    mod("launch.substitutions", LaunchConfiguration=_Config)
    mod("launch_ros")
    mod("launch_ros.actions", Node=kinds["Node"])
    mod("ament_index_python")
    mod("ament_index_python.packages", get_package_share_directory=lambda pkg: str(share))
    return mods


def _launch_nodes(path: Path, given: dict[str, str]) -> list[dict[str, Any]]:
    """Evaluate a launch file: the nodes it starts with resolved name, namespace and parameters."""
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102
    entities = module.generate_launch_description().args[0]
    values = dict(given)
    for e in entities:
        if type(e).__name__ == "DeclareLaunchArgument":
            values.setdefault(e.args[0], e.kwargs.get("default_value"))

    def val(x: Any) -> Any:
        return values[x.name] if isinstance(x, _Config) else x

    nodes: list[dict[str, Any]] = []
    for e in entities:
        cond = e.kwargs.get("condition")
        if cond is not None and str(val(cond.args[0])).lower() != "true":
            continue
        kind = type(e).__name__
        if kind == "IncludeLaunchDescription":
            sub = {k: val(v) for k, v in e.kwargs.get("launch_arguments", ())}
            nodes += _launch_nodes(Path(e.args[0].args[0]), sub)
        elif kind == "Node":
            params = [{k: val(v) for k, v in p.items()} if isinstance(p, dict) else val(p)
                      for p in e.kwargs.get("parameters", [])]
            nodes.append({"name": val(e.kwargs["name"]), "namespace": val(e.kwargs.get("namespace", "")) or "",
                          "parameters": params,
                          "remappings": [(val(a), val(b)) for a, b in e.kwargs.get("remappings", [])]})
    return nodes


def _launch_ros_args(params: list[Any]) -> list[str]:
    args = ["--ros-args"]
    for p in params:
        args += ["-p", *[f"{k}:={v}" for k, v in p.items()]] if isinstance(p, dict) else ["--params-file", p]
    return args


@pytest.fixture
def launch_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    share = tmp_path / "share"
    share.mkdir()
    (share / "launch").symlink_to(REPO / "launch")
    (share / "config").symlink_to(CONFIG)
    for name, m in _fake_launch_modules(share).items():
        monkeypatch.setitem(sys.modules, name, m)
    return share


@pytest.mark.parametrize("launch_file, given, expected_nodes", [
    ("perception.launch.py", {}, {"feature_extractor", "learner"}),
    ("teaching_session.launch.py", {"with_arm": "true", "namespace": "robot1"}, {"feature_extractor", "learner", "arm"}),
    ("sim_teaching_demo.launch.py", {}, {"sim_world", "feature_extractor", "learner", "arm"}),
    ("sim_teaching_demo.launch.py", {"with_page": "true", "namespace": "sim"},
     {"sim_world", "feature_extractor", "learner", "arm", "teaching_page"}),
    ("teaching_session.launch.py", {"with_page": "true"}, {"feature_extractor", "learner", "teaching_page"}),
    ("replay.launch.py", {"bag": "/tmp/none"}, {"feature_extractor", "learner"}),
    ("depth_camera.launch.py", {"with_page": "true", "namespace": "robot1"},
     {"feature_extractor", "learner", "teaching_page"}),
])
def test_launch_files_give_each_node_its_own_yaml(launch_share, launch_file, given, expected_nodes):
    nodes = _launch_nodes(launch_share / "launch" / launch_file, given)
    assert {n["name"] for n in nodes} == expected_nodes
    for n in nodes:
        files = [p for p in n["parameters"] if isinstance(p, str)]
        # the simulated session's learner also reads its memory file's name (config/sim_memory.yaml)
        extra = ["sim_memory.yaml"] if (launch_file, n["name"]) == ("sim_teaching_demo.launch.py", "learner") else []
        assert [Path(f).name for f in files] == [OWN_FILE[n["name"]], *extra], f"{launch_file}: {n['name']} reads {files}"
        got = _probe(_launch_ros_args(n["parameters"]), n["name"], n["namespace"])
        _check_node(got, n["name"], n["namespace"], files)


@pytest.mark.parametrize("launch_file", ["perception.launch.py", "teaching_session.launch.py", "replay.launch.py",
                                         "sim_teaching_demo.launch.py", "depth_camera.launch.py"])
def test_a_misspelt_launch_argument_stops_the_launch_before_any_node(launch_share, launch_file, monkeypatch):
    """``ros2 launch`` ignores an argument the file does not declare: ``camera_topc:=...`` started the
    nodes on the default camera topic without a word. Each file now checks, before its first node, the
    arguments given to it on the command line (not those its parent passes to an included file)."""
    path = launch_share / "launch" / launch_file
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102
    entities = module.generate_launch_description().args[0]
    kinds = [type(e).__name__ for e in entities]
    assert "OpaqueFunction" in kinds
    check = entities[kinds.index("OpaqueFunction")]
    assert all(k == "DeclareLaunchArgument" for k in kinds[:kinds.index("OpaqueFunction")])
    declared = [e.args[0] for e in entities if type(e).__name__ == "DeclareLaunchArgument"]

    def run(*given: str) -> Any:
        monkeypatch.setattr(sys, "argv", ["ros2", "launch", "cbcl_pr_ros", launch_file, *given])
        return check.kwargs["function"](None, *check.kwargs["args"])

    assert run(*(f"{n}:=x" for n in declared)) == []
    with pytest.raises(ValueError) as err:
        run("namespce:=robot1")
    assert "'namespce' (did you mean namespace?)" in str(err.value) and launch_file in str(err.value)
    monkeypatch.setattr(sys, "argv", ["ros2", "launch", "my_pkg", "mine.launch.py", "mine_only:=1"])
    assert check.kwargs["function"](None, *check.kwargs["args"]) == []  # included by another file


def test_launch_argument_replaces_the_arm_yaml(launch_share, tmp_path):
    """A user's arm file (``backend: baxter``) reaches the arm, not the default's ``sim``."""
    mine = tmp_path / "my_arm.yaml"
    mine.write_text("/**/arm:\n  ros__parameters:\n    backend: baxter\n")
    nodes = _launch_nodes(launch_share / "launch" / "teaching_session.launch.py",
                          {"with_arm": "true", "arm_config": str(mine)})
    arm = next(n for n in nodes if n["name"] == "arm")
    assert _probe(_launch_ros_args(arm["parameters"]), "arm", "")["backend"] == "baxter"


# ------------------------------------------------------------------ camera topics (issue 20: your own camera)
REALSENSE = ("/camera/camera/color/image_raw", "/camera/camera/aligned_depth_to_color/image_raw",
             "/camera/camera/color/camera_info")


def _resolved_topics(ros_args: list[str], name: str, namespace: str) -> tuple[str, str, str]:
    """The topics rcl resolves the extractor's ``image``, ``depth`` and ``camera_info`` to with these arguments."""
    context = rclpy.Context()
    rclpy.init(args=["probe", *ros_args], context=context)
    try:
        node = rclpy.create_node(name, namespace=namespace or None, context=context, start_parameter_services=False)
        try:
            return tuple(node.resolve_topic_name(t) for t in ("image", "depth", "camera_info"))  # type: ignore[return-value]
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


def _launch_topics(launch_share: Path, launch_file: str, given: dict[str, str]) -> tuple[str, str, str]:
    nodes = {n["name"]: n for n in _launch_nodes(launch_share / "launch" / launch_file, given)}
    extractor = nodes["feature_extractor"]
    args = ["--ros-args", *[x for a, b in extractor["remappings"] for x in ("-r", f"{a}:={b}")]]
    return _resolved_topics(args, "feature_extractor", extractor["namespace"])


@pytest.mark.parametrize("launch_file", ["perception.launch.py", "teaching_session.launch.py", "replay.launch.py"])
def test_launch_depth_and_camera_info_topics(launch_share, launch_file):
    """Defaults keep the nodes' own names (as before the arguments existed); given topics reach the extractor."""
    base = {"bag": "/tmp/none"} if launch_file == "replay.launch.py" else {}
    assert _launch_topics(launch_share, launch_file, {**base, "namespace": "robot1"}) == (
        "/camera/image_raw", "/robot1/depth", "/robot1/camera_info")
    given = {**base, "camera_topic": "/cam/rgb", "depth_topic": "/cam/aligned_depth", "camera_info_topic": "/cam/info"}
    assert _launch_topics(launch_share, launch_file, given) == ("/cam/rgb", "/cam/aligned_depth", "/cam/info")


def test_depth_camera_launch_reads_the_realsense_topics(launch_share):
    from cbcl_pr_ros.nodes.session import CAMERA_PRESETS

    assert _launch_topics(launch_share, "depth_camera.launch.py", {}) == REALSENSE == CAMERA_PRESETS["realsense"]
    other = {"camera_topic": "/camera/color/image_raw", "depth_topic": "/camera/depth/image_raw"}
    assert _launch_topics(launch_share, "depth_camera.launch.py", other) == (*other.values(), REALSENSE[2])
    nodes = {n["name"]: n for n in _launch_nodes(launch_share / "launch" / "depth_camera.launch.py",
                                                 {"with_arm": "true"})}
    assert set(nodes) == {"feature_extractor", "learner", "arm"}


@pytest.mark.parametrize("argv, want", [
    ([], ("/robot1/image", "/robot1/depth", "/robot1/camera_info")),
    (["--camera-topic", "/cam/rgb"], ("/cam/rgb", "/robot1/depth", "/robot1/camera_info")),
    (["--camera", "realsense"], REALSENSE),
    (["--camera", "realsense", "--depth-topic", "/cam/depth_mm", "--camera-info-topic", "/cam/info"],
     (REALSENSE[0], "/cam/depth_mm", "/cam/info")),
])
def test_teaching_session_camera_topic_options(argv, want):
    from cbcl_pr_ros.nodes import session

    opts = session.parse_args(["--namespace", "robot1", *argv])
    camera, depth, info = session.camera_topics(opts)
    args = session.build_ros_args([], camera, depth_topic=depth, camera_info_topic=info)[1:]
    assert _resolved_topics(args, "feature_extractor", "robot1") == want


# ------------------------------------------------------------------ teaching_session (one process)
@pytest.mark.parametrize("argv", [["--nodes", "extractor,learner,world,arm"],
                                  ["--nodes", "arm,learner", "--namespace", "robot1"],
                                  ["--nodes", "extractor,learner,world,page"]])
def test_teaching_session_gives_each_node_its_own_yaml(argv):
    from cbcl_pr_ros.nodes import session

    opts = session.parse_args(argv)
    kinds = opts.nodes.split(",")
    files = session.session_params_files(opts, kinds)
    ros_args = session.build_ros_args(files, "/cam")[1:]
    for kind in kinds:
        name = NODE_KINDS[kind].node_name
        got = _probe(ros_args, name, opts.namespace)
        _check_node(got, name, opts.namespace, [str(CONFIG / OWN_FILE[name])])


def test_teaching_session_arm_config_option(tmp_path):
    from cbcl_pr_ros.nodes import session

    mine = tmp_path / "my_arm.yaml"
    mine.write_text("/**/arm:\n  ros__parameters:\n    backend: baxter\n")
    opts = session.parse_args(["--nodes", "extractor,arm", "--arm-config", str(mine)])
    files = session.session_params_files(opts, ["extractor", "arm"])
    assert _probe(session.build_ros_args(files)[1:], "arm", "")["backend"] == "baxter"
    assert set(session.NODE_FACTORIES) == set(NODE_KINDS)


# ------------------------------------------------------------------ lifecycle: autostart on every path
@pytest.mark.parametrize("launch_file", ["perception.launch.py", "teaching_session.launch.py",
                                         "sim_teaching_demo.launch.py"])
def test_launch_autostart_argument_reaches_the_lifecycle_nodes(launch_share, launch_file):
    """Default: the nodes bring themselves to active; ``autostart:=false`` leaves them unconfigured."""
    for given, want in (({}, True), ({"autostart": "false"}, False)):
        nodes = {n["name"]: n for n in _launch_nodes(launch_share / "launch" / launch_file, given)}
        for name in ("feature_extractor", "learner"):
            got = _probe(_launch_ros_args(nodes[name]["parameters"]), name, "")
            assert got["autostart"] is want, f"{launch_file} {given}: {name} autostart {got['autostart']!r}"


def test_replay_launch_always_starts_active_nodes(launch_share):
    nodes = _launch_nodes(launch_share / "launch" / "replay.launch.py", {"bag": "/tmp/none", "autostart": "false"})
    for n in nodes:
        assert _probe(_launch_ros_args(n["parameters"]), n["name"], "")["autostart"] is True


@pytest.mark.parametrize("argv, want", [([], True), (["--no-autostart"], False)])
def test_teaching_session_autostart_option(argv, want):
    from cbcl_pr_ros.nodes import session

    opts = session.parse_args(argv)
    files = session.session_params_files(opts, ["extractor", "learner"])
    args = session.build_ros_args(files, autostart=not opts.no_autostart)[1:]
    for name in ("feature_extractor", "learner"):
        assert _probe(args, name, "robot1")["autostart"] is want


# ------------------------------------------------------------------ the main job (run_demo_session)
def test_demo_gives_each_node_its_own_yaml(tmp_path):
    from cbcl_pr_ros.nodes import demo

    opts = demo.parse_args([])
    ros_args = demo.demo_ros_args(opts, str(tmp_path / "memory.safetensors"))
    ros_args = ros_args[ros_args.index("--ros-args"):]
    overrides = ros_args[-1]  # the demo's own values, keyed by node, come last
    for name in ("sim_world", "feature_extractor", "learner", "arm"):
        got = _probe(ros_args, name, "")
        _check_node(got, name, "", [str(CONFIG / OWN_FILE[name]), overrides])


def test_the_check_catches_a_node_given_another_nodes_file():
    """The old teaching_session.launch.py gave the arm cbcl_pr.yaml: the check must refuse that."""
    got = _probe(["--ros-args", "--params-file", str(CONFIG / "cbcl_pr.yaml")], "arm", "")
    with pytest.raises(AssertionError):
        _check_node(got, "arm", "", [str(CONFIG / "arm.yaml")])
    got = _probe(["--ros-args", "--params-file", str(CONFIG / "sim_world.yaml"),
                  "--params-file", str(CONFIG / "arm.yaml")], "arm", "")
    _check_node(got, "arm", "", [str(CONFIG / "arm.yaml")])


def test_a_domain_id_dds_cannot_use_is_said_plainly():
    """Issue 22: ROS_DOMAIN_ID 233+ ended every node with Fast DDS's "port number is too high"."""
    import subprocess

    from ros_testing import installed_executable, ros_env

    from cbcl_pr_ros.nodes.spin import domain_id_problem

    assert domain_id_problem(None) is None and domain_id_problem("") is None and domain_id_problem("232") is None
    assert "above 232" in domain_id_problem("233") and "whole number" in domain_id_problem("x" * 1000)
    env = {**ros_env(0), "ROS_DOMAIN_ID": "300"}
    r = subprocess.run([sys.executable, str(installed_executable("learner_node"))], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == ["error: ROS_DOMAIN_ID 300 is above 232, the highest id DDS can use: pick one from 0 to 232 "
                     "(e.g. export ROS_DOMAIN_ID=42)"], r.stderr[-2000:]


# ------------------------------------------------------------------ the page shows the picture the extractor reads
def _node_image_topic(node: dict[str, Any]) -> str:
    args = ["--ros-args", *[x for a, b in node["remappings"] for x in ("-r", f"{a}:={b}")]]
    return _resolved_topics(args, node["name"], node["namespace"])[0]


@pytest.mark.parametrize("launch_file, given", [
    ("teaching_session.launch.py", {"with_page": "true"}),
    ("teaching_session.launch.py", {"with_page": "true", "namespace": "robot1", "camera_topic": "/cam/rgb"}),
    ("teaching_session.launch.py", {"with_page": "true", "namespace": "robot1", "camera_topic": "color/image_raw"}),
    ("depth_camera.launch.py", {"with_page": "true"}),
    ("depth_camera.launch.py", {"with_page": "true", "namespace": "robot1",
                                "camera_topic": "/camera/color/image_raw"}),
    ("sim_teaching_demo.launch.py", {"with_page": "true"}),
    ("sim_teaching_demo.launch.py", {"with_page": "true", "namespace": "sim"}),
])
def test_launch_page_reads_the_extractors_camera(launch_share, launch_file, given):
    """Whatever camera arguments and namespace a launch file gets, the page subscribes to the topic
    the extractor reads (the page without a remap waited on ``image`` while the camera was elsewhere)."""
    nodes = {n["name"]: n for n in _launch_nodes(launch_share / "launch" / launch_file, given)}
    want = _node_image_topic(nodes["feature_extractor"])
    assert _node_image_topic(nodes["teaching_page"]) == want
    if "camera_topic" in given and given["camera_topic"].startswith("/"):
        assert want == given["camera_topic"]
    if "sim_world" in nodes:  # the simulated camera publishes its relative ``image``
        assert _node_image_topic(nodes["sim_world"]) == want


@pytest.mark.parametrize("argv", [["--page"], ["--page", "--camera-topic", "/cam/rgb"],
                                  ["--page", "--camera", "realsense", "--namespace", "robot1"],
                                  ["--nodes", "extractor,learner,world", "--page", "--namespace", "sim"]])
def test_teaching_session_page_reads_the_extractors_camera(argv):
    """One process, one set of remaps: the page and the extractor resolve ``image`` alike."""
    from cbcl_pr_ros.nodes import session

    opts = session.parse_args(argv)
    camera, depth, info = session.camera_topics(opts)
    args = session.build_ros_args([], camera, depth_topic=depth, camera_info_topic=info)[1:]
    ns = opts.namespace
    page = _resolved_topics(args, "teaching_page", ns)[0]
    assert page == _resolved_topics(args, "feature_extractor", ns)[0]
    assert page == (camera or (f"/{ns}/image" if ns else "/image"))


# ------------------------------------------------------------------ memory per use: the simulation's own file
def test_sim_launch_gives_the_learner_its_own_memory_file(launch_share):
    nodes = {n["name"]: n for n in _launch_nodes(launch_share / "launch" / "sim_teaching_demo.launch.py", {})}
    assert _probe(_launch_ros_args(nodes["learner"]["parameters"]), "learner", "")["memory_path"] == \
        "sim_memory.safetensors"
    nodes = {n["name"]: n for n in _launch_nodes(launch_share / "launch" / "teaching_session.launch.py", {})}
    assert _probe(_launch_ros_args(nodes["learner"]["parameters"]), "learner", "")["memory_path"] == \
        "memory.safetensors"  # the real camera keeps the robot's memory


@pytest.mark.parametrize("argv, want", [
    (["--nodes", "extractor,learner,world,arm"], "sim_memory.safetensors"),
    (["--nodes", "extractor,learner"], "memory.safetensors"),
    (["--nodes", "extractor,learner,world", "--memory", "lab.safetensors"], "lab.safetensors"),
    (["--nodes", "extractor,learner,world", "--memory", ""], ""),
])
def test_teaching_session_memory_per_use(argv, want, tmp_path):
    from cbcl_pr_ros.nodes import session

    opts = session.parse_args(argv)
    kinds = opts.nodes.split(",")
    files = session.session_params_files(opts, kinds) + session.memory_files(opts, kinds, str(tmp_path))
    args = session.build_ros_args(files)[1:]
    assert _probe(args, "learner", "")["memory_path"] == want


def test_a_start_value_the_node_cannot_run_with_is_one_line_not_a_traceback(tmp_path):
    """`ros2 run cbcl_pr_ros learner_node --ros-args -p max_clusters:=abc` printed a 20-line Python
    traceback ending in the reason; the reason alone is what the user needs."""
    import subprocess

    from ros_testing import domain, installed_executable, ros_env

    with domain() as dom:
        r = subprocess.run([sys.executable, str(installed_executable("learner_node")), "--ros-args",
                            "-p", f"memory_path:={tmp_path / 'm.cbcl'}", "-p", "max_clusters:=abc"],
                           env=ros_env(dom), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert "error: parameter max_clusters must be an integer from 0 to 10000000, got 'abc' (a string)" in r.stderr
    assert not (tmp_path / "m.cbcl").exists()


@pytest.mark.parametrize("executable, given", [("arm_node", "base_frame:=''"), ("sim_world_node", "rate_hz:=abc"),
                                               ("teaching_page_node", "port:=abc")])
def test_a_refused_start_value_is_one_line_on_every_node(executable, given):
    """A node refused at start is destroyed half-made when rclpy shuts down: closing what it never
    made ended the arm, the simulated world and the page with an AttributeError traceback instead of
    the reason."""
    import subprocess

    from ros_testing import domain, installed_executable, ros_env

    with domain() as dom:
        r = subprocess.run([sys.executable, str(installed_executable(executable)), "--ros-args", "-p", given],
                           env=ros_env(dom), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "AttributeError" not in r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(said) == 1 and given.split(":=")[0] in said[0], r.stderr[-2000:]


@pytest.mark.parametrize("command", [["teaching_page_node"], ["teaching_session", "--nodes", "page"]])
def test_a_page_port_already_in_use_is_one_line_naming_the_port(command):
    """A second page (or any program) on the page's port ended the start with a 30-line traceback
    ending in "[Errno 98] ... address already in use"; the user needs the port and how to change it."""
    import socket
    import subprocess

    from ros_testing import domain, installed_executable, ros_env

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with domain() as dom:
            r = subprocess.run([sys.executable, str(installed_executable(command[0])), *command[1:],
                                "--ros-args", "-p", f"port:={port}"],
                               env=ros_env(dom), capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    said = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(said) == 1 and f"127.0.0.1:{port}" in said[0] and "already uses port" in said[0], r.stderr[-2000:]
    assert "-p port:=" in said[0]
