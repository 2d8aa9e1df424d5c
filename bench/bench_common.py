"""What every bench script shares: the repository's paths, where results go, the shared helpers.

A bench run writes its JSON (and tables, plots) under ``runs/bench/`` by default, which git ignores:
a run is a measurement, not a source. ``$CBCL_BENCH_OUT`` moves that folder. The few results the
docs and the CI's short pipeline run read are curated by hand in ``bench/results/`` (see its
README): copying a run there is a deliberate act.

The helpers the tests and the bench both use (``ros_testing``: ROS domains, processes and a client;
``synthetic``: the RGB-D table scene; ``fuzz_support``: the service fuzzer) live in one place,
``test/support``; importing this module puts it on the path, so a bench script imports them by
name, as the tests do (pytest.ini). A bench script finds this module with one line::

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common
"""
from __future__ import annotations

import json

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the helpers shared with the tests
SUPPORT = REPO / "test" / "support"
#: the committed, curated results (small; what docs and the CI read)
CURATED = REPO / "bench" / "results"
#: where runs go unless $CBCL_BENCH_OUT says otherwise (git-ignored)
RUNS = REPO / "runs" / "bench"

if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))


def out_root() -> Path:
    """The folder bench results are written to: ``$CBCL_BENCH_OUT`` or ``runs/bench``."""
    env = os.environ.get("CBCL_BENCH_OUT", "").strip()
    return Path(env).expanduser().resolve() if env else RUNS


def out_path(name: str | Path) -> Path:
    """The default output ``name`` (a file or folder, relative) of a bench script, outside git; its
    parent folder is created so that the script can write it."""
    path = out_root() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def auroc(higher, lower) -> float:
    """P(a value of ``higher`` exceeds a value of ``lower``), ties counted half (the area under the ROC
    curve, scikit-learn's); NaN when either side is empty."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    hi, lo = np.asarray(higher, float).ravel(), np.asarray(lower, float).ravel()
    if not len(hi) or not len(lo):
        return float("nan")
    return float(roc_auc_score(np.r_[np.ones(len(hi)), np.zeros(len(lo))], np.r_[hi, lo]))


def vga_cpu_ms(run, frame, repeats: int = 3) -> float:
    """CPU milliseconds of ``run(frame)`` (the best of ``repeats``: the least disturbed by other jobs),
    scaled to a 640x480 frame by pixels so that sources of other sizes compare."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        run(frame)
        best = min(best, time.process_time() - t0)
    return best * 1000 * (640 * 480) / (frame.rgb.shape[0] * frame.rgb.shape[1])


def store_labelled(path: str | Path, label: str, result: dict) -> Path:
    """Put ``result`` under ``label`` in the JSON file at ``path``, keeping its other labels' runs
    (a quiet and a busy run of one bench go into one file)."""
    path = Path(path)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[label] = result
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {path}")
    return path
