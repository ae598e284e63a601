"""Little's law fitted to bandwidth against concurrency (lecture §7.4).

With c independent loads of b bytes in flight, each taking L seconds, a memory system delivers
c * b / L bytes per second until it saturates at its peak: BW(c) = min(c * b / L, BW_max).  The knee
c* = BW_max * L / b is the concurrency that saturates it, and BW_max * L the bytes that must be in flight.
The fit is least squares on log bandwidth (every concurrency weighs the same whatever its bandwidth), with
bootstrap CIs over configurations.
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, ratio_ci, select


def model(concurrency, bytes_per_load: float, latency_s: float, peak_bytes_per_s: float):
    return np.minimum(np.asarray(concurrency, dtype=float) * bytes_per_load / latency_s, peak_bytes_per_s)


def _fit(c: np.ndarray, bw: np.ndarray, bytes_per_load: float) -> tuple[float, float]:
    # the model's own arithmetic, its invariant parts computed once: c * b / L is (c * b) / L
    bytes_in_flight, log_bw = c * bytes_per_load, np.log(bw)

    def residuals(p):
        return np.log(np.minimum(bytes_in_flight / np.exp(p[0]), np.exp(p[1]))) - log_bw

    # start from the data: the peak as the top bandwidth, the latency from the lowest concurrency's rate
    low = np.argmin(c)
    start = np.array([np.log(c[low] * bytes_per_load / bw[low]), np.log(bw.max())])
    p = _levenberg_marquardt(residuals, start)
    return float(np.exp(p[0])), float(np.exp(p[1]))


def _levenberg_marquardt(residuals, start: np.ndarray) -> np.ndarray:
    """``least_squares(residuals, start, method="lm").x``, the same numbers: through ``_lmder_fit`` where this
    scipy's least_squares does what it does (most of a small fit's time is least_squares' checks and wrappers),
    else least_squares itself."""
    if _lmder_is_least_squares():
        return _lmder_fit(residuals, start)
    from scipy.optimize import least_squares

    return least_squares(residuals, start, method="lm").x


def _lmder_fit(residuals, start: np.ndarray) -> np.ndarray:
    """MINPACK's lmder as least_squares(method="lm") calls it: its default tolerances and evaluation limit, the
    Jacobian by forward differences."""
    from scipy.optimize._minpack import _lmder

    return _lmder(residuals, lambda p: _forward_jacobian(residuals, p), start.copy(), (), True, False,
                  *LM_TOLERANCES, 100 * start.size, 100.0, None)[0]


#: least_squares' default ftol, xtol and gtol.
LM_TOLERANCES = (1e-8, 1e-8, 1e-8)


def _forward_jacobian(residuals, p: np.ndarray) -> np.ndarray:
    """The 2-point forward-difference Jacobian as scipy's approx_derivative takes it: step sqrt(eps) x
    max(1, |p_i|) in p_i's direction, divided by the step as represented."""
    f0 = residuals(p)
    step = np.finfo(float).eps ** 0.5 * ((p >= 0).astype(float) * 2 - 1) * np.maximum(1.0, np.abs(p))
    columns = np.empty((p.size, f0.size))
    for i in range(p.size):
        moved = p.copy()
        moved[i] = p[i] + step[i]
        columns[i] = (residuals(moved) - f0) / ((p[i] + step[i]) - p[i])
    return columns.T


@functools.cache
def _lmder_is_least_squares() -> bool:
    """Whether ``_levenberg_marquardt``'s direct lmder call gives least_squares' numbers with this scipy
    (checked on a fit of noisy samples once per process)."""
    from scipy.optimize import least_squares

    rng = np.random.default_rng(0)
    c = np.repeat(np.geomspace(4, 4096, 12), 2)
    log_bw = np.log(model(c, 128.0, 5e-7, 3e12) * rng.lognormal(0, 0.05, c.size))

    def residuals(p):
        return np.log(np.minimum(c * 128.0 / np.exp(p[0]), np.exp(p[1]))) - log_bw

    start = np.array([np.log(5e-7) + 0.3, np.log(3e12) - 0.2])
    try:
        direct = _lmder_fit(residuals, start)
    except (ImportError, AttributeError, TypeError, ValueError):  # a scipy whose private lmder is not this one
        return False
    return bool(np.array_equal(direct, least_squares(residuals, start, method="lm").x))


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


# -- the occupancy sweep (probes/occupancy.py) ---------------------------------------------------------------

PROBE = "occupancy.throughput"
LANES = 32
#: The lecture's §7.4 counts 128-byte loads (one 4-byte word per lane): the ilp1 headline uses that width.
HEADLINE_LOAD_BYTES = 4
CONFIG = ["level", "load_bytes", "ilp", "resident_warps_per_sm"]


