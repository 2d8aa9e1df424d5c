"""ROS 2 nodes of cbcl_pr_ros: thin rclpy adapters over the core and features layers.

Modules: ``feature_extractor`` (camera → FeatureVector, ExtractFeatures), ``learner`` (TeachClass,
Classify, ... over a CBCLPRLearner), ``session`` (all nodes in one process: ``teaching_session``),
and the ROS-free helpers they call: ``conversions``, ``controller``, ``params``, ``debug_image``,
``frame_collector``, ``feature_source``, plus ``qos``. See docs/nodes.md.

Nothing is imported here, so ``import cbcl_pr_ros.nodes.controller`` costs no rclpy import.
"""
