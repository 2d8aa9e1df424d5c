"""Train a small instance adapter on top of frozen EfficientNet-Lite0 features, from our own renders.

Why: the open-set gate separates another view of a taught object from a never-taught object only as
well as the feature space does (AUROC ~0.80-0.87 on the real set). An adapter trained so that views
of one object are close and different objects (also of one category: another tint or size) are far
could sharpen that without new pretrained weights (none install here).

Three steps, each deterministic under ``--seed``:

1. render: every catalogue category, ``--instances`` objects each (own scale, tint, mesh), each alone
   on the table from ``--views`` hand-camera poses (random table texture, light, azimuth, elevation
   20-80 deg, distance 3-9 half extents); the object's box is cropped as the extractor crops a
   proposal (masked to the object's pixels in 70 % of the views, plain otherwise), and the Lite0
   vector of every crop is stored in ``--cache`` (``sim_features.npz``);
   ``--jitter n`` adds n copies of each view's crop with the box shifted / scaled as a proposal's may
   be; ``--scenes n`` renders n cluttered tables instead (3-8 objects, ``--views`` poses each), every
   object cropped as the real set's crops are (its box masked by the product's own depth proposal);
   ``--render-only`` stops here (``eval_render_whitening.py`` fits its transforms to these vectors);
2. train: a projection (``--arch linear`` 1280->D or ``mlp`` 1280->H->D) of the transformed vector
   (power 0.5, L2) to an L2-normalised D-vector, or ``residual``: x + B A x of rank D, B starting at
   zero (so at first the Lite0 space itself), ``--anchor`` a penalty on |B A|^2 that keeps it near;
   supervised-contrastive loss over instances (batches of P instances x K views), torch on CPU;
3. write the weights (safetensors) and a JSON training log under ``--out``; the log carries the RMS
   within-category pair distance of the adapted sim vectors (the gate's distance prior, measured as
   the shipped Lite0 prior was: on rendered objects).

Run (about 11 min rendering + 1-2 min training on 2 busy cores; the renders are cached):

    source scripts/env.sh && python -P bench/train_adapter.py            # -> cache/adapter/, runs/adapter/
    python -P bench/eval_adapter.py      # real held-out AUROC, first shot -> runs/bench/eval_adapter_<name>.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # bench_real


def render_features(instances: int, views: int, seed: int, size: int = 320, jitter: int = 0) -> dict:
    """Lite0 vectors of masked/plain crops of every view of every rendered instance; with ``jitter``,
    as many more crops of each view whose box is shifted by up to 8 % and scaled by 0.9-1.1 (the real
    set's jittered copies, a proposal's box error); ``view`` numbers the views (copies share it)."""
    from bench_real import _jitter_boxes

    from cbcl_pr_ros.features import make_backbone
    from cbcl_pr_ros.perception import crop_images
    from cbcl_pr_ros.perception.types import Proposal
    from cbcl_pr_ros.robot.assets import CATALOGUE, TEXTURES
    from cbcl_pr_ros.robot.scenes import table_world
    from cbcl_pr_ros.robot.world import CameraConfig, sample_instances

    cam = CameraConfig(size, size * 3 // 4, 60.0, 0.02, 3.0)
    world = table_world(seed, cam)
    bb = make_backbone("efficientnet_lite0", runtime="onnx", threads=2)
    X, inst_id, cat_id, names, view_id = [], [], [], [], []
    try:
        for ci, cat in enumerate(CATALOGUE):
            rng = np.random.default_rng(np.random.SeedSequence([seed, ci, 4242]))
            for inst in sample_instances(cat, instances, rng, prefix=f"a{ci}_{cat}"):
                world.clear_objects()
                centre = np.asarray(world.config.table_center, float)
                obj = world.add_object(inst, centre, 0.0)
                crops, vid = [], []
                for v in range(views):
                    world.set_table_texture(TEXTURES[int(rng.integers(len(TEXTURES)))])
                    world.move_object(inst.name, centre + rng.uniform(-0.01, 0.01, 2), float(rng.uniform(-math.pi, math.pi)))
                    world.randomize_light(rng)
                    dist = max(float(rng.uniform(3.0, 9.0)) * float(obj.half_extents.max()), 0.12)
                    elev = math.radians(float(rng.uniform(20.0, 80.0)))
                    az = float(rng.uniform(-math.pi, math.pi))
                    target = obj.position + np.r_[rng.normal(0, 0.01, 2), 0.0]
                    eye = target + dist * np.array([math.cos(elev) * math.cos(az), math.cos(elev) * math.sin(az),
                                                    math.sin(elev)])
                    world.set_free_camera(eye, target)
                    fr = world.render(cam)
                    idx = fr.object_names.index(inst.name) if inst.name in fr.object_names else -1
                    mask = fr.segmentation == idx
                    if idx < 0 or mask.sum() < 100:
                        continue
                    ys, xs = np.nonzero(mask)
                    box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
                    masked = rng.random() < 0.7
                    centroid = np.zeros(3) if masked else np.full(3, np.nan)
                    boxes = [box] + _jitter_boxes(box, fr.rgb.shape, jitter + 1, rng)[1:] if jitter else [box]
                    crops += crop_images(fr.rgb, [Proposal(b, mask if masked else None, centroid,
                                                           np.full(3, np.nan), 1.0) for b in boxes])
                    vid += [v] * len(boxes)
                if len(set(vid)) < 2:
                    continue
                X.append(np.asarray(bb.extract(crops), np.float32))
                inst_id += [len(names)] * len(crops)
                cat_id += [ci] * len(crops)
                view_id += vid
                names.append(inst.name)
            print(f"rendered {cat}: {len(names)} instances so far", flush=True)
    finally:
        world.close()
    return {"X": np.concatenate(X), "inst": np.asarray(inst_id), "cat": np.asarray(cat_id), "names": np.asarray(names),
            "view": np.asarray(view_id)}


def render_scene_features(scenes: int, views: int, seed: int, size: int = 480) -> dict:
    """Lite0 vectors of every object of cluttered rendered tables (3-8 objects each, the catalogue's
    categories), each seen from ``views`` camera poses around the table (azimuth within 100 deg of the
    robot's side, height 0.3-0.7 m, light and table texture redrawn per scene), cropped as the real
    set's crops are (``bench_real.MaskedCrops``): the object's box, masked by the product's own depth
    proposal that matches it. An object is an instance (its views are positives, the other objects
    of its table negatives); ``view`` numbers the poses."""
    from cbcl_pr_ros.features import make_backbone
    from cbcl_pr_ros.perception import crop_images, mask_for_box, propose
    from cbcl_pr_ros.perception.types import CameraIntrinsics, Proposal
    from cbcl_pr_ros.robot.assets import CATALOGUE, TEXTURES
    from cbcl_pr_ros.robot.scenes import SceneSpec, ground_truth, make_scene, table_world
    from cbcl_pr_ros.robot.world import CameraConfig

    cam = CameraConfig(size * 4 // 3, size, 60.0, 0.02, 3.0)
    spec = SceneSpec(n_objects=(3, 8), camera=cam)
    world = table_world(seed, cam)
    bb = make_backbone("efficientnet_lite0", runtime="onnx", threads=2)
    X, inst_id, cat_id, names, view_id = [], [], [], [], []
    index: dict[str, int] = {}
    try:
        for sc in range(scenes):
            rng = np.random.default_rng(np.random.SeedSequence([seed, sc, 4343]))
            placed = make_scene(world, list(CATALOGUE), rng, spec, prefix=f"s{sc}_")
            world.set_table_texture(TEXTURES[int(rng.integers(len(TEXTURES)))])
            world.randomize_light(rng)
            cx, cy = world.config.table_center
            for v in range(views):
                target = np.array([cx, cy, world.config.table_height]) + np.r_[rng.normal(0, 0.04, 2), 0.0]
                az = math.pi + math.radians(float(rng.uniform(-100.0, 100.0)))
                back, height = float(rng.uniform(0.1, 0.4)), float(rng.uniform(0.3, 0.7))
                world.set_free_camera(target + np.array([back * math.cos(az), back * math.sin(az), height]), target)
                fr = world.render(cam)
                gts = ground_truth(world, fr, 400)
                if not gts:
                    continue
                K = np.asarray(fr.K, float)
                props = propose(fr.rgb, fr.depth, CameraIntrinsics(K[0, 0], K[1, 1], K[0, 2], K[1, 2]))
                crops = []
                for g in gts:
                    mask, _ = mask_for_box(props, g.box, fr.rgb.shape)
                    centre = np.zeros(3) if mask is not None else np.full(3, np.nan)
                    crops += crop_images(fr.rgb, [Proposal(g.box, mask, centre, np.full(3, np.nan), 1.0)])
                X.append(np.asarray(bb.extract(crops), np.float32))
                for g in gts:
                    if g.name not in index:
                        index[g.name] = len(names)
                        names.append(g.name)
                    inst_id.append(index[g.name])
                    cat_id.append(list(CATALOGUE).index(g.category))
                    view_id.append(v)
            if sc % 10 == 9:
                print(f"rendered {sc + 1} scenes: {len(names)} objects, {len(inst_id)} crops", flush=True)
    finally:
        world.close()
    return {"X": np.concatenate(X), "inst": np.asarray(inst_id), "cat": np.asarray(cat_id), "names": np.asarray(names),
            "view": np.asarray(view_id)}


def tukey_l2(x: np.ndarray) -> np.ndarray:
    """The learner's default transform: power 0.5 (signed), then L2."""
    t = np.sign(x) * np.sqrt(np.abs(x))
    return t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)


