"""A cache's capacity from a bandwidth-vs-footprint sweep in which every SM re-reads the footprint.

Model: a cache of C bytes re-read cyclically over a footprint F keeps a fraction h = min(1, C / F) of the
footprint resident (the first-order answer for a replacement policy that is not LRU: LRU would keep
nothing once F > C, a random policy keeps about C / F).  Each byte then costs h / B_cache + (1 - h) / B_miss
seconds, so

    bandwidth(F) = 1 / (h / B_cache + (1 - h) / B_miss).

The fit gives C, the cache's bandwidth and the bandwidth of the level behind it.  C's CI is the wider of a
bootstrap over the repeats at each footprint (measurement noise) and the fit's own 95% interval from the
residuals (how far the curve departs from the model).  A sweep with one sample per footprint (a published
curve) has nothing to resample: its CI is the residual interval alone.  A sweep that never leaves the cache
(no footprint past the fitted C with a bandwidth clearly below the plateau) yields no capacity.
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


def _fit(footprint: np.ndarray, bandwidth: np.ndarray) -> tuple[np.ndarray, float]:
    """(capacity, cache bandwidth, miss bandwidth) and the capacity's standard error."""
    from scipy.optimize import curve_fit

    scale_f, scale_b = np.median(footprint), np.max(bandwidth)
    p0 = (1.0, 1.0, np.min(bandwidth) / scale_b)
    params, cov = curve_fit(lambda f, c, b2, bm: bandwidth_model(f, c, b2, bm), footprint / scale_f,
                            bandwidth / scale_b, p0=p0, bounds=([1e-3, 1e-3, 1e-3], [1e3, 10.0, 10.0]))
    return params * np.array([scale_f, scale_b, scale_b]), float(np.sqrt(cov[0, 0]) * scale_f)


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
        (capacity, cache, miss), error = _fit(sizes, medians)
    except RuntimeError:  # no convergence: the curve has no cache-shaped drop
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
    z = 1.96 * error if np.isfinite(error) else 0.0
    return CapacityFit(float(capacity), (float(min(lo, capacity - z)), float(max(hi, capacity + z))),
                       float(cache), float(miss))
