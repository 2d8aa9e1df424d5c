#!/usr/bin/env python3
"""Benchmark the feature layer: throughput at batch 32 and one-frame latency, ONNX vs PyTorch.

Writes runs/bench/features.json (CPU) or, with ``--device cuda``, runs/bench/features_cuda.json.
The machine is shared, so every figure is measured over several rounds and reported as best and
median, with the load average at start and end.

    python bench/bench_features.py [--rounds 3] [--threads 2] [--quick]
    python bench/bench_features.py --device cuda [--quick]    # on a GPU machine

The CUDA run records the GPU's name and, per backbone and precision (fp32, tf32, fp16), the
figures issue 13 sets targets for: p50 latency of one 640x480 uint8 frame from host memory to a
feature vector on the host (CUDA graph; eager beside it), the model alone at batch 1 (CUDA graph
on a device tensor), offline img/s end to end from uint8 frames (prefetching producer), model-only
img/s at the offline batch, and the max relative error against fp32 CPU features.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402

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


def _timed_cuda(fn, iters: int) -> list[float]:
    """Milliseconds per call of ``fn`` (synchronised: each call ends with its result on the host)."""
    import torch

    out = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def _model_only_graph_ms(bb, iters: int) -> list[float]:
    """The network alone at batch 1 on a device tensor, replayed from a CUDA graph (the paper's figure)."""
    import torch

    x = torch.zeros((1, 3, bb.spec.crop, bb.spec.crop), device="cuda")
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), bb._math():
            for _ in range(3):
                bb._net(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), bb._math():
            bb._net(x)
        return _timed_cuda(graph.replay, iters)


def _model_only_rate(bb, batch: int, reps: int) -> float:
    """Images/s of the network alone on a device batch (eager; graphs add nothing at this size)."""
    import torch

    x = torch.zeros((batch, 3, bb.spec.crop, bb.spec.crop), device="cuda")
    with torch.inference_mode(), bb._math():
        bb._net(x)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(reps):
            bb._net(x)
        torch.cuda.synchronize()
    return batch * reps / (time.perf_counter() - t)