def throughput_samples(measurements: pd.DataFrame) -> pd.DataFrame:
    """Usable bandwidth samples of the occupancy sweep, with loads in flight per SM = resident warps x ILP."""
    if any(c not in measurements for c in CONFIG):
        return pd.DataFrame(columns=CONFIG + ["value", "sm_clock_hz", "loads_per_sm"])
    frame = select(measurements, PROBE, "bandwidth")
    frame = frame.astype({"load_bytes": int, "ilp": int, "resident_warps_per_sm": int})
    return frame.assign(loads_per_sm=frame["resident_warps_per_sm"] * frame["ilp"])


def throughput_table(measurements: pd.DataFrame) -> pd.DataFrame:
    """Per config of the occupancy sweep: median bandwidth (B/s) and the number of usable samples."""
    samples = throughput_samples(measurements)
    return samples.groupby(CONFIG).agg(bandwidth=("value", "median"), n=("value", "size")).reset_index()


def fit_sweep(samples: pd.DataFrame, level: str, load_bytes: int, sm_count: int, resamples: int = 500) -> dict | None:
    """Little's law over every ILP and residency of one level and load width: concurrency is warp loads in
    flight on the whole GPU (SMs x warps x ILP), each ``32 x load_bytes`` bytes; the knee is also given per
    SM (``knee_per_sm``: warps per SM at one load each).  Fitted to every sample, so the bootstrap resamples
    repeats and configs alike.  None with fewer than three concurrencies."""
    rows = samples[(samples["level"] == level) & (samples["load_bytes"] == load_bytes)]
    if rows["loads_per_sm"].nunique() < 3:
        return None
    fit = fit_littles_law(rows["loads_per_sm"] * sm_count, rows["value"], LANES * load_bytes, resamples)
    return {**fit, "knee_per_sm": fit["knee_concurrency"] / sm_count,
            "knee_per_sm_ci": tuple(k / sm_count for k in fit["knee_ci"]),
            "sm_clock_hz": float(rows["sm_clock_hz"].median()), "bytes_per_load": LANES * load_bytes}


def worked_block(fit: dict, sm_count: int, max_warps_per_sm: int, ilp1_fraction: float | None = None) -> str:
    """The lecture's §7.4 block (bytes in flight, 128-byte loads, loads per SM) with this GPU's numbers, and
    whether one load per warp can saturate HBM: the knee (with its CI) against the warps an SM holds, and
    what the ILP-1 line measured at the largest residency (``ilp1_fraction`` of the fitted plateau)."""
    loads = fit["bytes_in_flight"] / fit["bytes_per_load"]
    low, high = fit["knee_per_sm_ci"]
    if high <= max_warps_per_sm:
        verdict = "one load per warp can saturate HBM here"
    elif low > max_warps_per_sm:
        verdict = "one load per warp cannot saturate HBM here: the SM holds too few warps, ILP must supply the rest"
    else:
        verdict = "one load per warp is at the edge of saturating HBM here (the knee's CI spans the warp limit)"
    measured = ("" if ilp1_fraction is None else
                f"; measured at {max_warps_per_sm} warps/SM with ILP 1: {ilp1_fraction:.0%} of the plateau")
    return (f"{fit['peak_bytes_per_s'] / 1e12:.2f} TB/s x {fit['latency_s'] * 1e9:.0f} ns loaded latency = "
            f"{fit['bytes_in_flight'] / 1e6:.2f} MB in flight = {loads:,.0f} loads of {fit['bytes_per_load']} B "
            f"= {fit['knee_per_sm']:.0f} per SM against {max_warps_per_sm} warps: {verdict}{measured}")


def _ilp1_fraction(table: pd.DataFrame, fit: dict, load_bytes: int, max_warps: int) -> float | None:
    row = table[(table["level"] == "dram") & (table["load_bytes"] == load_bytes) & (table["ilp"] == 1)
                & (table["resident_warps_per_sm"] == max_warps)]
    return None if row.empty else float(row["bandwidth"].iloc[0] / fit["peak_bytes_per_s"])


