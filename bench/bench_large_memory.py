"""A household's memory over ROS: every learner service, the status topic and the page at N classes.

A robot with a thousand taught objects, used as a user uses it (docs/quickstart.md): the learner node
starts on a memory file of ``--classes`` synthetic 5-shot classes (built with the core, as
``bench_household.py`` draws them, for the shipped config), then through the services with the
documented client QoS and the default client timeouts (``LearnerClient``: 10 s, teaches 60 s):

* ``start``: process start to the first ListClasses answer holding the classes (each attempt with its
  outcome), and again after a restart on the memory the run changed;
* ``list_classes`` / ``status``: answer sizes (serialized bytes) and times;
* ``classify``: a feature vector, 20 calls; and calls made without a pause while 5 teaches and then a
  LoadMemory run (queries must keep answering);
* ``teach`` (11 new classes of 5 vectors), ``rename``, ``forget``, ``save`` (bytes), ``load``;
* ``page``: with ``--page``, the teaching page's ``/api/state`` (bytes, classes listed, newest there);
* ``rss_mb`` of the learner; the learner's log lines.

Each service's client is used once with a refused request before it is timed: a new client waits 1 s
after it first sees its server (``service_call``), which is not the learner's time.

``--busy on`` keeps one core busy with another process during the run (a robot's CPU is never idle).
Run ``source scripts/env.sh; python -P bench/bench_large_memory.py [--classes 1000] [--busy on] [--page]``;
output ``runs/bench/large_memory.json`` (not tracked). Timings on a shared machine mean little without
its load: the 1-minute load average is recorded at the start and end.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import REPO, out_path  # noqa: E402
from bench_household import DIM, _draw  # noqa: E402
from bench_pipeline import competing_process, learner_params  # noqa: E402

BACKBONE, EXTRA, PAGE_PORT = "efficientnet_lite0", 20, 18097


def build_memory(n: int, path: Path) -> tuple[np.ndarray, np.ndarray, float]:
    """A memory file of ``n`` classes ``object_0000``..; (5 shots of each of EXTRA more classes, one
    held-out vector of each of the first 20 classes, seconds to build)."""
    from cbcl_pr_ros.core.threads import set_blas_threads
    from cbcl_pr_ros.settings.params import learner_factory

    set_blas_threads(1)
    rng = np.random.default_rng(0)
    centres = np.abs(rng.normal(0, 1, (n + EXTRA, DIM)))
    dirs = rng.normal(0, 0.06, (n + EXTRA, 3, DIM))
    lrn = learner_factory(learner_params(REPO / "config" / "cbcl_pr.yaml"))(DIM)
    t0 = time.perf_counter()
    for lo in range(0, n, 500):
        lrn.teach_increment({f"object_{i:04d}": _draw(rng, centres[i], dirs[i], 5) for i in range(lo, min(n, lo + 500))})
    build = time.perf_counter() - t0
    lrn.save(path)
    extra = np.stack([_draw(rng, centres[n + j], dirs[n + j], 5) for j in range(EXTRA)])
    held = np.concatenate([_draw(rng, centres[i], dirs[i], 1) for i in range(min(n, 20))])
    return extra, held, build


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return round(next(int(ln.split()[1]) for ln in fh if ln.startswith("VmRSS")) / 1024.0, 1)


def timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t0, 3)


def first_answer(cli: Any, proc: Any, t0: float, timeout_s: float = 120.0) -> dict[str, Any]:
    """ListClasses with the default client timeout until it holds classes: every attempt's outcome."""
    from cbcl_pr_ros.srv import ListClasses

    attempts = []
    while time.monotonic() - t0 < timeout_s and proc.popen.poll() is None:
        sent = time.monotonic() - t0
        try:
            r = cli.call(ListClasses, "list_classes", ListClasses.Request(), timeout=10.0)
            attempts.append([round(sent, 2), round(time.monotonic() - t0, 2), len(r.classes)])
            if len(r.classes):
                break
        except TimeoutError as exc:
            attempts.append([round(sent, 2), round(time.monotonic() - t0, 2), str(exc)[:80]])
    ok = attempts and isinstance(attempts[-1][2], int) and attempts[-1][2] > 0
    return {"first_answer_s": attempts[-1][1] if ok else None, "attempts": attempts}


