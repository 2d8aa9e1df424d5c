"""One class taught by box over ROS on real RGB-D frames: how many other objects get its name (issue 20, outcome 3).

What a user does with a depth camera: ``teaching_session --camera realsense`` (extractor with
``detect_objects`` on, learner; one process), the camera publishing colour (rgb8), aligned depth
(16UC1, millimetres) and CameraInfo, then TeachClass with one box around one object while the camera
looks at it. Here the camera is the labelled real frames of bench/real_rgbd/labels.json, published
over ROS by this script, one frame at a time (the next once the ``detections`` of the last came back,
so nothing is dropped on a loaded machine).

Per seed a fixed sample of the instances seen in two or more frames is taught, each alone: the
learner's memory goes back to empty (LoadMemory of an empty memory saved at start: classes and
negatives both), the teaching frame (one of the instance's frames, seeded) is published until
TeachClass (its labelled box as the roi, the node's default frame count) answers, then every other
frame of the same source is shown ``--repeats`` times (a camera resting on each view a moment: the
tracker fuses a track's last frames). Every ``detections`` message of those frames made by the new
model is matched to the labelled boxes one to one at IoU >= 0.5 and counted:

* taught instance: its matched detections, and those named correctly (known, its name);
* other labelled objects: their matched detections, and those carrying the taught name; split into
  objects that were in the teaching frame (the node gave them as negatives) and the rest;
* unmatched detections (background, fragments, merges, things in the labels' ignore boxes) carrying
  the taught name.

With ``--teach-by track`` the teach is the teaching page's tap instead: the teaching frame is shown
``--num-frames`` times (10 when 0) and the track of the detection matching the labelled box is taught
by ``track_id``.

With ``--prelude N`` the robot first looks around: before each TeachClass, the N frames that follow
the teaching frame in the labels' order (wrapping round; never the teaching frame) are published once
each, of the same source (``--prelude-from same``: the same table, so the taught object is mostly in
them, seen from other views; those frames are also scored afterwards) or of the other sources
(``other``: another table).
Each teach starts 120 s of stamps after the last one, so the learner's recent-objects store
(``teach_negatives``, 60 s window) holds only this teach's prelude and teaching frames.

Variants: the shipped learner parameters, and with ``negatives_capacity`` 0 (no negatives) for comparison;
``--variant NAME:KEY=VALUE,...`` replaces them. Writes the run under ``--label`` into
runs/bench/real_ros.json (other runs there are kept; figures in docs/perception.md "Over ROS").
Run: ``source scripts/env.sh && nice -n 5 python -P bench/bench_real_ros.py --frames /path/to/real_rgbd``
(3 seeds x 12 teaches: 2-3 minutes per variant on 2 cores).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402
import ros_testing as H  # noqa: E402  (ROS domains held by flock, node processes, a spinning client)

from cbcl_pr_ros.evaluation.experiments import machine_info  # noqa: E402
from real_rgbd_set import RealFrame, load_frames, score_proposals  # noqa: E402

log = logging.getLogger("bench_real_ros")
FRAME_ID = "camera_color_optical_frame"
EMPTY = "empty.safetensors"  # the memory file every teach starts from
COUNTS = ("taught_matched", "taught_named", "other_matched", "other_named", "other_in_teach_frame_matched",
          "other_in_teach_frame_named", "other_unseen_matched", "other_unseen_named", "unmatched",
          "unmatched_named", "frames_played", "frames_without_detections")


@dataclass
class Counts:
    """Detections of one teach's played frames (see the module docstring)."""

    n: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))

    def add(self, other: "Counts") -> None:
        for k, v in other.n.items():
            self.n[k] += v

    def summary(self) -> dict[str, Any]:
        n = self.n
        rate = lambda a, b: round(n[a] / n[b], 4) if n[b] else None  # noqa: E731
        return {**n, "taught_named_rate": rate("taught_named", "taught_matched"),
                "other_named_rate": rate("other_named", "other_matched"),
                "other_in_teach_frame_named_rate": rate("other_in_teach_frame_named", "other_in_teach_frame_matched"),
                "other_unseen_named_rate": rate("other_unseen_named", "other_unseen_matched"),
                "unmatched_named_rate": rate("unmatched_named", "unmatched")}


