"""A person's first object, from the page alone: the time from the first command to the first object
the page names, in the simulated world, with nothing typed after that command.

    python -P bench/bench_first_object.py --label "this checkout"

Runs the README/quickstart command ``teaching_session --nodes extractor,learner,world,arm --page``
(only the page's port and a memory folder of its own are set), opens the page in Debian's chromium,
presses "Put objects on the table", taps the largest object, names it, presses Teach and waits until
the page names that object. Writes the times of each step (seconds from the command) to
``runs/bench/first_object.json`` under the label.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import REPO, out_path  # noqa: E402  (also puts the shared test helpers on the path)
from browser import make_browser  # noqa: E402
from ros_testing import Proc, fresh_domain, installed_executable, release_domain, ros_env  # noqa: E402


def _wait(pred, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return
        except Exception:  # noqa: BLE001 - not there yet
            pass
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


def run(tmp: Path) -> dict:
    from teaching_page.test_page_browser import click_box, text

    over = tmp / "page.yaml"
    over.write_text(yaml.safe_dump({"/**/teaching_page": {"ros__parameters": {"port": 0}}}))
    dom = fresh_domain()
    t: dict[str, float] = {}
    t0 = time.monotonic()
    proc = Proc([str(installed_executable("teaching_session")), "--nodes", "extractor,learner,world,arm", "--page",
                 "--ros-args", "--params-file", str(over)], ros_env(dom, {"ROS_HOME": str(tmp / "ros_home")}),
                tmp / "session.log")
    driver = None
    try:
        proc.wait_for("teaching page on http://127.0.0.1:", 300)
        url = re.search(r"teaching page on (http://127\.0\.0\.1:\d+/)", proc.output()).group(1)
        driver = make_browser(1100, 800)
        driver.get(url)
        _wait(lambda: text(driver, "connection") == "connected", 60, "the page")
        t["page_open_s"] = time.monotonic() - t0
        _wait(lambda: driver.find_element("id", "place").is_displayed(), 300, "the place button")
        _wait(lambda: driver.execute_script("return picture !== null"), 300, "the camera picture")
        t["picture_s"] = time.monotonic() - t0
        driver.find_element("id", "place").click()
        _wait(lambda: "put on the table" in text(driver, "message"), 120, "objects on the table")
        _wait(lambda: len(driver.execute_script("return objects")) >= 1, 300, "objects found")
        t["objects_found_s"] = time.monotonic() - t0
        time.sleep(1.0)
        boxes = driver.execute_script("return objects")
        big = max(boxes, key=lambda o: (o["box"][2] - o["box"][0]) * (o["box"][3] - o["box"][1]))
        for _ in range(5):
            click_box(driver, big["id"])
            if driver.find_element("id", "name").is_enabled():
                break
            time.sleep(0.5)
        driver.find_element("id", "name").send_keys("my thing")
        driver.find_element("id", "teach").click()
        _wait(lambda: "learned new class" in text(driver, "message"), 180, "the teach answer")
        t["taught_s"] = time.monotonic() - t0
        t["answer"] = text(driver, "message")
        _wait(lambda: any(o["known"] and o["label"] == "my thing" for o in driver.execute_script("return objects")),
              180, "the object named on the page")
        t["first_object_named_s"] = time.monotonic() - t0
        return t
    finally:
        if driver is not None:
            driver.quit()
        proc.stop(60)
        release_domain(dom)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--out", default=str(out_path("first_object.json")))
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="first_object_") as tmp:
        load0 = os.getloadavg()[0]
        times = run(Path(tmp))
    times.update({"machine": f"{platform.node()} ({os.cpu_count()} CPUs)", "load_avg_start": load0,
                  "load_avg_end": os.getloadavg()[0]})
    path = Path(opts.out)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[opts.label] = times
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(times, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
