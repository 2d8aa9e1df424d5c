"""The teaching page: a browser page on which a person teaches the robot by clicking an object.

ROS-free. :mod:`.state` holds what the page shows (latest frame, detections, learner
status) and wakes the connected pages; :mod:`.requests` checks every page request; :mod:`.app` is
the aiohttp application and the server thread; :class:`TeachingClient` is what the app calls to
teach, rename, forget and point. The ROS side (``cbcl_pr_ros.nodes.teaching_page``) implements the
client with the learner's and the arm's services. docs/teaching_page.md says how to use it.
"""
from cbcl_pr_ros.teaching_page.client import Outcome, TeachingClient
from cbcl_pr_ros.teaching_page.state import PageState

__all__ = ["Outcome", "TeachingClient", "PageState"]
