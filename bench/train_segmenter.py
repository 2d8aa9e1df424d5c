"""Make the rendered scenes and train the learned proposal segmenter on them, reproducibly, on the CPU.

One command regenerates everything, and with ``--install`` puts the weights and the log where the package
ships them (cbcl_pr_ros/perception/weights/)::

    source scripts/env.sh && nice -n 5 python -P bench/train_segmenter.py --install

1. ``--scenes`` rendered table scenes (``segmenter_data.make_scenes``, each from its own seed), cached
   under runs/bench/segmenter/ by their count, seed and the generator's source digest; ``--variety``
   makes them all with see-through objects, unread blotches, toy clutter and print textures, and
   ``--variety-share`` instead draws that share of each batch's samples from ``--variety-scenes`` such
   varied scenes (cached the same way), the rest from the plain ones;
2. the network's input features of each (``perception.segmenter.input_features``) and its targets:
   background, object inside, object boundary (object pixels beside another object or the background),
   and each object pixel's distance to the nearest pixel not of its object (clipped at
   ``DIST_CLIP_PX``, as a fraction of it; 0 on the background); objects too small to see are ignored;
3. ``--steps`` steps of AdamW on cross-entropy (boundary weighted 3) plus ``--dist-weight`` (default 0:
   the class head alone held out best on the real frames) times the squared error of the distance (batch ``--batch`` of ``--crop`` crops, horizontal flips, the colour channels dropped in one
   sample of five so depth alone must do), a one-cycle learning rate peaking at ``--lr``, fixed seeds,
   ``--threads`` torch threads, deterministic algorithms (the bytes depend on the thread count); from
   noise, or with ``--init`` from weights this script wrote (``warm_start``), which ``--make-init``
   first trains with the defaults when missing (``--init-threads`` threads) so that one command makes
   both stages; the last ``--val`` scenes (of each set) are never trained on and give the validation
   figures;
4. batch norms folded into the convolutions, weights written as safetensors (runs/bench/segmenter/
   segmenter.safetensors, or ``--weights``), checked by the runtime loader, and the NumPy forward pass
   compared with torch's on the validation scenes; the log (loss per 100 steps, validation pixel and
   object figures, time, the sha256 of the file, whose header is written with sorted keys so that the
   same weights give the same bytes) goes to runs/bench/segmenter/train_log.json;
5. with ``--install``, both copied into the package (``SHIPPED_WEIGHTS``, ``SHIPPED_LOG``) once the loader
   has taken the weights.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import out_path  # noqa: E402

from scipy import ndimage  # noqa: E402

from cbcl_pr_ros.perception.segmenter import CHANNELS, DIST_CLIP_PX, LAYERS, SHIPPED_LOG, SHIPPED_WEIGHTS, \
    input_features, instances, load_segmenter  # noqa: E402
from cbcl_pr_ros.perception.types import CameraIntrinsics  # noqa: E402

IGNORE = 255


def targets(inst: np.ndarray) -> np.ndarray:
    """Per pixel 0 background, 1 inside, 2 boundary (an object pixel with a 4-neighbour of another id),
    ``IGNORE`` for objects too small to learn from."""
    t = np.where(inst >= 0, 1, 0).astype(np.uint8)
    p = np.pad(inst, 1, mode="edge")
    differ = np.zeros(inst.shape, bool)
    for dy, dx in ((0, 1), (2, 1), (1, 0), (1, 2)):
        differ |= p[dy:dy + inst.shape[0], dx:dx + inst.shape[1]] != inst
    t[(inst >= 0) & differ] = 2
    t[inst < -1] = IGNORE
    return t


def distance_targets(inst: np.ndarray) -> np.ndarray:
    """Per pixel the distance (pixels) to the nearest pixel not of its object, clipped at ``DIST_CLIP_PX``
    and divided by it; 0 on the background and on objects too small to learn from (those are ignored by
    the loss through the class targets). The frame's edge is no border: an object cut by it goes on."""
    out = np.zeros(inst.shape, np.float32)
    ids = np.where(inst >= 0, inst.astype(np.int32) + 1, 0)
    for lab, sl in enumerate(ndimage.find_objects(ids), start=1):
        if sl is None:
            continue
        y0, y1 = max(sl[0].start - 1, 0), min(sl[0].stop + 1, inst.shape[0])
        x0, x1 = max(sl[1].start - 1, 0), min(sl[1].stop + 1, inst.shape[1])
        m = ids[y0:y1, x0:x1] == lab  # with a ring of other pixels, except at the frame's edge
        out[y0:y1, x0:x1][m] = ndimage.distance_transform_edt(m)[m]
    return np.minimum(out, DIST_CLIP_PX) / DIST_CLIP_PX