# ---------------------------------------------------------------------------- the camera
class Camera:
    """Publishes real frames on the RealSense topics and gathers ``detections`` by stamp."""

    def __init__(self, client: H.Client) -> None:
        from cbcl_pr_ros.msg import Detections
        from cbcl_pr_ros.nodes.qos import result_qos
        from cbcl_pr_ros.nodes.session import CAMERA_PRESETS
        from sensor_msgs.msg import CameraInfo, Image

        colour, depth, info = CAMERA_PRESETS["realsense"]
        node = client.node
        self.pub_rgb = node.create_publisher(Image, colour, 10)
        self.pub_depth = node.create_publisher(Image, depth, 10)
        self.pub_info = node.create_publisher(CameraInfo, info, 10)
        self.lock = threading.Lock()
        self.by_stamp: dict[int, list[Any]] = defaultdict(list)
        self.arrived = threading.Condition(self.lock)
        node.create_subscription(Detections, "detections", self._on_detections, result_qos(50))
        self.next_ns = 1_700_000_000 * 10**9
        self.cache: dict[str, tuple[Any, Any, Any]] = {}

    def _on_detections(self, msg: Any) -> None:
        with self.arrived:
            self.by_stamp[msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec].append(msg)
            self.arrived.notify_all()

    def _messages(self, fr: RealFrame) -> tuple[Any, Any, Any]:
        if fr.id not in self.cache:
            from sensor_msgs.msg import CameraInfo, Image

            h, w = fr.rgb.shape[:2]
            rgb = Image(height=h, width=w, encoding="rgb8", is_bigendian=0, step=3 * w,
                        data=np.ascontiguousarray(fr.rgb, np.uint8).tobytes())
            mm = np.where(np.isfinite(fr.depth_m), np.round(fr.depth_m * 1000.0), 0).astype("<u2")
            depth = Image(height=h, width=w, encoding="16UC1", is_bigendian=0, step=2 * w, data=mm.tobytes())
            k = fr.intrinsics
            info = CameraInfo(height=h, width=w, distortion_model="plumb_bob", d=[0.0] * 5,
                              k=[k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0],
                              r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
                              p=[k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0])
            for m in (rgb, depth, info):
                m.header.frame_id = FRAME_ID
            self.cache[fr.id] = (rgb, depth, info)
        return self.cache[fr.id]

    def pause(self, seconds: float) -> None:
        """Let ``seconds`` of stamps pass (nothing is published meanwhile)."""
        self.next_ns += int(seconds * 1e9)

    def show(self, fr: RealFrame, timeout_s: float = 30.0) -> Any | None:
        """Publish ``fr`` (CameraInfo, depth, then colour, one stamp) and wait for its detections;
        the message, or None when none came (a frame the extractor dropped)."""
        from cbcl_pr_ros.nodes.conversions import ns_to_stamp

        ns, self.next_ns = self.next_ns, self.next_ns + 100_000_000
        rgb, depth, info = self._messages(fr)
        for m in (info, depth, rgb):
            m.header.stamp = ns_to_stamp(ns)
        self.pub_info.publish(info)
        self.pub_depth.publish(depth)
        time.sleep(0.005)  # depth and info first: the extractor pairs the colour with them at once
        self.pub_rgb.publish(rgb)
        with self.arrived:
            self.arrived.wait_for(lambda: ns in self.by_stamp, timeout_s)
            got = self.by_stamp.pop(ns, None)
        return got[0] if got else None