def build(arch: str, dim: int, hidden: int):
    import torch.nn as nn

    if arch == "residual":
        return Residual(dim)
    if arch == "linear":
        return nn.Linear(1280, dim, bias=False)
    return nn.Sequential(nn.Linear(1280, hidden), nn.GELU(), nn.Linear(hidden, dim))


def _residual_class():
    import torch.nn as nn

    class _Residual(nn.Module):
        """``x + B A x`` (rank ``rank``, B starts at zero): the Lite0 space itself at the start, and
        never further from it than the penalty on ``B A`` allows."""

        def __init__(self, rank: int):
            super().__init__()
            self.down = nn.Linear(1280, rank, bias=False)
            self.up = nn.Linear(rank, 1280, bias=False)
            nn.init.zeros_(self.up.weight)

        def forward(self, x):
            return x + self.up(self.down(x))

    return _Residual


def Residual(rank: int):  # noqa: N802 - a class made on demand (torch imported lazily)
    return _residual_class()(rank)


def supcon(z, y, temperature: float):
    """Supervised contrastive loss (all other views of the same instance are positives)."""
    import torch

    sim = z @ z.T / temperature
    n = len(y)
    eye = torch.eye(n, dtype=torch.bool)
    sim = sim.masked_fill(eye, -1e9)
    pos = (y[:, None] == y[None, :]) & ~eye
    logp = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    return -(logp * pos).sum(1).div(pos.sum(1).clamp(min=1)).mean()


