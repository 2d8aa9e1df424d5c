"""PyBullet's native noise ("No inertial data for link", a stray "base") stays out of the user's terminal."""
from __future__ import annotations

import os


def test_loading_baxter_prints_nothing_native(capfd):
    from cbcl_pr_ros.robot.kinematics import BaxterKinematics

    capfd.readouterr()
    kin = BaxterKinematics("right")
    kin.close()
    out, err = capfd.readouterr()
    assert "inertial" not in out + err and "base" not in (out + err).split(), (out, err)


def test_silenced_window_restores_both_descriptors(capfd):
    from cbcl_pr_ros.robot.native_quiet import native_output_silenced

    with native_output_silenced():
        os.write(1, b"hidden-out\n")
        os.write(2, b"hidden-err\n")
    os.write(1, b"shown-out\n")
    os.write(2, b"shown-err\n")
    out, err = capfd.readouterr()
    assert "hidden" not in out + err
    assert "shown-out" in out and "shown-err" in err
