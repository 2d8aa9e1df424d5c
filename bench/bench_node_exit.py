"""How long each node takes from Ctrl-C (SIGINT) to its exit, against launch's grace period.

``ros2 launch`` waits 5 s after SIGINT, then sends SIGTERM and logs "failed to terminate ... exit code
-15". This starts each node as ``ros2 launch`` would (its installed executable with --ros-args), waits
until it is ready, gives it what a session gives it (the page: an open websocket and an action waiting
for a learner; the simulated world: rendering at its rate), sends SIGINT and measures the time to exit.

    python -P bench/bench_node_exit.py --repeats 3 --label "this checkout"

Writes ``runs/bench/node_exit.json`` (one entry per label: per node the exit times, codes, and
how many exceeded the grace period).
"""
from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import REPO, out_path, store_labelled  # noqa: E402  (also puts the shared test helpers on the path)
from ros_testing import fresh_domain, installed_executable, release_domain, ros_env  # noqa: E402

GRACE_S = 5.0  # launch's sigterm_timeout default
NODES = {  # executable, ROS arguments, ready line
    "teaching_page": ("teaching_page_node", ["-p", "port:={port}"], "teaching page on"),
    "sim_world": ("sim_world_node", ["-p", "rate_hz:=10.0"], "simulated world ready"),
    "arm": ("arm_node", [], "arm ready"),
    "feature_extractor": ("feature_extractor_node", ["-p", "threads:=1"], "configured: backbone"),
    "learner": ("learner_node", ["-p", "memory_path:=''"], "learner ready (active)"),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _busy_page(port: int) -> None:
    """An open page (websocket) and a rename waiting for a learner that is not there."""
    import asyncio

    from aiohttp import ClientSession

    async def hold() -> None:
        async with ClientSession() as s, s.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
            async for _ in ws:
                pass

    def ws() -> None:
        try:
            asyncio.run(hold())
        except Exception:  # noqa: BLE001 - the server going away ends it
            pass

    def rename() -> None:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/rename", b'{"old": "mug", "new": "cup"}',
                                     {"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=60).read()
        except Exception:  # noqa: BLE001
            pass

    threading.Thread(target=ws, daemon=True).start()
    time.sleep(0.5)
    threading.Thread(target=rename, daemon=True).start()


def measure(name: str, log_dir: Path) -> dict:
    exe, args, ready = NODES[name]
    port = _free_port()
    dom = fresh_domain()
    log = log_dir / f"{name}.log"
    try:
        with open(log, "wb") as fh:
            proc = subprocess.Popen([sys.executable, str(installed_executable(exe)), "--ros-args",
                                     *[a.format(port=port) for a in args]], env=ros_env(dom), stdout=fh,
                                    stderr=subprocess.STDOUT)
            end = time.monotonic() + 300
            while ready not in log.read_text(errors="replace") and time.monotonic() < end and proc.poll() is None:
                time.sleep(0.2)
            if name == "teaching_page":
                _busy_page(port)
            time.sleep(2.0)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            try:
                rc = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait(10)
            took = time.monotonic() - t0
    finally:
        release_domain(dom)
    out = log.read_text(errors="replace")
    return {"exit_s": round(took, 3), "rc": rc, "traceback": "Traceback" in out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--nodes", default=",".join(NODES))
    ap.add_argument("--out", default=str(out_path("node_exit.json")))
    opts = ap.parse_args()
    log_dir = Path(os.environ.get("TMPDIR", "/tmp")) / "bench_node_exit"
    log_dir.mkdir(parents=True, exist_ok=True)
    result = {"grace_s": GRACE_S, "machine": f"{platform.node()} ({os.cpu_count()} CPUs)",
              "load_avg_start": os.getloadavg()[0], "nodes": {}}
    for name in opts.nodes.split(","):
        runs = [measure(name, log_dir) for _ in range(opts.repeats)]
        times = [r["exit_s"] for r in runs]
        result["nodes"][name] = {"runs": runs, "max_exit_s": max(times),
                                 "over_grace": sum(t > GRACE_S for t in times),
                                 "clean": all(r["rc"] == 0 and not r["traceback"] for r in runs)}
        print(f"{name}: exit {', '.join(f'{t:.2f}' for t in times)} s; rc {[r['rc'] for r in runs]}", flush=True)
    result["load_avg_end"] = os.getloadavg()[0]
    store_labelled(opts.out, opts.label, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
