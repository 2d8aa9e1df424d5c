"""cbcl_pr_ros: CBCL-PR few-shot lifelong object learning as a ROS 2 perception system.

The subpackages are layered: ``core`` (clustering, memory, rehearsal, classifiers; no ROS),
``features`` (backbones and preprocessing), ``evaluation`` (protocols, baselines, reports),
``robot`` (simulated world, kinematics, arm backends), ``bags`` (rosbag2 record/replay), and
``nodes`` (thin rclpy adapters; the only part that imports ROS).
"""

__version__ = "0.1.0"
