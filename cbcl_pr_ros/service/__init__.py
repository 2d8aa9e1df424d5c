"""The learner's service logic without ROS: what happens between a request and the core learner.

Modules: ``controller`` (teach, classify, forget, rename, save, load, with every bad-input case decided
here) and ``params`` (the parameter table, its validation, parameter → LearnerConfig, the default
config file). ROS nodes (``cbcl_pr_ros.nodes``) and the bag tools (``cbcl_pr_ros.bags``) import this
package; it imports neither.
"""
