"""Fixtures of the robot layer's ROS tests; the helpers themselves are ros_testing's
(test/support/ros_testing.py, shared by every test directory)."""
from __future__ import annotations

import pytest
from ros_testing import REPO, Client, Proc, fresh_domain, ros_env, wait_until

NodeProcess = Proc  # the robot tests' name for it
__all__ = ["REPO", "NodeProcess", "fresh_domain", "ros_env", "wait_until"]


@pytest.fixture
def ros_client(request):
    clients: list[Client] = []

    def make(domain: int) -> Client:
        c = Client(domain, "robot_test_client")
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()
