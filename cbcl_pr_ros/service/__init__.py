"""The learner's service logic without ROS: what happens between a request and the core learner.

Modules: ``learner_session`` (everything the learner node serves, behind one port the node
implements), ``controller`` (teach, classify, forget, rename, save, load, with every bad-input case decided
here), ``teaching``/``object_teaching`` (what a TeachClass learns),
``memory_files``, ``classify_scope``, ``fleet``, ``frame_waiters`` and small helpers. The parameter tables live in
:mod:`cbcl_pr_ros.settings`, the request limits every node applies in :mod:`cbcl_pr_ros.request_checks`. ROS nodes (``cbcl_pr_ros.nodes``) and the bag tools (``cbcl_pr_ros.bags``)
import this package; it imports neither.
"""
