"""What fleet peers cost the learner: CPU per accepted LEARNED, and Classify latency under a peer's flood.

A learner with ``--classes`` synthetic 5-shot classes (built with the core as ``bench_household.py``
draws them, 1280-d, the shipped config) behind a :class:`~cbcl_pr_ros.service.controller.
LearnerController` and its :class:`~cbcl_pr_ros.service.fleet.FleetMember`, its memory file in a
temporary directory, no ROS:

* ``per_learned``: ``--updates`` LEARNED of new peer classes received one after the other; the CPU
  seconds (this thread's clock) of each ``receive``, split into the merge and refit (state out, merge,
  rebuild, exercise), ``serialise_check`` (the whole memory serialised and read back) and ``write``
  (the file written), per update; how many times the default file was written, and the CPU of the
  save of what is left (``flush_cpu_s``, where peers' changes wait for the next save).
* ``classify``: a Classify of one vector (``controller.classify``) called without a pause for
  ``--seconds`` in the main thread, while a second thread (the node's fleet callback group) receives
  new peer classes from 0, 1 and ``--senders`` sender names, each at ``fleet_max_update_rate``; the
  senders start ``--warmup`` seconds earlier (so that a burst allowance is spent before the
  measurement): latency median / p90 / p99 / max, the updates accepted and refused, the CPU seconds
  the fleet thread spent and the memory file's writes, all within the measured window.

``--busy on`` keeps one core busy with another process during the run (a robot's CPU is never idle).
Run ``source scripts/env.sh; nice python -P bench/bench_fleet_load.py [--classes 100,1000]``;
output ``runs/bench/fleet_load.json`` (not tracked), with the machine's load at start and end. To
measure another checkout's code, put its root first: ``PYTHONPATH=OLD_ROOT python -P ...`` (the
package measured is recorded as ``code``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import REPO, out_path  # noqa: E402
from bench_household import DIM, _draw  # noqa: E402
from bench_pipeline import competing_process, learner_params  # noqa: E402

BACKBONE = "efficientnet_lite0"


class Phases:
    """CPU seconds (thread clock) per phase, of the thread that ran it."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._depth = threading.local()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        c0 = time.thread_time()
        try:
            yield
        finally:
            self.cpu[name] += time.thread_time() - c0
            self.calls[name] += 1

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        fn = getattr(owner, attr)

        def timed(*a: Any, **kw: Any) -> Any:
            with self.phase(name):
                return fn(*a, **kw)
        setattr(owner, attr, timed)

    def reset(self) -> None:
        self.cpu.clear()
        self.calls.clear()


def build(n: int, tmp: Path) -> tuple[Any, Any, Any]:
    """(controller, fleet member, params) of a learner holding ``n`` classes, its file in ``tmp``."""
    from cbcl_pr_ros.core.threads import set_blas_threads
    from cbcl_pr_ros.request_checks import RequestLimits
    from cbcl_pr_ros.service.controller import LearnerController
    from cbcl_pr_ros.service.fleet import FleetMember, FleetSettings
    from cbcl_pr_ros.service.memory_files import store_from_params
    from cbcl_pr_ros.settings.params import learner_factory

    set_blas_threads(1)  # as the nodes run
    p = learner_params(REPO / "config" / "cbcl_pr.yaml")
    p.update(backbone=BACKBONE, memory_dir=str(tmp), fleet="home", robot_name="robot1")
    rng = np.random.default_rng(0)
    centres = np.abs(rng.normal(0, 1, (n, DIM)))
    dirs = rng.normal(0, 0.06, (n, 3, DIM))
    lrn = learner_factory(p)(DIM)
    for lo in range(0, n, 500):
        lrn.teach_increment({f"object_{i:04d}": _draw(rng, centres[i], dirs[i], 5) for i in range(lo, min(n, lo + 500))})
    store = store_from_params(p, "")
    lrn.save(Path(store.default_path))
    c = LearnerController(learner_factory(p), BACKBONE, DIM, store, cluster_budget=0, limits=RequestLimits.from_params(p))
    c.load_at_startup(move_aside=False)
    m = FleetMember(c, FleetSettings.from_params(p), lambda u: None, clock=time.monotonic)
    c.on_change = m.on_change
    return c, m, p


