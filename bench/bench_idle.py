"""What each node process costs when it has nothing to do, and when the simulated camera runs.

Starts the simulated session as ``launch/sim_teaching_demo.launch.py with_page:=true`` does (one
process per node, the shipped YAML files; the learner keeps its memory in RAM), on a ROS domain of
its own, every process at ``nice`` 10, puts a few objects on the table and measures CPU and RSS of
each process from ``/proc`` over a window in four states:

1. ``idle``: the world's camera paused (``pause_camera``), no page open;
2. ``camera``: the camera at its configured rate, no page open;
3. ``camera_page``: the same with one page open (one websocket client reading everything);
4. ``camera_busy``: state 2 with another process keeping one core busy (same nice).

Per process and state: CPU % of one core, wake-ups per second (context switches of all threads),
RSS at the start and end of the window, and the three busiest threads.

    python -P bench/bench_idle.py --window 30 --label before

Writes ``runs/bench/idle.json`` (one entry per label).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
from bench_common import REPO, out_path, store_labelled  # noqa: E402  (also puts the shared test helpers on the path)
from ros_testing import Client, Proc, fresh_domain, installed_executable, release_domain, ros_env  # noqa: E402

CFG = REPO / "config"
TICK = os.sysconf("SC_CLK_TCK")
STATES = ("idle", "camera", "camera_page", "camera_busy")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nodes(port: int) -> dict[str, tuple[str, list[str], str]]:
    """name: executable, ROS arguments (as the sim launch file gives them), line that says it is ready."""
    perception = ["--params-file", str(CFG / "cbcl_pr.yaml")]
    return {
        "sim_world": ("sim_world_node", ["--params-file", str(CFG / "sim_world.yaml")], "simulated world ready"),
        "feature_extractor": ("feature_extractor_node", perception, "(active)"),
        "learner": ("learner_node", perception + ["-p", "memory_path:=''"], "learner ready (active)"),
        "arm": ("arm_node", ["--params-file", str(CFG / "arm.yaml")], "arm ready"),
        "teaching_page": ("teaching_page_node", ["--params-file", str(CFG / "teaching_page.yaml"),
                                                 "-p", f"port:={port}"], "teaching page on"),
    }


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def _stat(pid: int) -> tuple[int, int]:
    """(utime + stime ticks, context switches) of the whole process, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    switches = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    switches += int(line.split()[1])
        except OSError:
            pass
    return ticks, switches