# ---------------------------------------------------------------------------- one learner process
class Session:
    """``teaching_session --camera realsense`` with objects on and a memory directory of its own."""

    def __init__(self, dom: int, workdir: Path, params: dict[str, Any]) -> None:
        from cbcl_pr_ros.srv import LoadMemory, SaveMemory, TeachClass

        self.workdir = workdir
        base = {"detect_objects": "on", "no_frame_warning_s": 0.0, "memory_dir": str(workdir / "memory"),
                "memory_path": "memory.safetensors", "threads": 1, "fit_threads": 1}
        (workdir / "memory").mkdir(parents=True, exist_ok=True)
        self.proc = H.start_node("teaching_session", dom, workdir, {**base, **params},
                                 extra=["--nodes", "extractor,learner", "--camera", "realsense"])
        self.client = H.Client(dom, "bench_real_ros")
        self.camera = Camera(self.client)
        self.srv = {"teach": (TeachClass, "teach_class"), "save": (SaveMemory, "save_memory"),
                    "load": (LoadMemory, "load_memory")}
        if not self.client.wait_for_service(TeachClass, "teach_class", 180.0, self.proc):
            raise RuntimeError(f"the nodes did not start:\n{self.proc.output()[-3000:]}")
        res = self.call("save", SaveMemory.Request(path=EMPTY))
        if not res.success:
            raise RuntimeError(f"SaveMemory refused: {res.message}")

    def call(self, what: str, req: Any, timeout: float = 120.0) -> Any:
        t, name = self.srv[what]
        return self.client.call(t, name, req, timeout)

    def reset(self) -> None:
        from cbcl_pr_ros.srv import LoadMemory

        res = self.call("load", LoadMemory.Request(path=EMPTY))
        if not res.success or res.num_classes != 0:
            raise RuntimeError(f"LoadMemory of the empty memory: {res.message}")

    def teach(self, fr: RealFrame, label: str, box: tuple[int, int, int, int], num_frames: int = 0) -> Any:
        """TeachClass with ``box`` as the roi while ``fr`` is shown again and again; the response, or
        None when none came (the teach is then skipped and counted as unanswered)."""
        from sensor_msgs.msg import RegionOfInterest

        from cbcl_pr_ros.srv import TeachClass

        x0, y0, x1, y1 = box
        req = TeachClass.Request(label=label, mode=TeachClass.Request.MODE_OBJECT, num_frames=num_frames,
                                 rois=[RegionOfInterest(x_offset=x0, y_offset=y0, width=x1 - x0, height=y1 - y0)])
        out: list[Any] = []

        def ask() -> None:
            try:
                out.append(self.call("teach", req, 120.0))
            except TimeoutError as exc:  # ServiceUnavailable: a loaded machine's DDS can lose an answer
                log.warning("TeachClass %s: %s", label, exc)
        th = threading.Thread(target=ask, daemon=True)
        self.camera.show(fr)  # one frame first: the teach checks the box against the last frame's size
        th.start()
        while th.is_alive():
            self.camera.show(fr, timeout_s=5.0)
        th.join()
        return out[0] if out else None

    def teach_track(self, fr: RealFrame, label: str, box: tuple[int, int, int, int], shows: int) -> Any:
        """TeachClass by ``track_id`` (the teaching page's tap): ``fr`` is shown ``shows`` times, then the
        track of the detection that best matches ``box`` (IoU >= 0.5) is taught; the response, None when
        none came, or a refusal naming why when no detection matches the box."""
        from cbcl_pr_ros.perception.boxes import box_iou
        from cbcl_pr_ros.srv import TeachClass

        det = None
        for _ in range(max(1, shows)):
            det = self.camera.show(fr) or det
        scored = [(box_iou((o.x0, o.y0, o.x1, o.y1), box), o.id) for o in (det.objects if det else ())]
        iou, track = max(scored, default=(0.0, -1))
        if iou < 0.5:
            return TeachClass.Response(success=False, message=f"no detection matches the box (best IoU {iou:.2f})")
        try:
            return self.call("teach", TeachClass.Request(label=label, track_id=int(track)), 120.0)
        except TimeoutError as exc:
            log.warning("TeachClass %s: %s", label, exc)
            return None

    def close(self) -> None:
        self.client.close()
        self.proc.stop()