def train(data: dict, arch: str, dim: int, hidden: int, epochs: int, seed: int, temperature: float = 0.1,
          p: int = 48, k: int = 4, lr: float = 2e-3, wd: float = 1e-4, anchor: float = 0.0) -> tuple[object, list[dict]]:
    """Fit the adapter; returns the module and the per-epoch log."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    rng = np.random.default_rng(seed)
    T = torch.from_numpy(tukey_l2(data["X"]))
    inst = data["inst"]
    by = [np.nonzero(inst == i)[0] for i in range(inst.max() + 1)]
    model = build(arch, dim, hidden)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    steps = max(1, len(by) // p)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs * steps)
    log = []
    for ep in range(epochs):
        order, tot = rng.permutation(len(by)), 0.0
        for s in range(steps):
            rows = np.concatenate([rng.choice(by[i], min(k, len(by[i])), replace=False) for i in order[s * p:(s + 1) * p]])
            z = torch.nn.functional.normalize(model(T[rows] + 0.01 * torch.randn(len(rows), 1280)), dim=1)
            loss = supcon(z, torch.from_numpy(inst[rows]), temperature)
            if anchor > 0 and arch == "residual":  # keep the residual near zero: the Lite0 geometry stays
                loss = loss + anchor * (model.up.weight @ model.down.weight).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            tot += float(loss.detach())
        log.append({"epoch": ep, "loss": round(tot / steps, 4)})
    return model, log


def adapt(model, X: np.ndarray) -> np.ndarray:
    """Adapted, L2-normalised vectors of raw Lite0 vectors."""
    import torch

    with torch.no_grad():
        z = torch.nn.functional.normalize(model(torch.from_numpy(tukey_l2(np.asarray(X, np.float32)))), dim=1)
    return z.numpy()


def rms_within(Z: np.ndarray, cat: np.ndarray, rng, per: int = 200) -> float:
    """RMS within-class pair distance (the gate's prior), on at most ``per`` vectors per class."""
    sq = []
    for c in np.unique(cat):
        z = Z[cat == c]
        z = z[rng.permutation(len(z))[:per]]
        d = ((z[:, None] - z[None]) ** 2).sum(-1)
        sq.append(d[np.triu_indices(len(z), 1)])
    return float(np.sqrt(np.concatenate(sq).mean()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="seed of the renders (and of training unless --train-seed)")
    ap.add_argument("--train-seed", type=int, default=None, help="seed of training alone (the renders are reused)")
    ap.add_argument("--instances", type=int, default=16, help="objects per category")
    ap.add_argument("--views", type=int, default=8, help="views per object")
    ap.add_argument("--scenes", type=int, default=0,
                    help="render this many cluttered tables (views from --views poses) instead of objects alone")
    ap.add_argument("--jitter", type=int, default=0, help="jittered-box copies of each view's crop")
    ap.add_argument("--arch", choices=("linear", "mlp", "residual"), default="mlp")
    ap.add_argument("--anchor", type=float, default=0.0, help="residual: penalty on |B A|^2 (toward the Lite0 space)")
    ap.add_argument("--temperature", type=float, default=0.1)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--cache", default=str(ROOT / "cache/adapter"))
    ap.add_argument("--out", default=str(ROOT / "runs/adapter"))
    ap.add_argument("--rerender", action="store_true")
    ap.add_argument("--render-only", action="store_true", help="render and cache the vectors, train nothing")
    args = ap.parse_args()
    cache, out = Path(args.cache), Path(args.out)
    cache.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    feats = cache / (f"sim_scenes_s{args.seed}_n{args.scenes}_v{args.views}.npz" if args.scenes else
                     f"sim_features_s{args.seed}_i{args.instances}_v{args.views}"
                     + (f"_j{args.jitter}" if args.jitter else "") + ".npz")
    t0 = time.perf_counter()
    if feats.exists() and not args.rerender:
        data = dict(np.load(feats))
        render_s = None
    else:
        data = (render_scene_features(args.scenes, args.views, args.seed) if args.scenes else
                render_features(args.instances, args.views, args.seed, jitter=args.jitter))
        np.savez_compressed(feats, **data)
        render_s = round(time.perf_counter() - t0, 1)
    if args.render_only:
        print(json.dumps({"vectors": int(len(data["X"])), "render_seconds": render_s}), flush=True)
        return
    t1 = time.perf_counter()
    train_seed = args.seed if args.train_seed is None else args.train_seed
    model, log = train(data, args.arch, args.dim, args.hidden, args.epochs, train_seed, args.temperature,
                       anchor=args.anchor)
    train_s = round(time.perf_counter() - t1, 1)
    from safetensors.numpy import save_file

    tensors = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    name = f"adapter_{args.arch}{args.dim}" + (f"_a{args.anchor:g}" if args.anchor else "")
    save_file(tensors, str(out / f"{name}.safetensors"),
              metadata={"arch": args.arch, "dim": str(args.dim), "hidden": str(args.hidden), "input": "efficientnet_lite0",
                        "transform": "power 0.5, L2, then the adapter, then L2"})
    rng = np.random.default_rng(args.seed)
    prior = rms_within(adapt(model, data["X"]), data["cat"], rng)
    prior_raw = rms_within(tukey_l2(data["X"]), data["cat"], np.random.default_rng(args.seed))
    rec = {"args": vars(args), "n_vectors": int(len(data["X"])), "n_instances": int(data["inst"].max() + 1),
           "render_seconds": render_s, "train_seconds": train_s, "loadavg": [round(v, 2) for v in os.getloadavg()],
           "distance_prior_adapted": round(prior, 4), "distance_prior_raw_sim": round(prior_raw, 4),
           "bytes": int(sum(v.nbytes for v in tensors.values())), "log": log}
    (out / f"{name}.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps({k: v for k, v in rec.items() if k != "log"}), "final loss", log[-1]["loss"], flush=True)


if __name__ == "__main__":
    main()
