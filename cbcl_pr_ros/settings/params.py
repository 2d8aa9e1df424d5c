"""The nodes' parameters in one table (ROS-free; ``nodes.ros_params`` declares them on a node): name, default, description, range or choices, who uses them.

The table drives three things, so they cannot drift apart: ``nodes.ros_params.declare_parameters`` (descriptors with
FloatingPointRange/IntegerRange, read-only flags), ``validate_parameter`` (the on-set callback, pure
and unit-tested), and the test that ``config/cbcl_pr.yaml`` holds every parameter.
"""
from __future__ import annotations

import array
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable

from cbcl_pr_ros.share import find_share_file

__all__ = [
    "ParamSpec",
    "PARAMS",
    "EXTRACTOR",
    "LEARNER",
    "specs_for",
    "aliases_for",
    "flatten",
    "resolve_aliases",
    "REMOVED",
    "removed_parameters",
    "validate_parameter",
    "check_value",
    "expected_value",
    "wrong_type",
    "cross_check",
    "normalise",
    "default_config_path",
    "feature_dim_for",
    "learner_config",
    "core_name",
    "learner_factory",
]

EXTRACTOR = "feature_extractor"
LEARNER = "learner"
BOTH = (EXTRACTOR, LEARNER)

# Choices of the core's LearnerConfig, repeated here so that this table imports no torch/scipy;
# test_params checks they equal the core's constants.
COVARIANCE_MODES = ("full", "diagonal")
REDUCTIONS = ("kmeans", "remove")
REHEARSAL_MODES = ("few_shot", "full")
CLASSIFIERS = ("blended", "gaussian", "linear_sgd", "cbcl_vote", "ncm")
OPEN_SET_MODES = ("distance", "confidence", "none")


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: Any
    description: str
    nodes: tuple[str, ...]
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    read_only: bool = True  # structural: fixed for the node's life (change = restart)
    # an enum whose names YAML reads as booleans (on/off): (name for true, name for false); the
    # parameter is then dynamically typed, so `ros2 param set ... on` and `detect_objects: off` work
    yaml_bools: tuple[str, str] | None = None
    # earlier names, still read at start for one release with a warning (docs/nodes.md "Renamed parameters")
    aliases: tuple[str, ...] = ()


