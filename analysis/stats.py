"""Robust summaries of repeated samples: the median is the headline, the spread and CI come with it."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pandas as pd


def usable(frame: pd.DataFrame) -> pd.DataFrame:
    """Samples a fit may use: flagged ones (throttled, invalid, warm-up) are kept on disk but left out."""
    return frame[_unflagged(frame)]


def _unflagged(frame: pd.DataFrame) -> pd.Series:
    return frame["flag"].fillna("") == ""


#: The lookups of the frames inside a ``split_by_probe`` block, by ``id`` (the frame is held there too, so the
#: id cannot be reused while the block lasts).
_SPLITS: dict[int, dict] = {}


@contextmanager
def split_by_probe(measurements: pd.DataFrame):
    """Within the block, ``select`` and ``of_probe`` on ``measurements`` read its rows from one split by probe,
    metric and parameters, each part found once, instead of masking the whole frame at every call: a derive
    reads one frame hundreds of times, and nothing changes it meanwhile (which the block's caller promises).
    A part may be handed out again: callers read it and never change it in place.  A block inside another on
    the same frame reads the outer block's split (and its parts already found)."""
    if id(measurements) in _SPLITS:
        yield
        return
    codes, probes = pd.factorize(measurements["probe"]) if "probe" in measurements else ([], [])
    _SPLITS[id(measurements)] = {"frame": measurements, "codes": np.asarray(codes), "none": measurements.iloc[:0],
                                 "probes": {probe: code for code, probe in enumerate(probes)}, "parts": {}}
    try:
        yield
    finally:
        del _SPLITS[id(measurements)]


def one_chunk(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each Arrow column (the strings) in one chunk, the same values and dtypes: a column read
    from several row groups stays in several chunks, and taking rows from a chunked column (every boolean
    mask of the frame) joins its chunks afresh each time."""
    import pyarrow as pa

    joined = {}
    for name in frame.columns:
        values = frame[name].array
        if isinstance(values, pd.arrays.ArrowExtensionArray):
            chunks = values.__arrow_array__()
            if chunks.num_chunks > 1:
                joined[name] = type(values)(pa.chunked_array([chunks.combine_chunks()]), dtype=values.dtype)
    return frame.assign(**joined) if joined else frame


def _part(split: dict, key: tuple, make):
    if key not in split["parts"]:
        split["parts"][key] = make()
    return split["parts"][key]


def _probe_rows(split: dict, probe: str) -> pd.DataFrame:
    """Every row of the probe: a slice when they are contiguous (as a run writes them) or none."""
    def make():
        at = np.flatnonzero(split["codes"] == split["probes"].get(probe, -1))
        if at.size and at[-1] - at[0] + 1 != at.size:  # scattered
            return split["frame"].iloc[at]
        return split["frame"].iloc[at[0]:at[-1] + 1] if at.size else split["none"]
    return _part(split, (probe,), make)


def _metric_rows(split: dict, probe: str, metric: str) -> pd.DataFrame:
    """The probe's usable samples of the metric."""
    def make():
        rows = _probe_rows(split, probe)
        return rows[(rows["metric"] == metric) & _unflagged(rows)] if len(rows) else rows
    return _part(split, (probe, metric), make)


def _param_groups(split: dict, probe: str, metric: str, names: tuple) -> dict:
    """``{values: rows}``: the probe's usable samples of the metric at each set of values of the parameters
    ``names``.  A group keeps the rows' order, and a row with a missing value is in none, as with ``==``."""
    def make():
        return dict(iter(_metric_rows(split, probe, metric).groupby(list(names), sort=False)))
    return _part(split, (probe, metric, names), make)


def of_probe(measurements: pd.DataFrame, probe: str) -> pd.DataFrame:
    """Every row (flagged ones too) of ``probe``."""
    split = _SPLITS.get(id(measurements))
    if split is not None:
        return _probe_rows(split, probe)
    return measurements[measurements["probe"] == probe]


def select(measurements: pd.DataFrame, probe: str, metric: str, **params) -> pd.DataFrame:
    """Usable samples of ``probe``'s ``metric`` at the given parameters; none if a parameter's column is
    absent (a run of other probes only)."""
    if any(name not in measurements for name in params):
        return measurements.iloc[:0]
    split = _SPLITS.get(id(measurements))
    if split is None:
        frame = usable(measurements[(measurements["probe"] == probe) & (measurements["metric"] == metric)])
        for name, value in params.items():
            frame = frame[frame[name] == value]
        return frame
    rows = _metric_rows(split, probe, metric)
    if not params or rows.empty:
        return rows
    return _param_groups(split, probe, metric, tuple(params)).get(tuple(params.values()), rows.iloc[:0])


def median_ci(values, confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Median and its percentile-bootstrap confidence interval."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (np.nan, np.nan, np.nan)
    medians = bootstrap_medians(values, resamples, np.random.default_rng(seed))
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(medians, [tail, 100 - tail])
    return float(np.median(values)), float(lo), float(hi)


def mean_ci(values, confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean and its percentile-bootstrap confidence interval: for a mixture of a few levels (a placement's
    latency), whose median jumps from level to level as their shares move, while the mean moves with them."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (np.nan, np.nan, np.nan)
    means = values[np.random.default_rng(seed).integers(0, values.size, (resamples, values.size))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(values.mean()), float(lo), float(hi)


#: Draws per block of resamples in ``bootstrap_medians``: a block stays in cache.
BLOCK_DRAWS = 1 << 20


def bootstrap_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``np.median(values[rng.integers(0, n, (resamples, n))], axis=1)``, the same numbers, faster.

    The draws are made a block of rows at a time, as 32-bit integers (the generator's stream does not depend
    on how it is cut, and a range under 2**32 draws the same numbers at either width), and each row's median
    is read off by rank: with ``ranked = sort(values)`` and ``rank[i]`` the place of ``values[i]`` in it, the
    k-th smallest of ``values[idx]`` is ``ranked[k-th smallest of rank[idx]]``, and the ranks are small
    integers that partition faster than the floats.  An even count's lower middle value
    is the largest left of the upper one once the row is partitioned there."""
    n = values.size
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    rank = np.empty(n, dtype=np.uint16 if n <= 1 << 16 else np.int32)
    rank[order] = np.arange(n)
    half = n // 2
    medians = np.empty(resamples)
    rows = max(1, BLOCK_DRAWS // n)
    for start in range(0, resamples, rows):
        block = rank[rng.integers(0, n, (min(rows, resamples - start), n), dtype=np.int32)]
        block.partition(half, axis=1)
        upper = ranked[block[:, half]]
        # the mean of the two middle values, computed as np.median computes it
        medians[start:start + len(block)] = upper if n % 2 else (ranked[block[:, :half].max(axis=1)] + upper) / 2
    return medians


def summarize(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group: n, median, quartiles and relative IQR of ``value``."""
    grouped = frame.groupby(by, dropna=False)["value"]
    out = grouped.agg(n="size", median="median", min="min", max="max")
    quartiles = grouped.quantile([0.25, 0.75]).unstack()
    out = out.assign(q25=quartiles[0.25], q75=quartiles[0.75])[["n", "median", "q25", "q75", "min", "max"]]
    out = out.reset_index()
    out["rel_iqr"] = (out["q75"] - out["q25"]) / out["median"].abs()
    return out


#: A config whose samples' relative IQR exceeds this is unstable: warned in the run summary and the report.
SPREAD_WARNING = 0.05


#: Metrics whose samples are a distribution by design (one row per recorded access), not repeats of one
#: measurement: their spread is the answer, never a warning.
DISTRIBUTION_METRICS = ("access",)


def unstable_configs(measurements: pd.DataFrame, threshold: float = SPREAD_WARNING) -> pd.DataFrame:
    """(probe, config, metric, n, median, rel_iqr) of every config whose usable samples spread more than
    ``threshold`` (relative IQR), worst first; distribution metrics are not repeats and are left out."""
    repeats = measurements[~measurements["metric"].isin(DISTRIBUTION_METRICS)] if len(measurements) else measurements
    table = summarize(usable(repeats), ["probe", "config", "metric"])
    table = table[(table["n"] >= 3) & (table["rel_iqr"] > threshold)]
    return table.sort_values("rel_iqr", ascending=False)[["probe", "config", "metric", "n", "median", "rel_iqr"]]


def ratio_ci(numerator, denominator, confidence: float = 0.95, resamples: int = 2000,
             seed: int = 0) -> tuple[float, float, float]:
    """median(numerator) / median(denominator) and a percentile-bootstrap CI resampling both."""
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    num, den = num[np.isfinite(num)], den[np.isfinite(den)]
    if num.size == 0 or den.size == 0:
        return (np.nan, np.nan, np.nan)
    rng = np.random.default_rng(seed)
    ratios = bootstrap_medians(num, resamples, rng) / bootstrap_medians(den, resamples, rng)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(num) / np.median(den)), float(lo), float(hi)


#: A second cluster of placements must sit this far above the first, relative to the first's median: a home
#: partition across the chip adds a crossing of the interconnect (over half the near latency again), while
#: the slices of one partition lie a few tens of cycles apart (a tenth of it).
NEAR_FAR_GAP = 0.15
#: ... and its gap must be this many times the clusters' own spread (their MAD, or 1/8 cycle where the clock
#: reads them all alike: the slices of one partition lie at different distances, so a mode spans tens of
#: cycles), with at least this many placements on each side.
NEAR_FAR_SEPARATION, NEAR_FAR_MIN = 3.0, 3


def near_far(values) -> tuple[np.ndarray, np.ndarray] | None:
    """(near, far) placements of a latency measured at many addresses, split at the largest gap between
    sorted values where that gap is a second mode (see NEAR_FAR_*), else None (one cluster)."""
    values = np.sort(np.asarray(values, dtype=float)[np.isfinite(values)])
    if values.size < 2 * NEAR_FAR_MIN:
        return None
    gaps = np.diff(values)[NEAR_FAR_MIN - 1:values.size - NEAR_FAR_MIN]
    cut = int(np.argmax(gaps)) + NEAR_FAR_MIN
    near, far = values[:cut], values[cut:]
    mad = max(float(np.median(np.abs(near - np.median(near)))), float(np.median(np.abs(far - np.median(far)))),
              0.125)
    gap = far[0] - near[-1]
    if gap < NEAR_FAR_GAP * np.median(near) or gap < NEAR_FAR_SEPARATION * mad:
        return None
    return near, far
