"""The shared-memory bank structure, derived from bank-conflict curves (probe ``smem.banks``).

Model.  Shared memory is ``banks`` banks of ``width_bytes`` each: byte address ``a`` lies in bank word
``a // width_bytes``, held by bank ``(a // width_bytes) % banks``.  A warp-wide load is served in phases of
consecutive lanes, each phase moving at most one row of the bank array (``banks * width_bytes`` bytes): on
32 banks of 4 B, the whole warp for 4-byte loads, half-warps for 8-byte and quarter-warps for 16-byte
(NVIDIA's rule for 64- and 128-bit shared accesses).  Within a phase, lanes reading the same bank word share
one read (broadcast) and a bank asked for ``k`` different words needs ``k`` passes.  The conflict degree of
a load is the largest ``k`` of any bank in any phase: 1 is conflict-free.  (A warp-wide broadcast of one 8-
or 16-byte element can take fewer passes than a conflict-free load of distinct ones; both are degree 1
here, and that is the main residual of the 8- and 16-byte fits.)

Fit.  For each candidate structure (16, 32 or 64 banks of 4 or 8 bytes) the median cycles per access of
each config is regressed on its degree, with an intercept and a slope per access size (an 8-byte load pays
each way once per half-warp phase, so its slope is its own).  A candidate's R² is that of its worst-fitted
access size: only 4-byte loads tell 4-byte banks from 8-byte ones (8- and 16-byte loads see just the row
size), and a pooled R², dominated by the many-way conflicts every candidate gets right, would blur that.
The candidate with the highest R² wins; a simpler one (a smaller bank row, then narrower banks) within
``TIE_R2`` of it is preferred.  The slope -- cycles per extra way of conflict -- gets a residual-bootstrap
CI.  Nothing here assumes the answer: 32 banks of 4 bytes is one candidate.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, of_probe, select, usable

LANES = 32
CANDIDATES = tuple((banks, width) for banks in (16, 32, 64) for width in (4, 8))
#: Candidates whose R² is this close to the best are a tie, resolved toward the simpler structure.
TIE_R2 = 1e-3
METRIC = "cycles_per_access"


def lane_addresses(stride_words: int, access_bytes: int, offset_words: int = 0,
                   lanes: int = LANES) -> np.ndarray:
    """Byte address each lane loads when lane l reads element ``l * stride + offset`` of ``access_bytes``."""
    return (np.arange(lanes, dtype=np.int64) * stride_words + offset_words) * access_bytes


def degree_of(addresses, access_bytes: int, banks: int, width_bytes: int) -> int:
    """Conflict degree of one warp-wide load of ``access_bytes`` per lane from these byte addresses."""
    addresses = np.asarray(addresses, dtype=np.int64)
    lanes_per_phase = max(1, min(addresses.size, banks * width_bytes // access_bytes))
    words_per_access = np.arange(max(1, access_bytes // width_bytes))
    worst = 0
    for start in range(0, addresses.size, lanes_per_phase):
        phase = addresses[start:start + lanes_per_phase]
        words = np.unique((phase[:, None] // width_bytes + words_per_access).ravel())
        worst = max(worst, int(np.bincount(words % banks, minlength=banks).max()))
    return worst


@lru_cache(maxsize=None)  # asked for every config and candidate structure by each fit
def conflict_degree(stride_words: int, access_bytes: int, banks: int = 32, width_bytes: int = 4,
                    offset_words: int = 0, lanes: int = LANES) -> int:
    """The number of distinct words the busiest bank must serve for one warp-wide load at this stride."""
    return degree_of(lane_addresses(stride_words, access_bytes, offset_words, lanes), access_bytes, banks,
                     width_bytes)


def config_medians(frame: pd.DataFrame) -> pd.DataFrame:
    """Median cycles per access of each (access_bytes, stride_words, offset_words) of one probe and form.

    A run's measurements hold every probe's axes as columns, so ``layout`` and ``offset_words`` may be
    missing (NaN) on rows that never had them: those are the plain layout and offset 0."""
    frame = usable(frame) if "flag" in frame else frame
    if "metric" in frame:
        frame = frame[frame["metric"] == METRIC]
    if "layout" in frame:
        frame = frame[frame["layout"].fillna("plain") == "plain"]
    for column in ("probe", "form"):
        if column in frame and frame[column].nunique() > 1:
            raise ValueError(f"fit one {column} at a time: the frame mixes {sorted(frame[column].unique())}")
    if frame.empty:
        raise ValueError("no usable cycles_per_access samples to fit")
    offsets = frame["offset_words"].fillna(0) if "offset_words" in frame else 0
    keys = ["access_bytes", "stride_words", "offset_words"]
    points = frame.assign(offset_words=offsets).groupby(keys)["value"].agg(cycles="median", n="size")
    return points.reset_index().astype({k: int for k in keys})


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``(intercept, slope)``; a flat line when ``x`` does not vary."""
    if np.ptp(x) == 0:
        return float(y.mean()), 0.0
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def _r2(residual_ss: float, total_ss: float) -> float:
    return 1.0 - residual_ss / total_ss if total_ss > 0 else float(residual_ss == 0)


