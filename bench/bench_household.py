"""A growing household: teach, frame scoring, save, load, file size and RSS at 10 .. 3000 classes.

Each class count runs in its own process (so that its RSS is its own): the learner is taught that
many synthetic 5-shot classes (1280-d, post-ReLU-like, each class spread along a few directions of
its own), then measured:

* ``teach_s``: one more 5-shot class taught (wall time, median of ``--repeats``);
* ``frame_cpu_ms`` / ``frame_wall_ms``: one ``predict`` of 6 vectors (a frame of 6 objects, top 16,
  as the object stream asks) on this thread's CPU clock and on the wall clock, medians;
* ``save_s`` / ``load_s`` / ``file_mb``: the memory file;
* ``rss_mb``: the process's resident memory after the load; ``memory_bytes_per_class``: the
  learner's own count (memory, head) divided by the classes.

* ``top1_frame`` / ``top1_exact`` / ``frame_agrees``: on 4 held-out vectors of every class (drawn
  like its shots), top-1 of the frame's scoring (``predict``), of the exact logits of every class,
  and the share of vectors where the two pick the same class.

The machine's 1-minute load is recorded with every row: timings on a shared machine mean little
without it.  ``--code A,B`` runs each class count once per checkout (a package root put first on
the child's path; rows labelled by ``code``), one after the other for each count, so that two
versions are measured side by side under the same load.  Run ``python -P bench/bench_household.py
[--classes 10,100,300,1000] [--code OLD_ROOT,NEW_ROOT] [--out PATH]``; the default output is
``runs/bench/household.json`` (not tracked).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import out_path  # noqa: E402

DIM, SHOTS, FRAME = 1280, 5, 6


def _draw(rng: np.random.Generator, centre: np.ndarray, dirs: np.ndarray, n: int) -> np.ndarray:
    return np.abs(centre + rng.normal(0, 1, (n, len(dirs))) @ dirs * 8 + rng.normal(0, 0.9, (n, DIM))).astype(np.float32)


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(ln.split()[1]) for ln in fh if ln.startswith("VmRSS")) / 1024.0


def _uptime() -> str:
    """``uptime``'s line: the load while the bench ran."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def one(n_classes: int, repeats: int) -> dict:
    """Measure one class count in this process."""
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.core.threads import set_blas_threads

    set_blas_threads(1)  # as the nodes run
    rng = np.random.default_rng(0)
    centres = np.abs(rng.normal(0, 1, (n_classes + repeats, DIM)))
    dirs = rng.normal(0, 0.06, (n_classes + repeats, 3, DIM))
    learner = CBCLPRLearner(LearnerConfig(seed=0), "synthetic", DIM)
    t0 = time.perf_counter()
    for lo in range(0, n_classes, 500):  # bulk, in increments of at most 500 classes
        learner.teach_increment({f"c{i}": _draw(rng, centres[i], dirs[i], SHOTS)
                                 for i in range(lo, min(n_classes, lo + 500))})
    build_s = time.perf_counter() - t0
    teach = []
    for j in range(repeats):
        i = n_classes + j
        x = _draw(rng, centres[i], dirs[i], SHOTS)
        t0 = time.perf_counter()
        learner.teach(f"new{j}", x)
        teach.append(time.perf_counter() - t0)
    frame = np.concatenate([_draw(rng, centres[i], dirs[i], 1) for i in range(FRAME)])
    cpu, wall = [], []
    learner.predict(frame, top_k=16)
    for _ in range(50):
        t0, c0 = time.perf_counter(), time.thread_time()
        learner.predict(frame, top_k=16)
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - t0)
    # accuracy: held-out vectors of every class; the frame's scoring against the exact logits
    test = np.concatenate([_draw(rng, centres[i], dirs[i], 4) for i in range(n_classes)])
    truth = np.repeat(np.arange(n_classes), 4)
    names = {c: i for i, c in enumerate(learner.classes_)}
    want = np.array([names.get(f"c{i}", -1) for i in range(n_classes)])[truth]
    frame_pick, exact_pick = [], []
    head = learner._served.head
    for lo in range(0, len(test), FRAME):
        x = learner.transform(test[lo:lo + FRAME])
        frame_pick.append(np.argmax(head.scores(x), axis=1))
        exact_pick.append(np.argmax(head.logits(x), axis=1))
    frame_pick, exact_pick = np.concatenate(frame_pick), np.concatenate(exact_pick)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.safetensors"
        t0 = time.perf_counter()
        learner.save(path)
        save_s = time.perf_counter() - t0
        size = path.stat().st_size
        per_class = learner.memory_bytes() / len(learner.classes_)
        del learner
        t0 = time.perf_counter()
        loaded = CBCLPRLearner.load(path)
        load_s = time.perf_counter() - t0
    return {"classes": n_classes, "build_s": round(build_s, 2), "teach_s": round(float(np.median(teach)), 3),
            "teach_all_s": [round(t, 3) for t in teach],
            "frame_cpu_ms": round(float(np.median(cpu)) * 1e3, 3), "frame_wall_ms": round(float(np.median(wall)) * 1e3, 3),
            "frame_wall_p90_ms": round(float(np.percentile(wall, 90)) * 1e3, 3),
            "save_s": round(save_s, 3), "load_s": round(load_s, 3), "file_mb": round(size / 1e6, 2),
            "rss_mb": round(_rss_mb(), 1), "memory_bytes_per_class": int(per_class),
            "classes_loaded": len(loaded.classes_), "top1_frame": round(float(np.mean(frame_pick == want)), 4),
            "top1_exact": round(float(np.mean(exact_pick == want)), 4),
            "frame_agrees": round(float(np.mean(frame_pick == exact_pick)), 4),
            "loadavg_1min": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", default="10,100,300,1000,3000")
    ap.add_argument("--repeats", type=int, default=3, help="teaches measured per class count")
    ap.add_argument("--out", default=str(out_path("household.json")))
    ap.add_argument("--code", default="", help="comma-separated package roots to measure side by side "
                                                 "(default: the installed package)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process: one class count
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.repeats)))
        return
    from cbcl_pr_ros.evaluation.experiments import machine_info

    roots = [r for r in args.code.split(",") if r] or [""]
    rows = []
    for n in (int(c) for c in args.classes.split(",")):
        for root in roots:
            env = dict(os.environ)
            if root:
                env["PYTHONPATH"] = os.pathsep.join([str(Path(root).resolve()), env.get("PYTHONPATH", "")])
            out = subprocess.run([sys.executable, "-P", __file__, "--one", str(n), "--repeats", str(args.repeats)],
                                 capture_output=True, text=True, check=True, env=env)
            rows.append({"code": root or "installed", **json.loads(out.stdout.strip().splitlines()[-1])})
            print(json.dumps(rows[-1]), flush=True)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps({"machine": machine_info(), "uptime": _uptime(), "rows": rows},
                                                 indent=1))


if __name__ == "__main__":
    main()
