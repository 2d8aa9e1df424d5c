#!/usr/bin/env python3
"""Issue 11's and 22's closing figures: fuzzed requests against live nodes, the kill -9 loop, lifecycle
transitions under a teach loop, and the time the new memory-file checks add to a save and a load.

1. **Fuzz**: extractor and learner as child processes on a fresh ROS domain; thousands of
   hypothesis-generated requests (random and adversarial: labels with NUL/newlines/20k characters,
   vectors of the wrong width or with 3e38/NaN, images with lying sizes, timeouts of inf/1e10, paths
   like ``../../etc/passwd``, ``/dev/zero``, a FIFO, a symlink out, a garbage file) at all 8 services,
   while a second client classifies continuously. Counted: crashes (a node ended), wedged calls (no
   answer within 30 s), classes lost (a successful teach/rename/load the learner no longer reflects,
   checked live and after a restart), files outside the memory directory changed.
   Since issue 22 the fuzz covers every service and topic of the four nodes (also sim_world and the
   arm), counts answers later than 10 s and answers contrary to a shadow model (classes held, objects
   on the table).
2. **kill -9 loop**: a learner is taught new classes continuously and killed with SIGKILL at a random
   moment (often inside a save), then restarted; every class whose teach answered success must be
   back, and the temporary files of interrupted saves must be gone after the restart. Every other
   teach goes through the object path (issue 22): ObjectFeatures published at ~15 Hz, TeachClass
   with MODE_OBJECT collecting 3 frames.
4. **Lifecycle race** (issue 22): random deactivate/cleanup/configure/activate while teaches (feature
   requests and stream teaches) run without pause; 0 false successes, then a restart loses nothing.
3. **Save/load time**: the same learner saved and loaded by the code before this change (``--before-ref``,
   extracted with ``git archive`` and run in a subprocess) and by the node's path now (MemoryStore +
   complete validation + one test classification); medians and their ratio.

    python -P bench/bench_hardening.py [--requests 10000] [--kills 100] [--transitions 240] [--before-ref f65c4c8]

Writes runs/bench/hardening.json (machine and load average included).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from cbcl_pr_ros.evaluation.experiments import machine_info

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import REPO, out_path  # noqa: E402
import fuzz_support as FZ  # noqa: E402  (test/support, shared with the tests)
import ros_testing as H  # noqa: E402  (test/support: Proc, Client, start_node, domains)

log_every = 250


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------ 1. fuzz
def fuzz(n_requests: int, work: Path) -> dict:
    from cbcl_pr_ros.srv import Classify, ClearObjects, ExtractFeatures, ListClasses, PointAt, TeachClass

    domain = H.fresh_domain()
    mem, outside = work / "mem", work / "outside.txt"
    FZ.prepare_memory_dir(mem, outside)
    lp = FZ.learner_params(mem)
    extractor = H.start_node("feature_extractor_node", domain, work, {"no_frame_warning_s": 0.0})
    learner = H.start_node("learner_node", domain, work, lp)
    robot = FZ.start_world_and_arm(H, domain, work)
    cli = H.Client(domain, "fuzz_client")
    side = H.Client(domain, "classify_client")
    t0 = time.monotonic()
    try:
        assert cli.wait_for_service(ExtractFeatures, "extract_features", 180, extractor), extractor.output()
        assert cli.wait_for_service(TeachClass, "teach_class", 180, learner), learner.output()
        assert cli.wait_for_service(PointAt, "point_at", 180, robot["arm"]), robot["arm"].output()[-2000:]
        assert cli.wait_for_service(ClearObjects, "clear_objects", 180, robot["sim_world"]), \
            robot["sim_world"].output()[-2000:]
        f = FZ.Fuzzer(cli, {"extractor": extractor, "learner": learner, **robot})
        f.seed_anchors()
        side_f = FZ.Fuzzer(side, {"learner": learner})
        stop = threading.Event()
        side_stats = {"calls": 0, "answered": 0, "unanswered": 0}
        probe = FZ.good_features(99, 1)[0]

        def classify_loop() -> None:
            while not stop.is_set():
                r = side_f.call("classify", Classify.Request(feature=probe))
                side_stats["calls"] += 1
                side_stats["answered" if r is not None else "unanswered"] += 1

        th = threading.Thread(target=classify_loop, daemon=True)
        th.start()
        def on_example(i: int) -> None:
            if i % 250 == 0:
                f.audit()  # finds a lost class near the request that lost it
            if i % log_every == 0:
                progress(f"fuzz {i}/{n_requests}: {f.tally.successes} succeeded, crashes {f.tally.crashes}, "
                         f"wedged {f.tally.wedged}, late {f.tally.late}, contrary {f.tally.contrary}")

        f.run(n_requests, seed=2024, strategy=FZ.request_all(), on_example=on_example,
              cover=FZ.cover_every_service())
        stop.set()
        th.join(60)
        alive = f.alive()
        lost_live = f.check_classes()
        world_contrary = f.check_world()
        held_before = len(f.expected)
        learner.stop()
        learner = H.start_node("learner_node", domain, work, lp, tag="_restarted")
        f.procs["learner"] = learner
        assert cli.wait_for_service(ListClasses, "list_classes", 180, learner), learner.output()
        H.wait_until(lambda: "learner ready" in learner.output(), 120)
        lost_restart = f.check_classes()
        tally = f.tally
        out = {
            "requests": tally.requests, "by_service": tally.by_service, "succeeded": tally.successes,
            "crashes": tally.crashes, "wedged_calls": tally.wedged, "lost_replies": tally.lost_replies, "internal_errors": tally.errors_internal,
            "classes_lost_live": lost_live, "classes_lost_after_restart": lost_restart,
            "answers_later_than_10s": tally.late, "outcomes_contrary_to_shadow": tally.contrary,
            "table_check_contrary": world_contrary, "messages_published": tally.published,
            "successes_by_service": tally.successes_by_service,
            "classes_held_at_end": held_before, "nodes_alive_at_end": alive,
            "concurrent_classify": side_stats,
            "outside_file_unchanged": outside.read_text() == "must never change",
            "temp_files_left": len(list(mem.glob("*.tmp"))),
            "tracebacks_in_logs": sum(p.output().count("Traceback") for p in (learner, extractor, *robot.values())),
            "seconds": round(time.monotonic() - t0, 1), "notes": tally.notes[:20],
        }
    finally:
        stop_all = [cli, side]
        for c in stop_all:
            c.close()
        for p in (learner, extractor, *robot.values()):
            p.stop()
    return out


# ------------------------------------------------------------------ 2. kill -9 loop
def kill_loop(kills: int, work: Path, seed: int = 7) -> dict:
    from cbcl_pr_ros.srv import ListClasses, TeachClass

    rnd = random.Random(seed)
    domain = H.fresh_domain()
    mem = work / "kill_mem"
    mem.mkdir(parents=True, exist_ok=True)
    lp = {**FZ.learner_params(mem), "max_memory_file_bytes": 256 * 1024 * 1024}  # the default cap
    cli = H.Client(domain, "kill_client")
    from cbcl_pr_ros.msg import ObjectFeatures

    objects_pub = cli.node.create_publisher(ObjectFeatures, "object_features", 10)
    counts = {"object_teaches": 0, "object_successes": 0}
    confirmed: set[str] = set()
    lost_total, killed_mid_save, temp_after_restart, restarts_failed = 0, 0, 0, 0
    per_kill = []
    k = 0
    try:
        for k in range(kills):
            proc = H.start_node("learner_node", domain, work, lp, tag=f"_kill{k}")
            r = held_classes(cli, proc)
            if r is None:
                restarts_failed += 1
                proc.popen.kill()
                continue
            held = r
            lost = confirmed - held
            lost_total += len(lost)
            temp_after_restart += len(list(mem.glob("*.tmp")))
            stop = threading.Event()

            def objects_stream() -> None:  # what the extractor publishes: 2 objects per frame
                i = 0
                while not stop.is_set():
                    objects_pub.publish(object_frame(i))
                    i += 1
                    time.sleep(0.066)

            def teach_loop(k: int = k) -> None:
                j = 0
                while not stop.is_set():
                    label = f"k{k}_{j}"
                    if j % 2:  # the object path: frames collected from the stream, the object in view
                        req = TeachClass.Request(label=label, mode=TeachClass.Request.MODE_OBJECT, num_frames=3,
                                                 timeout_s=2.0)
                        counts["object_teaches"] += 1
                    else:
                        req = TeachClass.Request(label=label, features=FZ.good_features(1000 * k + j, 16,
                                                                                        centre=float(j % 7)))
                    resp = H_call(cli, TeachClass, "teach_class", req, timeout=8.0)
                    if resp is not None and resp.success:
                        confirmed.add(label)
                        counts["object_successes"] += j % 2
                    j += 1

            ths = [threading.Thread(target=fn, daemon=True) for fn in (objects_stream, teach_loop)]
            for th in ths:
                th.start()
            time.sleep(rnd.uniform(0.5, 4.0))  # a teach takes 1-2 s on the shared 2-core machine
            proc.popen.send_signal(signal.SIGKILL)
            proc.popen.wait(10)
            stop.set()
            for th in ths:
                th.join(10)  # a call to the killed process times out after 8 s
            tmp_left = len(list(mem.glob("*.tmp")))
            killed_mid_save += tmp_left > 0
            per_kill.append({"held_at_start": len(held), "lost": len(lost), "temp_files_after_kill": tmp_left})
            if k % 10 == 0:
                progress(f"kill {k + 1}/{kills}: {len(confirmed)} classes confirmed, lost so far {lost_total}, "
                         f"kills inside a save {killed_mid_save}")
        # the final restart checks the last kill
        proc = H.start_node("learner_node", domain, work, lp, tag="_final")
        held = held_classes(cli, proc)
        assert held is not None, proc.output()[-2000:]
        lost_total += len(confirmed - held)
        temp_final = len(list(mem.glob("*.tmp")))
        proc.stop()
    finally:
        cli.close()
    return {"kills": kills, "classes_confirmed": len(confirmed), "classes_lost": lost_total, **counts,
            "kills_that_left_a_temp_file": killed_mid_save, "temp_files_after_restarts": temp_after_restart + temp_final,
            "restarts_failed": restarts_failed, "memory_file_bytes_at_end": (mem / "memory.safetensors").stat().st_size
            if (mem / "memory.safetensors").exists() else 0}


def object_frame(i: int):
    """An ObjectFeatures message as the extractor sends it: two objects of a 640x480 frame, one central."""
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.conversions import ns_to_stamp
    from cbcl_pr_ros.nodes.detections_msgs import make_object_features_msg
    from cbcl_pr_ros.perception import Proposal

    rng = np.random.default_rng(i)
    props = [Proposal((280, 200, 360, 280), None, np.array([0.0, 0.0, 0.5]), np.array([0.08, 0.08, 0.08]), 0.9),
             Proposal((20, 20, 80, 80), None, np.array([-0.2, -0.15, 0.6]), np.array([0.05, 0.05, 0.05]), 0.6)]
    feats = rng.normal(0, 1, (2, FZ.DIM)).astype(np.float32) + np.array([[2.0], [-2.0]], np.float32)
    header = Header(frame_id="camera", stamp=ns_to_stamp(time.time_ns()))
    return make_object_features_msg(header, FZ.BACKBONE, "", props, feats, (480, 640))


def lifecycle_race(transitions: int, work: Path) -> dict:
    """Issue 22: random lifecycle transitions under a teach loop (test_lifecycle runs a shorter one)."""
    from lifecycle_msgs.srv import GetState
    from std_msgs.msg import Header

    from cbcl_pr_ros.nodes.conversions import make_feature_msg, ns_to_stamp

    dim = 8
    domain = H.fresh_domain()
    mem = work / "race_mem"
    mem.mkdir(parents=True, exist_ok=True)
    params = {"backbone": "test", "feature_dim": dim, "memory_dir": str(mem), "autostart": True}

    def vectors(seed: int, n: int) -> list:
        rng = np.random.default_rng(seed)
        return [make_feature_msg(Header(stamp=ns_to_stamp(i)), "test", "", rng.normal(float(seed % 9), 1.0, dim))
                for i in range(n)]

    proc = H.start_node("learner_node", domain, work, params, tag="_race")
    cli = H.Client(domain, "race_client")
    t0 = time.monotonic()
    try:
        assert cli.wait_for_service(GetState, "/learner/get_state", 180, proc), proc.output()[-2000:]
        out = FZ.lifecycle_race(cli, proc, transitions, vectors, seed=5)
        confirmed = out.pop("confirmed")
        out["exit_code_after_race"] = proc.stop()
        first = proc
        proc = H.start_node("learner_node", domain, work, params, tag="_race_restarted")
        held = held_classes(cli, proc)
        out["classes_lost_after_restart"] = len(confirmed - (held or set())) if held is not None else -1
        out["temp_files_left"] = len(list(mem.glob("*.tmp")))
        out["tracebacks_in_logs"] = first.output().count("Traceback") + proc.output().count("Traceback")
        out["seconds"] = round(time.monotonic() - t0, 1)
    finally:
        cli.close()
        proc.stop()
    return out


def held_classes(cli, proc, timeout: float = 120.0) -> set | None:
    """The classes a freshly started learner holds, once *it* answers (the killed one may still look
    discovered for a while, so a first call can go to a dead server); None if it never answers."""
    from cbcl_pr_ros.srv import ListClasses

    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.popen.poll() is None:
        if "learner ready" in proc.output():
            r = H_call(cli, ListClasses, "list_classes", ListClasses.Request(), timeout=10.0)
            if r is not None:
                return {c.name for c in r.classes}
        time.sleep(0.5)
    return None


def H_call(cli, srv_type, name, req, timeout: float = 30.0):
    try:
        return cli.call(srv_type, name, req, timeout=timeout)
    except TimeoutError:
        return None


# ------------------------------------------------------------------ 3. save/load time
_OLD_TIMER = r"""
import sys, time, json, numpy as np
sys.path.insert(0, sys.argv[1])
from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
data = np.load(sys.argv[2])
lrn = CBCLPRLearner(LearnerConfig(seed=0), backbone="efficientnet_lite0", feature_dim=data["x"].shape[2])
lrn.teach_increment({f"c{i}": data["x"][i] for i in range(data["x"].shape[0])})
path = sys.argv[3]
save, load = [], []
for _ in range(int(sys.argv[4])):
    t = time.perf_counter(); lrn.save(path); save.append(time.perf_counter() - t)
    t = time.perf_counter(); CBCLPRLearner.load(path, expected_backbone="efficientnet_lite0"); load.append(time.perf_counter() - t)
