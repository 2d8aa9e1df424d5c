"""Declares the service layer's parameter table on an rclpy node (descriptors, ranges, on-set check).

The table itself and its validation live in :mod:`cbcl_pr_ros.settings.params` (no ROS there).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from cbcl_pr_ros.settings.params import (
    PARAMS,
    REMOVED,
    ParamSpec,
    aliases_for,
    cross_check,
    normalise,
    removed_parameters,
    resolve_aliases,
    specs_for,
    validate_parameter,
)
from cbcl_pr_ros.settings.robot_params import check_parameters, on_set_check

__all__ = ["declare_parameters", "declare_read_only", "read_parameters", "install_validation", "parameter"]


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
        node.declare_parameter(spec.name, default, _descriptor(spec))
        if spec.name in renamed and node.get_parameter(spec.name).value != renamed[spec.name]:
            node.get_logger().warning(f"{spec.name} is set too: its earlier name is ignored")
        reason = validate_parameter(spec.name, node.get_parameter(spec.name).value)
        if reason:
            raise ValueError(f"parameter {reason}")
    values = read_parameters(node, kind)
    reason = cross_check(values)
    if reason:
        raise ValueError(f"parameter {reason}")
    install_validation(node, specs, lambda name, value, current: validate_parameter(name, value, current))


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
        raise ValueError(reason)


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
        node.declare_parameter(spec.name, spec.default,
                               ParameterDescriptor(description=spec.description, read_only=True))
    value = lambda name: node.get_parameter(name).value  # noqa: E731
    check_parameters(specs, value)
    install_validation(node, specs, on_set_check(specs))
    return value


def install_validation(node: Any, specs: Iterable[ParamSpec],
                       check: Callable[[str, Any, dict[str, Any]], str | None]) -> None:
    """An on-set-parameters callback that refuses a value ``check(name, value, values after the
    change)`` finds a reason against, with that reason (a user's mistake: logged as a warning)."""
    from rcl_interfaces.msg import SetParametersResult

    names = [spec.name for spec in specs]

    def _on_set(params: Iterable[Any]) -> SetParametersResult:
        try:
            params = list(params)
            current = {n: node.get_parameter(n).value for n in names if node.has_parameter(n)}
            current.update({p.name: p.value for p in params if p.name in names})
            for p in params:
                if p.name not in names:
                    continue  # not ours (use_sim_time, qos_overrides...): ROS decides
                reason = check(p.name, p.value, current)
                if reason:
                    node.get_logger().warning(f"parameter change refused: {reason}")
                    return SetParametersResult(successful=False, reason=reason)
        except Exception as exc:  # a parameter request must never end the node
            return SetParametersResult(successful=False, reason=f"refused ({type(exc).__name__})")
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(_on_set)


def read_parameters(node: Any, kind: str) -> dict[str, Any]:
    """Current values of the parameters of ``kind`` as a plain dict (on/off enums normalised)."""
    return {spec.name: normalise(spec, node.get_parameter(spec.name).value) for spec in specs_for(kind)}


def parameter(node: Any, spec_name: str) -> Any:
    """One parameter's current value as the node uses it (on/off enums normalised)."""
    spec = next(s for s in PARAMS if s.name == spec_name)
    return normalise(spec, node.get_parameter(spec_name).value)
