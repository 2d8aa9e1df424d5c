"""Declares the service layer's parameter table on an rclpy node (descriptors, ranges, on-set check).

The table itself and its validation live in :mod:`cbcl_pr_ros.settings.params` (no ROS there).
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Iterable

from cbcl_pr_ros.settings.params import (
    PARAMS,
    REMOVED,
    ParamSpec,
    aliases_for,
    check_value,
    cross_check,
    normalise,
    removed_parameters,
    resolve_aliases,
    specs_for,
    validate_parameter,
    wrong_type,
)
from cbcl_pr_ros.settings.param_names import (
    nearest_name_hint,
    package_parameter_names,
    unknown_parameter_note,
    unknown_parameters,
)
from cbcl_pr_ros.settings.robot_params import check_parameters, on_set_check

__all__ = ["declare_parameters", "declare_read_only", "read_parameters", "install_validation", "parameter",
           "ParameterRefused", "warn_unknown_parameters"]


def _descriptor(spec: ParamSpec):
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    desc = spec.description
    if spec.choices:
        desc += f" [{'|'.join(spec.choices)}]"
    # an on/off enum takes YAML's booleans too (normalised when read): dynamically typed
    d = ParameterDescriptor(description=desc, read_only=spec.read_only,
                            dynamic_typing=spec.yaml_bools is not None)
    if isinstance(spec.default, float) and spec.min is not None and spec.max is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(spec.min),
                                                     to_value=float(spec.max), step=0.0)]
    elif isinstance(spec.default, int) and not isinstance(spec.default, bool) \
            and spec.min is not None and spec.max is not None:
        d.integer_range = [IntegerRange(from_value=int(spec.min), to_value=int(spec.max), step=0)]
    return d


class ParameterRefused(ValueError):
    """A value given at start (YAML, launch, -p) the node cannot run with; the message names the
    parameter and why. ``spin.run_nodes`` prints it as one line and exits, without a traceback."""


def declare_parameters(node: Any, kind: str, overrides: dict[str, Any] | None = None) -> None:
    """Declare the parameters of ``kind`` on an rclpy node and install the validating on-set callback.

    ``overrides`` replace the table's defaults (values from a YAML file still win over both). A value
    given at start under an earlier name (an alias) becomes the current name's default, with a warning.
    """
    _refuse_removed(node)
    renamed = _declare_aliases(node, kind)
    overrides = {**(overrides or {}), **renamed}
    specs = specs_for(kind)
    for spec in specs:
        default = overrides.get(spec.name, spec.default)
        _declare(node, spec, default, _descriptor(spec))
        if spec.name in renamed and node.get_parameter(spec.name).value != renamed[spec.name]:
            node.get_logger().warning(f"{spec.name} is set too: its earlier name is ignored")
        reason = validate_parameter(spec.name, node.get_parameter(spec.name).value)
        if reason:
            raise ParameterRefused(f"parameter {reason}")
    values = read_parameters(node, kind)
    reason = cross_check(values)
    if reason:
        raise ParameterRefused(f"parameter {reason}")
    install_validation(node, specs, lambda name, value, current: validate_parameter(name, value, current))
    warn_unknown_parameters(node, kind, specs)


def _declare(node: Any, spec: ParamSpec, default: Any, descriptor: Any) -> None:
    """Declare one parameter; a start value (YAML, launch) of the wrong type or out of range stops the
    start with the parameter's name, what it takes and the value given (rclpy says "Wrong parameter
    type" in its own terms); a whole number given for a decimal parameter is that number."""
    from rcl_interfaces.msg import ParameterDescriptor
    from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException

    try:
        node.declare_parameter(spec.name, default, descriptor)
        return
    except (InvalidParameterTypeException, InvalidParameterValueException):
        pass  # refused and left undeclared: read the value given to say why
    given = node.declare_parameter(spec.name, None, ParameterDescriptor(dynamic_typing=True)).value
    node.undeclare_parameter(spec.name)
    if isinstance(spec.default, float) and isinstance(given, int) and not isinstance(given, bool) \
            and check_value(spec, given) is None:
        node.declare_parameter(spec.name, float(given), descriptor, ignore_override=True)
        return
    raise ParameterRefused(f"parameter {check_value(spec, given) or wrong_type(spec, given)}")