# ---------------------------------------------------------------------------- scoring
def score_frame(det: Any, fr: RealFrame, taught: str, teach_frame: RealFrame, c: Counts) -> None:
    """Add one detections message of ``fr`` to ``c``."""
    boxes = [(o.x0, o.y0, o.x1, o.y1) for o in det.objects]
    s = score_proposals(boxes, [b for _, b in fr.objects], fr.ignore)
    in_teach = {n for n, _ in teach_frame.objects}
    used = set(s.matched.values())
    for j, i in s.matched.items():
        name = fr.objects[j][0]
        o = det.objects[i]
        named = bool(o.known) and o.label == taught
        if name == taught:
            c.n["taught_matched"] += 1
            c.n["taught_named"] += named
        else:
            part = "other_in_teach_frame" if name in in_teach else "other_unseen"
            for key in ("other", part):
                c.n[f"{key}_matched"] += 1
                c.n[f"{key}_named"] += named
    for i, o in enumerate(det.objects):
        if i not in used:
            c.n["unmatched"] += 1
            c.n["unmatched_named"] += bool(o.known) and o.label == taught


def eligible(frames: list[RealFrame]) -> list[tuple[str, str, list[str]]]:
    """(source, instance, frame ids) of every instance seen in two or more frames."""
    seen: dict[tuple[str, str], list[str]] = defaultdict(list)
    for fr in frames:
        for name, _ in fr.objects:
            if fr.id not in seen[fr.source, name]:
                seen[fr.source, name].append(fr.id)
    return [(s, n, ids) for (s, n), ids in sorted(seen.items()) if len(ids) >= 2]


def plan(frames: list[RealFrame], seeds: int, per_seed: int) -> list[tuple[int, str, str, str]]:
    """(seed, source, instance, teaching frame id): per seed ``per_seed`` instances and one of each one's
    frames, drawn with the seed."""
    cands = eligible(frames)
    out = []
    for seed in range(seeds):
        rng = np.random.default_rng([seed, 2020])
        for k in rng.permutation(len(cands))[:per_seed]:
            source, name, ids = cands[int(k)]
            out.append((seed, source, name, ids[int(rng.integers(len(ids)))]))
    return out


def prelude_frames(frames: list[RealFrame], teach_id: str, n: int, source: str = "same") -> list[RealFrame]:
    """The ``n`` frames that follow the teaching frame in the labels' order (wrapping round), never the
    teaching frame itself: what the robot saw while looking around before the teach. ``source``:
    ``same`` takes only its source's frames (the same table: the taught object is in most of them, from
    other views), ``other`` only other sources' frames (another table: none shows the taught object)."""
    fr = next(f for f in frames if f.id == teach_id)
    k = frames.index(fr)
    after = [frames[(k + i) % len(frames)] for i in range(1, len(frames))]
    return [f for f in after if (f.source == fr.source) == (source == "same")][:max(0, n)]