PARAMS: tuple[ParamSpec, ...] = (
    # --- shared ---------------------------------------------------------------------------
    ParamSpec("backbone", "efficientnet_lite0",
              "Frozen backbone computing the feature vectors; the learner refuses vectors and memory "
              "files of any other", BOTH),
    ParamSpec("image_topic", "image",
              "Camera topic (sensor_msgs/Image or CompressedImage); remapping 'image' works too",
              BOTH),
    ParamSpec("features_topic", "features", "FeatureVector topic between extractor and learner",
              BOTH),
    ParamSpec("autostart", True,
              "Configure and activate the (lifecycle) node by itself at start; false leaves it "
              "unconfigured for a lifecycle manager (ros2 lifecycle set <node> configure)", BOTH),
    # --- extractor ------------------------------------------------------------------------
    ParamSpec("runtime", "onnx", "Inference runtime of the backbone", (EXTRACTOR,),
              choices=("onnx", "torch")),
    ParamSpec("device", "auto", "Where the backbone runs: auto (CUDA when any runtime reaches it), cpu or cuda",
              (EXTRACTOR,), choices=("auto", "cpu", "cuda")),
    ParamSpec("precision", "fp32", "Backbone arithmetic: fp32 (GPU = CPU within 1e-4), tf32 or fp16 (CUDA)",
              (EXTRACTOR,), choices=("fp32", "tf32", "fp16")),
    ParamSpec("threads", 2, "CPU threads of the backbone (ONNX Runtime intra-op or torch)", (EXTRACTOR,),
              min=1, max=256),
    ParamSpec("compressed", False,
              "Subscribe to sensor_msgs/CompressedImage (PNG or JPEG; another format is refused) instead of "
              "sensor_msgs/Image",
              BOTH),
    ParamSpec("no_frame_warning_s", 5.0,
              "Log a hint (topic, QoS, is the camera running?) when no frame arrived for this long "
              "(0 = never)", (EXTRACTOR,), min=0.0, max=3600.0, read_only=False),
    ParamSpec("extract_service", "extract_features",
              "Name of the ExtractFeatures service (the learner calls it for request images)", BOTH),
    # --- request limits (every request field is untrusted; docs/security.md) -----------------
    ParamSpec("max_images_per_request", 64,
              "Most images (or feature vectors) in one TeachClass or ExtractFeatures request", BOTH,
              min=1, max=10_000),
    ParamSpec("max_image_pixels", 4096 * 4096, "Most pixels (width x height) of one request image and of "
              "every camera frame: colour, depth, and compressed as its header states (refused before it "
              "is decoded)",
              BOTH, min=1, max=2**31 - 1),
    ParamSpec("max_image_bytes", 64 * 1024 * 1024, "Most data bytes of one request image", BOTH,
              min=1, max=2**31 - 1),
    # --- learner: CBCL-PR hyperparameters ---------------------------------------------------
    ParamSpec("distance_threshold", 0.0,
              "Agg-Var distance threshold D (0 = estimated from the first class taught)", (LEARNER,),
              min=0.0, max=1.0e6),
    ParamSpec("max_clusters", 0, "Total cluster budget K over all classes (0 = unlimited)",
              (LEARNER,), min=0, max=10_000_000, aliases=("cluster_budget",)),
    ParamSpec("covariance", "full", "Covariance kept per cluster: full or diagonal (CBCL-PR_D)",
              (LEARNER,), choices=COVARIANCE_MODES),
    ParamSpec("reduction", "kmeans",
              "How clusters are reduced when K is exceeded: kmeans (the paper's proportional "
              "reduction) or remove", (LEARNER,), choices=REDUCTIONS),
    ParamSpec("classifier", "blended",
              "Classifier over the clusters: blended (per-class Gaussians, closed form, default), gaussian "
              "(shared-covariance LDA), linear_sgd (the paper's linear head), cbcl_vote (CBCL weighted vote), "
              "ncm (nearest class mean)", (LEARNER,),
              choices=CLASSIFIERS),
    ParamSpec("open_set", "distance",
              "Unknown-object test: distance (to the predicted class's clusters), confidence, none",
              (LEARNER,), choices=OPEN_SET_MODES),
    ParamSpec("unknown_distance_factor", 1.3,
              "open_set=distance: unknown when farther than this many D from the class's clusters",
              (LEARNER,), min=1.0e-3, max=1000.0),
    ParamSpec("negatives_capacity", 128,
              "Feature vectors of untaught things kept to tighten each class's unknown-object radius "
              "(the other objects of teaching frames; vectors, never images; 0 = none kept)",
              (LEARNER,), min=0, max=1024),
    ParamSpec("negative_quantile", 0.1,
              "With enough negatives a class's radius is negative_margin times this quantile of their "
              "distances to it (never above unknown_distance_factor D)", (LEARNER,), min=0.0, max=1.0),
    ParamSpec("negative_margin", 0.95, "See negative_quantile", (LEARNER,), min=1.0e-3, max=1.0),
    ParamSpec("negative_rank", 0,
              "When >= 1, the radius uses the distance of the class's negative_rank-th nearest negative instead "
              "of negative_quantile: far negatives then never loosen it (0 = the quantile)", (LEARNER,),
              min=0, max=4096),
    ParamSpec("min_confidence", 0.0,
              "A best score below this is answered as unknown (0 = no score threshold)",
              (LEARNER,), min=0.0, max=1.0, aliases=("unknown_threshold",)),
    ParamSpec("seed", 0, "Seed of the pseudo-rehearsal sampling and classifier training", (LEARNER,),
              min=0, max=2**31 - 1),
    ParamSpec("fit_threads", 1, "BLAS and torch threads during a retrain, restored afterwards (1 is fastest "
              "on a busy machine; docs/core.md)", (LEARNER,), min=1, max=256, aliases=("threads",)),
    # --- learner: settings of the linear_sgd head only (classifier linear_sgd; the default head ignores them)
    ParamSpec("linear_sgd.rehearsal", "few_shot",
              "classifier linear_sgd only: pseudo-rehearsal few_shot (linear_sgd.exemplars_per_class for every "
              "class, the paper's few-shot setting) or full (as many as each cluster holds; a class being taught: "
              "its real vectors, plus as many samples as it held before)", (LEARNER,), choices=REHEARSAL_MODES, aliases=("rehearsal",)),
    ParamSpec("linear_sgd.exemplars_per_class", 40,
              "classifier linear_sgd only: pseudo-exemplars drawn per class when linear_sgd.rehearsal=few_shot",
              (LEARNER,), min=1, max=100_000, aliases=("exemplars_per_class",)),
    # --- learner: node behaviour --------------------------------------------------------------
    ParamSpec("feature_dim", 0,
              "Width of the feature vectors (0 = the backbone's, from features.backbones); vectors "
              "of another width are refused", (LEARNER,), min=0, max=65536),
    ParamSpec("memory_dir", "",
              "Directory of the memory files; SaveMemory/LoadMemory names resolve inside it "
              "('' = $ROS_HOME/cbcl_pr_ros, i.e. ~/.ros/cbcl_pr_ros, with the node's namespace below it: "
              "~/.ros/cbcl_pr_ros/robot1 for /robot1; an absolute path otherwise)",
              (LEARNER,)),
    ParamSpec("memory_path", "memory.safetensors",
              "Default memory file, saved after every change and loaded at start-up: a file name "
              "inside memory_dir, or an absolute path whose directory is then the memory directory "
              "('' = RAM only)", (LEARNER,)),
    ParamSpec("allow_absolute_paths", False,
              "Let SaveMemory/LoadMemory requests name absolute paths outside memory_dir (off: "
              "any peer on the ROS domain could then write files as this process)", (LEARNER,)),
    ParamSpec("max_memory_file_bytes", 256 * 1024 * 1024,
              "Largest memory file that is read (checked before reading)", (LEARNER,),
              min=1024, max=2**40),
    ParamSpec("max_teach_frames", 100, "Most camera frames one TeachClass may ask for (num_frames)",
              (LEARNER,), min=1, max=10_000),
    ParamSpec("max_teach_timeout_s", 60.0,
              "Longest a TeachClass may wait for camera frames (timeout_s); this bounds how long "
              "the mutation group (teach/forget/rename/save/load) can be busy waiting", (LEARNER,),
              min=0.1, max=3600.0),
    ParamSpec("max_feature_abs", 1.0e6,
              "Largest absolute feature value accepted in a request or on the features and object_features "
              "topics (backbone features are O(10))",
              (LEARNER,), min=1.0, max=1.0e30),
    ParamSpec("max_prediction_rate", 0.0,
              "Most predictions per second published for the stream, on average (token bucket on the "
              "node clock, bursts of 2); 0 = one per feature vector, i.e. the camera's rate",
              (LEARNER,), min=0.0, max=1000.0, read_only=False),
    ParamSpec("teach_num_frames", 10, "Frames taken from the stream by a TeachClass without "
              "images or features (at most max_teach_frames: a larger value is refused, not clamped)",
              (LEARNER,), min=1, max=10_000, read_only=False),
    ParamSpec("teach_views", 8,
              "Jittered copies (crop, mirror, colour; features/augment.py) of every image or object crop "
              "taught from a TeachClass request, sent through the backbone with it: one backbone pass "
              "each at teach time, none at recognition time. The learner keeps them as "
              "spread shared by all classes, not as shots (memory, D, open-set gate and calibration hold "
              "the images alone). 0 = the images only; 1 is refused (one view measures no spread) "
              "(docs/core.md, Levers)",
              (LEARNER,), min=0, max=16, read_only=False),
    ParamSpec("teach_view_spread", 0.5,
              "The views' vectors are moved onto their own image's (x + spread (v - mean of its views)): "
              "the class mean stays the taught images', the views only add spread (docs/core.md, Levers)",
              (LEARNER,), min=0.0, max=1.0, read_only=False),
    ParamSpec("teach_negatives", "frames+stream",
              "Negatives for the open-set gate given with a TeachClass of an object (by box, in view or by "
              "track): frames (the other objects of the teaching frames), frames+stream (and the recent "
              "objects of the stream seen beside the taught track: at most 256 vectors of the last 60 s, one per "
              "track per second), or "
              "stream (the recent objects only; they include the teaching frames' others once). Never the "
              "taught track's vectors, nor any near the new shots",
              (LEARNER,), choices=("frames", "frames+stream", "stream"), read_only=False),
    ParamSpec("teach_timeout_s", 10.0, "Seconds a TeachClass waits for those frames (at most "
              "max_teach_timeout_s: a larger value is refused, not clamped)", (LEARNER,),
              min=0.1, max=3600.0, read_only=False),
    ParamSpec("extract_timeout_s", 10.0,
              "Seconds to wait for the extractor's service when images are sent to the learner",
              (LEARNER,), min=0.1, max=300.0, read_only=False),
    ParamSpec("status_period_s", 2.0, "Period of the status publication (also sent on every change)",
              (LEARNER,), min=0.1, max=3600.0),
    ParamSpec("debug_image", False,
              "Always publish the annotated debug_image (otherwise only while someone subscribes)",
              (LEARNER,), read_only=False),
    # --- per-object perception ----------------------------------------------------------------
    ParamSpec("object_features_topic", "object_features",
              "ObjectFeatures topic between extractor and learner (every object of a frame with its vector)",
              BOTH),
    ParamSpec("detect_objects", "auto",
              "Find the objects of each frame and compute their vectors in the same backbone batch: "
              "auto (once a depth frame has arrived), on (also RGB-only cameras), off (frame vector only); "
              "YAML's booleans mean on/off (`ros2 param set /feature_extractor detect_objects on` works)",
              (EXTRACTOR,), choices=("auto", "on", "off"), read_only=False, yaml_bools=("on", "off")),
    ParamSpec("depth_topic", "depth", "Depth image registered to the colour image (32FC1 m or 16UC1 mm)",
              (EXTRACTOR,)),
    ParamSpec("camera_info_topic", "camera_info", "CameraInfo of the colour image (intrinsics K)",
              (EXTRACTOR,)),
    ParamSpec("depth_max_age_s", 0.2,
              "Use the newest depth frame when none has the image's stamp, if at most this much older",
              (EXTRACTOR,), min=0.0, max=10.0, read_only=False),
    ParamSpec("object_proposals", "hybrid",
              "How each frame's objects are found: hybrid (the small network shipped with the package, trained "
              "on rendered tables, with the depth's geometry as referee: pieces it sees as one object joined, "
              "given to their object or dropped, objects it parts parted; held out on real tables it finds more "
              "objects and merges fewer than the geometry alone, at about twice its time), depth (the geometry "
              "of the depth alone: support plane, heights, seams) or learned (the network alone, its objects "
              "placed on the same support plane); a frame without usable depth gets the RGB proposals either "
              "way: docs/perception.md, 'Learned proposals'",
              (EXTRACTOR,), choices=("depth", "learned", "hybrid")),
    ParamSpec("segmenter_weights", "",
              "With object_proposals learned or hybrid: a safetensors file of the segmenter's weights (bench/"
              "train_segmenter.py makes them); '' = the weights shipped with the package. Loaded once at "
              "start; a file the loader refuses stops the start", (EXTRACTOR,)),
    ParamSpec("max_objects", 16, "Most objects per frame sent through the backbone (highest proposal scores)",
              (EXTRACTOR,), min=1, max=256, read_only=False),
    ParamSpec("reuse_still_crops", True,
              "Keep a still picture's proposals and frame vector, and an object's crop features while its box "
              "and pixels stay put (a still table costs a crop refresh per frame); false: proposals, the "
              "frame and every crop on every frame",
              (EXTRACTOR,), read_only=False),
    ParamSpec("crop_refresh_frames", 10, "With reuse_still_crops: compute the proposals and each still "
              "object's features again at least every this many frames", (EXTRACTOR,), min=1, max=1000),
    ParamSpec("mask_crops", True,
              "Fill each object crop's pixels outside its depth proposal's mask with neutral grey, so table and "
              "neighbours stay out of its vector (more accurate on real tables: docs/perception.md, "
              "'Masked crops'); false: crops as boxes (how a memory taught without masks saw its objects)",
              (EXTRACTOR,), read_only=False),
    ParamSpec("join_candidates", 3,
              "Most pairs of touching pieces per frame whose union crop is sent with the objects, so the "
              "learner can join the pieces of one taught object that its classifier recognises better "
              "together (objects.pieces); 0: none", (EXTRACTOR,), min=0, max=16, read_only=False),
    ParamSpec("crop_margin", 0.1, "Context around each object's box in its crop (fraction of the longer side)",
              (EXTRACTOR, LEARNER), min=0.0, max=2.0, read_only=False),
    ParamSpec("teach_from", "auto",
              "What a TeachClass with mode MODE_DEFAULT learns: auto (the object in view from the stream "
              "when objects are detected, request images whole), object, or frame",
              (LEARNER,), choices=("auto", "object", "frame"), read_only=False),
    ParamSpec("track_window", 5, "Frames whose class scores are fused per tracked object", (LEARNER,),
              min=1, max=1000),
    ParamSpec("track_max_missed", 5, "Frames a tracked object may go unseen before its track ends",
              (LEARNER,), min=0, max=1000),
    ParamSpec("track_max_distance_m", 0.1, "Largest 3-D jump of a tracked object between frames (metres)",
              (LEARNER,), min=1.0e-3, max=10.0),
    ParamSpec("camera_pose_topic", "camera_pose",
              "geometry_msgs/PoseStamped of the camera's optical frame in a fixed frame, stamped like the image: "
              "tracks then live in that frame, so ids stay on their objects while the camera moves, and the "
              "extractor takes the table's up direction from it (the fixed frame's +z); "
              "'' = tracks in the camera frame and the table found from the image alone", (EXTRACTOR, LEARNER)),
    # --- fleet mode (docs/nodes.md "Fleet mode", docs/security.md "Fleet peers") --------
    ParamSpec("fleet", "", "Fleet name: learners of one fleet publish their class changes on fleet_topic "
              "and merge each other's; '' = fleet mode off", (LEARNER,)),
    ParamSpec("robot_name", "", "This robot's name in the fleet (1-64 of [A-Za-z0-9_.-]; needed in fleet mode); "
              "recorded as the teacher in each class's provenance", (LEARNER,)),
    ParamSpec("fleet_allow", "", "Comma-separated robot names whose updates are merged; '' = every robot of "
              "the fleet (who may publish at all is SROS2's to decide)", (LEARNER,)),
    ParamSpec("fleet_topic", "/class_updates", "Topic of the fleet's ClassUpdate messages (absolute, so that "
              "namespaced robots share it)", (LEARNER,)),
    ParamSpec("fleet_history_depth", 100, "Updates kept for late joiners (transient-local history) and the "
              "burst of updates accepted at once", (LEARNER,), min=1, max=10_000),
    ParamSpec("fleet_max_update_rate", 5.0, "Updates per second taken from each robot of the fleet on average "
              "(more are refused; every robot has its own allowance)", (LEARNER,), min=0.01, max=1000.0),
    ParamSpec("fleet_digest_period", 10.0, "Seconds between the digests of the classes held, from which a "
              "robot that missed an update asks for it again; 0 = no digest", (LEARNER,), min=0.0, max=3600.0),
    ParamSpec("fleet_save_period", 10.0, "Seconds a change taken from a fleet peer may wait in RAM before the "
              "memory file is written (also written at deactivate, cleanup and every local change; a peer's "
              "class lost to a crash is asked for again by the digest); 0 = write after each one",
              (LEARNER,), min=0.0, max=3600.0),
    ParamSpec("fleet_cpu_share", 0.25, "Share of one CPU core that the updates of all fleet peers together may "
              "use on average (merges cost ~1 s each at 1000 classes); past it every update is refused until "
              "the share refills", (LEARNER,), min=0.01, max=1.0),
    ParamSpec("fleet_max_update_bytes", 8 * 1024 * 1024, "Largest class statistics one update may carry "
              "(also capped by max_memory_file_bytes)", (LEARNER,), min=1024, max=2**31),
)

