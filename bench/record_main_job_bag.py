"""Record the main job's way of teaching, by object, as a bag: bench/bags/main_job_by_object.

The main job (scripts/run-demo) teaches each class from views of an object held up to the camera,
with TeachClass mode MODE_OBJECT (the learner crops the object in view), two classes per increment.
This script renders such a session in the simulated world (``bags.simulate``, mode 1 on every
event), replays it into a live ``teaching_session`` (extractor + learner) with ``record_session``
beside it, and keeps the recorded bag: camera frames, and teaching events with the live answers
and the teach sources (bag format 2). Then it evaluates that bag offline and writes
runs/bench/main_job_bag.json: the offline answers must equal the live ones it recorded.

Run: ``python bench/record_main_job_bag.py [--classes 4 --shots 5 --test-views 2 --image-size 160]``
(about 1-2 minutes; needs the built package and rclpy). Evaluate the kept bag any time with
``python -m cbcl_pr_ros.cli.bag_eval bench/bags/main_job_by_object``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common: outputs, shared helpers
from bench_common import out_path  # noqa: E402


def record_live(sim: Path, out: Path, cfg: Path, tmp: Path) -> dict:
    """Replay ``sim`` into a live teaching_session with a recorder writing ``out``; the replay report."""
    from ros_testing import Proc, domain, ros_env

    with domain() as dom:
        env = ros_env(dom)
        session = Proc([sys.executable, "-m", "cbcl_pr_ros.nodes.session", "--config", str(cfg),
                        "--camera-topic", "/camera/image_raw"], env, tmp / "session.log", cwd=tmp)
        recorder = Proc([sys.executable, "-m", "cbcl_pr_ros.nodes.recorder", str(out), "--topics", "/camera/image_raw",
                         "--reliable", "--type-wait", "0.5"], env, tmp / "rec.log", cwd=tmp)
        try:
            recorder.wait_for("recording", 60)
            session.wait_for("ready", 120)
            report = tmp / "replay.json"
            run = subprocess.run([sys.executable, "-m", "cbcl_pr_ros.nodes.replay", str(sim), "--report", str(report),
                                  "--service-timeout", "120", "--discovery-wait", "10", "--min-subscribers", "2"],
                                 env=env, cwd=tmp, capture_output=True, text=True, timeout=600)
            if run.returncode != 0:
                raise RuntimeError(run.stderr[-3000:] + session.output()[-2000:])
            time.sleep(1.0)
            if recorder.stop() != 0:
                raise RuntimeError(recorder.output()[-2000:])
        finally:
            recorder.stop()
            session.stop()
    return json.loads(report.read_text())


def main(argv: list[str] | None = None) -> int:
    from cbcl_pr_ros.bags.offline_eval import evaluate_bag
    from cbcl_pr_ros.bags.simulate import SessionPlan, simulate_session
    from cbcl_pr_ros.evaluation.experiments import machine_info

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--categories", nargs="+", default=["mug", "can", "duck", "bottle"],
                    help="the first four of the main job's default classes")
    ap.add_argument("--shots", type=int, default=5)
    ap.add_argument("--test-views", type=int, default=2)
    ap.add_argument("--image-size", type=int, default=160)
    ap.add_argument("--out", default=str(ROOT / "bench" / "bags" / "main_job_by_object"))
    opts = ap.parse_args(argv)
    load0 = os.getloadavg()
    out = Path(opts.out)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        plan = SessionPlan(tuple(opts.categories), opts.shots, opts.test_views, classes_per_increment=2,
                           image_size=opts.image_size, seed=0, mode=1)
        simulate_session(tmp / "sim", plan)
        cfg = [('    memory_path: ""' if ln.strip().startswith("memory_path:") else ln)
               for ln in (ROOT / "config" / "cbcl_pr.yaml").read_text().splitlines()]
        (tmp / "cfg.yaml").write_text("\n".join(cfg) + "\n")
        live = record_live(tmp / "sim", tmp / "live", tmp / "cfg.yaml", tmp)
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(tmp / "live", out)
    t0 = time.perf_counter()
    offline = evaluate_bag(out)  # the package's config/cbcl_pr.yaml, as the docs' command runs it
    wall = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in out.iterdir())
    result = {
        "bag": str(out.relative_to(ROOT)), "bag_bytes": size, "plan": plan.__dict__,
        "events": offline.n_events, "live_accuracy": live["accuracy"], "offline_accuracy": offline.accuracy,
        "agreement_with_recording": offline.agreement_with_recording,
        "accuracy_per_increment": [i.accuracy for i in offline.increments],
        "teach_answers_live": [a["message"] for a in live["answers"] if a["kind"] == "TEACH"],
        "offline_wall_s": wall, "teach_failures": offline.teach_failures,
        "machine": {"cpu": machine_info()["cpu"], "nproc": os.cpu_count(), "loadavg_start": load0,
                    "loadavg_end": os.getloadavg()}}
    res = out_path("main_job_bag.json")
    res.write_text(json.dumps(result, indent=2, default=list))
    print(json.dumps(result, indent=2, default=list))
    return 0 if offline.agreement_with_recording == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