def littles_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """Derived rows of the occupancy sweep: the Little's-law fit of HBM (the lecture's 128-byte loads, every
    ILP), its knee as warps per SM at one load each, the 16-byte and L2 fits, and the bandwidth reached at the
    largest residency with ILP >= 4."""
    samples = throughput_samples(measurements)
    if samples.empty:
        return []
    table = throughput_table(measurements)
    sms, max_warps = device["sm_count"], device["max_threads_per_sm"] // LANES
    rows = []
    how = "Little's-law fit min(c x b / L, peak) over warps x ILP ({level}, {b}-byte loads), bootstrap CI over configs"
    dram = fit_sweep(samples, "dram", HEADLINE_LOAD_BYTES, sms)
    if dram:
        method = how.format(level="HBM", b=HEADLINE_LOAD_BYTES)
        clock = dram["sm_clock_hz"]
        rows += [derived_row("littles.bytes_in_flight", dram["bytes_in_flight"], *dram["bytes_in_flight_ci"],
                             method, PROBE),
                 derived_row("littles.loaded_latency_s", dram["latency_s"], *dram["latency_ci"], method, PROBE),
                 derived_row("littles.loaded_latency_cycles", dram["latency_s"] * clock,
                             *(x * clock for x in dram["latency_ci"]), method + "; x the samples' median SM clock",
                             PROBE),
                 derived_row("littles.peak_bandwidth_bytes_per_s", dram["peak_bytes_per_s"], *dram["peak_ci"],
                             method, PROBE),
                 derived_row("occupancy.warps_to_saturate_dram_ilp1", dram["knee_per_sm"], *dram["knee_per_sm_ci"],
                             method + "; knee / SMs", PROBE,
                             worked_block(dram, sms, max_warps, _ilp1_fraction(table, dram, HEADLINE_LOAD_BYTES, max_warps)))]
    wide = fit_sweep(samples, "dram", 16, sms)
    if wide:
        rows.append(derived_row("occupancy.warps_to_saturate_dram_ilp1_16b", wide["knee_per_sm"],
                                *wide["knee_per_sm_ci"], how.format(level="HBM", b=16) + "; knee / SMs", PROBE))
    l2 = fit_sweep(samples, "l2", HEADLINE_LOAD_BYTES, sms)
    if l2:
        method = how.format(level="L2", b=HEADLINE_LOAD_BYTES)
        rows += [derived_row("littles.l2_bytes_in_flight", l2["bytes_in_flight"], *l2["bytes_in_flight_ci"],
                             method, PROBE),
                 derived_row("littles.l2_loaded_latency_s", l2["latency_s"], *l2["latency_ci"], method, PROBE)]
    rows += _full_occupancy_rows(measurements, table)
    return rows


def _full_occupancy_rows(measurements: pd.DataFrame, table: pd.DataFrame) -> list[dict]:
    """HBM bandwidth at the largest residency measured with ILP >= 4 (the best such config), and its ratio to
    the bandwidth probe's HBM read bandwidth."""
    dram = table[(table["level"] == "dram") & (table["ilp"] >= 4)]
    if dram.empty:
        return []
    top = dram[dram["resident_warps_per_sm"] == dram["resident_warps_per_sm"].max()]
    best = top.loc[top["bandwidth"].idxmax()]
    frame = select(measurements, PROBE, "bandwidth")
    samples = frame[(frame["level"] == "dram") & (frame["load_bytes"].astype(int) == best["load_bytes"])
                    & (frame["ilp"].astype(int) == best["ilp"])
                    & (frame["resident_warps_per_sm"].astype(int) == best["resident_warps_per_sm"])]["value"]
    config = (f"{int(best['resident_warps_per_sm'])} warps/SM, ILP {int(best['ilp'])}, "
              f"{int(best['load_bytes'])}-byte loads")
    rows = [derived_row("occupancy.full_occupancy_dram_bandwidth_bytes_per_s", *median_ci(samples),
                        "median over repeats of the best ILP >= 4 config at the largest residency", PROBE, config)]
    read = select(measurements, "bw.dram", "bandwidth", op="read")["value"]
    if len(read):
        rows.append(derived_row("occupancy.full_occupancy_fraction_of_dram_read", *ratio_ci(samples, read),
                                "median over median bw.dram read, bootstrap CI resampling both", PROBE, config))
    return rows


FAMILY = Family(order=60, probe_modules=("occupancy",), rows=littles_rows, quantities={
    "littles.bytes_in_flight": ("B", "bytes in flight needed to saturate device memory"),
    "occupancy.warps_to_saturate_dram_ilp1": ("1", "resident warps per SM to saturate HBM, one load each"),
    "littles.loaded_latency_s": ("s", "HBM latency under load: the Little's-law fit of bandwidth against loads "
                                      "in flight"),
    "littles.loaded_latency_cycles": ("cycles", "HBM latency under load in SM cycles (fit x measured clock)"),
    "littles.peak_bandwidth_bytes_per_s": ("B/s", "HBM read plateau of the Little's-law fit"),
    "occupancy.warps_to_saturate_dram_ilp1_16b": ("1", "resident warps per SM to saturate HBM, one 16-byte-per-"
                                                       "lane load each"),
    "littles.l2_bytes_in_flight": ("B", "bytes in flight needed to saturate L2 reads"),
    "littles.l2_loaded_latency_s": ("s", "L2 latency under load: the Little's-law fit of L2 bandwidth"),
    "occupancy.full_occupancy_dram_bandwidth_bytes_per_s": ("B/s", "HBM read bandwidth at the largest residency "
                                                                   "with ILP >= 4"),
    "occupancy.full_occupancy_fraction_of_dram_read": ("1", "that bandwidth over the bandwidth probe's HBM read "
                                                            "bandwidth"),
})
