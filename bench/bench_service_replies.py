#!/usr/bin/env python3
"""Reproducer for issue 11's "wedged" Classify calls: a reply lost in a busy client's reader history.

With rmw_fastrtps every client of a service reads the one reply topic of that service and drops the
replies meant for others when it *takes* them. A client's reader keeps the last ``depth`` samples
(rclpy's default for clients: 10). While another client classifies continuously, a client whose
executor does not take for a moment (its process busy: GIL, a big allocation, a hypothesis draw) sees
its own reply pushed out of that history by the others' replies: a call that is never answered,
although the learner answered it.

Setup: a learner process on a fresh domain, taught two classes; ``--flooders`` clients (one context
each) classify back-to-back; a teach loop retrains; one *slow* client (own context) calls Classify
with a 5 s timeout while its spin thread stalls for ``--stall-s`` about every ``--every-s`` seconds. The slow client's service QoS is the variable: rclpy's default (keep last 10) vs
:func:`cbcl_pr_ros.nodes.qos.service_qos` (keep last 100) and a tight loop without stalls.

    python -P bench/bench_service_replies.py [--calls 300] [--stall-s 0.3] [--every-s 1.0]

Merges its figures under ``lost_replies`` (one entry per stall setting) in runs/bench/hardening.json.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

from cbcl_pr_ros.evaluation.experiments import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402
import bench_hardening as _bh  # noqa: E402  (the fuzzer, the ROS helpers and its progress line)

FZ, H, REPO, progress = _bh.FZ, _bh.H, _bh.REPO, _bh.progress


class StallingClient(H.Client):
    """A test client whose spin thread sometimes stops taking for ``stall_s`` (a busy process)."""

    def __init__(self, domain_id: int, name: str, stall_s: float, every_s: float, seed: int) -> None:
        self.stall_s, self.every_s = stall_s, every_s
        self._rng = random.Random(seed)
        super().__init__(domain_id, name)

    def _spin(self) -> None:
        next_stall = time.monotonic() + self._rng.uniform(0, 2 * self.every_s)
        try:
            while self.context.ok():
                self.executor.spin_once(timeout_sec=0.05)
                if self.stall_s > 0 and time.monotonic() >= next_stall:
                    time.sleep(self.stall_s)
                    next_stall = time.monotonic() + self._rng.uniform(0, 2 * self.every_s)
        except Exception:
            pass


def one_call(client, srv_type, name: str, req, qos, timeout: float, retries: int = 0) -> tuple[bool, float]:
    """(answered, seconds) for one call on a cached client created with ``qos``; an unanswered
    call is sent again up to ``retries`` times (Classify is idempotent)."""
    key = (name, id(qos))
    cache = client.__dict__.setdefault("_cached", {})
    cli = cache.get(key)
    if cli is None:
        cli = cache[key] = (client.node.create_client(srv_type, name, qos_profile=qos) if qos is not None
                            else client.node.create_client(srv_type, name))
        assert cli.wait_for_service(timeout_sec=60.0), f"{name} not discovered"
    t0 = time.monotonic()
    for _ in range(retries + 1):
        done = threading.Event()
        fut = cli.call_async(req)
        fut.add_done_callback(lambda _f: done.set())
        if done.wait(timeout):
            return True, time.monotonic() - t0
        cli.remove_pending_request(fut)
    return False, time.monotonic() - t0


def run(calls: int, flooders: int, stall_s: float, every_s: float, work: Path) -> dict:
    from cbcl_pr_ros.nodes.qos import service_qos
    from cbcl_pr_ros.srv import Classify, ListClasses, TeachClass

    domain = H.fresh_domain()
    mem = work / "mem"
    mem.mkdir(parents=True, exist_ok=True)
    learner = H.start_node("learner_node", domain, work, FZ.learner_params(mem))
    floods = [H.Client(domain, f"flood_{i}") for i in range(flooders)]
    teacher = H.Client(domain, "teacher")
    slow = StallingClient(domain, "slow_client", stall_s, every_s, seed=11)
    tight = H.Client(domain, "tight_client")
    stop = threading.Event()
    flood_stats = {"calls": 0, "answered": 0}
    teach_stats = {"calls": 0, "answered": 0}
    out: dict = {}
    try:
        assert teacher.wait_for_service(TeachClass, "teach_class", 180, learner), learner.output()
        assert teacher.wait_for_service(ListClasses, "list_classes", 180, learner), learner.output()
        for i, label in enumerate(FZ.ANCHORS):
            r = teacher.call(TeachClass, "teach_class", TeachClass.Request(label=label, features=FZ.good_features(i, 4, 3.0 * i)))
            assert r.success, r.message
        probe = FZ.good_features(99, 1)[0]
        lock = threading.Lock()

        def flood(c) -> None:
            while not stop.is_set():
                ok, _ = one_call(c, Classify, "classify", Classify.Request(feature=probe), None, 30.0)
                with lock:
                    flood_stats["calls"] += 1
                    flood_stats["answered"] += ok

        def teach() -> None:
            i = 0
            while not stop.is_set():
                i += 1
                ok, _ = one_call(teacher, TeachClass, "teach_class", TeachClass.Request(
                    label=f"c{i % 5}", features=FZ.good_features(1000 + i, 2, float(i % 5))), None, 60.0)
                teach_stats["calls"] += 1
                teach_stats["answered"] += ok

        threads = [threading.Thread(target=flood, args=(c,), daemon=True) for c in floods]
        threads.append(threading.Thread(target=teach, daemon=True))
        for t in threads:
            t.start()
        time.sleep(2.0)
        progress(f"flooding: {flood_stats['calls']} classify and {teach_stats['calls']} teach calls so far")
        variants = {"rclpy_default_keep_last_10": (slow, None, 5.0, 0),
                    "service_qos_keep_last_100": (slow, service_qos(), 5.0, 0),
                    "service_qos_2s_timeout_3_retries": (slow, service_qos(), 2.0, 3),
                    "no_stalls_rclpy_default": (tight, None, 5.0, 0)}
        for vname, (c, qos, timeout, retries) in variants.items():
            unanswered, worst, f0, t1 = 0, 0.0, flood_stats["calls"], time.monotonic()
            for k in range(calls):
                ok, dt = one_call(c, Classify, "classify", Classify.Request(feature=probe), qos, timeout, retries)
                unanswered += not ok
                worst = max(worst, dt if ok else 0.0)
                if (k + 1) % 20 == 0:
                    progress(f"{vname}: {k + 1}/{calls}, unanswered {unanswered}")
            secs = time.monotonic() - t1
            out[vname] = {"calls": calls, "unanswered": unanswered, "slowest_answer_s": round(worst, 3),
                          "timeout_s": timeout, "retries": retries,
                          "other_replies_per_s": round((flood_stats["calls"] - f0) / secs, 1)}
        stop.set()
        for t in threads:
            t.join(35)
        out["flood_calls"] = dict(flood_stats)
        out["teach_calls"] = dict(teach_stats)
        out["learner_alive"] = learner.popen.poll() is None
    finally:
        stop.set()
        for c in (*floods, teacher, slow, tight):
            c.close()
        learner.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--flooders", type=int, default=2)
    ap.add_argument("--stall-s", type=float, default=0.3)
    ap.add_argument("--every-s", type=float, default=1.0, help="mean seconds between stalls")
    ap.add_argument("--out", type=Path, default=out_path("hardening.json"))
    args = ap.parse_args()
    load0, m0 = os.getloadavg(), machine_info()
    with tempfile.TemporaryDirectory() as tmp:
        res = run(args.calls, args.flooders, args.stall_s, args.every_s, Path(tmp))
    res.update({"stall_s": args.stall_s, "stall_every_s": args.every_s, "flooders": args.flooders,
                "rmw": os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp (default)"),
                "loadavg_start": [round(x, 2) for x in load0], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
                "machine": m0})
    print(json.dumps(res, indent=1))
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data.setdefault("lost_replies", {})[f"stall_{args.stall_s:g}s_every_{args.every_s:g}s"] = res
    args.out.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
