"""The page in a real browser (Debian's chromium via selenium) against a fake robot: tap a box,
name it, the right track is taught; bad input shows a message on the page; a page whose server
went away reconnects; two tabs show the same thing; it fits a tablet-width screen (issue 21).
Skipped, with the reason, where no chromium/chromedriver can be had."""
from __future__ import annotations

import time

import pytest
from browser import make_browser

from cbcl_pr_ros.teaching_page.app import PageConfig, PageServer
from cbcl_pr_ros.teaching_page.state import PageState

from .fake_robot import FakeRobot, frame

pytestmark = pytest.mark.slow


def wait(pred, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return
        except Exception:  # noqa: BLE001 - element not there yet
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def click_box(driver, track_id: int) -> None:
    """A real pointer click at the centre of a drawn box (image pixels -> CSS pixels)."""
    from selenium.webdriver.common.action_chains import ActionChains

    canvas = driver.find_element("id", "camera")
    x, y = driver.execute_script("""
        const o = objects.find((o) => o.id === arguments[0]); const c = document.getElementById('camera');
        const r = c.getBoundingClientRect(); const s = r.width / c.width;
        return [((o.box[0] + o.box[2]) / 2) * s - r.width / 2, ((o.box[1] + o.box[3]) / 2) * s - r.height / 2];
    """, track_id)
    ActionChains(driver).move_to_element_with_offset(canvas, int(x), int(y)).click().perform()


def text(driver, id_: str) -> str:
    return driver.find_element("id", id_).text


@pytest.fixture
def page():
    state, robot = PageState(), FakeRobot()
    server = PageServer(state, robot, PageConfig(port=0))
    server.start()
    state.set_frame(frame())
    driver = make_browser(820, 1100)  # a tablet held upright
    yield driver, server, state, robot
    driver.quit()
    server.stop()


def test_tap_name_teach_and_bad_input_in_the_browser(page):
    driver, server, state, robot = page
    driver.get(server.url)
    wait(lambda: text(driver, "connection") == "connected", what="the websocket")
    wait(lambda: "#3 What is this?" in text(driver, "objects"), what="the unknown object listed")
    assert "#5 mug 0.90" in text(driver, "objects")
    # tablet width: nothing wider than the screen
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")

    click_box(driver, 3)
    assert "What is this?" in text(driver, "selected")
    name = driver.find_element("id", "name")
    name.send_keys("   ")
    driver.find_element("id", "teach").click()
    wait(lambda: "empty name" in text(driver, "message"), what="the empty-name message")
    driver.execute_script("document.getElementById('name').value = 'x'.repeat(10000)")
    driver.find_element("id", "teach").click()
    wait(lambda: "the most is 128" in text(driver, "message"), what="the long-name message")
    assert robot.calls == []

    name.clear()
    name.send_keys("teapot")
    driver.find_element("id", "teach").click()
    wait(lambda: "learned new class 'teapot'" in text(driver, "message"), what="the teach answer")
    assert robot.calls == [("track", "teapot", 3)]
    wait(lambda: "learned new class 'teapot'" in text(driver, "st-last"), what="last teach in the status")

    # the object leaves the view: a stale choice is refused by the server with a message
    click_box(driver, 5)
    state.set_frame(frame(objects=((9, "", False, 0.1, 10, 10, 60, 60),)))
    wait(lambda: "left the view" in text(driver, "selected"), what="the stale-choice notice")
    name = driver.find_element("id", "name")
    name.send_keys("cup")
    driver.find_element("id", "teach").click()
    wait(lambda: "no longer in view" in text(driver, "message"), what="the stale-track message")
    assert robot.calls == [("track", "teapot", 3)]


def test_the_first_class_counts_one_view_and_one_cluster(page):
    """After the first teach the page read "cup (1 views, 1 clusters)" and "1 clusters": a person
    writes the singular."""
    driver, server, state, _ = page
    driver.get(server.url)
    wait(lambda: text(driver, "connection") == "connected", what="the websocket")
    state.set_classes([{"name": "cup", "num_clusters": 1, "num_examples": 1}])
    state.set_status({"num_classes": 1, "num_clusters": 1, "memory_bytes": 13000, "model_version": 2})
    wait(lambda: "cup (1 view, 1 cluster)" in text(driver, "classes"), what="the singular counts")
    wait(lambda: text(driver, "st-memory") == "1 cluster, 13 kB", what="the memory line")


def test_a_class_list_cut_by_the_page_says_how_many_it_leaves_out(page):
    """Past the page's bound (state.MAX_SHOWN_CLASSES) the learner's newest classes are not listed:
    the page says how many, instead of ending the list as if it were whole."""
    driver, server, state, _ = page
    driver.get(server.url)
    wait(lambda: text(driver, "connection") == "connected", what="the websocket")
    state.set_classes([{"name": f"cup{i}", "num_clusters": 1, "num_examples": 5} for i in range(3)], total=5)
    wait(lambda: "and 2 more classes not listed here" in text(driver, "classes"), what="the unlisted count")
    state.set_classes([{"name": "cup0", "num_clusters": 1, "num_examples": 5}])
    wait(lambda: "not listed" not in text(driver, "classes"), what="a whole list without the line")


def test_two_tabs_share_state_and_a_page_reconnects(page):
    driver, server, state, robot = page
    driver.get(server.url)
    wait(lambda: text(driver, "connection") == "connected", what="the websocket")
    first = driver.current_window_handle
    driver.switch_to.new_window("tab")
    driver.get(server.url)
    wait(lambda: text(driver, "connection") == "connected", what="the second tab's websocket")
    state.set_classes([{"name": "kettle", "num_clusters": 2, "num_examples": 10}])
    wait(lambda: "kettle (10 views, 2 clusters)" in text(driver, "classes"), what="the class in tab 2")
    driver.switch_to.window(first)
    wait(lambda: "kettle (10 views, 2 clusters)" in text(driver, "classes"), what="the class in tab 1")

    # "Point at" appears once an arm answers, and asks the robot to point
    assert "Point at" not in text(driver, "classes")
    state.set_robot({"arm": True})
    wait(lambda: "Point at" in text(driver, "classes"), what="the Point at button")
    driver.find_element("xpath", "//li[@data-name='kettle']//button[text()='Point at']").click()
    wait(lambda: "no arm in this test" in text(driver, "message"), what="the point answer")
    assert robot.calls == [("point", "kettle")]

    # the server goes away and comes back on the same port: the page says so and reconnects
    port = server.port
    server.stop()
    wait(lambda: text(driver, "connection") == "reconnecting…", what="the lost connection shown")
    server2 = PageServer(state, robot, PageConfig(port=port))
    server2.start()
    try:
        wait(lambda: text(driver, "connection") == "connected", timeout=30, what="the reconnection")
        state.set_classes([{"name": "kettle", "num_clusters": 2, "num_examples": 10},
                           {"name": "spoon", "num_clusters": 1, "num_examples": 5}])
        wait(lambda: "spoon" in text(driver, "classes"), what="a change after the reconnection")
    finally:
        server2.stop()


def test_a_page_over_max_pages_says_why_it_is_not_connected():
    state, robot = PageState(), FakeRobot()
    server = PageServer(state, robot, PageConfig(port=0, max_pages=1))
    server.start()
    state.set_frame(frame())
    driver = make_browser(820, 1100)
    try:
        driver.get(server.url)
        wait(lambda: text(driver, "connection") == "connected", what="the first page's websocket")
        first = driver.current_window_handle
        driver.switch_to.new_window("tab")
        driver.get(server.url)
        wait(lambda: "max_pages" in text(driver, "connection"), what="the second page's reason")
        assert "too many pages open (1 of at most 1" in text(driver, "connection")
        driver.close()  # the second tab; the first page is still served
        driver.switch_to.window(first)
        assert text(driver, "connection") == "connected"
    finally:
        driver.quit()
        server.stop()
