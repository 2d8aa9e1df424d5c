#!/usr/bin/env python3
"""CPU speed of the feature layer in two source trees, measured in one run as a ratio (B / A).

    python bench/ab_features_cpu.py OLD_TREE NEW_TREE [--rounds 4] [--iters 30] [--threads 2]

Each tree is a directory holding a ``cbcl_pr_ros`` package (e.g. ``git archive main cbcl_pr_ros |
tar -x -C /tmp/old``). Rounds alternate A, B, A, B in fresh processes, so load from other
processes on a shared machine hits both alike; per tree the median over rounds is kept. Figures:
one 640x480 frame end to end (p50 wall ms, and p50 process CPU ms, which a loaded machine disturbs
far less) and batch-32 img/s (and CPU ms per image) with preprocessing, for runtimes onnx and
torch (EfficientNet-Lite0). Prints JSON; writes it with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, sys, time, numpy as np, cv2
from cbcl_pr_ros.features import make_backbone
threads, iters, cache = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
frames = [cv2.resize(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8), (640, 480), interpolation=cv2.INTER_CUBIC)
          for _ in range(33)]
out = {}
for runtime in ("onnx", "torch"):
    bb = make_backbone(runtime=runtime, device="cpu", threads=threads, cache_dir=cache)
    bb.extract(frames[:32]); bb.extract(frames[32:])
    n = iters if runtime == "onnx" else max(5, iters // 4)
    lat, cpu = [], []
    for i in range(n):
        c = time.process_time(); t = time.perf_counter(); bb.extract([frames[32]])
        lat.append((time.perf_counter() - t) * 1e3); cpu.append((time.process_time() - c) * 1e3)
    c = time.process_time(); t = time.perf_counter(); bb.extract(frames[:32])
    rate, cpu32 = 32 / (time.perf_counter() - t), (time.process_time() - c) * 1e3 / 32
    out[runtime] = {"p50_ms": float(np.median(lat)), "p50_cpu_ms": float(np.median(cpu)), "batch32_img_s": rate,
                    "batch32_cpu_ms_per_img": cpu32}
print(json.dumps(out))
"""


def _run(tree: str, threads: int, iters: int, cache: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree), "OMP_NUM_THREADS": str(threads)}
    res = subprocess.run([sys.executable, "-P", "-c", _CHILD, str(threads), str(iters), cache],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tree_a")
    ap.add_argument("tree_b")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from cbcl_pr_ros.evaluation.experiments import machine_info

    runs: dict[str, list[dict]] = {"a": [], "b": []}
    loads = []
    with tempfile.TemporaryDirectory(prefix="ab_features_") as cache:
        for r in range(args.rounds):
            for side, tree in (("a", args.tree_a), ("b", args.tree_b)):
                runs[side].append(_run(tree, args.threads, args.iters, cache))
                loads.append(round(os.getloadavg()[0], 2))
                print(f"round {r + 1} {side}: {runs[side][-1]}", file=sys.stderr)
    result: dict = {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(), "threads": args.threads,
                    "rounds": args.rounds, "loadavg_1min_after_each_run": loads, "trees": [args.tree_a, args.tree_b]}
    for runtime in ("onnx", "torch"):
        for fig in ("p50_ms", "p50_cpu_ms", "batch32_img_s", "batch32_cpu_ms_per_img"):
            med = {s: statistics.median(x[runtime][fig] for x in runs[s]) for s in "ab"}
            result[f"{runtime}_{fig}"] = {"a": round(med["a"], 3), "b": round(med["b"], 3),
                                          "ratio_b_over_a": round(med["b"] / med["a"], 3)}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
