"""The nodes' settings without ROS: every parameter's name, default, range and meaning, in tables.

Modules: ``params`` (the extractor's and the learner's parameters, their validation, parameter →
LearnerConfig, the default config file), ``robot_params`` (the arm's and the simulated world's) and
``node_configs`` (which YAML file configures which node). ``cbcl_pr_ros.nodes.ros_params`` declares
the tables on rclpy nodes; docs/nodes.md's parameter table is generated from them.
"""