def fit_candidate(points: pd.DataFrame, banks: int, width_bytes: int) -> dict:
    """One candidate structure's fit over ``points``: ``r2`` (its worst-fitted access size), ``r2_pooled``,
    ``per_access`` (intercept, slope, R² and n per access size) and ``points`` with ``degree``, ``fitted``
    and ``ways`` (the degree the data imply, ``(cycles - intercept) / slope``)."""
    degree = [conflict_degree(s, a, banks, width_bytes, o)
              for a, s, o in points[["access_bytes", "stride_words", "offset_words"]].itertuples(index=False)]
    points = points.assign(degree=degree, fitted=np.nan, ways=np.nan)
    per_access, residual_ss, total_ss = {}, 0.0, 0.0
    for access_bytes, group in points.groupby("access_bytes"):
        x, y = group["degree"].to_numpy(float), group["cycles"].to_numpy(float)
        intercept, slope = _line(x, y)
        points.loc[group.index, "fitted"] = intercept + slope * x
        if slope:
            points.loc[group.index, "ways"] = (y - intercept) / slope
        residual, total = float(((y - intercept - slope * x) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
        per_access[int(access_bytes)] = {"intercept": intercept, "slope": slope, "r2": _r2(residual, total),
                                         "n": int(x.size)}
        residual_ss, total_ss = residual_ss + residual, total_ss + total
    return {"r2": min(fit["r2"] for fit in per_access.values()), "r2_pooled": _r2(residual_ss, total_ss),
            "per_access": per_access, "points": points}


def bootstrap_slope(x, y, resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile CI of the least-squares slope by residual bootstrap: the strides (so the degrees) are the
    experiment's design, fixed; the residuals -- noise and misfit alike -- are resampled onto the fit."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.ptp(x) == 0:
        return (np.nan, np.nan)
    intercept, slope = _line(x, y)
    fitted = intercept + slope * x
    rng = np.random.default_rng(seed)
    ys = fitted + (y - fitted)[rng.integers(0, x.size, (resamples, x.size))]
    dx = x - x.mean()
    slopes = (ys - ys.mean(axis=1, keepdims=True)) @ dx / (dx @ dx)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(slopes, [tail, 100 - tail])
    return float(lo), float(hi)


def _simplicity(candidate: tuple[int, int]) -> tuple[int, int, int]:
    banks, width = candidate
    return (banks * width, width, banks)


def fit_banks(frame: pd.DataFrame, candidates=CANDIDATES, resamples: int = 2000, seed: int = 0) -> dict:
    """Derive the bank structure from one form (latency or throughput) of one bank-conflict probe.

    ``frame``: measurements with ``access_bytes``, ``stride_words``, ``value`` (cycles per access) and
    optionally ``offset_words``, ``metric``, ``flag``, ``layout``, ``form``, ``probe``.  Returns the chosen
    ``banks`` and ``width_bytes`` with their ``r2`` (worst access size) and ``r2_pooled``; ``slope`` (cycles
    per extra way of conflict), its ``slope_ci`` and ``intercept`` for the smallest access size measured
    (``access_bytes``); ``per_access`` (the same for every access size, with its own R² and n);
    ``candidates`` (every candidate's R², best first); and ``points`` (per config: median cycles, degree,
    fitted cycles and ways).
    """
    points = config_medians(frame)
    fits = {candidate: fit_candidate(points, *candidate) for candidate in candidates}
    table = pd.DataFrame([{"banks": b, "width_bytes": w, "r2": fits[(b, w)]["r2"],
                           "r2_pooled": fits[(b, w)]["r2_pooled"]} for b, w in candidates])
    table = table.sort_values("r2", ascending=False, kind="stable").reset_index(drop=True)
    tied = table[table["r2"] >= table["r2"].iloc[0] - TIE_R2]
    chosen = min(((int(b), int(w)) for b, w in zip(tied["banks"], tied["width_bytes"])), key=_simplicity)
    fit = fits[chosen]
    for access_bytes, group in fit["points"].groupby("access_bytes"):
        fit["per_access"][int(access_bytes)]["slope_ci"] = bootstrap_slope(group["degree"], group["cycles"],
                                                                           resamples, seed=seed)
    smallest = fit["per_access"][min(fit["per_access"])]
    return {"banks": chosen[0], "width_bytes": chosen[1], "r2": fit["r2"], "r2_pooled": fit["r2_pooled"],
            "access_bytes": min(fit["per_access"]), "slope": smallest["slope"], "slope_ci": smallest["slope_ci"],
            "intercept": smallest["intercept"], "per_access": fit["per_access"], "candidates": table,
            "points": fit["points"]}


def bank_rows(measurements: pd.DataFrame) -> list[dict]:
    """Derived rows: the bank structure and cost per way from the latency form of ``smem.banks``, the
    pipeline's cost per way from its throughput form, and exercise 3's recovery factor."""
    rows = []
    banks = of_probe(measurements, "smem.banks")
    if not banks.empty and "form" in banks:
        fit = fit_banks(banks[banks["form"] == "latency"])
        ranking = "; ".join(f"{int(b)}x{int(w)} B R2 {r:.4f}" for b, w, r in
                            fit["candidates"][["banks", "width_bytes", "r2"]].itertuples(index=False))
        method = "linear conflict model, cycles = a + b * degree, best of 16/32/64 banks x 4/8 B"
        rows += [derived_row("smem.banks", fit["banks"], fit["banks"], fit["banks"], method, "smem.banks", ranking),
                 derived_row("smem.bank_width_bytes", fit["width_bytes"], fit["width_bytes"], fit["width_bytes"],
                             method, "smem.banks", f"R2 {fit['r2']:.4f} (worst access size)"),
                 derived_row("smem.conflict_cycles_per_way", fit["slope"], *fit["slope_ci"],
                             f"slope of the latency form, {fit['access_bytes']}-byte loads (residual bootstrap 95% "
                             "CI)", "smem.banks",
                             f"conflict-free latency {fit['intercept'] + fit['slope']:.1f} cycles")]
        throughput = banks[banks["form"] == "throughput"]
        if not throughput.empty:
            tfit = fit_banks(throughput)
            rows.append(derived_row("smem.conflict_cycles_per_way_throughput", tfit["slope"], *tfit["slope_ci"],
                                    f"slope of the throughput form, {tfit['access_bytes']}-byte loads", "smem.banks",
                                    f"{tfit['banks']}x{tfit['width_bytes']} B, R2 {tfit['r2']:.4f}"))
    column = select(measurements, "smem.column_read", "useful_bandwidth")
    if not column.empty:
        side = column["matrix_side"].min()  # the lecture's 4096
        at = column[column["matrix_side"] == side]
        direct, staged = (at.loc[at["method"] == m, "value"] for m in ("direct", "staged"))
        if len(direct) and len(staged):
            d, s = median_ci(direct), median_ci(staged)
            rows.append(derived_row("smem.column_read_recovery", s[0] / d[0], s[1] / d[2], s[2] / d[1],
                                    "staged over direct useful bandwidth of a fp16 column read", "smem.column_read",
                                    f"n = {int(side)}: direct {d[0] / 1e9:.0f} GB/s, staged {s[0] / 1e9:.0f} GB/s"))
    return rows


FAMILY = Family(order=40, probe_modules=("smem_banks", "smem_banks.smem_banks_numba", "column_read"),
                rows=lambda m, device: bank_rows(m), quantities={
    "smem.banks": ("1", "number of shared-memory banks"),
    "smem.bank_width_bytes": ("B", "width of one shared-memory bank"),
    "smem.conflict_cycles_per_way": ("cycles", "extra cycles per extra way of bank conflict"),
    "smem.conflict_cycles_per_way_throughput": ("cycles", "extra cycles of the SM's shared-memory pipeline per "
                                                "extra way (independent loads from several warps)"),
    "smem.column_read_recovery": ("1", "useful bandwidth of a fp16 column read staged through a shared tile "
                                       "over the direct read (lecture exercise 3)"),
})
