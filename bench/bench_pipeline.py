#!/usr/bin/env python3
"""Camera -> extractor -> learner: rate, drops, latency and where the time goes, per stage and process.

A 640x480 rgb8 stream at 30 Hz (sensor-data QoS, as a camera publishes) goes through the real nodes
(EfficientNet-Lite0 on ONNX Runtime, the shipped config/cbcl_pr.yaml) on a ROS domain of its own.
Each stream run (``--modes`` x ``--known`` x ``--objects``, ``--repeats`` times) measures:
  * frames published; feature vectors, predictions (and, per object, detections) received; drops;
  * the sustained rate and the latency image stamp -> prediction (or detections) received, p50/p95/max;
  * CPU seconds per frame of every process (extractor, learner or the one session, this bench);
  * the nodes' own stage times (``runtime/stage_times.py``, logged when they stop): stamp ->
    callback (transport and executor wait), queue, decode, backbone, publish, predict, objects, ...;
  * TeachClass while streaming: one teach from the stream every ``--teach-every`` s (round trip and
    learning time), as a user teaches while the camera runs.
``known`` classes are in the learner's memory file before it starts (real EfficientNet vectors of
four photos, each class shifted by its own offset, learned by the core learner with the shipped
config); ``--known 0`` starts empty, the first teach then makes the first class. ``--objects``
adds a 16UC1 depth image and CameraInfo of a table with 6 boxes, so the per-object path runs (with
``--objects-known`` classes known, 100 by default; 1000 is a large household). ``--busy off,on``
runs every configuration quiet and with another process keeping one core busy, interleaved (keys
ending in ``/busy``).
Before the streams, the same stages are timed in this process on one thread (``stage_costs``) and
TeachClass with 100 known is timed through the service (5 feature vectors; 5 images).

Results: ``--out`` (runs/bench/pipeline.json): every run, the spread over the repeats (median,
min, max) and the load average beside each run. The machine is shared: read the load figures
beside the timings. ``--baseline FILE`` compares the stage costs and the stream with a recorded
run and prints one warning line per stage more than 5 % slower (``--short`` is the CI form,
test/nodes/test_pipeline_guard.py; ``--write-baseline`` records one).

    python -P bench/bench_pipeline.py                                   # the full set, 5 repeats
    python -P bench/bench_pipeline.py --modes separate --known 100 --repeats 1 --seconds 10
    python -P bench/bench_pipeline.py --short                           # CI form -> pipeline_short.json
    python -P bench/bench_pipeline.py --short --write-baseline          # record the CI baseline here
    PATH=$PATH:<py-spy dir> python -P bench/bench_pipeline.py --profile-dir /tmp/spy ...  # py-spy samples
    python -P bench/bench_pipeline.py --modes learner_rate              # the learner alone
    python -P bench/bench_pipeline.py --modes separate --known 100 --objects off,on --objects-known 100,1000 \
        --busy off,on --repeats 3                                       # quiet vs one core taken
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import CURATED, out_path  # noqa: E402  (and test/support: ros_testing, synthetic)

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "cbcl_pr.yaml"
BASELINE = CURATED / "pipeline_baseline.json"

#: a stage or figure this much worse than the baseline prints a warning line
REGRESSION = 0.05
# a stage must also be this much slower in absolute terms: sub-millisecond stages (decode 0.14 ms)
# move by 5-10 % between quiet runs and would warn for nothing
REGRESSION_MIN_MS = 0.5


def executable(name: str) -> Path:
    import cbcl_pr_ros

    # not resolve(): with --symlink-install the package files link back into the source tree
    for parent in list(Path(cbcl_pr_ros.__file__).absolute().parents) + [REPO / "install" / "cbcl_pr_ros"]:
        cand = parent / "lib" / "cbcl_pr_ros" / name
        if cand.exists():
            return cand
    raise SystemExit(f"{name} is not installed: run scripts/setup and source scripts/env.sh")


def start(name: str, domain: int, workdir: Path, params: dict, config: Path,
          extra: list[str] | None = None) -> subprocess.Popen:
    """An installed executable with the shipped YAML plus ``params``, in the user's environment
    (no thread variables set: what a user who starts the nodes gets)."""
    import yaml

    over = workdir / f"{name}.params.yaml"
    over.write_text(yaml.safe_dump({f"/**/{n}": {"ros__parameters": dict(params)}
                                    for n in ("learner", "feature_extractor")}))
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
               PYTHONUNBUFFERED="1", CBCL_STOP_STATS="1")  # the nodes' stage times as they stop
    env.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "config" / "fastdds_profile.xml"))
    args = [sys.executable, str(executable(name))] + (extra or []) + \
        ["--ros-args", "--params-file", str(config), "--params-file", str(over)]
    log = open(workdir / f"{name}.log", "wb")
    return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def stop(p: subprocess.Popen) -> int:
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    return p.returncode


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) so far; nan once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def table_scene(seed: int = 0) -> tuple[np.ndarray, np.ndarray, Any]:
    """(rgb, depth metres, intrinsics) of a 640x480 table with 6 boxes (test/support/synthetic.py)."""
    from synthetic import SynthObject, scene

    photos = [im for _, im in views(6, seed=seed + 3)]
    boxes = [(60, 250, 170, 370), (210, 240, 300, 350), (340, 260, 450, 380), (490, 250, 590, 360),
             (120, 390, 230, 470), (380, 395, 500, 470)]
    objs = [SynthObject(b, 0.05 + 0.02 * i, (40 * i % 255, 90, 200 - 25 * i)) for i, b in enumerate(boxes)]
    rgb, depth, k, _ = scene(objs, seed=seed, width=640, height=480)
    for (x0, y0, x1, y1), im in zip(boxes, photos):  # textured objects, as a camera sees them
        rgb[y0:y1, x0:x1] = im[:y1 - y0, :x1 - x0]
    return rgb, depth, k


def learner_params(config: Path) -> dict[str, Any]:
    """The learner's parameters as the node reads them: table defaults, then the YAML's values."""
    import yaml

    from cbcl_pr_ros.settings.params import LEARNER, specs_for

    p = {s.name: s.default for s in specs_for(LEARNER)}
    doc = yaml.safe_load(config.read_text())
    for key in ("/**", "/**/learner"):
        p.update((doc.get(key) or {}).get("ros__parameters") or {})
    return p


def class_vectors(base: np.ndarray, n_classes: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n_classes`` classes of 5 vectors: real vectors of one photo, shifted by a class offset."""
    rng = np.random.default_rng(seed)
    scale = float(base.std())
    out = {}
    for c in range(n_classes):
        rows = base[[i for i in range(len(base)) if i % 4 == c % 4]][:5]
        out[f"class_{c:03d}"] = np.maximum(rows + rng.normal(0, 3 * scale, (1, base.shape[1])), 0).astype(np.float32)
    return out


