"""Little's law fitted to bandwidth against concurrency (lecture §7.4).

With c independent loads of b bytes in flight, each taking L seconds, a memory system delivers
c * b / L bytes per second until it saturates at its peak: BW(c) = min(c * b / L, BW_max).  The knee
c* = BW_max * L / b is the concurrency that saturates it, and BW_max * L the bytes that must be in flight.
The fit is least squares on log bandwidth (every concurrency weighs the same whatever its bandwidth), with
bootstrap CIs over configurations.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares


def model(concurrency, bytes_per_load: float, latency_s: float, peak_bytes_per_s: float):
    return np.minimum(np.asarray(concurrency, dtype=float) * bytes_per_load / latency_s, peak_bytes_per_s)


def _fit(c: np.ndarray, bw: np.ndarray, bytes_per_load: float) -> tuple[float, float]:
    def residuals(p):
        return np.log(model(c, bytes_per_load, np.exp(p[0]), np.exp(p[1]))) - np.log(bw)

    # start from the data: the peak as the top bandwidth, the latency from the lowest concurrency's rate
    low = np.argmin(c)
    start = [np.log(c[low] * bytes_per_load / bw[low]), np.log(bw.max())]
    p = least_squares(residuals, start, method="lm").x
    return float(np.exp(p[0])), float(np.exp(p[1]))


def fit_littles_law(concurrency, bandwidth, bytes_per_load: float, resamples: int = 500, seed: int = 0) -> dict:
    """Loaded latency (s), peak bandwidth (B/s), knee concurrency and bytes in flight, each with a 95% CI."""
    c = np.asarray(concurrency, dtype=float)
    bw = np.asarray(bandwidth, dtype=float)
    if len(np.unique(c)) < 3:
        raise ValueError("a Little's-law fit needs bandwidth at three or more concurrencies")
    latency, peak = _fit(c, bw, bytes_per_load)
    rng = np.random.default_rng(seed)
    boot = np.array([_fit(c[i], bw[i], bytes_per_load) for i in rng.integers(0, len(c), (resamples, len(c)))
                     if len(np.unique(c[i])) >= 3])

    def ci(values):
        return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))

    in_flight = boot[:, 0] * boot[:, 1]
    return {"latency_s": latency, "latency_ci": ci(boot[:, 0]), "peak_bytes_per_s": peak, "peak_ci": ci(boot[:, 1]),
            "bytes_in_flight": latency * peak, "bytes_in_flight_ci": ci(in_flight),
            "knee_concurrency": latency * peak / bytes_per_load,
            "knee_ci": ci(in_flight / bytes_per_load)}