def session(args: argparse.Namespace, work: Path, domain_id: int) -> dict[str, Any]:
    from rclpy.serialization import serialize_message
    from ros_testing import Client, start_node
    from std_msgs.msg import Header

    from cbcl_pr_ros.msg import LearnerStatus
    from cbcl_pr_ros.nodes.conversions import make_feature_msg
    from cbcl_pr_ros.nodes.qos import status_qos
    from cbcl_pr_ros.srv import Classify, ForgetClass, ListClasses, LoadMemory, RenameClass, SaveMemory, TeachClass

    res: dict[str, Any] = {}
    memdir = work / "memory"
    memdir.mkdir()
    extra, held, res["build_s"] = build_memory(args.classes, memdir / "memory.safetensors")
    res["file_bytes"] = (memdir / "memory.safetensors").stat().st_size
    fv = lambda v: make_feature_msg(Header(), BACKBONE, "", v)  # noqa: E731
    params = {"memory_dir": str(memdir)}
    cli = Client(domain_id, "large_memory_bench")
    statuses: list = []
    cli.node.create_subscription(LearnerStatus, "status", statuses.append, status_qos())
    page = None
    try:
        t0 = time.monotonic()
        learner = start_node("learner_node", domain_id, work, params)
        if args.page:
            page = start_node("teaching_page_node", domain_id, work, extra=["--ros-args", "-p", f"port:={PAGE_PORT}"])
        res["start"] = first_answer(cli, learner, t0)
        res["rss_start_mb"] = rss_mb(learner.popen.pid)
        call = lambda srv, name, req, timeout=10.0: cli.call(srv, name, req, timeout=timeout)  # noqa: E731
        lists = [timed(lambda: call(ListClasses, "list_classes", ListClasses.Request())) for _ in range(5)]
        res["list_classes"] = {"classes": len(lists[-1][0].classes), "bytes": len(serialize_message(lists[-1][0])),
                               "s": [t for _, t in lists]}
        answers = [timed(lambda i=i: call(Classify, "classify", Classify.Request(feature=fv(held[i]), top_k=3)))
                   for i in range(len(held))]
        res["classify"] = {"s_median": float(np.median([t for _, t in answers[1:]])),  # the first waited 1 s
                           "s_max": max(t for _, t in answers[1:]),
                           "right": sum(a.label == f"object_{i:04d}" for i, (a, _) in enumerate(answers)), "of": len(held)}
        # each service's client sees its server once (service_call waits 1 s after that, first call only):
        # a refused request each, so that the figures below are the learner's, not that wait
        for srv, name, req in ((TeachClass, "teach_class", TeachClass.Request(label="")),
                               (RenameClass, "rename_class", RenameClass.Request()),
                               (ForgetClass, "forget_class", ForgetClass.Request()),
                               (SaveMemory, "save_memory", SaveMemory.Request(path="../outside")),
                               (LoadMemory, "load_memory", LoadMemory.Request(path="../outside"))):
            assert not call(srv, name, req).success
        time.sleep(5)
        res["status"] = {"in_5s": len(statuses), "bytes": len(serialize_message(statuses[-1])) if statuses else None}
        teach = lambda j: call(TeachClass, "teach_class", TeachClass.Request(  # noqa: E731
            label=f"new_{j:02d}", features=[fv(v) for v in extra[j]]), timeout=60.0)
        taught = [timed(lambda j=j: teach(j)) for j in range(11)]
        res["teach"] = {"s": [t for _, t in taught], "learning_s": [round(a.learning_time_s, 3) for a, _ in taught],
                        "all_ok": all(a.success for a, _ in taught)}

        def classify_while(body: Any) -> dict[str, Any]:
            stop, took = threading.Event(), []

            def poll() -> None:
                while not stop.is_set():
                    took.append(timed(lambda: call(Classify, "classify", Classify.Request(feature=fv(held[0]))))[1])
            th = threading.Thread(target=poll)
            th.start()
            try:
                _, body_s = timed(body)
            finally:
                stop.set()
                th.join()
            return {"body_s": body_s, "calls": len(took), "s_median": float(np.median(took)) if took else None,
                    "s_max": max(took) if took else None}
        res["classify_while_teaching"] = classify_while(lambda: [teach(j) for j in range(11, 16)])
        for key, srv, name, req in (
                ("rename", RenameClass, "rename_class", RenameClass.Request(old_label="object_0005", new_label="mug")),
                ("forget", ForgetClass, "forget_class", ForgetClass.Request(label="object_0006")),
                ("forget_unknown", ForgetClass, "forget_class", ForgetClass.Request(label="no_such_thing")),
                ("save", SaveMemory, "save_memory", SaveMemory.Request(path="copy.safetensors"))):
            a, s = timed(lambda: call(srv, name, req))
            res[key] = {"s": s, "ok": a.success, "message_chars": len(a.message), "message": a.message[:200]}
            if key == "save":
                res[key]["bytes"] = int(a.bytes_written)
        res["classify_while_loading"] = classify_while(
            lambda: call(LoadMemory, "load_memory", LoadMemory.Request(path="copy.safetensors"), timeout=60.0))
        res["rss_end_mb"] = rss_mb(learner.popen.pid)
        if page is not None:
            time.sleep(3)
            body = urllib.request.urlopen(f"http://127.0.0.1:{PAGE_PORT}/api/state", timeout=10).read()
            st = json.loads(body)
            res["page"] = {"bytes": len(body), "classes_listed": len(st["classes"]),
                           "classes_total": st.get("classes_total"), "num_classes": st["status"].get("num_classes"),
                           "newest_listed": any(c["name"] == "new_15" for c in st["classes"])}
        learner.stop()
        res["log_lines"] = len(learner.output().splitlines())
        t0 = time.monotonic()
        learner = start_node("learner_node", domain_id, work, params, tag="_restart")
        res["restart"] = first_answer(cli, learner, t0)
        learner.stop()
    finally:
        if page is not None:
            page.stop()
        cli.close()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--classes", type=int, default=1000, help="classes in the memory at start")
    ap.add_argument("--busy", choices=("on", "off"), default="on", help="another process keeps one core busy")
    ap.add_argument("--page", action="store_true", help="also start the teaching page and read its state")
    ap.add_argument("--note", default="", help="what else loaded the machine (recorded with the figures)")
    ap.add_argument("--out", default=str(out_path("large_memory.json")))
    args = ap.parse_args()
    from ros_testing import domain

    from cbcl_pr_ros.evaluation.experiments import machine_info

    out: dict[str, Any] = {"benchmark": "large_memory", "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                           "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
                           "machine": {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(),
                                       "nice": os.nice(0), "loadavg_start": os.getloadavg()},
                           "classes": args.classes, "busy": args.busy, "note": args.note}
    with tempfile.TemporaryDirectory() as tmp, domain() as domain_id, competing_process(args.busy == "on"):
        out.update(session(args, Path(tmp), domain_id))
    out["machine"]["loadavg_end"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
