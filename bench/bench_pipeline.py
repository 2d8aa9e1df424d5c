#!/usr/bin/env python3
"""Camera -> extractor -> learner throughput and latency, in separate processes and in one process.

A 640x480 rgb8 stream at 30 Hz (sensor-data QoS, as a camera publishes) goes through the real nodes
(EfficientNet-Lite0 on ONNX Runtime, CBCL-PR learner with 100 classes) on a fresh ROS domain.
Measured per mode:
  * frames published / features computed / predictions received, frames dropped;
  * sustained prediction rate (predictions per second over the stream);
  * latency image stamp -> prediction received, p50/p95/max (same host clock);
  * TeachClass time with 100 known classes: 5 images in the request (extraction + learning) and
    5 feature vectors in the request (learning only), client round trip and the node's learning_time_s.
Mode ``learner_rate``: the learner alone (shipped defaults, then ``max_prediction_rate: 30``) fed
feature vectors at the camera rate with a camera's jitter (each frame early or late by N(0, 4 ms)):
the prediction rate the learner's rate limit lets through, independent of the backbone's speed.
The 100 classes are pre-taught by feature requests: real EfficientNet vectors of four photos, each class
shifted by its own random offset. Results: bench/results/pipeline.json (machine and load included;
other agents share this machine's CPU, so read the load figures beside the timings).

    python bench/bench_pipeline.py [--seconds 20] [--rate 30] [--modes separate,one_process,learner_rate]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from cbcl_pr_ros.evaluation.experiments import machine_info

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "cbcl_pr.yaml"




def executable(name: str) -> Path:
    import cbcl_pr_ros

    # not resolve(): with --symlink-install the package files link back into the source tree
    for parent in list(Path(cbcl_pr_ros.__file__).absolute().parents) + [REPO / "install" / "cbcl_pr_ros"]:
        cand = parent / "lib" / "cbcl_pr_ros" / name
        if cand.exists():
            return cand
    raise SystemExit(f"{name} is not installed: run scripts/setup and source scripts/env.sh")


def start(name: str, domain: int, workdir: Path, params: dict, extra: list[str] | None = None) -> subprocess.Popen:
    import yaml

    over = workdir / f"{name}.params.yaml"
    over.write_text(yaml.safe_dump({f"/**/{n}": {"ros__parameters": dict(params)}
                                    for n in ("learner", "feature_extractor")}))
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1")
    env.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "config" / "fastdds_profile.xml"))
    args = [sys.executable, str(executable(name))] + (extra or []) + \
        ["--ros-args", "--params-file", str(CONFIG), "--params-file", str(over)]
    log = open(workdir / f"{name}.log", "wb")
    return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def stop(p: subprocess.Popen) -> int:
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    return p.returncode


def views(n: int, seed: int) -> list[tuple[str, np.ndarray]]:
    import cv2
    import skimage.data

    photos = {"cat": skimage.data.chelsea(), "coffee": skimage.data.coffee(),
              "rocket": skimage.data.rocket(), "astronaut": skimage.data.astronaut()}
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        name = list(photos)[i % 4]
        img = photos[name][:, :, :3]
        h, w = img.shape[:2]
        s = rng.uniform(0.6, 0.95)
        ch, cw = int(h * s), int(w * s)
        y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        out.append((name, np.ascontiguousarray(cv2.resize(img[y:y + ch, x:x + cw], (640, 480)))))
    return out


class Bench:
    def __init__(self, domain: int) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import MultiThreadedExecutor

        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node("bench_pipeline", context=self.ctx)
        self.ex = MultiThreadedExecutor(num_threads=2, context=self.ctx)
        self.ex.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        try:
            while self.ctx.ok():
                self.ex.spin_once(timeout_sec=0.05)
        except Exception:
            pass

    def call(self, srv, name, req, timeout=300.0):
        cli = self.node.create_client(srv, name)
        try:
            if not cli.wait_for_service(timeout_sec=timeout):
                raise TimeoutError(f"{name} not available")
            done = threading.Event()
            fut = cli.call_async(req)
            fut.add_done_callback(lambda _f: done.set())
            if not done.wait(timeout):
                raise TimeoutError(f"{name} did not answer")
            return fut.result()
        finally:
            self.node.destroy_client(cli)

    def close(self) -> None:
        import rclpy

        self.ex.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.ctx)


def run_mode(mode: str, seconds: float, rate: float, workdir: Path) -> dict:
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from cbcl_pr_ros.msg import Prediction
    from cbcl_pr_ros.nodes.conversions import (features_from_msgs, make_feature_msg, ns_to_stamp,
                                               rgb_to_image_msg, stamp_to_ns)
    from cbcl_pr_ros.srv import ExtractFeatures, TeachClass
    from std_msgs.msg import Header

    domain = random.Random(time.time_ns()).randint(1, 200)
    workdir.mkdir(parents=True, exist_ok=True)
    params = {"memory_path": str(workdir / "memory.safetensors"), "no_frame_warning_s": 0.0}
    if mode == "separate":
        procs = [start("feature_extractor_node", domain, workdir, params),
                 start("learner_node", domain, workdir, params)]
    else:
        procs = [start("teaching_session", domain, workdir, params, ["--nodes", "extractor,learner"])]
    b = Bench(domain)
    res: dict = {"mode": mode, "ros_domain_id": domain}
    try:
        t0 = time.perf_counter()
        b.call(ExtractFeatures, "extract_features", ExtractFeatures.Request(images=[]), timeout=300)
        b.call(TeachClass, "teach_class", TeachClass.Request(label=""), timeout=300)
        res["startup_s"] = round(time.perf_counter() - t0, 2)

        # real vectors of the four photos, then 100 classes as shifted copies, taught by features
        imgs = views(20, seed=1)
        r = b.call(ExtractFeatures, "extract_features", ExtractFeatures.Request(
            images=[rgb_to_image_msg(im, Header()) for _, im in imgs]))
        base = features_from_msgs(r.features)
        rng = np.random.default_rng(0)
        scale = float(base.std())
        t0 = time.perf_counter()
        for c in range(100):
            rows = base[[i for i in range(20) if i % 4 == c % 4]][:5]
            feats = rows + rng.normal(0, 3 * scale, (1, base.shape[1])).astype(np.float32)
            req = TeachClass.Request(label=f"class_{c:03d}",
                                     features=[make_feature_msg(Header(), "efficientnet_lite0", "", f) for f in feats])
            rr = b.call(TeachClass, "teach_class", req)
            if not rr.success:
                raise RuntimeError(rr.message)
        res["preteach_100_classes_s"] = round(time.perf_counter() - t0, 2)

        # TeachClass with 100 known classes: 5 images (extract + learn), 5 feature vectors (learn)
        teach = {}
        for kind in ("images", "features"):
            times, learn = [], []
            for rep in range(3):
                req = TeachClass.Request(label=f"new_{kind}_{rep}")
                vi = views(5, seed=50 + rep)
                if kind == "images":
                    req.images = [rgb_to_image_msg(im, Header()) for _, im in vi]
                else:
                    req.features = [make_feature_msg(Header(), "efficientnet_lite0", "", f)
                                    for f in base[:5] + rng.normal(0, 3 * scale, (1, base.shape[1])).astype(np.float32)]
                t = time.perf_counter()
                rr = b.call(TeachClass, "teach_class", req)
                times.append(time.perf_counter() - t)
                learn.append(rr.learning_time_s)
                if not rr.success:
                    raise RuntimeError(rr.message)
            teach[kind] = {"known_classes_before": 100 + len(teach) * 3, "round_trip_s_median": round(float(np.median(times)), 3),
                           "round_trip_s": [round(x, 3) for x in times],
                           "learning_time_s_median": round(float(np.median(learn)), 3)}
        res["teach_class_with_100_known"] = teach

        # the stream
        recv: list[tuple[int, int]] = []
        b.node.create_subscription(Prediction, "prediction",
                                   lambda m: recv.append((stamp_to_ns(m.header.stamp), time.time_ns())), 50)
        pub = b.node.create_publisher(Image, "image", qos_profile_sensor_data)
        deadline = time.monotonic() + 30
        while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        frames = [rgb_to_image_msg(im, Header(frame_id="camera")) for _, im in views(30, seed=7)]
        load_start = os.getloadavg()
        n_frames = int(seconds * rate)
        period = 1.0 / rate
        sent_ns = []
        t_start = time.monotonic()
        late = 0
        for i in range(n_frames):
            target = t_start + i * period
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                late += 1
            msg = frames[i % len(frames)]
            now = time.time_ns()
            msg.header.stamp = ns_to_stamp(now)
            pub.publish(msg)
            sent_ns.append(now)
        publish_s = time.monotonic() - t_start
        time.sleep(2.0)
        load_end = os.getloadavg()
        sent = set(sent_ns)
        got = [(s, r) for s, r in recv if s in sent]
        lat = np.array([(r - s) / 1e6 for s, r in got])
        res["stream"] = {
            "frame": "640x480 rgb8", "rate_hz": rate, "frames_published": n_frames,
            "publisher_late_ticks": late, "publish_seconds": round(publish_s, 2),
            "predictions_received": len(got), "frames_dropped": n_frames - len(got),
            "drop_fraction": round(1 - len(got) / n_frames, 4),
            "sustained_prediction_rate_hz": round(len(got) / publish_s, 2),
            "latency_ms": ({"p50": round(float(np.percentile(lat, 50)), 1),
                            "p95": round(float(np.percentile(lat, 95)), 1),
                            "max": round(float(lat.max()), 1)} if len(lat) else None),
            "loadavg_during": [load_start, load_end],
        }
    finally:
        b.close()
        codes = [stop(p) for p in procs]
        res["exit_codes"] = codes
    logs = "".join((workdir / f).read_text(errors="replace") for f in os.listdir(workdir) if f.endswith(".log"))
    m = re.search(r"feature_extractor stopping: (\{.*?\})", logs)
    if m:
        res["extractor_counters"] = json.loads(m.group(1).replace("'", '"'))
    return res


def run_learner_rate(seconds: float, rate: float, workdir: Path, jitter_s: float = 0.004) -> dict:
    """Predictions per second from a jittered ``rate`` Hz stream of feature vectors (learner only)."""
    from cbcl_pr_ros.msg import FeatureVector, Prediction
    from cbcl_pr_ros.nodes.conversions import make_feature_msg, ns_to_stamp
    from cbcl_pr_ros.srv import TeachClass
    from std_msgs.msg import Header

    out: dict = {"jitter_sd_ms": jitter_s * 1000, "rate_hz": rate}
    for label, extra in (("shipped_default", {}), ("max_prediction_rate_30", {"max_prediction_rate": 30.0})):
        domain = random.Random(time.time_ns()).randint(1, 200)
        wd = workdir / label
        wd.mkdir(parents=True, exist_ok=True)
        proc = start("learner_node", domain, wd, {"memory_path": "", **extra})
        b = Bench(domain)
        try:
            rng = np.random.default_rng(0)
            for c in range(20):
                feats = rng.normal(c, 1.0, (5, 1280)).astype(np.float32)
                rr = b.call(TeachClass, "teach_class", TeachClass.Request(
                    label=f"class_{c:02d}",
                    features=[make_feature_msg(Header(), "efficientnet_lite0", "", f) for f in feats]))
                if not rr.success:
                    raise RuntimeError(rr.message)
            recv: list[int] = []
            b.node.create_subscription(Prediction, "prediction", lambda m: recv.append(time.monotonic_ns()), 50)
            pub = b.node.create_publisher(FeatureVector, "features", 10)
            deadline = time.monotonic() + 30
            while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)
            vecs = [make_feature_msg(Header(), "efficientnet_lite0", "", rng.normal(c, 1.0, 1280)) for c in range(20)]
            n = int(seconds * rate)
            offsets = np.clip(rng.normal(0.0, jitter_s, n), -0.4 / rate, 0.4 / rate)
            load_start = os.getloadavg()
            t0 = time.monotonic()
            for i in range(n):
                delay = t0 + i / rate + offsets[i] - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                msg = vecs[i % len(vecs)]
                msg.header.stamp = ns_to_stamp(time.time_ns())
                pub.publish(msg)
            span = time.monotonic() - t0
            time.sleep(1.0)
            out[label] = {"vectors_published": n, "publish_seconds": round(span, 2),
                          "predictions_received": len(recv),
                          "prediction_rate_hz": round(len(recv) / span, 2),
                          "loadavg_during": [load_start, os.getloadavg()], **extra}
        finally:
            b.close()
            out.setdefault("exit_codes", []).append(stop(proc))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--modes", default="separate,one_process,learner_rate")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "pipeline.json"))
    args = ap.parse_args()
    import tempfile

    out = {"benchmark": "pipeline", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "machine": {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(), "loadavg_start": os.getloadavg(),
                       "python": platform.python_version(), "rmw": os.environ.get("RMW_IMPLEMENTATION", ""),
                       "fastdds_profile": os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE", "")},
           "settings": {"backbone": "efficientnet_lite0", "runtime": "onnx", "threads": 2,
                        "classifier": "gaussian (config default)",
                        "max_prediction_rate": "shipped default (config/cbcl_pr.yaml)"}}
    with tempfile.TemporaryDirectory(prefix="bench_pipeline_") as tmp:
        out["modes"] = {m: (run_learner_rate(args.seconds, args.rate, Path(tmp) / m) if m == "learner_rate"
                            else run_mode(m, args.seconds, args.rate, Path(tmp) / m))
                        for m in args.modes.split(",")}
    out["machine"]["loadavg_end"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
