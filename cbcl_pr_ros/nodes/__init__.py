"""ROS 2 nodes of cbcl_pr_ros: thin rclpy adapters over the core and features layers.

Modules: ``feature_extractor`` (camera → FeatureVector, ExtractFeatures), ``learner`` (TeachClass,
Classify, ... over a CBCLPRLearner), ``session`` (all nodes in one process: ``teaching_session``),
and the helpers they call: ``conversions``, ``ros_params``, ``debug_image``,
``frame_collector``, ``feature_source``, plus ``qos`` and ``lifecycle`` (the managed-node frame of
the extractor and the learner). See docs/nodes.md.

The ROS-free service logic (controller, parameter table) lives in :mod:`cbcl_pr_ros.service`.
"""
