"""runtime/heap.py: with the learner's heap settings, large arrays a retrain frees go back to the system."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from cbcl_pr_ros.runtime.heap import _glibc

PROBE = textwrap.dedent("""
    import sys, threading
    import numpy as np
    from cbcl_pr_ros.runtime.heap import keep_heap_flat

    if sys.argv[1] == "tuned":
        assert keep_heap_flat()

    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024

    def retrain_like():
        big = np.ones(20 * 2**20 // 8)  # a large block freed first (glibc then raises its mmap threshold)
        del big
        for _ in range(5):
            arrays = [np.ones(k * 2**20 // 8) for k in (6, 9, 12)]
            del arrays

    before = rss_mb()
    worker = threading.Thread(target=retrain_like)  # an executor thread, as in the node
    worker.start()
    worker.join()
    print(rss_mb() - before)
""")


def _kept_mb(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return float(out.stdout.strip())


@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt is not available on this system (not glibc)")
def test_freed_retrain_arrays_leave_the_process_with_the_learner_heap_settings():
    tuned = _kept_mb("tuned")
    assert tuned < 3.0, f"kept {tuned:.1f} MB with the settings (defaults keep {_kept_mb('default'):.1f} MB)"