_BY_NAME = {p.name: p for p in PARAMS}
# parameters that are gone, and what replaced them: given at start, they stop the node
# (:func:`removed_parameters`)
REMOVED: dict[str, str] = {
    "reliability": "qos_overrides.<topic>.subscription.reliability",
    "qos_depth": "qos_overrides.<topic>.subscription.depth",
}
_FLEET_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def specs_for(node: str) -> list[ParamSpec]:
    """The parameters a node declares (``feature_extractor`` or ``learner``)."""
    if node not in BOTH:
        raise ValueError(f"unknown node kind {node!r}; expected one of {BOTH}")
    return [p for p in PARAMS if node in p.nodes]


def aliases_for(node: str) -> dict[str, ParamSpec]:
    """Earlier names of ``node``'s parameters → the parameter that replaced them."""
    return {alias: spec for spec in specs_for(node) for alias in spec.aliases}


def flatten(section: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A YAML ``ros__parameters`` mapping with nested groups as ROS reads it: ``{"a": {"b": 1}}`` → ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in section.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def resolve_aliases(given: dict[str, Any], node: str) -> tuple[dict[str, Any], list[str]]:
    """``given`` values (nested groups allowed) under the current names, and one warning per earlier name used.

    The current name wins when both are given (the earlier one is then ignored, with a warning).
    """
    flat = flatten(given)
    old = aliases_for(node)
    out = {name: value for name, value in flat.items() if name not in old}
    warnings: list[str] = []
    for name, value in flat.items():
        spec = old.get(name)
        if spec is None:
            continue
        if spec.name in out:
            warnings.append(f"parameter {name} is deprecated and ignored: {spec.name} is set too")
            continue
        out[spec.name] = value
        warnings.append(f"parameter {name} is deprecated: it was renamed {spec.name}; it works until the next "
                        f"release")
    return out, warnings


def removed_parameters(given: Iterable[str]) -> str | None:
    """Why a node given these parameter names at start refuses to start: each removed one with what
    replaced it; None when none was removed. A node that ran on without it would quietly ignore a
    setting its user meant."""
    names = set(given)
    found = [f"parameter {name} was removed: set {REMOVED[name]} instead" for name in REMOVED if name in names]
    return "; ".join(found) + ' (docs/nodes.md "QoS choices and transport")' if found else None


def validate_parameter(name: str, value: Any, current: dict[str, Any] | None = None) -> str | None:
    """None when ``value`` is acceptable for parameter ``name``, else the reason (for the on-set callback).

    ``current``: the node's other parameter values (after this change), for the rules that tie two
    parameters together (:func:`cross_check`).
    """
    spec = _BY_NAME.get(name)
    if spec is None:
        return None  # not ours (e.g. use_sim_time): let ROS decide
    reason = check_value(spec, value)
    if reason:
        return reason
    value = normalise(spec, value)
    if name in ("backbone", "image_topic", "features_topic", "extract_service") and not value.strip():
        return f"{name} must not be empty"
    if name == "teach_views" and value == 1:
        return "teach_views 1 is refused: one view measures no spread; use 0 (off) or 2-16"
    if name in ("fleet", "robot_name") and value and not _FLEET_NAME.fullmatch(value):
        return f"{name} must be 1-64 letters, digits, '_', '.' or '-' (or ''), got {short(value)}"
    if name == "fleet_allow" and any(a.strip() and not _FLEET_NAME.fullmatch(a.strip()) for a in value.split(",")):
        return f"fleet_allow must be comma-separated robot names (1-64 of [A-Za-z0-9_.-]), got {short(value)}"
    if name == "fleet_topic" and not value.strip():
        return "fleet_topic must not be empty"
    if name == "memory_dir" and value and not os.path.isabs(value):
        return f"memory_dir must be an absolute path or '' (nothing is expanded), got {short(value)}"
    if name == "memory_path" and value and not os.path.isabs(value) and (
            "/" in value or value.startswith(".") or "$" in value or value.startswith("~")):
        return (f"memory_path must be a file name inside memory_dir or an absolute path (nothing is "
                f"expanded), got {short(value)}")
    if current is not None:
        return cross_check({**current, name: value}, only=name)
    return None


# (parameter, its cap): a run-time default above the cap of a request field would be clamped silently
_CAPPED_BY = {"teach_timeout_s": "max_teach_timeout_s", "teach_num_frames": "max_teach_frames"}


def cross_check(values: dict[str, Any], only: str | None = None) -> str | None:
    """The rules between parameters (each default within its request cap); None when they hold.
    ``only``: check just the rules that involve this parameter."""
    for name, cap in _CAPPED_BY.items():
        if only not in (None, name, cap) or name not in values or cap not in values:
            continue
        if values[name] > values[cap]:
            return (f"{name} {values[name]} is above {cap} {values[cap]}, the most a TeachClass may ask: "
                    f"use at most {values[cap]}, or raise {cap} at start (read-only)")
    return None


def short(value: Any, limit: int = 40) -> str:
    """repr of a value cut to ``limit`` characters: refusals never echo a long value."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(str(value))} characters)"


def normalise(spec: ParamSpec, value: Any) -> Any:
    """The value as the node uses it: YAML's booleans become the enum's on/off names."""
    if spec.yaml_bools is not None and isinstance(value, bool):
        return spec.yaml_bools[0] if value else spec.yaml_bools[1]
    return value


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list"}


def expected_value(spec: ParamSpec) -> str:
    """What ``spec`` takes, in words: ``an integer from 0 to 64``, ``one of on, off, auto``..."""
    if spec.choices is not None:
        return f"one of {', '.join(spec.choices)}" + (" (or true/false)" if spec.yaml_bools else "")
    kind = "a list of strings" if isinstance(spec.default, list) else _KINDS.get(type(spec.default), "a value")
    if spec.min is not None and spec.max is not None:
        return f"{kind} from {spec.min} to {spec.max}"
    if spec.min is not None:
        return f"{kind} >= {spec.min}"
    return f"{kind} <= {spec.max}" if spec.max is not None else kind


def wrong_type(spec: ParamSpec, value: Any) -> str:
    """The refusal of a value of another type than ``spec``'s: its name, what it takes, what was given."""
    if isinstance(value, array.array):  # how rclpy hands over an integer or double array
        value = value.tolist()
    kind = "a boolean" if isinstance(value, bool) else _KINDS.get(type(value), type(value).__name__)
    given = "nothing" if value is None else f"{short(value)} ({kind})"
    return f"{spec.name} must be {expected_value(spec)}, got {given}"


def check_value(spec: ParamSpec, value: Any) -> str | None:
    """Type, finiteness, choices and range of ``value`` against ``spec`` (None: acceptable)."""
    name = spec.name
    value = normalise(spec, value)
    want = type(spec.default)
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if (want is bool) != isinstance(value, bool) or not isinstance(value, want):
        return wrong_type(spec, value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name} must be finite, got {value!r}"
    if spec.choices is not None and value not in spec.choices:
        return f"{name} must be one of {', '.join(spec.choices)}; got {short(value)}"
    if spec.min is not None and value < spec.min:
        return f"{name} must be >= {spec.min}, got {short(value)}"
    if spec.max is not None and value > spec.max:
        return f"{name} must be <= {spec.max}, got {short(value)}"
    return None


def feature_dim_for(p: dict[str, Any]) -> int:
    """The feature width of the learner: ``feature_dim`` if set, else the backbone's declared width.

    The width is fixed by configuration, never by the first request (a peer's three 3-d vectors
    must not decide it); an unknown backbone needs ``feature_dim``.
    """
    from cbcl_pr_ros.features.backbones import BACKBONES  # local: settings stay light (no OpenCV)

    dim = int(p.get("feature_dim", 0) or 0)
    info = BACKBONES.get(p["backbone"])
    if info is not None and dim and dim != info.feature_dim:
        raise ValueError(f"feature_dim {dim} contradicts backbone {p['backbone']!r} ({info.feature_dim})")
    if info is None and not dim:
        raise ValueError(f"backbone {p['backbone']!r} is not one of {sorted(BACKBONES)}: set "
                         "feature_dim to the width of its vectors")
    return dim or info.feature_dim


def core_name(spec: ParamSpec) -> str:
    """The LearnerConfig field a learner parameter sets: its name without the head's group (``linear_sgd.``)."""
    return spec.name.rsplit(".", 1)[-1]


# LearnerConfig fields whose "none" (estimate, unlimited) is 0 as a ROS parameter
_ZERO_IS_NONE = ("distance_threshold", "max_clusters")


def learner_config(p: dict[str, Any]) -> Any:
    """The core LearnerConfig for the learner's parameter values (0 = auto/unlimited → None).

    Every learner parameter named like a LearnerConfig field (or ``<head>.<field>``) sets that field,
    so a setting reaches the core under its one name; the other fields keep the core's defaults.
    """
    import dataclasses

    from cbcl_pr_ros.core import LearnerConfig  # local: settings stay light (no scipy, scikit-learn)

    fields = {f.name for f in dataclasses.fields(LearnerConfig)}
    values = {core_name(spec): p[spec.name] for spec in specs_for(LEARNER) if core_name(spec) in fields}
    for name in _ZERO_IS_NONE:
        values[name] = values[name] or None
    return LearnerConfig(**values)


def learner_factory(p: dict[str, Any]) -> Any:
    """callable(feature_dim) -> an empty CBCLPRLearner configured from the parameters.

    The config is built (and checked) now, so a bad combination fails at start-up, not at the first teach.
    """
    from cbcl_pr_ros.core import CBCLPRLearner  # local: settings stay light (no scipy, scikit-learn)

    config = learner_config(p)
    backbone = p["backbone"]

    def make(feature_dim: int) -> Any:
        return CBCLPRLearner(config, backbone=backbone, feature_dim=int(feature_dim))

    return make


def default_config_path() -> str:
    """config/cbcl_pr.yaml of the installed package (ament or pip), else of the source tree."""
    return str(find_share_file("config", "cbcl_pr.yaml"))
