"""Benchmark of the bag tools -> runs/bench/bags.json.

1. Replay timing at 1x: a 640x480 rgb8 camera bag at 30 Hz (3 s) replayed by ``replay_session``;
   arrival times at a RELIABLE subscriber in this process (the middleware's reception timestamps)
   vs the recorded offsets, and the
   replay's own publish lateness (p50/p95/max, ms).
2. The same with a teaching session (simulated world, service calls to a live learner running in
   a ``teaching_session`` process), the worst case for timing (teaches retrain meanwhile).
3. Offline evaluation of that session: wall time, frames/s, and that two runs give equal numbers.

Run: ``python bench/bench_bags.py`` (about 1-2 minutes; needs the built package and rclpy).
"""
from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from cbcl_pr_ros.evaluation.experiments import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]




def subscriber_timing(bag: Path, extra: list[str], env: dict, tmp: Path) -> dict:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    from cbcl_pr_ros.bags.replay_plan import timing_summary
    from cbcl_pr_ros.stamps import stamp_to_ns

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    arrivals: list[tuple[float, int]] = []
    node = rclpy.create_node("bench_probe", context=ctx)
    node.create_subscription(Image, "/camera/image_raw",
                             lambda m, info: arrivals.append((info["received_timestamp"] * 1e-9,
                                                              stamp_to_ns(m.header.stamp))),
                             QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE))
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    th = threading.Thread(target=lambda: _spin(ex), daemon=True)
    th.start()
    report = tmp / f"report{len(list(tmp.iterdir()))}.json"
    out = subprocess.run([sys.executable, "-m", "cbcl_pr_ros.nodes.replay", str(bag), "--report", str(report),
                          "--discovery-wait", "10", "--service-timeout", "120", *extra],
                         env=env, cwd=tmp, capture_output=True, text=True, timeout=600)
    time.sleep(0.5)
    ex.shutdown()
    th.join(5)
    rclpy.shutdown(context=ctx)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    rep = json.loads(report.read_text())
    # Log time = header stamp in these bags, so stamps give the recorded offsets.
    t = np.array([a for a, _ in arrivals])
    rec = np.array([(s - arrivals[0][1]) * 1e-9 for _, s in arrivals])
    d = t - rec
    return {"received": len(arrivals), "published": sum(rep["published"].values()),
            "subscriber": timing_summary(d - np.median(d)), "publisher": rep["publish_timing"],
            "live_accuracy": rep.get("accuracy")}


def _spin(ex) -> None:
    try:
        ex.spin()
    except Exception:
        pass


def main() -> int:
    from cbcl_pr_ros.bags import TeachingBagWriter
    from cbcl_pr_ros.bags.offline_eval import evaluate_bag
    from cbcl_pr_ros.bags.simulate import SessionPlan, default_categories, simulate_session

    load0 = os.getloadavg()
    domain = 1 + os.getpid() % 200
    os.environ.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(ROOT / "config" / "fastdds_profile.xml"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    results: dict = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rng = np.random.default_rng(0)
        with TeachingBagWriter(tmp / "camera") as w:
            for i in range(90):
                w.write_image("/camera/image_raw", rng.integers(0, 256, (480, 640, 3), dtype=np.uint8),
                              1_700_000_000 * 10**9 + i * 33_333_333)
        results["camera_640x480_30hz_1x"] = subscriber_timing(tmp / "camera", ["--no-events"], env, tmp)

        sim = tmp / "session"
        simulate_session(sim, SessionPlan(tuple(default_categories(5)), shots=5, test_views=3, image_size=224))
        cfg = (ROOT / "config" / "cbcl_pr.yaml").read_text().splitlines()
        cfg = [('    memory_path: ""' if ln.strip().startswith("memory_path:") else ln) for ln in cfg]
        (tmp / "cfg.yaml").write_text("\n".join(cfg) + "\n")
        log = open(tmp / "session.log", "wb")
        sess = subprocess.Popen([sys.executable, "-m", "cbcl_pr_ros.nodes.session", "--config",
                                 str(tmp / "cfg.yaml"), "--camera-topic", "/camera/image_raw"],
                                env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            results["teaching_session_224_10hz_1x_with_learner"] = subscriber_timing(
                sim, ["--min-subscribers", "2"], env, tmp)
        finally:
            sess.send_signal(signal.SIGINT)
            try:
                sess.wait(15)
            except subprocess.TimeoutExpired:
                sess.kill()
            log.close()
        t0 = time.perf_counter()
        r1 = evaluate_bag(sim, config=tmp / "cfg.yaml")
        wall = time.perf_counter() - t0
        r2 = evaluate_bag(sim, config=tmp / "cfg.yaml")
        results["offline_eval"] = {
            "events": r1.n_events, "frames": r1.n_frames_extracted, "wall_s": wall,
            "feature_s": r1.feature_seconds, "learner_s": r1.learner_seconds,
            "frames_per_s": r1.n_frames_extracted / wall, "accuracy": r1.accuracy,
            "accuracy_per_increment": [i.accuracy for i in r1.increments],
            "deterministic": r1.to_dict(timings=False) == r2.to_dict(timings=False)}
    results["machine"] = {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(), "loadavg_start": load0,
                          "loadavg_end": os.getloadavg(), "python": platform.python_version()}
    out = out_path("bags.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
