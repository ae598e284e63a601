"""A cache's capacity from a bandwidth-vs-footprint sweep in which every SM re-reads the footprint.

Model: a cache of C bytes re-read cyclically over a footprint F keeps a fraction h = min(1, C / F) of the
footprint resident (the first-order answer for a replacement policy that is not LRU: LRU would keep
nothing once F > C, a random policy keeps about C / F).  Each byte then costs h / B_cache + (1 - h) / B_miss
seconds, so

    bandwidth(F) = 1 / (h / B_cache + (1 - h) / B_miss).

Seconds per byte, 1 / bandwidth = h / B_cache + (1 - h) / B_miss, is linear in 1 / B_cache and 1 / B_miss
once C is fixed, so the fit scans C over a fine log grid, solves the two rates by least squares at each
(relative errors), and keeps the C of least residual: a global answer that no optimiser's starting point
can move (the min() kink gives a general optimiser several local minima).  C's CI is the wider of a
bootstrap over the repeats at each footprint (measurement noise) and the profile interval, the Cs whose
residual stays within an F-test of the best (how far the curve departs from the model).  A sweep with one
sample per footprint (a published curve) has nothing to resample: its CI is the profile interval alone.  A
sweep that never leaves the cache (no footprint past the fitted C with a bandwidth clearly below the
plateau) yields no capacity.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: A sweep must reach a bandwidth this far below the plateau for the capacity to be fitted at all.
MIN_DROP = 0.25
_CONFIDENCE = 0.95


@dataclass(frozen=True)
class CapacityFit:
    capacity_bytes: float
    ci: tuple[float, float]
    cache_bytes_per_s: float
    miss_bytes_per_s: float


def bandwidth_model(footprint_bytes, capacity_bytes: float, cache_bytes_per_s: float,
                    miss_bytes_per_s: float) -> np.ndarray:
    resident = np.minimum(1.0, capacity_bytes / np.asarray(footprint_bytes, dtype=float))
    return 1.0 / (resident / cache_bytes_per_s + (1.0 - resident) / miss_bytes_per_s)


#: Capacities tried per octave of the swept footprints.
GRID_PER_OCTAVE = 256


def _profile(footprint: np.ndarray, bandwidth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every C of the grid: the residual sum of squares (relative, in seconds per byte) and the best
    (1 / B_cache, 1 / B_miss) at that C."""
    seconds = 1.0 / bandwidth
    octaves = np.log2(footprint.max() / footprint.min())
    grid = np.geomspace(footprint.min(), footprint.max(), max(16, int(octaves * GRID_PER_OCTAVE)))
    h = np.minimum(1.0, grid[:, None] / footprint[None, :])  # (C, footprint)
    x1, x2 = h / seconds, (1.0 - h) / seconds  # weighted by 1 / y: relative errors
    s11, s12, s22 = (x1 * x1).sum(1), (x1 * x2).sum(1), (x2 * x2).sum(1)
    t1, t2 = x1.sum(1), x2.sum(1)  # X^T (y / y) = X^T 1
    det = s11 * s22 - s12 * s12
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = (s22 * t1 - s12 * t2) / det, (s11 * t2 - s12 * t1) / det
        rss = ((a[:, None] * x1 + b[:, None] * x2 - 1.0) ** 2).sum(1)
    rss[~((a > 0) & (b > 0) & np.isfinite(rss))] = np.inf
    return grid, rss, np.column_stack([a, b])


def _fit(footprint: np.ndarray, bandwidth: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
    """(capacity, cache bandwidth, miss bandwidth) and the capacity's profile interval."""
    from scipy.special import fdtri  # the F distribution's quantile, without importing scipy.stats

    grid, rss, rates = _profile(footprint, bandwidth)
    best = int(np.argmin(rss))
    if not np.isfinite(rss[best]):
        raise RuntimeError("no capacity gives positive rates")
    dof = footprint.size - 3
    limit = rss[best] * (1 + fdtri(1, dof, _CONFIDENCE) / dof) if dof > 0 else rss[best]
    inside = grid[rss <= limit]
    a, b = rates[best]
    return np.array([grid[best], 1 / a, 1 / b]), (float(inside.min()), float(inside.max()))


def fit_capacity(footprint_bytes, bandwidth, min_footprint_bytes: float = 0.0, resamples: int = 200,
                 seed: int = 0) -> CapacityFit | None:
    """Fit the model to samples (several per footprint allowed) at footprints >= ``min_footprint_bytes``
    (below the cache's own plateau, e.g. where a smaller level still serves part of the reads, is left out).
    None when the sweep does not fall at least MIN_DROP below its plateau."""
    footprint = np.asarray(footprint_bytes, dtype=float)
    bandwidth = np.asarray(bandwidth, dtype=float)
    keep = (footprint >= min_footprint_bytes) & np.isfinite(bandwidth) & (bandwidth > 0)
    footprint, bandwidth = footprint[keep], bandwidth[keep]
    sizes = np.unique(footprint)
    if sizes.size < 4:
        return None
    groups = [bandwidth[footprint == f] for f in sizes]
    medians = np.array([np.median(g) for g in groups])
    if medians[-1] > (1 - MIN_DROP) * medians.max():
        return None
    try:
        (capacity, cache, miss), (profile_lo, profile_hi) = _fit(sizes, medians)
    except RuntimeError:  # no capacity explains the curve with positive rates
        return None
    if not sizes[0] < capacity < sizes[-1]:
        return None
    rng = np.random.default_rng(seed)
    boot = []
    # one sample per footprint: every resample is the sweep itself, the residual term alone carries the CI
    repeated = any(g.size > 1 for g in groups)
    for _ in range(resamples if repeated else 0):
        resampled = np.array([np.median(g[rng.integers(0, g.size, g.size)]) for g in groups])
        try:
            boot.append(_fit(sizes, resampled)[0][0])
        except RuntimeError:
            continue
    tail = (1 - _CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(boot, [tail, 100 - tail]) if boot else (capacity, capacity)
    return CapacityFit(float(capacity), (float(min(lo, profile_lo)), float(max(hi, profile_hi))),
                       float(cache), float(miss))
