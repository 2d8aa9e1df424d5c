"""ROS 2 nodes of cbcl_pr_ros: thin rclpy adapters over the core and features layers.

Modules: ``feature_extractor`` (camera → FeatureVector, ExtractFeatures), ``learner`` (TeachClass,
Classify, ... over the ROS-free learner session), ``session`` (all nodes in one process:
``teaching_session``), and the helpers they call: ``conversions``, ``ros_params``, ``debug_image``,
``feature_source``, plus ``qos`` and ``lifecycle`` (the managed-node frame of the extractor and the
learner). See docs/nodes.md.

The ROS-free service logic (the learner session, controller) lives in :mod:`cbcl_pr_ros.service`.
"""
