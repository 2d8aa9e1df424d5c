"""Does the camera stream keep its rate while teach images go through the same backbone?

One process, the real backbone (EfficientNet-Lite0, ONNX Runtime, 2 threads): a camera thread
extracts a frame and its 6 object crops (one batch of 7) at up to ``--rate`` Hz while a teach
thread sends ``--teach-images`` images every ``--teach-every`` s through the same backbone, either
as one batch under a plain lock (as the extractor did) or by turns
(:class:`~cbcl_pr_ros.runtime.backbone_turns.BackboneTurns`, as it does now).  The two ways run
interleaved, ``--repeats`` times each, and optionally with another process keeping one core busy.
Per run: the stream's rate, its longest gap between two frames, and the teaches' round trips.

    python -P bench/bench_backbone_turns.py [--seconds 12] [--repeats 3] [--busy] [--out PATH]

Writes ``runs/bench/backbone_turns.json`` by default (not tracked).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import out_path  # noqa: E402

from cbcl_pr_ros.runtime.backbone_turns import BackboneTurns


def run_once(backbone, way: str, seconds: float, rate: float, teach_every: float, n_teach: int) -> dict:
    rng = np.random.default_rng(0)
    frame = [rng.integers(0, 255, (480, 640, 3), np.uint8)] + [rng.integers(0, 255, (120, 100, 3), np.uint8)] * 6
    teach = [rng.integers(0, 255, (240, 240, 3), np.uint8) for _ in range(n_teach)]
    turns, lock = BackboneTurns(chunk=2), threading.Lock()
    stop = threading.Event()
    stamps: list[float] = []
    trips: list[float] = []

    def camera() -> None:
        period, nxt = 1.0 / rate, time.perf_counter()
        while not stop.is_set():
            with (turns if way == "turns" else lock):
                backbone.extract(frame)
            stamps.append(time.perf_counter())
            nxt = max(nxt + period, time.perf_counter())
            time.sleep(max(0.0, nxt - time.perf_counter()))

    def teacher() -> None:
        while not stop.wait(teach_every):
            t0 = time.perf_counter()
            if way == "turns":
                turns.extract(backbone, teach)
            else:
                with lock:
                    backbone.extract(teach)
            trips.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=camera), threading.Thread(target=teacher)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    s = np.array(stamps)
    s = s[s > s[0] + 1.0] if len(s) else s  # the first second warms up
    gaps = np.diff(s) if len(s) > 1 else np.zeros(1)
    return {"way": way, "rate_hz": round(float((len(s) - 1) / (s[-1] - s[0])), 2) if len(s) > 1 else 0.0,
            "max_gap_s": round(float(gaps.max()), 3), "p95_gap_s": round(float(np.percentile(gaps, 95)), 3),
            "teaches": len(trips), "teach_round_trip_s": [round(t, 2) for t in trips],
            "loadavg_1min": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--teach-every", type=float, default=3.0)
    ap.add_argument("--teach-images", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--busy", action="store_true", help="another process keeps one core busy")
    ap.add_argument("--out", default=str(out_path("backbone_turns.json")))
    args = ap.parse_args()
    from cbcl_pr_ros.evaluation.experiments import machine_info
    from cbcl_pr_ros.features import make_backbone

    backbone = make_backbone("efficientnet_lite0", runtime="onnx", threads=2)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    runs = []
    try:
        for _ in range(args.repeats):
            for way in ("one_batch", "turns"):  # interleaved: a burst of load hits both
                runs.append(run_once(backbone, way, args.seconds, args.rate, args.teach_every, args.teach_images))
                print(json.dumps(runs[-1]), flush=True)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"machine": machine_info(), "settings": vars(args), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