def peer_updates(p: dict, count: int, seed: int) -> list[Any]:
    """``count`` LEARNED updates of new classes, one each, as a peer robot publishes them."""
    from cbcl_pr_ros.service.controller import LearnerController
    from cbcl_pr_ros.service.fleet import LEARNED, FleetMember, FleetSettings
    from cbcl_pr_ros.settings.params import learner_factory

    sent: list[Any] = []
    c = LearnerController(learner_factory(p), BACKBONE, DIM, None)
    m = FleetMember(c, FleetSettings("home", "peer"), sent.append)
    c.on_change = m.on_change
    rng = np.random.default_rng(seed)
    for j in range(count):
        centre = np.abs(rng.normal(0, 1, DIM))
        c.teach(f"peer{seed}_{j:04d}", _draw(rng, centre, rng.normal(0, 0.06, (3, DIM)), 5))
        c.forget(f"peer{seed}_{j:04d}")  # the peer keeps a small memory: its updates stay one class
    return [u for u in sent if u.op == LEARNED]


def instrument(phases: Phases, c: Any) -> None:
    from cbcl_pr_ros.service import controller as ctl

    phases.wrap(ctl, "merge_states", "merge")
    phases.wrap(ctl, "checked_bytes", "serialise_check")
    phases.wrap(c, "_exercise", "exercise")
    phases.wrap(c.store, "write", "write")
    cls = type(c.learner_)
    first = not hasattr(cls, "_bench_phases")
    cls._bench_phases = phases  # the wrappers below charge the latest count's phases
    if first:
        orig_from, orig_to = cls.from_state, cls.to_state

        def from_state(*a: Any, **kw: Any) -> Any:
            with cls._bench_phases.phase("refit"):
                return orig_from(*a, **kw)

        def to_state(self: Any, *a: Any, **kw: Any) -> Any:
            with cls._bench_phases.phase("to_state"):
                return orig_to(self, *a, **kw)
        cls.from_state, cls.to_state = staticmethod(from_state), to_state


def per_learned(n: int, updates: int, seed: int) -> dict:
    phases = Phases()
    with tempfile.TemporaryDirectory() as tmp:
        c, m, p = build(n, Path(tmp))
        ups = peer_updates(p, updates, seed)
        instrument(phases, c)
        cpu, accepted = [], 0
        file_mb = os.path.getsize(c.store.default_path) / 1e6
        for u in ups:
            c0 = time.thread_time()
            r = m.receive(u)
            cpu.append(time.thread_time() - c0)
            accepted += r.applied
        per = {k: round(v / max(1, accepted), 4) for k, v in phases.cpu.items()}
        writes = phases.calls.get("write", 0)
        c0 = time.thread_time()
        if hasattr(m, "flush"):
            m.flush()
        flush_cpu = time.thread_time() - c0
        return {"classes": n, "file_mb": round(file_mb, 2), "updates": len(ups), "accepted": accepted,
                "cpu_s_median": round(statistics.median(cpu), 4), "cpu_s_max": round(max(cpu), 4),
                "phase_cpu_s_per_update": per, "file_writes": writes,
                "flush_cpu_s": round(flush_cpu, 4),
                "merge_refit_s": round(sum(per.get(k, 0) for k in ("merge", "refit", "exercise", "to_state")), 4),
                "save_s": round(sum(per.get(k, 0) for k in ("serialise_check", "write")), 4)}


