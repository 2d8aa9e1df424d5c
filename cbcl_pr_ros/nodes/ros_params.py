"""Declares the service layer's parameter table on an rclpy node (descriptors, ranges, on-set check).

The table itself and its validation live in :mod:`cbcl_pr_ros.service.params` (no ROS there).
"""
from __future__ import annotations

from typing import Any, Iterable

from cbcl_pr_ros.service.params import ParamSpec, specs_for, validate_parameter

__all__ = ["declare_parameters", "read_parameters"]


def _descriptor(spec: ParamSpec):
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    desc = spec.description
    if spec.choices:
        desc += f" [{'|'.join(spec.choices)}]"
    d = ParameterDescriptor(description=desc, read_only=spec.read_only)
    if isinstance(spec.default, float) and spec.min is not None and spec.max is not None:
        d.floating_point_range = [FloatingPointRange(from_value=float(spec.min),
                                                     to_value=float(spec.max), step=0.0)]
    elif isinstance(spec.default, int) and not isinstance(spec.default, bool) \
            and spec.min is not None and spec.max is not None:
        d.integer_range = [IntegerRange(from_value=int(spec.min), to_value=int(spec.max), step=0)]
    return d


def declare_parameters(node: Any, kind: str, overrides: dict[str, Any] | None = None) -> None:
    """Declare the parameters of ``kind`` on an rclpy node and install the validating on-set callback.

    ``overrides`` replace the table's defaults (values from a YAML file still win over both).
    """
    from rcl_interfaces.msg import SetParametersResult

    overrides = overrides or {}
    for spec in specs_for(kind):
        default = overrides.get(spec.name, spec.default)
        node.declare_parameter(spec.name, default, _descriptor(spec))
        reason = validate_parameter(spec.name, node.get_parameter(spec.name).value)
        if reason:
            raise ValueError(f"parameter {reason}")

    def _on_set(params: Iterable[Any]) -> SetParametersResult:
        try:
            for p in params:
                reason = validate_parameter(p.name, p.value)
                if reason:
                    return SetParametersResult(successful=False, reason=reason)
        except Exception as exc:  # a parameter request must never end the node
            return SetParametersResult(successful=False, reason=f"refused ({type(exc).__name__})")
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(_on_set)


def read_parameters(node: Any, kind: str) -> dict[str, Any]:
    """Current values of the parameters of ``kind`` as a plain dict."""
    return {spec.name: node.get_parameter(spec.name).value for spec in specs_for(kind)}