def _refuse_removed(node: Any) -> None:
    """ValueError naming the replacement when a removed parameter was given at start (YAML or -p);
    each is declared only to read it, and undeclared again."""
    from rcl_interfaces.msg import ParameterDescriptor

    given = []
    for name in REMOVED:
        node.declare_parameter(name, None, ParameterDescriptor(dynamic_typing=True))
        if node.get_parameter(name).value is not None:
            given.append(name)
        node.undeclare_parameter(name)
    reason = removed_parameters(given)
    if reason:
        raise ParameterRefused(reason)


def _declare_aliases(node: Any, kind: str) -> dict[str, Any]:
    """Declare each earlier parameter name (read-only, unset unless given at start); the values given,
    under their current names (warnings logged)."""
    from rcl_interfaces.msg import ParameterDescriptor

    given = {}
    for old, spec in aliases_for(kind).items():
        node.declare_parameter(old, None, ParameterDescriptor(
            description=f"Deprecated: renamed {spec.name} (read at start until the next release)",
            read_only=True, dynamic_typing=True))
        value = node.get_parameter(old).value
        if value is not None:
            given[old] = value
    renamed, warnings = resolve_aliases(given, kind)
    for note in warnings:
        node.get_logger().warning(note)
    return renamed


def declare_read_only(node: Any, specs: Iterable[ParamSpec]) -> Callable[[str], Any]:
    """Declare parameters a node reads once, at start (arm, world, page): read-only, so a later set is
    refused rather than ignored; a value out of its spec stops the start with the parameter's name.
    Returns ``value(name)``."""
    from rcl_interfaces.msg import ParameterDescriptor

    specs = tuple(specs)
    for spec in specs:
        _declare(node, spec, spec.default, ParameterDescriptor(description=spec.description, read_only=True))
    value = lambda name: node.get_parameter(name).value  # noqa: E731
    try:
        check_parameters(specs, value)
    except ValueError as exc:
        raise ParameterRefused(str(exc)) from None
    install_validation(node, specs, on_set_check(specs))
    if specs:
        warn_unknown_parameters(node, specs[0].nodes[0], specs)
    return value


#: per ROS context, the unknown start values already warned about: the nodes of one process
#: (``teaching_session``) share one context and each gets every -p, so each name is named once
_WARNED: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()
_WARNED_LOCK = threading.Lock()


def warn_unknown_parameters(node: Any, kind: str, specs: Iterable[ParamSpec]) -> list[str]:
    """Log one warning per start value (-p, YAML, launch) whose name no node of the package declares:
    ROS ignores it, so a misspelt name would otherwise leave the default in place without a word.
    A name already warned about by another node of the same context is not repeated. Returns the
    warnings."""
    given = getattr(node, "_parameter_overrides", None) or {}  # rclpy keeps the start values there
    names = [spec.name for spec in specs] + sorted(package_parameter_names())  # one -p reaches every node
    unknown = unknown_parameters(given, node.has_parameter)
    context = getattr(node, "context", None)
    if context is not None:
        with _WARNED_LOCK:
            try:
                warned = _WARNED.setdefault(context, set())
            except TypeError:  # a context that cannot be weakly referenced: warn every time
                warned = set()
            unknown = [name for name in unknown if name not in warned]
            warned.update(unknown)
    notes = [unknown_parameter_note(name, kind, names) for name in unknown]
    for note in notes:
        node.get_logger().warning(note)
    return notes


#: why ``use_sim_time`` is not switched on a running node: any process may call the parameter service,
#: and a node switched to a ``/clock`` that nobody publishes stops its timers (status, predictions' rate)
SIM_TIME_AT_START = ("use_sim_time is set when the node starts (-p use_sim_time:=true, or the launch file's "
                     "parameter), not while it runs: switched to a /clock nobody publishes, its timers would stop")


