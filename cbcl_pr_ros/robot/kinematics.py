"""Inverse kinematics for pointing at an object and for aiming the hand camera, on Baxter's model.

A private kinematic copy of Baxter (no meshes, its own PyBullet client) is used, so solving never
moves the arm that is being commanded: a target that cannot be reached is refused with a clear
error and nothing moves. Every solution is checked by forward kinematics before it is returned.

The pointing ray is the hand's z axis (out of the gripper), starting at the hand.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from . import baxter
from .assets import baxter_urdf
from .world import look_at_quaternion, quaternion_to_matrix
from .native_quiet import import_pybullet, native_output_silenced

__all__ = ["Unreachable", "PointingSolution", "BaxterKinematics", "ray_distance"]


class Unreachable(ValueError):
    """The arm cannot reach a pose that satisfies the request within its joint limits."""


@dataclass(frozen=True)
class PointingSolution:
    """Joint targets for one arm and how well the resulting pose does its job."""

    joint_names: tuple[str, ...]
    joint_positions: tuple[float, ...]
    hand_position: np.ndarray
    ray_direction: np.ndarray
    error_m: float  # distance from the target to the ray (pointing) or position error (camera)

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.joint_names, self.joint_positions))


def ray_distance(origin: Sequence[float], direction: Sequence[float], point: Sequence[float]) -> float:
    """Distance from ``point`` to the half-line from ``origin`` along ``direction``."""
    o, d, q = (np.asarray(v, float) for v in (origin, direction, point))
    d = d / np.linalg.norm(d)
    t = max(0.0, float(np.dot(q - o, d)))
    return float(np.linalg.norm(q - (o + t * d)))


class BaxterKinematics:
    """Baxter's arms for IK/FK. One instance per thread (PyBullet clients are not thread-safe)."""

    def __init__(self, side: str = "right") -> None:
        p = import_pybullet()
        self._p = p
        self.side = baxter.check_side(side)
        self._cid = p.connect(p.DIRECT)
        with native_output_silenced():  # "No inertial data for link" for Baxter's massless links
            self._body = p.loadURDF(str(baxter_urdf(kinematics_only=True)), useFixedBase=True,
                                    physicsClientId=self._cid)
        self._movable: list[int] = []
        self._index: dict[str, int] = {}
        self._link: dict[str, int] = {}
        lo, hi = [], []
        for j in range(p.getNumJoints(self._body, physicsClientId=self._cid)):
            info = p.getJointInfo(self._body, j, physicsClientId=self._cid)
            self._link[info[12].decode()] = j
            if info[2] != p.JOINT_FIXED:
                self._index[info[1].decode()] = j
                self._movable.append(j)
                lo.append(float(info[8]))
                hi.append(float(info[9]))
        self._lo, self._hi = np.array(lo), np.array(hi)
        self.joint_names = tuple(baxter.arm_joint_names(side))
        self.limits = {n: (self._lo[self._movable.index(self._index[n])], self._hi[self._movable.index(self._index[n])])
                       for n in self.joint_names}

    def close(self) -> None:
        if self._cid >= 0:
            self._p.disconnect(physicsClientId=self._cid)
            self._cid = -1

    def __del__(self) -> None:  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------ FK
    def _set(self, positions: Mapping[str, float]) -> None:
        for n, v in positions.items():
            self._p.resetJointState(self._body, self._index[n], float(v), physicsClientId=self._cid)

    def link_pose(self, positions: Mapping[str, float], link: str) -> tuple[np.ndarray, np.ndarray]:
        """Forward kinematics: pose of ``link`` with the arm at ``positions``."""
        self._set(positions)
        st = self._p.getLinkState(self._body, self._link[link], computeForwardKinematics=True, physicsClientId=self._cid)
        return np.array(st[4]), np.array(st[5])

    # ------------------------------------------------------------------ IK
    def _solve(self, link: str, position: np.ndarray, quaternion: np.ndarray, seed: Mapping[str, float]) -> dict[str, float]:
        p = self._p
        self._set(seed)
        ranges = (self._hi - self._lo).tolist()
        rest = [float(seed.get(n, 0.0)) for n in self._ordered_names()]
        sol = None
        for _ in range(6):  # re-linearise from the last solution: PyBullet's IK is one damped step sequence
            sol = p.calculateInverseKinematics(self._body, self._link[link], position.tolist(), quaternion.tolist(),
                                               lowerLimits=self._lo.tolist(), upperLimits=self._hi.tolist(),
                                               jointRanges=ranges, restPoses=rest, maxNumIterations=200,
                                               residualThreshold=1e-5, physicsClientId=self._cid)
            self._set({n: v for n, v in zip(self._ordered_names(), sol) if n in self.joint_names})
        names = self._ordered_names()
        out = {n: float(v) for n, v in zip(names, sol) if n in self.joint_names}
        return out

    def _seeds(self, seed: Mapping[str, float] | None) -> list[dict[str, float]]:
        """IK starts: the given joint positions (the arm's ``joint_states``), then the neutral pose
        (every joint at 0, within its limits). The solver starts from the arm's last state, so the
        neutral pose is set explicitly: from some starts (a pose at the joint limits, or positions a
        stranger published) PyBullet's IK finds no solution that the neutral start finds, and the
        seed must only ever help."""
        neutral = {n: float(np.clip(0.0, lo, hi)) for n, (lo, hi) in self.limits.items()}
        given = {n: float(v) for n, v in (seed or {}).items()}
        return [given, neutral] if given else [neutral]

    def _ordered_names(self) -> list[str]:
        inv = {j: n for n, j in self._index.items()}
        return [inv[j] for j in self._movable]

    def _within_limits(self, q: Mapping[str, float]) -> bool:
        return all(self.limits[n][0] - 1e-6 <= v <= self.limits[n][1] + 1e-6 for n, v in q.items())

    def point_at(self, target: Sequence[float], seed: Mapping[str, float] | None = None, tolerance_m: float = 0.03,
                 standoffs: Sequence[float] = (0.18, 0.25, 0.32), max_reach_m: float = 1.25,
                 min_forward_m: float = 0.3) -> PointingSolution:
        """Joint targets that aim the hand's z axis at ``target`` from a standoff.

        Several standoffs and approach elevations are tried; the solution with the smallest
        ray-to-target distance (checked by FK) within the joint limits wins. Raises
        :class:`Unreachable` when none points within ``tolerance_m``.
        """
        tgt = np.asarray(target, float)
        if tgt.shape != (3,) or not np.all(np.isfinite(tgt)):
            raise ValueError(f"target must be 3 finite numbers, got {target!r}")
        if tgt[0] < min_forward_m:
            raise Unreachable(f"target {tgt.round(3).tolist()} is not in front of the robot (x < {min_forward_m} m)")
        shoulder, _ = self.link_pose({}, f"{self.side}_upper_shoulder")
        if np.linalg.norm(tgt - shoulder) > max_reach_m + max(standoffs):
            raise Unreachable(f"target {tgt.round(3).tolist()} is {np.linalg.norm(tgt - shoulder):.2f} m from the "
                              f"{self.side} shoulder, beyond the arm's reach")
        hand = f"{self.side}_hand"
        best: PointingSolution | None = None
        horiz = tgt[:2] - shoulder[:2]
        az = math.atan2(horiz[1], horiz[0])
        for start in self._seeds(seed):
            for elev in (math.radians(55), math.radians(35), math.radians(75)):
                d = np.array([math.cos(elev) * math.cos(az), math.cos(elev) * math.sin(az), -math.sin(elev)])
                for s in standoffs:
                    pos = tgt - s * d
                    quat = look_at_quaternion(pos, tgt)
                    q = self._solve(hand, pos, quat, start)
                    if not self._within_limits(q):
                        continue
                    hp, hq = self.link_pose(q, hand)
                    ray = quaternion_to_matrix(hq)[:, 2]
                    err = ray_distance(hp, ray, tgt)
                    # the hand must be in front of the target along the ray, not past it
                    if np.dot(tgt - hp, ray) <= 0.02:
                        continue
                    if best is None or err < best.error_m:
                        best = PointingSolution(self.joint_names, tuple(q[n] for n in self.joint_names), hp, ray, err)
                    if err < 0.005:
                        return best
            if best is not None and best.error_m <= tolerance_m:
                break
        if best is None or best.error_m > tolerance_m:
            got = "no solution within joint limits" if best is None else f"best ray misses it by {best.error_m * 100:.1f} cm"
            raise Unreachable(f"cannot point the {self.side} arm at {tgt.round(3).tolist()}: {got}")
        return best

    def aim_camera(self, eye: Sequence[float], target: Sequence[float], seed: Mapping[str, float] | None = None,
                   tolerance_m: float = 0.02) -> PointingSolution:
        """Joint targets that put the hand camera at ``eye`` looking at ``target``."""
        eye_a, tgt = np.asarray(eye, float), np.asarray(target, float)
        link = f"{self.side}_hand_camera"
        # Baxter's hand camera frame is the hand's rotated 90° about z; keep the image's "up" forward.
        quat = look_at_quaternion(eye_a, tgt, up_hint=(1.0, 0.0, 0.0))
        for start in self._seeds(seed):
            q = self._solve(link, eye_a, quat, start)
            cp, cq = self.link_pose(q, link)
            ray = quaternion_to_matrix(cq)[:, 2]
            err = max(float(np.linalg.norm(cp - eye_a)), ray_distance(cp, ray, tgt))
            if self._within_limits(q) and err <= tolerance_m:
                break
        if not self._within_limits(q) or err > tolerance_m:
            raise Unreachable(f"cannot put the {self.side} hand camera at {eye_a.round(3).tolist()} looking at "
                              f"{tgt.round(3).tolist()} (error {err * 100:.1f} cm)")
        return PointingSolution(self.joint_names, tuple(q[n] for n in self.joint_names), cp, ray, err)