def cuda_main(args) -> int:
    """The GPU figures (see the module docstring); CPU fp32 features are the accuracy reference."""
    import torch

    from cbcl_pr_ros.features import extract_prefetched, make_backbone
    from cbcl_pr_ros.features.prefetch import default_workers

    if not torch.cuda.is_available():
        print("error: --device cuda but torch sees no CUDA device (a CPU build of torch, or no GPU)", file=sys.stderr)
        return 1
    import onnxruntime

    result: dict = {
        "benchmark": "features_cuda",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {**machine_info(), "gpu": torch.cuda.get_device_name(0), "torch_cuda": torch.version.cuda,
                    "cudnn": torch.backends.cudnn.version(),
                    "onnxruntime_providers": onnxruntime.get_available_providers()},
        "loadavg_start": os.getloadavg(),
        "settings": {"offline_batch": args.offline_batch, "offline_images": args.offline_images,
                     "prefetch_workers": default_workers(), "latency_iterations": args.latency_iters,
                     "rounds": args.rounds, "input": "640x480 RGB uint8 frames -> the backbone input (224, Lite1 240, Lite2 260)"},
        "targets": {"single_frame_p50_ms": 1.0, "model_only_ms": 0.6, "offline_img_per_s_efficientnet_lite0": 5000,
                    "max_rel_err_fp32_vs_cpu": 1e-4},
        "notes": [
            "max_rel_err_vs_fp32_cpu = max |gpu - cpu| / max |cpu| over check frames of 3 sizes (640x480, "
            "160x120, 1280x720), CPU = runtime torch, fp32.",
            "single_frame_* is host uint8 frame -> host feature vector (pinned upload, device crop/normalise, "
            "network, copy back), synchronised per call.",
            "offline_img_per_s_end_to_end: extract_prefetched over uint8 frames already in memory (no decoding), "
            "worker threads cropping/resizing with OpenCV (the default); _device_resize: whole frames uploaded "
            "and resized on the GPU.",
            "ResNet-18/34 use random weights (speed does not depend on weight values).",
        ],
        "backbones": {},
    }
    pool = frames(64)
    single = frames(1, seed=99)[0]
    check = frames(6, seed=7) + [cv2_resize(f, (160, 120)) for f in frames(2, seed=8)] + \
        [cv2_resize(f, (1280, 720)) for f in frames(2, seed=9)]
    with tempfile.TemporaryDirectory(prefix="bench_features_cuda_") as tmp:
        tmpd = Path(tmp)
        for name in args.backbones.split(","):
            weights = None if name.startswith("efficientnet_lite") else random_resnet_weights(name, tmpd)
            ref = make_backbone(name, runtime="torch", weights_path=weights, device="cpu", threads=args.threads).extract(check)
            entry: dict = {"weights": "pretrained ImageNet (package)" if weights is None else "random (see notes)"}
            result["backbones"][name] = entry
            configs = [("torch", p) for p in args.precisions.split(",")]
            if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
                configs.append(("onnx", "fp32"))
            for runtime, precision in configs:
                bb = make_backbone(name, runtime=runtime, weights_path=weights, device="cuda", precision=precision,
                                   batch_size=args.offline_batch, cache_dir=tmpd / "onnx")
                got = bb.extract(check)
                rec: dict = {"runtime": bb.runtime, "device": bb.device, "precision": bb.precision,
                             "max_rel_err_vs_fp32_cpu": float(np.abs(got - ref).max() / np.abs(ref).max()),
                             "max_abs_err_vs_fp32_cpu": float(np.abs(got - ref).max())}
                rounds = []
                for r in range(args.rounds):
                    bb.extract([single])  # capture / warm-up
                    m = {"lat": _timed_cuda(lambda: bb.extract([single]), args.latency_iters)}
                    n = args.offline_images
                    extract_prefetched(bb, 2 * args.offline_batch, lambda i: pool[i % len(pool)])  # warm-up
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    extract_prefetched(bb, n, lambda i: pool[i % len(pool)])
                    m["offline"] = n / (time.perf_counter() - t)
                    t = time.perf_counter()
                    extract_prefetched(bb, n, lambda i: pool[i % len(pool)], host_crop=False)
                    m["offline_device_resize"] = n / (time.perf_counter() - t)
                    if runtime == "torch":
                        m["model_ms"] = _model_only_graph_ms(bb, args.latency_iters)
                        m["model_rate"] = _model_only_rate(bb, args.offline_batch, 10)
                        eager = make_backbone(name, runtime="torch", weights_path=weights, device="cuda",
                                              precision=precision, cuda_graphs=False) if r == 0 else eager
                        eager.extract([single])
                        m["eager"] = _timed_cuda(lambda: eager.extract([single]), args.latency_iters)
                    m["load1"] = os.getloadavg()[0]
                    rounds.append(m)
                    _LOG.info("round %d %s %s/%s: p50 %.3f ms, offline %.0f img/s, rel err %.2g", r + 1, name,
                              runtime, precision, float(np.percentile(m["lat"], 50)), m["offline"],
                              rec["max_rel_err_vs_fp32_cpu"])
                rec["single_frame_host_to_feature_ms_p50"] = summarise(
                    [float(np.percentile(m["lat"], 50)) for m in rounds])
                rec["single_frame_host_to_feature_ms_p95"] = summarise(
                    [float(np.percentile(m["lat"], 95)) for m in rounds])
                rec["offline_img_per_s_end_to_end"] = summarise_rate([m["offline"] for m in rounds])
                rec["offline_img_per_s_end_to_end_device_resize"] = summarise_rate(
                    [m["offline_device_resize"] for m in rounds])
                if runtime == "torch":
                    rec["model_only_batch1_cuda_graph_ms_p50"] = summarise(
                        [float(np.percentile(m["model_ms"], 50)) for m in rounds])
                    rec[f"model_only_batch{args.offline_batch}_img_per_s"] = summarise_rate(
                        [m["model_rate"] for m in rounds])
                    rec["single_frame_eager_ms_p50"] = summarise([float(np.percentile(m["eager"], 50)) for m in rounds])
                rec["loadavg_1min_per_round"] = [round(m["load1"], 2) for m in rounds]
                entry[f"{runtime}_{precision}"] = rec
    result["loadavg_end"] = os.getloadavg()
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    out = Path(args.out or out_path("features_cuda.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    _LOG.info("wrote %s", out)
    return 0


def cv2_resize(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    import cv2

    return cv2.resize(img, size, interpolation=cv2.INTER_AREA)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precisions", default="fp32,tf32,fp16", help="--device cuda: precisions to measure")
    ap.add_argument("--offline-batch", type=int, default=128, help="--device cuda: batch of the offline figure")
    ap.add_argument("--offline-images", type=int, default=4096, help="--device cuda: images per offline round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--latency-iters", type=int, default=40)
    ap.add_argument("--backbones", default="efficientnet_lite0,resnet18,resnet34")
    ap.add_argument("--runtimes", default="onnx,torch")
    ap.add_argument("--quick", action="store_true", help="1 round, few iterations (smoke run)")
    ap.add_argument("--out", default=None,
                    help="default runs/bench/features.json (cpu) or features_cuda.json (cuda)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.quick:
        args.rounds, args.latency_iters = 1, 5
        args.offline_images = min(args.offline_images, 512)
    if args.device == "cuda":
        if args.latency_iters == 40 and not args.quick:
            args.latency_iters = 200
        return cuda_main(args)
    args.out = args.out or str(out_path("features.json"))

    from cbcl_pr_ros.features import make_backbone

    result: dict = {
        "benchmark": "features",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "loadavg_start": os.getloadavg(),
        "settings": {"threads": args.threads, "batch": args.batch, "input": "640x480 RGB frames -> the backbone input (224, Lite1 240, Lite2 260)",
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
            weights = None if name.startswith("efficientnet_lite") else random_resnet_weights(name, tmpd)
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