print(json.dumps({"save": save, "load": load, "file": sys.modules["cbcl_pr_ros"].__file__}))
"""


def save_load_times(ref: str, work: Path, classes: int = 30, shots: int = 10, reps: int = 15) -> dict:
    from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig
    from cbcl_pr_ros.service.controller import LearnerController
    from cbcl_pr_ros.service.memory_files import MemoryStore

    rng = np.random.default_rng(0)
    x = (rng.normal(0, 1, (classes, shots, 1280)) + rng.normal(0, 3, (classes, 1, 1280))).astype(np.float32)
    np.savez(work / "data.npz", x=x)
    old_dir = work / "before"
    old_dir.mkdir(exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "cbcl_pr_ros/__init__.py", "cbcl_pr_ros/core"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old_dir)], input=archive, check=True)
    res = subprocess.run([sys.executable, "-P", "-c", _OLD_TIMER, str(old_dir), str(work / "data.npz"),
                          str(work / "old.safetensors"), str(reps)], check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    old = json.loads(res.stdout.strip().splitlines()[-1])
    assert old["file"].startswith(str(old_dir)), old["file"]  # the code before, not the installed one

    def make(d: int) -> CBCLPRLearner:
        return CBCLPRLearner(LearnerConfig(seed=0), backbone="efficientnet_lite0", feature_dim=d)

    c = LearnerController(make, "efficientnet_lite0", 1280, MemoryStore(str(work / "new_mem"), ""))
    c.learner_.teach_increment({f"c{i}": x[i] for i in range(classes)})
    save, load = [], []
    for _ in range(reps):
        t = time.perf_counter()
        ok, msg, _, size = c.save("bench.safetensors")
        save.append(time.perf_counter() - t)
        assert ok, msg
        t = time.perf_counter()
        out = c.load("bench.safetensors")
        load.append(time.perf_counter() - t)
        assert out.success, out.message

    def med(v: list) -> float:
        return float(np.median(v))

    return {
        "classes": classes, "shots_per_class": shots, "feature_dim": 1280, "file_bytes": size, "reps": reps,
        "before_ref": ref,
        "save_s_before": med(old["save"]), "save_s_after": med(save),
        "load_s_before": med(old["load"]), "load_s_after": med(load),
        "save_ratio_after_over_before": med(save) / med(old["save"]),
        "load_ratio_after_over_before": med(load) / med(old["load"]),
        "note": "before = the code at before_ref (core save/load by path); after = the node's path now "
                "(MemoryStore name resolution + O_NOFOLLOW/fstat/size cap, complete validation, "
                "rebuild, one test classification). Same machine, same data, medians.",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--transitions", type=int, default=240)
    ap.add_argument("--before-ref", default="f65c4c8")
    ap.add_argument("--parts", default="fuzz,kill,time,race")
    ap.add_argument("--out", default=str(out_path("hardening.json")))
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    parts = set(args.parts.split(","))
    result: dict = {"machine_start": machine_info()}
    with tempfile.TemporaryDirectory(prefix="bench_hardening_") as tmp:
        work = Path(tmp)
        if "time" in parts:
            progress("save/load timing (before vs after)")
            result["save_load"] = save_load_times(args.before_ref, work)
            progress(json.dumps(result["save_load"]))
        if "fuzz" in parts:
            progress(f"fuzzing {args.requests} requests")
            result["fuzz"] = fuzz(args.requests, work)
            progress(json.dumps({k: v for k, v in result["fuzz"].items() if k != "notes"}))
        if "kill" in parts:
            progress(f"kill -9 loop, {args.kills} kills")
            result["kill_loop"] = kill_loop(args.kills, work)
            progress(json.dumps(result["kill_loop"]))
        if "race" in parts:
            progress(f"lifecycle race, {args.transitions} transitions")
            result["lifecycle_race"] = lifecycle_race(args.transitions, work)
            progress(json.dumps(result["lifecycle_race"]))
    result["machine_end"] = machine_info()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and parts != {"fuzz", "kill", "time", "race"}:  # a partial run updates its parts only
        previous = json.loads(out.read_text())
        previous.update({k: v for k, v in result.items() if not k.startswith("machine")})
        previous.setdefault("machine_runs", []).append(
            {"parts": sorted(parts), "start": result["machine_start"], "end": result["machine_end"]})
        result = previous
    out.write_text(json.dumps(result, indent=2) + "\n")
    progress(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
