"""A cache's fill block and its line (tag) size: two methods that measure two different things.

Fill block (``fit_line_size``), from a chase walked in address order at stride s: a load misses when it enters
a block the previous miss did not bring in, so the miss fraction is min(s / B, 1) for fill block size B, and
latency(s) = hit + (miss - hit) * min(s / B, 1).  For each power-of-two B the model is linear in (hit,
miss - hit); the B with the least squared error wins.  A sectored cache fills one sector per miss, so B is the
sector (or the block the next level sends), not the line.

Line size (``fit_line_by_capacity``), from random chases at several strides s, one element per s-byte block:
a cache of C bytes in L-byte lines holds C / L lines.  With s >= L every element takes a line of its own; with
s < L, L / s elements share one.  So the footprint at the capacity knee is K(s) = C * max(1, s / L): flat for
s <= L, doubling with s beyond.  L is the largest stride whose knee has not moved from the small-stride knee.
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


#: A knee that moved has grown by s / L >= 2 for power-of-two strides, so a knee within half an octave of the
#: small-stride knee has not moved.
UNMOVED_OCTAVES = 0.5


def _largest_unmoved(strides: np.ndarray, log_knees: np.ndarray) -> int:
    """Index of the largest stride such that it and every smaller stride keep the smallest stride's knee."""
    unmoved = np.abs(log_knees - log_knees[0]) < UNMOVED_OCTAVES
    return int(np.argmin(unmoved) - 1) if not unmoved.all() else len(strides) - 1


def fit_line_by_capacity(knees: dict, resamples: int = 1000, seed: int = 0) -> dict:
    """Line size from ``{stride_bytes: (knee_bytes, ci_low, ci_high)}``, the capacity knee of a chase at each
    stride.  Returns ``line_bytes``, whether it is only a ``lower_bound`` (no measured stride moved the knee:
    the line is at least the largest stride) or an ``upper_bound`` (the second stride already moved the knee:
    the line is at most the smallest stride), ``capacity_bytes`` (the small-stride knee, C), the knee ratios
    K(s) / C, and a bootstrap 95% ``ci`` of the line.  The bootstrap draws each knee from a log-normal whose
    95% interval is that knee's CI."""
    if len(knees) < 2:
        raise ValueError("a line size by capacity needs capacity knees at two or more strides")
    strides = np.array(sorted(knees), dtype=float)
    knee = np.array([knees[s][0] for s in sorted(knees)], dtype=float)
    lo = np.array([knees[s][1] for s in sorted(knees)], dtype=float)
    hi = np.array([knees[s][2] for s in sorted(knees)], dtype=float)
    if not (np.all(knee > 0) and np.all(lo > 0) and np.all(hi >= lo)):
        raise ValueError("capacity knees and their CIs must be positive, each CI low <= high")
    log_knee = np.log2(knee)
    best = _largest_unmoved(strides, log_knee)
    sigma = (np.log2(hi) - np.log2(lo)) / (2 * 1.96)
    rng = np.random.default_rng(seed)
    draws = log_knee + sigma * rng.standard_normal((resamples, strides.size))
    boot = strides[[_largest_unmoved(strides, d) for d in draws]]
    moved = best < len(strides) - 1
    predicted = np.log2(np.maximum(1.0, strides / strides[best]))
    return {"model_octaves": float(np.sqrt(np.mean((log_knee - log_knee[0] - predicted) ** 2))),
            "line_bytes": int(strides[best]), "lower_bound": not moved,
            "upper_bound": moved and best == 0, "capacity_bytes": float(knee[0]),
            "ratios": {int(s): float(k / knee[0]) for s, k in zip(strides, knee)},
            "ci": (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))}
