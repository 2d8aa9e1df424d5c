"""A person's first minutes on the page, in a real browser against a fake robot: the camera wait says
where it waits and what to type; late detections are shown as late (never "no object") and stay
choosable; "left the view" goes when the object is back; a teach marks the object it used; the
simulated world's buttons and the way back after pointing. Skipped without chromium/chromedriver."""
from __future__ import annotations

import pytest
from browser import make_browser

from cbcl_pr_ros.teaching_page.app import PageConfig, PageServer
from cbcl_pr_ros.teaching_page.client import Outcome
from cbcl_pr_ros.teaching_page.state import Frame, PageState

from .fake_robot import FakeRobot, frame
from .test_page_browser import click_box, text, wait

pytestmark = pytest.mark.slow


class Robot(FakeRobot):
    def teach_track(self, label: str, track_id: int) -> Outcome:
        out = super().teach_track(label, track_id)
        return Outcome(out.ok, out.message + f"; the object at (200, 80)-(280, 170), track {track_id}", track_id,
                       (200, 80, 280, 170))

    def point_at(self, label: str) -> Outcome:
        self.calls.append(("point", label))
        self.view = {"at": "pointing", "label": label}
        return Outcome(True, f"pointing the right arm at object #5 ({label!r}, 100 % of its views)")

    def look_at_table(self) -> Outcome:
        self.calls.append(("look",))
        return Outcome(True, "right hand camera looks at [0.7, 0.0, -0.18] (table)")

    def place_objects(self) -> Outcome:
        self.calls.append(("place",))
        return Outcome(True, "put on the table: mug, duck, lemon")


@pytest.fixture
def page():
    state, robot = PageState(), Robot()
    server = PageServer(state, robot, PageConfig(port=0))
    server.start()
    driver = make_browser(820, 1100)
    yield driver, server, state, robot
    driver.quit()
    server.stop()


def test_the_camera_wait_names_the_topic_and_the_remap(page):
    driver, server, state, _ = page
    state.set_camera({"topic": "/robot1/image", "waiting": True, "hint": ""})
    driver.get(server.url)
    wait(lambda: "/robot1/image" in text(driver, "no-picture"), what="the topic waited on")
    state.set_camera({"topic": "/robot1/image", "waiting": True,
                      "hint": "No camera picture on '/robot1/image'. Image topics now: /camera/color/image_raw. "
                              "To use /camera/color/image_raw: teaching_page_node --ros-args -r "
                              "image:=/camera/color/image_raw (the node alone)."})
    wait(lambda: "-r image:=/camera/color/image_raw" in text(driver, "no-picture"), what="the remap hint")
    state.set_camera({"topic": "/robot1/image", "waiting": False, "hint": ""})
    state.set_frame(frame())
    wait(lambda: not driver.find_element("id", "no-picture").is_displayed(), what="the picture")


def test_late_detections_the_heading_and_the_taught_mark(page):
    driver, server, state, robot = page
    state.set_frame(frame())
    driver.get(server.url)
    wait(lambda: "#5 mug 0.90" in text(driver, "objects"), what="the objects")
    click_box(driver, 5)
    wait(lambda: "Object #5" in text(driver, "selected"), what="the choice")
    f = frame()
    state.set_frame(Frame(f.jpeg, f.width, f.height, 2.0, f.objects, 1, 0, "late", 4.0))
    wait(lambda: "found 4 s ago" in text(driver, "objects"), what="the late note")
    assert "No object found" not in text(driver, "objects") and "left the view" not in text(driver, "selected")
    state.set_frame(frame(objects=((9, "", False, 0.1, 10, 10, 60, 60),)))  # fresh, without #5
    wait(lambda: "left the view" in text(driver, "selected"), what="left the view")
    state.set_frame(frame())  # back
    wait(lambda: "left the view" not in text(driver, "selected") and "#5" in text(driver, "selected"),
         what="the heading after the object came back")
    driver.find_element("id", "name").send_keys("cup")
    driver.find_element("id", "teach").click()
    wait(lambda: "track 5" in text(driver, "message"), what="the answer naming the object")
    wait(lambda: driver.execute_script("return highlight && highlight.trackId") == 5, what="the taught mark")


def test_scene_buttons_and_the_way_back_after_pointing(page):
    driver, server, state, robot = page
    state.set_frame(frame())
    state.set_classes([{"name": "mug", "num_clusters": 1, "num_examples": 3}])
    state.set_robot({"arm": True, "look": True, "world": True})
    driver.get(server.url)
    wait(lambda: driver.find_element("id", "place").is_displayed(), what="the place button")
    driver.find_element("id", "place").click()
    wait(lambda: "put on the table: mug, duck, lemon" in text(driver, "message"), what="the place answer")
    state.set_view({"at": "pointing", "label": "mug"})
    wait(lambda: text(driver, "look") == "Back to the table", what="the way back")
    assert "points at “mug”" in text(driver, "view-note")
    driver.find_element("id", "look").click()
    wait(lambda: "looks at" in text(driver, "message"), what="the look answer")
    assert ("place",) in robot.calls and ("look",) in robot.calls