def taught_learner(config: Path, base: np.ndarray, n_classes: int) -> Any:
    """A core learner with the config's settings that knows ``n_classes`` classes (one increment)."""
    from cbcl_pr_ros.settings.params import learner_factory

    learner = learner_factory(learner_params(config))(base.shape[1])
    learner.teach_increment(class_vectors(base, n_classes))
    return learner


def _timed(fn, n: int) -> dict[str, float]:
    """Median wall ms and mean thread-CPU ms of ``n`` calls (after one warm-up call)."""
    fn()
    wall, c0 = [], time.thread_time()
    for _ in range(n):
        t = time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t)
    return {"ms": round(1000 * float(np.median(wall)), 3), "cpu_ms": round(1000 * (time.thread_time() - c0) / n, 3)}


def stage_costs(backbone: Any, base: np.ndarray, learner: Any, n: int = 20) -> dict[str, Any]:
    """Each stage of the frame and object paths timed alone, in this process (median ms, CPU ms);
    ``learner`` knows 100 classes (three more are taught to time a teach)."""
    from std_msgs.msg import Header

    from cbcl_pr_ros.core.learner import Prediction
    from cbcl_pr_ros.features.preprocessing import crop_and_resize, normalise
    from cbcl_pr_ros.nodes.conversions import (features_from_msgs, image_msg_to_rgb, make_feature_msg,
                                               prediction_to_msg, rgb_to_image_msg)
    from cbcl_pr_ros.perception import crop_images, propose

    rgb = views(1, seed=7)[0][1]
    msg = rgb_to_image_msg(rgb, Header(frame_id="camera"))
    table, depth, k = table_scene()
    props = propose(table, depth, k)
    crops = crop_images(table, props, 0.1)
    vec = backbone.extract([rgb])
    fmsg = make_feature_msg(Header(), backbone.name, backbone.preprocessing_id, vec[0])
    objs = backbone.extract(crops)
    pred = learner.predict(vec, top_k=100)[0]
    staged = crop_and_resize(rgb, backbone.spec)
    batch = normalise(staged[None], backbone.spec)
    out = {
        "decode": _timed(lambda: image_msg_to_rgb(msg), n),
        "preprocess": _timed(lambda: normalise(crop_and_resize(rgb, backbone.spec)[None], backbone.spec), n),
        "backbone_forward": _timed(lambda: backbone.extract_preprocessed(batch), n),
        "feature_msg": _timed(lambda: make_feature_msg(Header(), backbone.name, backbone.preprocessing_id, vec[0]), n),
        "predict_100_classes": _timed(lambda: learner.predict(features_from_msgs([fmsg]), top_k=100), n),
        "prediction_msg": _timed(lambda: prediction_to_msg(Header(), pred, 1), n),
        "proposals_6_objects": _timed(lambda: propose(table, depth, k), max(3, n // 4)),
        "backbone_frame_and_6_crops": _timed(lambda: backbone.extract([table, *crops]), max(3, n // 4)),
        "predict_6_objects_100_classes": _timed(lambda: learner.predict(objs, top_k=100), n),
    }
    out["objects_found"] = len(props)
    t = []
    for i in range(3):
        t.append(learner.teach(f"new_{i}", class_vectors(base, 1, seed=100 + i)["class_000"]).seconds)
    out["teach_5_shots_100_known_s"] = round(float(np.median(t)), 4)
    assert isinstance(pred, Prediction)
    return out


class Bench:
    """The bench's own node (camera, subscribers, service client), spun in a background thread."""

    def __init__(self, domain: int) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=domain)
        self.node = rclpy.create_node("bench_pipeline", context=self.ctx)
        # Single-threaded: a camera driver is light; rclpy's multi-threaded executor took 0.6 of a
        # core here and made the bench's own publisher late (nodes/spin.py says why).
        self.ex = SingleThreadedExecutor(context=self.ctx)
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
        from cbcl_pr_ros.nodes.qos import service_qos

        cli = self.node.create_client(srv, name, qos_profile=service_qos())
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


def _stop_reports(logs: str) -> dict[str, Any]:
    """The nodes' stop lines (counters and stage times, JSON) by node name."""
    out = {}
    for name, text in re.findall(r"(feature_extractor|learner) stopping: (\{.*\})\s*$", logs, re.M):
        try:
            out[name] = json.loads(text)
        except ValueError:
            pass
    return out


def _latency(lat_ms: list[float]) -> dict[str, float] | None:
    if not lat_ms:
        return None
    a = np.asarray(lat_ms)
    return {"p50": round(float(np.percentile(a, 50)), 1), "p95": round(float(np.percentile(a, 95)), 1),
            "max": round(float(a.max()), 1)}


def teach_timing(b: Bench, base: np.ndarray) -> dict[str, Any]:
    """TeachClass round trip and learning time: 5 feature vectors, then 5 images (3 times each)."""
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.conversions import make_feature_msg, rgb_to_image_msg
    from cbcl_pr_ros.srv import TeachClass

    out = {}
    for kind in ("features", "images"):
        trips, learn = [], []
        for rep in range(3):
            req = TeachClass.Request(label=f"new_{kind}_{rep}")
            if kind == "images":
                req.images = [rgb_to_image_msg(im, Header()) for _, im in views(5, seed=50 + rep)]
            else:
                req.features = [make_feature_msg(Header(), "efficientnet_lite0", "", f)
                                for f in class_vectors(base, 1, seed=50 + rep)["class_000"]]
            t = time.perf_counter()
            rr = b.call(TeachClass, "teach_class", req)
            trips.append(time.perf_counter() - t)
            learn.append(rr.learning_time_s)
            if not rr.success:
                raise RuntimeError(rr.message)
        out[kind] = {"round_trip_s_median": round(float(np.median(trips)), 3),
                     "round_trip_s": [round(x, 3) for x in trips],
                     "learning_time_s_median": round(float(np.median(learn)), 3)}
    return out


def run_stream(mode: str, known: int, objects: bool, seconds: float, rate: float, teach_every: float,
               workdir: Path, config: Path, base: np.ndarray, memory_file: Path | None, time_teach: bool = False,
               profile_dir: Path | None = None) -> dict[str, Any]:
    """One stream run; see the module docstring.  ``profile_dir``: py-spy samples of every node
    process during the stream (raw flame-graph text, ``py-spy`` on PATH; it does not pause them)."""
    from rclpy.qos import qos_profile_sensor_data
    from ros_testing import fresh_domain, release_domain
    from sensor_msgs.msg import CameraInfo, Image
    from std_msgs.msg import Header

    from cbcl_pr_ros.msg import Detections, FeatureVector, Prediction
    from cbcl_pr_ros.nodes.conversions import ns_to_stamp, rgb_to_image_msg, stamp_to_ns
    from cbcl_pr_ros.srv import TeachClass

    workdir.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"mode": mode, "known_at_start": known, "objects": objects}
    memory = workdir / "memory.safetensors"
    if known:  # a copy: the run's teaches change it
        shutil.copyfile(memory_file, memory)
    domain = fresh_domain()
    params = {"memory_path": str(memory), "no_frame_warning_s": 0.0}
    if mode == "separate":
        procs = {"feature_extractor": start("feature_extractor_node", domain, workdir, params, config),
                 "learner": start("learner_node", domain, workdir, params, config)}
    else:
        procs = {"session": start("teaching_session", domain, workdir, params, config,
                                  ["--nodes", "extractor,learner"])}
    b = Bench(domain)
    try:
        t0 = time.perf_counter()
        for srv, name in ((TeachClass, "teach_class"),):
            cli = b.node.create_client(srv, name)
            if not cli.wait_for_service(timeout_sec=300):
                raise TimeoutError(f"{name} not available")
            b.node.destroy_client(cli)
        res["startup_s"] = round(time.perf_counter() - t0, 2)
        if time_teach:
            res["teach_class"] = teach_timing(b, base)

        preds: list[tuple[int, int]] = []
        feats: list[int] = []
        dets: list[tuple[int, int]] = []
        b.node.create_subscription(Prediction, "prediction",
                                   lambda m: preds.append((stamp_to_ns(m.header.stamp), time.time_ns())), 50)
        b.node.create_subscription(FeatureVector, "features", lambda m: feats.append(stamp_to_ns(m.header.stamp)), 50)
        b.node.create_subscription(Detections, "detections",
                                   lambda m: dets.append((stamp_to_ns(m.header.stamp), time.time_ns())), 50)
        pub = b.node.create_publisher(Image, "image", qos_profile_sensor_data)
        if objects:
            rgb, depth, k = table_scene()
            # a still table seen by a real sensor: every frame differs by noise (colour sigma 2 levels,
            # depth sigma 2 mm), so no stage can profit from frames that are equal to the bit
            noise = np.random.default_rng(3)
            frames, depth_msgs = [], []
            for _ in range(30):
                im = np.clip(rgb + noise.normal(0, 2.0, rgb.shape), 0, 255).astype(np.uint8)
                frames.append(rgb_to_image_msg(im, Header(frame_id="camera")))
                mm = np.where(depth > 0, depth * 1000 + noise.normal(0, 2.0, depth.shape), 0)
                d = Image(height=480, width=640, encoding="16UC1", step=1280)
                d.data = np.clip(np.round(mm), 0, 65535).astype("<u2").tobytes()
                d.header.frame_id = "camera"
                depth_msgs.append(d)
            info = CameraInfo(height=480, width=640, k=[k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0])
            info.header.frame_id = "camera"
            dpub = b.node.create_publisher(Image, "depth", qos_profile_sensor_data)
            ipub = b.node.create_publisher(CameraInfo, "camera_info", qos_profile_sensor_data)
        else:
            frames = [rgb_to_image_msg(im, Header(frame_id="camera")) for _, im in views(30, seed=7)]
        deadline = time.monotonic() + 30
        while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)

        def publish(i: int) -> int:
            msg = frames[i % len(frames)]
            now = time.time_ns()
            msg.header.stamp = ns_to_stamp(now)
            if objects:  # depth and camera_info right after the colour frame, as a camera driver sends them
                dmsg = depth_msgs[i % len(depth_msgs)]
                info.header.stamp = dmsg.header.stamp = msg.header.stamp
                ipub.publish(info)
                pub.publish(msg)
                dpub.publish(dmsg)
            else:
                pub.publish(msg)
            return now

        for i in range(int(rate)):  # 1 s of warm-up frames, not counted
            publish(i)
            time.sleep(1.0 / rate)
        time.sleep(0.5)
        preds.clear(), feats.clear(), dets.clear()

        teaches: list[dict[str, Any]] = []
        stop_teach = threading.Event()

        def teacher() -> None:  # one TeachClass from the stream every teach_every seconds
            i = 0
            while not stop_teach.wait(teach_every if i else min(1.0, teach_every)):
                t = time.perf_counter()
                start_ns = time.time_ns()
                try:
                    rr = b.call(TeachClass, "teach_class", TeachClass.Request(label=f"stream_{i:02d}"), timeout=60)
                    teaches.append({"at_ns": start_ns, "done_ns": time.time_ns(), "success": bool(rr.success),
                                    "round_trip_s": round(time.perf_counter() - t, 3),
                                    "learning_time_s": round(rr.learning_time_s, 3),
                                    "message": rr.message[:160]})
                except TimeoutError as exc:
                    teaches.append({"at_ns": start_ns, "success": False, "message": str(exc)})
                i += 1

        pids = {name: p.pid for name, p in procs.items()} | {"bench": os.getpid()}
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        spies = []
        if profile_dir is not None:
            profile_dir.mkdir(parents=True, exist_ok=True)
            spies = [subprocess.Popen(["py-spy", "record", "--nonblocking", "--threads", "-r", "100", "-f", "raw",
                                       "-d", str(int(seconds) + 1), "-p", str(p.pid), "-o",
                                       str(profile_dir / f"{workdir.name}_{name}.txt")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for name, p in procs.items()]
        th = threading.Thread(target=teacher, daemon=True)
        if teach_every > 0:
            th.start()
        load_start = os.getloadavg()
        n_frames = int(seconds * rate)
        sent_ns = []
        t_start = time.monotonic()
        late = 0
        for i in range(n_frames):
            delay = t_start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                late += 1
            sent_ns.append(publish(i))
        publish_s = time.monotonic() - t_start
        cpu1 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        for spy in spies:
            spy.wait(30)
        stop_teach.set()
        time.sleep(2.0)
        th.join(timeout=60) if teach_every > 0 else None
        load_end = os.getloadavg()

        sent = set(sent_ns)
        # with no class known at the start, predictions begin once the first teach is answered
        first_ok = min((t["done_ns"] for t in teaches if t.get("success")), default=None)
        eligible = [s for s in sent_ns if known or (first_ok is not None and s >= first_ok)]
        got = [(s, r) for s, r in preds if s in sent]
        got_eligible = [(s, r) for s, r in got if not eligible or s >= eligible[0]]
        stream: dict[str, Any] = {
            "frame": "640x480 rgb8" + (" + 16UC1 depth + camera_info, 6 boxes on a table" if objects else ""),
            "rate_hz": rate, "frames_published": n_frames, "publisher_late_ticks": late,
            "publish_seconds": round(publish_s, 2),
            "features_received": sum(1 for s in feats if s in sent),
            "feature_rate_hz": round(sum(1 for s in feats if s in sent) / publish_s, 2),
            "predictions_received": len(got),
            "frames_eligible_for_prediction": len(eligible),
            "frames_dropped": len(eligible) - len(got_eligible),
            "drop_fraction": round(1 - len(got_eligible) / len(eligible), 4) if eligible else None,
            "sustained_prediction_rate_hz": (round(len(got_eligible) / (len(eligible) / rate), 2)
                                             if eligible else 0.0),
            "latency_ms": _latency([(r - s) / 1e6 for s, r in got]),
            "loadavg_during": [load_start, load_end],
            "cpu_s_per_frame": {name: round((cpu1[name] - cpu0[name]) / n_frames, 4) for name in pids},
            "cpu_cores_busy": {name: round((cpu1[name] - cpu0[name]) / publish_s, 2) for name in pids},
        }
        if objects:
            dgot = [(s, r) for s, r in dets if s in sent]
            stream["detections_received"] = len(dgot)
            stream["detection_rate_hz"] = round(len(dgot) / publish_s, 2)
            stream["detection_latency_ms"] = _latency([(r - s) / 1e6 for s, r in dgot])
        stream["teaches"] = [{k: v for k, v in t.items() if not k.endswith("_ns")} for t in teaches]
        res["stream"] = stream
    finally:
        b.close()
        res["exit_codes"] = {name: stop(p) for name, p in procs.items()}
        release_domain(domain)
    logs = "".join((workdir / f).read_text(errors="replace") for f in os.listdir(workdir) if f.endswith(".log"))
    res["nodes"] = _stop_reports(logs)
    return res


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Spread over repeats of one configuration: median, min and max of the headline figures."""
    def spread(values: list[float]) -> dict[str, float] | None:
        v = [x for x in values if x is not None]
        return {"median": round(float(np.median(v)), 3), "min": round(float(min(v)), 3),
                "max": round(float(max(v)), 3), "n": len(v)} if v else None

    s = [r["stream"] for r in runs if "stream" in r]
    out = {
        "repeats": len(runs),
        "sustained_prediction_rate_hz": spread([x["sustained_prediction_rate_hz"] for x in s]),
        "drop_fraction": spread([x["drop_fraction"] for x in s]),
        "latency_p50_ms": spread([(x["latency_ms"] or {}).get("p50") for x in s]),
        "latency_p95_ms": spread([(x["latency_ms"] or {}).get("p95") for x in s]),
        "feature_rate_hz": spread([x["feature_rate_hz"] for x in s]),
        "teach_round_trip_s": spread([t["round_trip_s"] for x in s for t in x["teaches"] if "round_trip_s" in t]),
        "teach_learning_time_s": spread([t["learning_time_s"] for x in s for t in x["teaches"] if "learning_time_s" in t]),
        "loadavg_1min_during": spread([x["loadavg_during"][1][0] for x in s]),
    }
    if any("detection_rate_hz" in x for x in s):
        out["detection_rate_hz"] = spread([x.get("detection_rate_hz") for x in s])
        out["detection_latency_p95_ms"] = spread([(x.get("detection_latency_ms") or {}).get("p95") for x in s])
    cpu: dict[str, list[float]] = {}
    for x in s:
        for name, v in x["cpu_s_per_frame"].items():
            cpu.setdefault(name, []).append(1000 * v)
    out["cpu_ms_per_frame"] = {name: spread(v) for name, v in cpu.items()}
    stages: dict[str, list[float]] = {}
    for r in runs:
        for node, rep in r.get("nodes", {}).items():
            for st, row in rep.get("stages", {}).items():
                stages.setdefault(f"{node}.{st}", []).append(row["mean_ms"])
    out["stage_mean_ms"] = {k: spread(v) for k, v in sorted(stages.items())}
    return out


def regressions(result: dict[str, Any], baseline: dict[str, Any], tolerance: float = REGRESSION) -> list[str]:
    """One line per stage or headline figure more than ``tolerance`` worse than ``baseline``."""
    lines = []
    for st, row in result.get("stage_costs", {}).items():
        old = baseline.get("stage_costs", {}).get(st)
        if isinstance(row, dict) and isinstance(old, dict) and old.get("ms"):
            if row["ms"] > old["ms"] * (1 + tolerance) and row["ms"] - old["ms"] > REGRESSION_MIN_MS:
                lines.append(f"stage '{st}': {row['ms']:.3g} ms vs {old['ms']:.3g} ms in the baseline "
                             f"(+{100 * (row['ms'] / old['ms'] - 1):.0f} %)")
    for key, new in result.get("summary", {}).items():
        old = baseline.get("summary", {}).get(key)
        if not old:
            continue
        rate_new = (new.get("sustained_prediction_rate_hz") or {}).get("median")
        rate_old = (old.get("sustained_prediction_rate_hz") or {}).get("median")
        if rate_new is not None and rate_old and rate_new < rate_old * (1 - tolerance):
            lines.append(f"stream '{key}': {rate_new:.3g} predictions/s vs {rate_old:.3g} in the baseline "
                         f"({100 * (rate_new / rate_old - 1):.0f} %)")
        for st, spread_new in new.get("stage_mean_ms", {}).items():
            spread_old = old.get("stage_mean_ms", {}).get(st)
            if spread_new and spread_old and spread_old["median"] > 0.05 and \
                    spread_new["median"] > spread_old["median"] * (1 + tolerance) and \
                    spread_new["median"] - spread_old["median"] > REGRESSION_MIN_MS:
                lines.append(f"stream '{key}' stage '{st}': {spread_new['median']:.3g} ms vs "
                             f"{spread_old['median']:.3g} ms in the baseline "
                             f"(+{100 * (spread_new['median'] / spread_old['median'] - 1):.0f} %)")
    return lines


def run_learner_rate(seconds: float, rate: float, workdir: Path, config: Path, jitter_s: float = 0.004) -> dict:
    """Predictions per second from a jittered ``rate`` Hz stream of feature vectors (learner only)."""
    from cbcl_pr_ros.msg import FeatureVector, Prediction
    from cbcl_pr_ros.nodes.conversions import make_feature_msg, ns_to_stamp
    from cbcl_pr_ros.srv import TeachClass
    from std_msgs.msg import Header

    out: dict = {"jitter_sd_ms": jitter_s * 1000, "rate_hz": rate}
    for label, extra in (("shipped_default", {}), ("max_prediction_rate_30", {"max_prediction_rate": 30.0})):
        from ros_testing import fresh_domain, release_domain

        domain = fresh_domain()
        wd = workdir / label
        wd.mkdir(parents=True, exist_ok=True)
        proc = start("learner_node", domain, wd, {"memory_path": "", **extra}, config)
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
            release_domain(domain)
    return out


def base_vectors(backbone: Any) -> np.ndarray:
    """Real EfficientNet vectors of 20 views of the four photos (the classes' raw material)."""
    return backbone.extract([im for _, im in views(20, seed=1)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measured stream length per run")
    ap.add_argument("--rate", type=float, default=30.0, help="camera rate (Hz)")
    ap.add_argument("--modes", default="separate,one_process",
                    help="separate (two processes), one_process (teaching_session), learner_rate")
    ap.add_argument("--known", default="0,100", help="classes known when the stream starts, comma separated")
    ap.add_argument("--objects", default="off,on", help="per-object path: off, on or off,on (on runs with 100 known)")
    ap.add_argument("--objects-known", default="100", help="classes known in the per-object runs, comma separated "
                                                           "(e.g. 100,1000)")
    ap.add_argument("--busy", default="off", help="off, on or off,on: runs with another process keeping one core "
                                                  "busy (on), quiet (off) or both, interleaved")
    ap.add_argument("--teach-every", type=float, default=10.0, help="one TeachClass from the stream every N s (0: none)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--config", default=str(CONFIG), help="the nodes' YAML (default: the shipped one)")
    ap.add_argument("--out", default="", help="result JSON (default runs/bench/pipeline.json; "
                                                 "pipeline_short.json with --short)")
    ap.add_argument("--baseline", default=str(BASELINE), help="compare with this result ('' = no comparison)")
    ap.add_argument("--write-baseline", action="store_true", help="also write the result to --baseline")
    ap.add_argument("--profile-dir", default="", help="py-spy samples of the node processes during each stream here")
    ap.add_argument("--short", action="store_true",
                    help="CI form: stage costs + one 4 s two-process stream, 100 known, one teach")
    args = ap.parse_args(argv)
    if args.short:
        args.seconds, args.modes, args.known, args.objects, args.repeats, args.teach_every = 4.0, "separate", "100", "off", 1, 3.0
    config = Path(args.config)
    args.out = args.out or str(out_path("pipeline_short.json" if args.short else "pipeline.json"))
    result = run(args, config)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({"stage_costs": result["stage_costs"], "summary": result["summary"]}, indent=2))
    if args.baseline and Path(args.baseline).is_file() and not args.write_baseline:
        for line in regressions(result, json.loads(Path(args.baseline).read_text())):
            print(f"WARNING pipeline slower than the baseline: {line}")
            warnings.warn(f"pipeline slower than the baseline: {line}", stacklevel=1)
    if args.write_baseline and args.baseline:
        Path(args.baseline).write_text(json.dumps(result, indent=2) + "\n")
    return 0


@contextlib.contextmanager
def competing_process(on: bool) -> Iterator[None]:
    """While the body runs, another process keeps one core busy (``--busy on``): a robot's computer
    is never quiet. Nothing when ``on`` is false."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # it is running before the stream starts
        yield
    finally:
        spinner.kill()
        spinner.wait()


def run(args: argparse.Namespace, config: Path) -> dict[str, Any]:
    """Stage costs, then every stream configuration ``args.repeats`` times, then the spread."""
    from cbcl_pr_ros.evaluation.experiments import machine_info
    from cbcl_pr_ros.features import make_backbone

    out: dict[str, Any] = {
        "benchmark": "pipeline", "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "machine": {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(), "loadavg_start": os.getloadavg(),
                    "python": platform.python_version(), "rmw": os.environ.get("RMW_IMPLEMENTATION", ""),
                    "fastdds_profile": os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE", "")},
        "settings": {"config": str(config), "seconds": args.seconds, "rate_hz": args.rate,
                     "teach_every_s": args.teach_every, "repeats": args.repeats},
    }
    from cbcl_pr_ros.core.threads import set_blas_threads

    set_blas_threads(1)  # as the nodes run (nodes/spin.py), so that the stage costs are theirs
    backbone = make_backbone("efficientnet_lite0", runtime="onnx", threads=2)
    base = base_vectors(backbone)
    from cbcl_pr_ros.core import save_learner

    tmp = Path(tempfile.mkdtemp(prefix="bench_pipeline_"))  # the nodes' logs stay there when a run fails
    t0 = time.perf_counter()
    learner = taught_learner(config, base, 100)
    out["settings"]["memory_100_classes_build_s"] = round(time.perf_counter() - t0, 2)
    memories = {100: save_learner(learner, tmp / "memory_100.safetensors")}  # classes known -> memory file
    out["stage_costs"] = stage_costs(backbone, base, learner)
    out["stage_costs"]["loadavg"] = os.getloadavg()
    del backbone
    runs: dict[str, list[dict[str, Any]]] = {}
    modes = [m for m in args.modes.split(",") if m]
    if "learner_rate" in modes:
        out["learner_rate"] = run_learner_rate(args.seconds, args.rate, Path(tmp) / "learner_rate", config)
    configs = [(m, int(k), False) for m in modes if m != "learner_rate" for k in args.known.split(",") if k]
    if "on" in args.objects.split(","):
        configs += [(m, int(k), True) for m in modes if m != "learner_rate" for k in args.objects_known.split(",") if k]
    if "off" not in args.objects.split(","):
        configs = [c for c in configs if c[2]]
    loads = [b == "on" for b in args.busy.split(",") if b in ("off", "on")] or [False]
    for rep in range(args.repeats):  # repeats interleaved, so a burst of load hits every configuration
        for (mode, known, objects), busy in ((c, b) for c in configs for b in loads):  # quiet and busy side by side
            key = f"{mode}/known_{known}" + ("/objects" if objects else "") + ("/busy" if busy else "")
            wd = Path(tmp) / f"{key.replace('/', '_')}_{rep}"
            if known and known not in memories:
                memories[known] = save_learner(taught_learner(config, base, known), tmp / f"memory_{known}.safetensors")
            memory = memories.get(known)
            with competing_process(busy):
                r = run_stream(mode, known, objects, args.seconds, args.rate, args.teach_every, wd, config, base, memory,
                               time_teach=(rep == 0 and known == 100 and not objects and not busy and not args.short),
                               profile_dir=Path(args.profile_dir) if args.profile_dir else None)
            r["busy"] = busy
            runs.setdefault(key, []).append(r)
            st = r.get("stream", {})
            print(f"[{key} #{rep + 1}] {st.get('sustained_prediction_rate_hz')} Hz, drop {st.get('drop_fraction')}, "
                  f"latency {st.get('latency_ms')}, load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    out["runs"] = runs
    out["summary"] = {key: summarise(r) for key, r in runs.items()}
    out["machine"]["loadavg_end"] = os.getloadavg()
    return out


if __name__ == "__main__":
    sys.exit(main())