def generator_digest() -> str:
    """The first 12 hex digits of the sha256 of the scene generator's source: the cache of rendered scenes
    is keyed by it, so a changed generator never trains on scenes of the one before."""
    return hashlib.sha256((Path(__file__).resolve().parent / "segmenter_data.py").read_bytes()).hexdigest()[:12]


def build_data(scenes: int, seed: int, variety: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """(features (n, c, h, w) float16, class targets (n, h, w) uint8, distance targets (n, h, w) float16,
    the raw scenes) for ``scenes`` scenes (``variety``: ``segmenter_data.make_scenes``'s)."""
    from segmenter_data import make_scenes

    cache = out_path(f"segmenter/scenes_{scenes}_{seed}{'_variety' if variety else ''}_{generator_digest()}.npz")
    if cache.exists():
        raw = dict(np.load(cache))
    else:
        t0 = time.time()
        raw = make_scenes(scenes, seed, progress=True, variety=variety)
        np.savez(cache, **raw)
        print(f"rendered {scenes} scenes in {time.time() - t0:.0f} s -> {cache}", flush=True)
    n, h, w = raw["depth"].shape
    feats = np.zeros((n, len(CHANNELS), h, w), np.float16)
    tg = np.zeros((n, h, w), np.uint8)
    dist = np.zeros((n, h, w), np.float16)
    for i in range(n):
        K = CameraIntrinsics(*map(float, raw["K"][i]))
        f = input_features(raw["rgb"][i], raw["depth"][i].astype(np.float32), K)
        if f is None:
            tg[i] = IGNORE
            continue
        feats[i] = f
        tg[i] = targets(raw["inst"][i])
        dist[i] = distance_targets(raw["inst"][i])
    return feats, tg, dist, raw


def make_net():
    """The torch twin of the NumPy network: each 3x3 convolution followed by batch norm and ReLU."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = nn.ModuleDict()
            self.norms = nn.ModuleDict()
            for name, cin, cout in LAYERS:
                self.convs[name] = nn.Conv2d(cin, cout, 1 if name == "head" else 3, padding=0 if name == "head" else 1)
                if name != "head":
                    self.norms[name] = nn.BatchNorm2d(cout)

        def c(self, x, name):
            return torch.relu(self.norms[name](self.convs[name](x)))

        def block(self, x, name):
            return self.c(self.c(x, name + "a"), name + "b")

        def forward(self, x):
            pool = nn.functional.max_pool2d
            up = lambda t: nn.functional.interpolate(t, scale_factor=2, mode="nearest")  # noqa: E731
            e1 = self.block(x, "enc1")
            e2 = self.block(pool(e1, 2), "enc2")
            e3 = self.block(pool(e2, 2), "enc3")
            m = self.c(self.c(pool(e3, 2), "mid_a"), "mid_b")
            d3 = self.block(torch.cat([up(m), e3], 1), "dec3")
            d2 = self.block(torch.cat([up(d3), e2], 1), "dec2")
            d1 = self.block(torch.cat([up(d2), e1], 1), "dec1")
            return self.convs["head"](d1)

    return Net()


def warm_start(net, path: Path, sample: np.ndarray) -> None:
    """Start ``net`` from the folded weights at ``path`` (as this script writes them): the convolutions take
    them and each batch norm is set to give back what it is handed, its statistics those of ``sample``
    (features (n, c, h, w)), so that the network computes what the weights did and training goes on from
    there rather than from noise."""
    import torch
    from safetensors.numpy import load_file

    w = load_file(str(path))
    stats: dict = {}
    with torch.no_grad():
        for name, conv in net.convs.items():
            conv.weight.copy_(torch.from_numpy(w[f"{name}.weight"]))
            conv.bias.copy_(torch.from_numpy(w[f"{name}.bias"]))
        for bn in net.norms.values():  # pass-through while the statistics are read
            bn.reset_parameters()
            bn.running_var.fill_(1.0 - bn.eps)
        hooks = [net.convs[name].register_forward_hook(
            lambda _m, _i, o, name=name: stats.__setitem__(name, (o.mean((0, 2, 3)), o.var((0, 2, 3), unbiased=False))))
            for name in net.norms]
        net.eval()
        net(torch.from_numpy(np.ascontiguousarray(sample, np.float32)))
        for h in hooks:
            h.remove()
        for name, bn in net.norms.items():
            mean, var = stats[name]
            bn.running_mean.copy_(mean)
            bn.running_var.copy_(var)
            bn.weight.copy_(torch.sqrt(var + bn.eps))
            bn.bias.copy_(mean)


def folded(net) -> dict[str, np.ndarray]:
    """The network's weights with each batch norm folded into its convolution (what the runtime runs)."""
    out = {}
    for name, conv in net.convs.items():
        w = conv.weight.detach().double().numpy()
        b = conv.bias.detach().double().numpy()
        if name in net.norms:
            bn = net.norms[name]
            s = bn.weight.detach().double().numpy() / np.sqrt(bn.running_var.double().numpy() + bn.eps)
            w = w * s[:, None, None, None]
            b = (b - bn.running_mean.double().numpy()) * s + bn.bias.detach().double().numpy()
        out[f"{name}.weight"] = np.ascontiguousarray(w, np.float32)
        out[f"{name}.bias"] = np.ascontiguousarray(b, np.float32)
    return out


def object_figures(pred: np.ndarray, inst: np.ndarray) -> tuple[int, int, int]:
    """(objects, found at mask IoU 0.5, predicted objects) of one scene."""
    ids = [i for i in np.unique(inst) if i >= 0 and (inst == i).sum() >= 30]
    found = 0
    for i in ids:
        m = inst == i
        labs, counts = np.unique(pred[m], return_counts=True)
        for lab, c in zip(labs, counts):
            if lab > 0 and c / (m.sum() + (pred == lab).sum() - c) >= 0.5:
                found += 1
                break
    return len(ids), found, int(pred.max())


def canonical_bytes(path: Path) -> bytes:
    """The safetensors file's bytes with its header's keys sorted: the library writes its metadata in an
    order that changes from process to process, so the same weights would not give the same file."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.dumps(json.loads(raw[8:8 + n]), sort_keys=True, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)  # the tensors stay 8-byte aligned
    return struct.pack("<Q", len(header)) + header + raw[8 + n:]


def install(weights: Path, log: Path) -> None:
    """Copy ``weights`` (canonical bytes) and the training ``log`` into the package, where the extractor's
    learned proposals load them from; refused (ValueError) when the loader refuses the weights or the log
    is not of them."""
    data = canonical_bytes(weights)
    digest = hashlib.sha256(data).hexdigest()
    record = json.loads(log.read_text())
    if record.setdefault("weights_sha256", digest) != digest or record.get("weights_bytes") != len(data):
        raise ValueError(f"{log} is the log of other weights than {weights}")
    SHIPPED_WEIGHTS.parent.mkdir(parents=True, exist_ok=True)
    tmp = SHIPPED_WEIGHTS.with_suffix(".tmp")
    tmp.write_bytes(data)
    load_segmenter(tmp)  # nothing ships that the loader refuses
    tmp.replace(SHIPPED_WEIGHTS)
    SHIPPED_LOG.write_text(json.dumps(record, indent=1) + "\n")
    print(f"installed {weights} (sha256 {digest}) -> {SHIPPED_WEIGHTS}, log -> {SHIPPED_LOG}", flush=True)


def validate(net, seg, feats, tg, dist, inst) -> dict:
    """Pixel recall per class, objects found at mask IoU 0.5 (from the border-distance cores and from the
    classes alone), the border distance's error and NumPy against torch, on scenes never trained on."""
    import torch

    conf = np.zeros((3, 3), np.int64)
    objs = found = preds = 0
    cls_found = cls_preds = 0
    dist_err, dist_n = 0.0, 0
    worst = 0.0
    with torch.no_grad():
        for i in range(len(feats)):
            f = feats[i].astype(np.float32)
            lg = seg.outputs(f)
            ref = net(torch.from_numpy(f[None]))[0].numpy()
            worst = max(worst, float(np.abs(lg - ref).max()))
            pred_cls = lg[:3].argmax(0)
            ok = tg[i] != IGNORE
            np.add.at(conf, (tg[i][ok], pred_cls[ok]), 1)
            on = ok & (tg[i] > 0)
            dist_err += float(np.abs(np.clip(lg[3], 0, 1) - dist[i].astype(np.float32))[on].sum()) * DIST_CLIP_PX
            dist_n += int(on.sum())
            o, fd, pr = object_figures(instances(lg), inst[i])
            objs, found, preds = objs + o, found + fd, preds + pr
            _, fd, pr = object_figures(instances(lg, core=None), inst[i])
            cls_found, cls_preds = cls_found + fd, cls_preds + pr
    return {"scenes": len(feats), "pixel_recall_per_class": [round(float(conf[k, k] / max(conf[k].sum(), 1)), 3)
                                                             for k in range(3)],
            "objects": objs, "found_iou50": found, "recall_iou50": round(found / max(objs, 1), 3),
            "predicted_objects": preds, "numpy_vs_torch_max_abs": worst,
            "border_distance_mean_abs_error_px": round(dist_err / max(dist_n, 1), 3),
            "classes_only": {"recall_iou50": round(cls_found / max(objs, 1), 3), "predicted_objects": cls_preds}}


def train(args: argparse.Namespace, log_path: Path) -> tuple[Path, dict]:
    """Train one network as ``args`` say, write its weights and its log (``log_path``); (weights, log)."""
    import torch
    from safetensors.numpy import save_file

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    t_start = time.time()
    feats, tg, dist, raw = build_data(args.scenes, args.seed, args.variety)
    n_train = len(feats) - args.val
    share = args.variety_share
    if share > 0:  # a share of each batch from the varied scenes, their last --val never trained on
        vfeats, vtg, vdist, vraw = build_data(args.variety_scenes, args.seed, True)
        nv_train = len(vfeats) - args.val
    print(f"features ready ({time.time() - t_start:.0f} s)", flush=True)
    net = make_net()
    log = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
           "scene_generator_sha256_12": generator_digest(), "loss": []}
    if args.init is not None:
        warm_start(net, args.init, feats[:min(64, n_train)])
        init_log = args.init.with_name(args.init.stem + "_train_log.json")
        log["init"] = {"weights_sha256": hashlib.sha256(args.init.read_bytes()).hexdigest(),
                       **({"log": json.loads(init_log.read_text())} if init_log.exists() else {})}
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.1)
    loss_fn = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 1.0, 3.0]), ignore_index=IGNORE)
    rng = np.random.default_rng(args.seed)
    colour = [CHANNELS.index(c) for c in ("red", "green", "blue")]
    nx = CHANNELS.index("normal_x")
    net.train()
    running, t0 = 0.0, time.time()
    for step in range(args.steps):
        idx = rng.integers(0, n_train, args.batch)
        cy, cx = int(rng.integers(0, feats.shape[2] - args.crop[0] + 1)), int(rng.integers(0, feats.shape[3] - args.crop[1] + 1))
        ys, xs = slice(cy, cy + args.crop[0]), slice(cx, cx + args.crop[1])
        if share > 0:
            varied = rng.random(args.batch) < share
            vidx = rng.integers(0, nv_train, args.batch)
            x = np.where(varied[:, None, None, None], vfeats[vidx, :, ys, xs], feats[idx, :, ys, xs]).astype(np.float32)
            y = np.where(varied[:, None, None], vtg[vidx, ys, xs], tg[idx, ys, xs]).astype(np.int64)
            yd = np.where(varied[:, None, None], vdist[vidx, ys, xs], dist[idx, ys, xs]).astype(np.float32)
        else:
            x = feats[idx, :, ys, xs].astype(np.float32)
            y = tg[idx, ys, xs].astype(np.int64)
            yd = dist[idx, ys, xs].astype(np.float32)
        flip = rng.random(args.batch) < 0.5
        x[flip] = x[flip][..., ::-1]
        x[flip, nx] *= -1
        y[flip] = y[flip][..., ::-1]
        yd[flip] = yd[flip][..., ::-1]
        drop = rng.random(args.batch) < 0.2
        x[np.ix_(drop, colour)] = 0.0
        out = net(torch.from_numpy(np.ascontiguousarray(x)))
        yt = torch.from_numpy(np.ascontiguousarray(y))
        seen = (yt != IGNORE).float()
        sq = (out[:, 3] - torch.from_numpy(np.ascontiguousarray(yd))) ** 2
        loss = loss_fn(out[:, :3], yt) + args.dist_weight * (sq * seen).sum() / seen.sum().clamp(min=1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running += loss.item()
        if (step + 1) % 100 == 0:
            log["loss"].append([step + 1, round(running / 100, 4), round(time.time() - t0, 1)])
            print(f"step {step + 1}: loss {running / 100:.4f} ({time.time() - t0:.0f} s)", flush=True)
            running = 0.0
    net.eval()
    weights = folded(net)
    path = args.weights or out_path("segmenter/segmenter.safetensors")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(path), metadata={"channels": ",".join(CHANNELS), "scenes": str(args.scenes),
                                            "steps": str(args.steps)})
    path.write_bytes(canonical_bytes(path))  # the same weights, the same file (and sha256)
    seg = load_segmenter(path)
    log["validation"] = validate(net, seg, feats[n_train:], tg[n_train:], dist[n_train:], raw["inst"][n_train:])
    if share > 0:
        log["validation_varied"] = validate(net, seg, vfeats[nv_train:], vtg[nv_train:], vdist[nv_train:],
                                            vraw["inst"][nv_train:])
    log["seconds"] = round(time.time() - t_start, 1)
    log["weights_bytes"] = path.stat().st_size
    log["weights_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    log["parameters"] = int(sum(v.size for v in weights.values()))
    log_path.write_text(json.dumps(log, indent=1))
    print(json.dumps(log["validation"]), json.dumps(log.get("validation_varied")), f"-> {path}, {log_path}", flush=True)
    return path, log


def parser() -> argparse.ArgumentParser:
    """The command line; its defaults are the first stage's recipe (plain scenes, from scratch)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", type=int, default=4000)
    ap.add_argument("--val", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--crop", type=int, nargs=2, default=(64, 96), help="training crop (height, width), multiples of 8")
    ap.add_argument("--lr", type=float, default=3e-3, help="the one-cycle schedule's peak learning rate")
    ap.add_argument("--variety", action="store_true",
                    help="scenes with see-through objects, unread blotches, toy clutter and print textures only (held "
                         "out no better on the real frames than the plain scenes: see docs/results.md)")
    ap.add_argument("--variety-share", type=float, default=0.0,
                    help="chance of each batch sample coming from the varied scenes (--variety-scenes of them) "
                         "instead of the plain ones (0: the plain scenes alone)")
    ap.add_argument("--variety-scenes", type=int, default=6000)
    ap.add_argument("--init", type=Path, default=None,
                    help="start from these weights (as this script writes them) instead of from noise")
    ap.add_argument("--make-init", action="store_true",
                    help="when the --init file is missing, first train it with the defaults (plain scenes, "
                         "from noise; --seed, --scenes and --val as given, --init-threads threads) and write it there")
    ap.add_argument("--init-threads", type=int, default=2,
                    help="torch threads of the --make-init stage (the float sums, so the bytes, depend on them)")
    ap.add_argument("--dist-weight", type=float, default=0.0,
                    help="weight of the distance's squared error (0: the class head alone, what held out best)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--weights", type=Path, default=None)
    ap.add_argument("--install", action="store_true",
                    help="copy the weights and the log into the package (cbcl_pr_ros/perception/weights/): what ships")
    ap.add_argument("--install-only", action="store_true",
                    help="no training: install the weights (--weights, or the default output) and their log as made")
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    if args.install_only:
        install(args.weights or out_path("segmenter/segmenter.safetensors"), out_path("segmenter/train_log.json"))
        return
    if not 0.0 <= args.variety_share <= 1.0 or (args.variety and args.variety_share > 0):
        ap.error("--variety-share is a chance (0-1) of the plain scenes' batches, not with --variety")
    if args.make_init and args.init is None:
        ap.error("--make-init needs --init (where the first stage's weights go)")
    if args.init is not None and not args.init.exists():
        if not args.make_init:
            ap.error(f"--init {args.init} does not exist (--make-init trains it first)")
        first = ap.parse_args(["--seed", str(args.seed), "--threads", str(args.init_threads),
                               "--scenes", str(args.scenes), "--val", str(args.val), "--weights", str(args.init)])
        print(f"first stage: the defaults from noise -> {args.init}", flush=True)
        train(first, args.init.with_name(args.init.stem + "_train_log.json"))
    path, _ = train(args, out_path("segmenter/train_log.json"))
    if args.install:
        install(path, out_path("segmenter/train_log.json"))


if __name__ == "__main__":
    main()