def _threads(pid: int) -> dict[str, int]:
    """ticks per thread (name/tid)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            raw = (task / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        f = raw.rsplit(")", 1)[1].split()
        out[f"{name}/{task.name}"] = int(f[11]) + int(f[12])
    return out


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _window(pids: dict[str, int], seconds: float, trace: list) -> dict:
    t0 = time.monotonic()
    s0 = {n: _stat(p) for n, p in pids.items()}
    th0 = {n: _threads(p) for n, p in pids.items()}
    rss0 = {n: _rss_mb(p) for n, p in pids.items()}
    while time.monotonic() - t0 < seconds:
        time.sleep(min(5.0, seconds - (time.monotonic() - t0)) if seconds > time.monotonic() - t0 else 0)
        trace.append({"t": round(time.time(), 1), **{n: _rss_mb(p) for n, p in pids.items()}})
    wall = time.monotonic() - t0
    out = {}
    for n, p in pids.items():
        ticks, sw = _stat(p)
        th1 = _threads(p)
        busy = sorted(((th1[k] - th0[n].get(k, 0), k) for k in th1), reverse=True)[:3]
        out[n] = {"cpu_pct": round(100 * (ticks - s0[n][0]) / TICK / wall, 1),
                  "wakeups_per_s": round((sw - s0[n][1]) / wall, 1),
                  "rss_mb_start": rss0[n], "rss_mb_end": _rss_mb(p),
                  "busiest_threads": {k: round(100 * d / TICK / wall, 1) for d, k in busy if d > 0}}
    out["_load_avg"] = os.getloadavg()[0]
    out["_wall_s"] = round(wall, 1)
    return out


def _page_client(port: int, stop: threading.Event, counts: dict) -> None:
    """One open page: a websocket that reads everything the page sends."""
    from aiohttp import ClientSession, WSMsgType

    async def hold() -> None:
        async with ClientSession() as s, s.ws_connect(f"http://127.0.0.1:{port}/ws") as ws:
            while not stop.is_set():
                try:
                    msg = await asyncio.wait_for(ws.receive(), 0.5)
                except asyncio.TimeoutError:
                    continue
                if msg.type in (WSMsgType.CLOSED, WSMsgType.ERROR):
                    return
                counts["messages"] = counts.get("messages", 0) + 1
                counts["bytes"] = counts.get("bytes", 0) + len(msg.data or b"")

    asyncio.run(hold())


def run(window: float, settle: float, objects: int, log_dir: Path) -> dict:
    from cbcl_pr_ros.srv import PlaceObject
    from std_srvs.srv import SetBool

    port = _free_port()
    dom = fresh_domain()
    procs: dict[str, Proc] = {}
    client = None
    busy = None
    trace: list = []
    result: dict = {"states": {}, "rss_trace": trace}
    try:
        env = ros_env(dom)
        env.pop("OMP_NUM_THREADS", None)  # as a user starts them
        for name, (exe, args, _) in _nodes(port).items():
            procs[name] = Proc(["nice", "-n", "10", sys.executable, str(installed_executable(exe)), "--ros-args", *args],
                               env, log_dir / f"{name}.log")
        for name, (_, _, ready) in _nodes(port).items():
            procs[name].wait_for(ready, 300)
        print("all nodes ready", flush=True)
        pids = {n: p.popen.pid for n, p in procs.items()}
        client = Client(dom, "bench_idle")
        for i in range(objects):
            r = client.call(PlaceObject, "place_object", PlaceObject.Request(
                category=("mug", "duck", "can", "lemon")[i % 4], instance=1, x=0.7, y=-0.26 + 0.2 * i), 60)
            print(r.message, flush=True)
        client.call(SetBool, "pause_camera", SetBool.Request(data=True), 30)
        for state in STATES:
            if state == "camera":
                client.call(SetBool, "pause_camera", SetBool.Request(data=False), 30)
            stop = threading.Event()
            counts: dict = {}
            if state == "camera_page":
                threading.Thread(target=_page_client, args=(port, stop, counts), daemon=True).start()
            if state == "camera_busy":
                busy = subprocess.Popen(["nice", "-n", "10", sys.executable, "-c", "while True: pass"])
            time.sleep(settle)
            print(f"measuring {state} for {window:.0f} s", flush=True)
            result["states"][state] = _window(pids, window, trace)
            stop.set()
            if counts:
                result["states"][state]["_page_client"] = counts
            if busy is not None:
                busy.kill()
                busy.wait()
                busy = None
            row = "  ".join(f"{n} {v['cpu_pct']:5.1f}% {v['rss_mb_end']:.0f}MB"
                            for n, v in result["states"][state].items() if not n.startswith("_"))
            print(f"{state}: {row}", flush=True)
    finally:
        if busy is not None:
            busy.kill()
        if client is not None:
            client.close()
        for p in procs.values():
            p.stop(60)
        release_domain(dom)
    for name, p in procs.items():
        log = p.output()
        result.setdefault("log_lines", {})[name] = log.count("\n")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=float, default=30.0, help="seconds measured per state")
    ap.add_argument("--settle", type=float, default=8.0, help="seconds after a state change before measuring")
    ap.add_argument("--objects", type=int, default=3, help="objects put on the table")
    ap.add_argument("--label", default="this checkout")
    ap.add_argument("--out", default=str(out_path("idle.json")))
    opts = ap.parse_args()
    log_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_idle_{os.getpid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    result = {"machine": f"{platform.node()} ({os.cpu_count()} CPUs, {_cpu_model()})",
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "window_s": opts.window,
              "nice": 10, "load_avg_start": os.getloadavg()[0], "log_dir": str(log_dir)}
    result.update(run(opts.window, opts.settle, opts.objects, log_dir))
    result["load_avg_end"] = os.getloadavg()[0]
    store_labelled(opts.out, opts.label, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
