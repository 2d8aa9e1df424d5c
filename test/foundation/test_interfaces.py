"""The package's interfaces are really built by rosidl and import from rclpy's world."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.ros

MSGS = ["DetectedObject", "Detections", "ObjectFeatures", "FeatureVector", "ClassInfo", "Prediction", "LearnerStatus", "TeachingEvent"]
SRVS = ["PlaceObject", "ClearObjects", "TeachClass", "Classify", "ListClasses", "ForgetClass", "RenameClass", "SaveMemory",
        "LoadMemory", "ExtractFeatures", "PointAt"]


@pytest.mark.parametrize("name", MSGS)
def test_message_generated_with_typesupport(name: str) -> None:
    import cbcl_pr_ros.msg as msgs
    from rclpy.type_support import check_for_type_support

    cls = getattr(msgs, name)
    check_for_type_support(cls)  # raises if the C type support was not built and loaded
    assert cls.__module__.startswith("cbcl_pr_ros.msg")


@pytest.mark.parametrize("name", SRVS)
def test_service_generated_with_typesupport(name: str) -> None:
    import cbcl_pr_ros.srv as srvs
    from rclpy.type_support import check_for_type_support

    cls = getattr(srvs, name)
    check_for_type_support(cls)
    assert hasattr(cls, "Request") and hasattr(cls, "Response")


def test_teach_and_classify_fields_match_the_design() -> None:
    from cbcl_pr_ros.srv import Classify, TeachClass

    req = TeachClass.Request.get_fields_and_field_types()
    assert req == {"label": "string", "images": "sequence<sensor_msgs/Image>",
                   "features": "sequence<cbcl_pr_ros/FeatureVector>", "num_frames": "uint32",
                   "timeout_s": "float", "mode": "uint8", "track_id": "int64",
                   "rois": "sequence<sensor_msgs/RegionOfInterest>"}
    assert TeachClass.Request().track_id == -1  # default: no track
    assert TeachClass.Request().mode == TeachClass.Request.MODE_DEFAULT
    res = TeachClass.Response.get_fields_and_field_types()
    for field in ("success", "message", "num_clusters", "num_classes", "learning_time_s"):
        assert field in res
    cres = Classify.Response.get_fields_and_field_types()
    for field in ("label", "confidence", "known", "top_labels", "top_scores"):
        assert field in cres


def test_feature_vector_carries_what_a_remote_learner_needs() -> None:
    from cbcl_pr_ros.msg import FeatureVector

    fields = FeatureVector.get_fields_and_field_types()
    assert fields["header"] == "std_msgs/Header"
    assert fields["values"] == "sequence<float>"
    assert {"backbone", "preprocessing", "dimension"} <= set(fields)


def test_teaching_event_constants() -> None:
    from cbcl_pr_ros.msg import TeachingEvent

    assert (TeachingEvent.TEACH, TeachingEvent.CLASSIFY, TeachingEvent.FORGET, TeachingEvent.RENAME) == (0, 1, 2, 3)


def test_interface_definitions_are_installed_in_the_ament_index() -> None:
    from ament_index_python.packages import get_package_share_directory

    share = Path(get_package_share_directory("cbcl_pr_ros"))
    for name in MSGS:
        assert (share / "msg" / f"{name}.msg").is_file()
    for name in SRVS:
        assert (share / "srv" / f"{name}.srv").is_file()
    assert (share / "package.xml").is_file()
