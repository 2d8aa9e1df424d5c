"""Offline feature extraction that keeps the backbone fed: worker threads load and stage the next
batches while the current one runs.

Evaluation, bag evaluation and rendered data sets extract thousands of images; done in one loop,
decoding and resizing (OpenCV, ~2-3 ms per 640x480 frame) and the network take turns, and on a
GPU the network waits for the CPU most of the time. Here ``workers`` threads run ``load(i)`` and
``Backbone.stage`` (decode, check, and the crop/resize done on the host; OpenCV releases the GIL)
up to ``depth`` batches ahead, while the calling thread runs ``Backbone.extract_staged``. Rows
come back in index order; a failing image raises with its index.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

__all__ = ["default_workers", "extract_prefetched"]

_LOG = logging.getLogger(__name__)


def default_workers() -> int:
    """Loader threads: the cores beside the one that drives the backbone, at least 1, at most 16."""
    return max(1, min(16, (os.cpu_count() or 2) - 1))


def extract_prefetched(
    backbone: Any,
    n: int,
    load: Callable[[int], np.ndarray],
    *,
    batch_size: int | None = None,
    workers: int | None = None,
    depth: int = 2,
    progress: Callable[[int], Any] | None = None,
    host_crop: bool | None = None,
) -> np.ndarray:
    """(n, feature_dim) float32 features of the RGB uint8 images ``load(0) .. load(n-1)``.

    ``batch_size`` defaults to the backbone's; ``workers`` to :func:`default_workers` (0 runs
    everything in the calling thread); ``depth`` batches are staged ahead; ``progress(k)`` is
    called after each batch with the number of images it held (e.g. ``tqdm.update``).
    ``host_crop`` (default: when there are workers) has the workers crop and resize frames with
    OpenCV even for a GPU backbone, so it uploads 224x224 crops instead of whole frames (the
    same numbers; which is faster depends on the cores and the bus: ``bench_features --device cuda``
    measures both).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    bs = int(batch_size or getattr(backbone, "batch_size", 32))
    if bs < 1 or depth < 1:
        raise ValueError(f"batch_size and depth must be >= 1, got {bs}, {depth}")
    nw = default_workers() if workers is None else int(workers)
    out = np.empty((n, backbone.feature_dim), np.float32)
    # any object with extract() works (test doubles, wrappers): it is then only loaded ahead
    stage = getattr(backbone, "stage", None)
    extract_staged = getattr(backbone, "extract_staged", None)
    crop_on_host = nw > 0 if host_crop is None else bool(host_crop)
    if stage is None or extract_staged is None:
        stage, extract_staged = (lambda x, host_crop=False: x), backbone.extract

    def staged(i: int) -> np.ndarray:
        try:
            return stage(load(i), host_crop=crop_on_host)
        except (TypeError, ValueError, OSError) as exc:
            raise type(exc)(f"image {i}: {exc}") from None

    starts = list(range(0, n, bs))
    if nw == 0:
        for s in starts:
            out[s:s + bs] = extract_staged([staged(i) for i in range(s, min(n, s + bs))])
            if progress is not None:
                progress(min(n, s + bs) - s)
        return out
    with ThreadPoolExecutor(max_workers=nw, thread_name_prefix="feature_prefetch") as pool:
        queue: deque[tuple[int, list[Future[np.ndarray]]]] = deque()
        todo = iter(starts)

        def submit_next() -> None:
            s = next(todo, None)
            if s is not None:
                queue.append((s, [pool.submit(staged, i) for i in range(s, min(n, s + bs))]))

        for _ in range(depth):
            submit_next()
        try:
            while queue:
                s, futures = queue.popleft()
                batch = [f.result() for f in futures]
                submit_next()  # keep ``depth`` batches in flight while this one runs
                out[s:s + len(batch)] = extract_staged(batch)
                if progress is not None:
                    progress(len(batch))
        except BaseException:
            for _, futures in queue:
                for f in futures:
                    f.cancel()
            raise
    return out