def run_variant(params: dict[str, Any], jobs: list[tuple[int, str, str, str]], frames: list[RealFrame],
                repeats: int, workdir: Path, num_frames: int = 0, prelude: int = 0,
                prelude_from: str = "same", teach_by: str = "box") -> dict[str, Any]:
    by_id = {f.id: f for f in frames}
    per_seed: dict[int, Counts] = defaultdict(Counts)
    teaches = []
    t0 = time.perf_counter()
    with H.domain() as dom:
        s = Session(dom, workdir, params)
        try:
            log.info("nodes up after %.0f s", time.perf_counter() - t0)
            for seed, source, name, fid in jobs:
                s.reset()
                s.camera.pause(120.0)
                for seen in prelude_frames(frames, fid, prelude, prelude_from):
                    s.camera.show(seen)
                fr = by_id[fid]
                box = next(b for n, b in fr.objects if n == name)
                res = (s.teach_track(fr, name, box, num_frames or 10) if teach_by == "track"
                       else s.teach(fr, name, box, num_frames))
                if res is None or not res.success:  # e.g. no proposal inside the box: counted, skipped
                    why = "no answer" if res is None else res.message[:160]
                    log.info("%s/%s from %s refused: %s", source, name, fid, why)
                    teaches.append({"seed": seed, "instance": f"{source}/{name}", "teach_frame": fid, "refused": why})
                    continue
                c = Counts()
                for other in (f for f in frames if f.source == source and f.id != fid):
                    for _ in range(repeats):
                        det = s.camera.show(other)
                        c.n["frames_played"] += 1
                        if det is None or det.model_version < res.model_version:
                            c.n["frames_without_detections"] += 1
                            continue
                        score_frame(det, other, name, fr, c)
                per_seed[seed].add(c)
                teaches.append({"seed": seed, "instance": f"{source}/{name}", "teach_frame": fid,
                                "teach_message": res.message[:160], **c.summary()})
                log.info("%s/%s from %s: %s", source, name, fid, c.n)
        finally:
            s.close()
    total = Counts()
    for c in per_seed.values():
        total.add(c)
    return {"params": params, "seconds": round(time.perf_counter() - t0, 1),
            "teaches": len(teaches), "teaches_refused": sum("refused" in t for t in teaches), "total": total.summary(),
            "per_seed": {str(k): v.summary() for k, v in sorted(per_seed.items())}, "per_teach": teaches}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", default=str(ROOT / "bench/real_rgbd/labels.json"))
    ap.add_argument("--frames", default=os.environ.get("CBCL_REAL_RGBD", str(ROOT / "data/real_rgbd")),
                    help="the assembled frames (bench/real_rgbd/assemble.py; not in the repository: licences)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--per-seed", type=int, default=12, help="instances taught per seed (each alone)")
    ap.add_argument("--repeats", type=int, default=2, help="times each other frame is shown")
    ap.add_argument("--num-frames", type=int, default=0, help="TeachClass num_frames (0 = the node's default)")
    ap.add_argument("--prelude", type=int, default=0,
                    help="frames of the source shown once each before every teach (see the docstring)")
    ap.add_argument("--prelude-from", choices=("same", "other"), default="same",
                    help="the prelude's frames: of the teaching frame's source, or of the other sources")
    ap.add_argument("--teach-by", choices=("box", "track"), default="box",
                    help="box: TeachClass with the labelled box as roi; track: the teaching frame is shown "
                         "--num-frames times (10 when 0), then the matching detection's track_id is taught")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE,...",
                    help="a learner variant (default: 'shipped' and 'no_negatives' = negatives_capacity 0)")
    ap.add_argument("--out", default=str(out_path("real_ros.json")))
    ap.add_argument("--label", default="now", help="the run's key in --out (other runs there are kept)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    variants: dict[str, dict[str, Any]] = {"shipped": {}, "no_negatives": {"negatives_capacity": 0}}
    if args.variant:
        variants = {}
        for v in args.variant:
            name, _, kvs = v.partition(":")
            variants[name] = {k: json.loads(x) for k, x in (kv.split("=", 1) for kv in kvs.split(",") if kv)}
    frames = load_frames(args.labels, args.frames)
    jobs = plan(frames, args.seeds, args.per_seed)
    res = {"machine": machine_info(), "loadavg_before": [round(v, 2) for v in os.getloadavg()],
           "seeds": args.seeds, "per_seed": args.per_seed, "repeats": args.repeats, "num_frames": args.num_frames,
           "prelude": args.prelude, "prelude_from": args.prelude_from, "teach_by": args.teach_by,
           "jobs": [{"seed": s, "instance": f"{src}/{n}", "teach_frame": f} for s, src, n, f in jobs], "variants": {}}
    with tempfile.TemporaryDirectory(prefix="bench_real_ros_") as tmp:
        for name, params in variants.items():
            log.info("variant %s %s", name, params)
            res["variants"][name] = run_variant(params, jobs, frames, args.repeats, Path(tmp) / name,
                                                args.num_frames, args.prelude, args.prelude_from, args.teach_by)
            log.info("%s: %s", name, res["variants"][name]["total"])
    res["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.is_file() else {}
    doc.update({"benchmark": "bench_real_ros", "eligible_instances": len(eligible(frames)),
                "protocol": "teaching_session --camera realsense (extractor + learner, one process); per teach: "
                            "LoadMemory of an empty memory, TeachClass with the labelled box as roi while the "
                            "teaching frame is published, then every other frame of the same source published "
                            "--repeats times; detections of the new model matched to labels at IoU >= 0.5"})
    doc.setdefault("runs", {})[args.label] = res
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: v["total"] for k, v in res["variants"].items()}, indent=1))

if __name__ == "__main__":
    main()