def install_validation(node: Any, specs: Iterable[ParamSpec],
                       check: Callable[[str, Any, dict[str, Any]], str | None]) -> None:
    """An on-set-parameters callback that refuses a value ``check(name, value, values after the
    change)`` finds a reason against, with that reason (a user's mistake: logged as a warning).

    rclpy checks a value's type against the declared one before any on-set callback, and refuses in
    its own terms ("Wrong parameter type, expected '2' got '4'"). So a pre-set callback puts the
    current value in place of one of the wrong type and notes why; the on-set callback then refuses
    the change with that reason, and nothing changes. A whole number for a decimal parameter is that
    number (``ros2 param set ... teach_timeout_s 30``). rclpy's own ``use_sim_time`` is refused too once
    the node runs (:data:`SIM_TIME_AT_START`); its value at start is taken as given."""
    from rcl_interfaces.msg import SetParametersResult

    by_name = {spec.name: spec for spec in specs}
    wrong = threading.local()  # the pre-set and on-set callbacks of one set run on one thread

    def _pre_set(params: list[Any]) -> list[Any]:
        wrong.reasons = {}
        _refuse_undeclared(node, params)
        try:
            return [_typed(node, by_name, p, wrong.reasons) for p in params]
        except Exception:  # never in the way of a set: rclpy then decides as without this callback
            wrong.reasons = {}
            return list(params)

    def _on_set(params: Iterable[Any]) -> SetParametersResult:
        noted, wrong.reasons = getattr(wrong, "reasons", {}), {}
        try:
            params = list(params)
            current = {n: node.get_parameter(n).value for n in by_name if node.has_parameter(n)}
            current.update({p.name: p.value for p in params if p.name in by_name})
            for p in params:
                if p.name == "use_sim_time" and p.value != node.get_parameter("use_sim_time").value:
                    node.get_logger().warning(f"parameter change refused: {SIM_TIME_AT_START}")
                    return SetParametersResult(successful=False, reason=SIM_TIME_AT_START)
                if p.name not in by_name:
                    continue  # not ours (qos_overrides...): ROS decides
                reason = noted.get(p.name) or check(p.name, p.value, current)
                if reason:
                    node.get_logger().warning(f"parameter change refused: {reason}")
                    return SetParametersResult(successful=False, reason=reason)
        except Exception as exc:  # a parameter request must never end the node
            return SetParametersResult(successful=False, reason=f"refused ({type(exc).__name__})")
        return SetParametersResult(successful=True)

    node.add_pre_set_parameters_callback(_pre_set)
    node.add_on_set_parameters_callback(_on_set)


def _refuse_undeclared(node: Any, params: list[Any]) -> None:
    """Refuse a set of a name the node never declared in words (``ros2 param set /learner max_clustres
    5``): rclpy's own refusal reads "Invalid access to undeclared parameter(s): []", without the name."""
    from rclpy.exceptions import ParameterNotDeclaredException

    if getattr(node, "_allow_undeclared_parameters", False):
        return
    missing = [p.name for p in params if not node.has_parameter(p.name)]
    if not missing:
        return
    hint = nearest_name_hint(missing[0], node.list_parameters([], 0).names)
    reason = (f"{node.get_name()} has no parameter {missing[0]!r}{hint}; "
              f"`ros2 param list {node.get_fully_qualified_name()}` lists them")

    class NoSuchParameter(ParameterNotDeclaredException):  # the parameter service answers with its text
        def __init__(self) -> None:
            Exception.__init__(self, reason)

    raise NoSuchParameter()


def _typed(node: Any, by_name: dict[str, ParamSpec], param: Any, reasons: dict[str, str]) -> Any:
    """``param`` as the set goes on with it: unchanged unless it is ours, settable, statically typed and
    of another type than declared; then a whole number for a decimal one as that decimal, else the
    current value (the change is refused with the reason noted in ``reasons``)."""
    from rclpy.parameter import Parameter

    spec = by_name.get(param.name)
    if spec is None or param.type_ == Parameter.Type.NOT_SET or not node.has_parameter(param.name):
        return param
    declared = node.describe_parameter(param.name)
    if declared.dynamic_typing or declared.read_only or param.type_.value == declared.type:
        return param  # rclpy refuses a read-only one in plain words; an on/off enum takes any type
    if declared.type == Parameter.Type.DOUBLE.value and param.type_ == Parameter.Type.INTEGER:
        return Parameter(param.name, value=float(param.value))
    reasons[param.name] = wrong_type(spec, param.value)
    return node.get_parameter(param.name)


def read_parameters(node: Any, kind: str) -> dict[str, Any]:
    """Current values of the parameters of ``kind`` as a plain dict (on/off enums normalised)."""
    return {spec.name: normalise(spec, node.get_parameter(spec.name).value) for spec in specs_for(kind)}


def parameter(node: Any, spec_name: str) -> Any:
    """One parameter's current value as the node uses it (on/off enums normalised)."""
    spec = next(s for s in PARAMS if s.name == spec_name)
    return normalise(spec, node.get_parameter(spec_name).value)
