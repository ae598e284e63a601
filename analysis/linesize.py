"""Fill granularity (line or sector size) from a chase walked in address order at stride s.

A load misses when it enters a block the previous miss did not bring in, so the miss fraction is
min(s / L, 1) for fill block size L, and latency(s) = hit + (miss - hit) * min(s / L, 1).  For each
power-of-two L the model is linear in (hit, miss - hit); the L with the least squared error wins.
"""
from __future__ import annotations

import numpy as np

CANDIDATES = tuple(2**k for k in range(3, 11))  # 8 B .. 1 KiB


def _fit_one(stride, latency, block):
    x = np.minimum(stride / block, 1.0)
    design = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(design, latency, rcond=None)
    rss = float(np.sum((design @ coef - latency) ** 2))
    return coef, rss


def fit_line_size(stride_bytes, latency, resamples: int = 500, seed: int = 0) -> dict:
    """Best block size with hit and miss latencies, R², every candidate's error, and a bootstrap CI of L.

    Candidates are limited to blocks the sweep can tell apart: at least the smallest stride measured.
    """
    stride = np.asarray(stride_bytes, dtype=float)
    latency = np.asarray(latency, dtype=float)
    candidates = [b for b in CANDIDATES if b >= stride.min() and b <= stride.max()]
    if len(np.unique(stride)) < 3 or not candidates:
        raise ValueError("a line-size fit needs at least three strides spanning a candidate block size")

    def best(s, y):
        fits = {b: _fit_one(s, y, b) for b in candidates}
        block = min(fits, key=lambda b: fits[b][1])
        return block, fits

    block, fits = best(stride, latency)
    (hit, step), rss = fits[block]
    tss = float(np.sum((latency - latency.mean()) ** 2))
    rng = np.random.default_rng(seed)
    boot = [best(stride[i], latency[i])[0] for i in rng.integers(0, len(stride), (resamples, len(stride)))]
    return {"block_bytes": block, "hit": float(hit), "miss": float(hit + step),
            "r2": 1 - rss / tss if tss else 1.0, "rss": {b: f[1] for b, f in fits.items()},
            "ci": (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))}