def classify_under(n: int, senders: int, seconds: float, warmup: float, seed: int) -> dict:
    """Classify latency in this thread while ``senders`` names send new classes at the per-sender rate."""
    from cbcl_pr_ros.service.fleet import ClassUpdate  # noqa: F401  (the updates are dataclasses)
    import dataclasses

    with tempfile.TemporaryDirectory() as tmp:
        c, m, p = build(n, Path(tmp))
        rate = float(p["fleet_max_update_rate"])
        need = int(rate * (seconds + warmup) * max(1, senders)) + 4
        ups = peer_updates(p, need, seed) if senders else []
        writes = [0]
        write = c.store.write

        def counted_write(*a: Any, **kw: Any) -> Any:
            writes[0] += 1
            return write(*a, **kw)
        c.store.write = counted_write
        stop, measuring = threading.Event(), threading.Event()
        stats = {"accepted": 0, "refused": 0, "fleet_cpu_s": 0.0}

        def flood() -> None:
            t0 = time.monotonic()
            k = 0
            c0 = None
            while not stop.is_set() and k < len(ups):
                if c0 is None and measuring.is_set():
                    c0 = time.thread_time()
                    writes[0] = 0
                    stats.update(accepted=0, refused=0)
                due = t0 + k / (rate * senders)  # every sender at its own rate, interleaved
                wait = due - time.monotonic()
                if wait > 0:
                    stop.wait(wait)
                    continue
                u = dataclasses.replace(ups[k], robot=f"inv{k % senders}")
                r = m.receive(u)
                stats["accepted" if r.applied else "refused"] += 1
                k += 1
            stats["fleet_cpu_s"] = round(time.thread_time() - c0, 3) if c0 is not None else 0.0

        x = _draw(np.random.default_rng(1), np.abs(np.random.default_rng(0).normal(0, 1, DIM)),
                  np.zeros((3, DIM)), 1)
        c.classify(x)
        th = threading.Thread(target=flood, daemon=True)
        lat = []
        th.start()
        if senders:
            time.sleep(warmup)
        measuring.set()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            c.classify(x)
            lat.append(time.perf_counter() - t0)
        stop.set()
        th.join()
        lat_ms = np.array(lat) * 1e3
        return {"classes": n, "senders": senders, "rate_per_sender": rate, "seconds": seconds, "warmup_s": warmup,
                "classify_calls": len(lat), "classify_ms_median": round(float(np.median(lat_ms)), 3),
                "classify_ms_p90": round(float(np.percentile(lat_ms, 90)), 3),
                "classify_ms_p99": round(float(np.percentile(lat_ms, 99)), 3),
                "classify_ms_max": round(float(lat_ms.max()), 1), "file_writes": writes[0], **stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", default="100,1000", help="class counts, comma-separated")
    ap.add_argument("--updates", type=int, default=8, help="LEARNED received per class count (part 1)")
    ap.add_argument("--senders", type=int, default=8, help="invented sender names of the last flood")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each Classify run")
    ap.add_argument("--warmup", type=float, default=12.0, help="seconds the senders send before it")
    ap.add_argument("--busy", choices=("on", "off"), default="off", help="one core kept busy by another process")
    ap.add_argument("--skip-classify", action="store_true", help="part 1 only")
    ap.add_argument("--out", default=str(out_path("fleet_load.json")))
    args = ap.parse_args()
    from cbcl_pr_ros.evaluation.experiments import machine_info

    import cbcl_pr_ros

    out: dict[str, Any] = {"benchmark": "fleet_load", "code": str(Path(cbcl_pr_ros.__file__).parents[1]), "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                           "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
                           "machine": {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(),
                                       "loadavg_start": os.getloadavg()}, "busy": args.busy,
                           "per_learned": [], "classify": []}
    with competing_process(args.busy == "on"):
        for n in (int(x) for x in args.classes.split(",")):
            row = per_learned(n, args.updates, seed=n)
            out["per_learned"].append(row)
            print(json.dumps(row), flush=True)
            if args.skip_classify:
                continue
            for s in (0, 1, args.senders):
                row = classify_under(n, s, args.seconds, args.warmup, seed=n + 100 + s)
                out["classify"].append(row)
                print(json.dumps(row), flush=True)
    out["machine"]["loadavg_end"] = os.getloadavg()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
