#!/usr/bin/env python3
"""Benchmark the feature layer: throughput at batch 32 and one-frame latency, ONNX vs PyTorch.

Writes bench/results/features.json. The machine is shared, so every figure is measured over
several rounds and reported as best and median, with the load average at start and end.

    python bench/bench_features.py [--rounds 3] [--threads 2] [--quick]

ResNet-18/34 use random weights (no ImageNet weights are obtainable offline here): their speed
is what matters, and speed does not depend on the weight values.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from cbcl_pr_ros.evaluation.experiments import machine_info as _shared_machine_info

_LOG = logging.getLogger("bench_features")


def machine_info() -> dict:
    cpu = _shared_machine_info()["cpu"] or "unknown"
    import onnxruntime
    import torch

    return {
        "cpu_model": cpu,
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "cuda_available": bool(torch.cuda.is_available()),
    }


def frames(n: int, seed: int = 0) -> list[np.ndarray]:
    """Photo-like 640x480 RGB frames (smooth noise upsampled), so JPEG-free but realistic in size."""
    import cv2

    rng = np.random.default_rng(seed)
    return [
        cv2.resize(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8), (640, 480), interpolation=cv2.INTER_CUBIC)
        for _ in range(n)
    ]


def random_resnet_weights(arch: str, out_dir: Path) -> Path:
    import torch

    from cbcl_pr_ros.features.torchvision_compat import import_torchvision

    torch.manual_seed(0)
    p = out_dir / f"{arch}-random.pth"
    torch.save(getattr(import_torchvision().models, arch)(weights=None).state_dict(), p)
    return p


def summarise(values: list[float]) -> dict:
    return {"best": min(values), "median": statistics.median(values), "all": [round(v, 3) for v in values]}


def summarise_rate(values: list[float]) -> dict:
    return {"best": max(values), "median": statistics.median(values), "all": [round(v, 1) for v in values]}


def measure_round(bb, pre: np.ndarray, batch: list[np.ndarray], single: np.ndarray, lat_iters: int) -> dict:
    """One round of every figure for one backbone."""
    t = time.perf_counter()
    bb.extract_preprocessed(pre)
    thr_model = len(batch) / (time.perf_counter() - t)
    t = time.perf_counter()
    bb.extract(batch)
    thr_e2e = len(batch) / (time.perf_counter() - t)
    lat = []
    for _ in range(lat_iters):
        t = time.perf_counter()
        bb.extract([single])
        lat.append((time.perf_counter() - t) * 1e3)
    t = time.perf_counter()
    for _ in range(20):
        bb.preprocess([single])
    pre_ms = (time.perf_counter() - t) * 1e3 / 20
    return {"thr_model": thr_model, "thr_e2e": thr_e2e, "p50": float(np.percentile(lat, 50)),
            "p95": float(np.percentile(lat, 95)), "pre_ms": pre_ms, "load1": os.getloadavg()[0]}


def aggregate(rounds: list[dict], lat_iters: int) -> dict:
    return {
        "batch32_img_per_s_model_only": summarise_rate([r["thr_model"] for r in rounds]),
        "batch32_img_per_s_with_preprocessing": summarise_rate([r["thr_e2e"] for r in rounds]),
        "single_frame_latency_ms_p50": summarise([r["p50"] for r in rounds]),
        "single_frame_latency_ms_p95": summarise([r["p95"] for r in rounds]),
        "preprocess_one_640x480_ms": summarise([r["pre_ms"] for r in rounds]),
        "loadavg_1min_per_round": [round(r["load1"], 2) for r in rounds],
        "latency_iterations_per_round": lat_iters,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--latency-iters", type=int, default=40)
    ap.add_argument("--backbones", default="efficientnet_lite0,resnet18,resnet34")
    ap.add_argument("--runtimes", default="onnx,torch")
    ap.add_argument("--quick", action="store_true", help="1 round, few iterations (smoke run)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "features.json"))
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.rounds, args.latency_iters = 1, 5

    from cbcl_pr_ros.features import make_backbone

    result: dict = {
        "benchmark": "features",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "loadavg_start": os.getloadavg(),
        "settings": {"threads": args.threads, "batch": args.batch, "input": "640x480 RGB frames -> 224x224",
                     "rounds": args.rounds, "device": "cpu"},
        "notes": [
            "ResNet-18/34 use random weights: no ImageNet ResNet weights are obtainable offline here; speed "
            "does not depend on weight values.",
            "batch32_img_per_s_model_only times the network on a preprocessed batch; _with_preprocessing "
            "includes crop/resize/normalise of 640x480 frames.",
            "single_frame_latency includes preprocessing of one 640x480 frame.",
            "The machine is shared with other agents: best and median over rounds are reported.",
        ],
        "backbones": {},
    }
    batch = frames(args.batch)
    single = frames(1, seed=99)[0]
    check = frames(8, seed=7)
    with tempfile.TemporaryDirectory(prefix="bench_features_") as tmp:
        tmpd = Path(tmp)
        models: dict[tuple[str, str], object] = {}
        for name in args.backbones.split(","):
            weights = None if name == "efficientnet_lite0" else random_resnet_weights(name, tmpd)
            entry: dict = {"weights": "pretrained ImageNet (package)" if weights is None else "random (see notes)"}
            result["backbones"][name] = entry
            feats = {}
            for runtime in args.runtimes.split(","):
                t = time.perf_counter()
                bb = make_backbone(name, runtime=runtime, weights_path=weights, threads=args.threads,
                                   device="cpu", cache_dir=tmpd / "onnx")
                entry[runtime] = {"build_seconds_incl_export": round(time.perf_counter() - t, 2)}
                if runtime == "onnx":
                    entry[runtime]["export_max_abs_diff"] = bb.max_abs_diff
                feats[runtime] = bb.extract(check)  # also warms up both batch shapes
                bb.extract([single])
                models[(name, runtime)] = bb
            if "onnx" in feats and "torch" in feats:
                entry["torch_vs_onnx_max_abs_diff"] = float(np.abs(feats["onnx"] - feats["torch"]).max())
                entry["feature_max_abs"] = float(np.abs(feats["torch"]).max())
        # Rounds go over all models in turn, so a burst of load from other processes hits one
        # round of each rather than every round of one model.
        per_model: dict[tuple[str, str], list[dict]] = {k: [] for k in models}
        pre = {k: bb.preprocess(batch) for k, bb in models.items()}
        for r in range(args.rounds):
            for key, bb in models.items():
                iters = args.latency_iters if key[1] == "onnx" else max(5, args.latency_iters // 4)
                m = measure_round(bb, pre[key], batch, single, iters)
                per_model[key].append(m)
                _LOG.info("round %d %s/%s: %.1f img/s (batch %d), p50 %.2f ms, load %.1f", r + 1, *key,
                          m["thr_model"], args.batch, m["p50"], m["load1"])
        for (name, runtime), rounds in per_model.items():
            iters = args.latency_iters if runtime == "onnx" else max(5, args.latency_iters // 4)
            result["backbones"][name][runtime].update(aggregate(rounds, iters))
    result["loadavg_end"] = os.getloadavg()
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    _LOG.info("wrote %s", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
