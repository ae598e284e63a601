"""Robust summaries of repeated samples: the median is the headline, the spread and CI come with it."""
from __future__ import annotations

import numpy as np
import pandas as pd


def usable(frame: pd.DataFrame) -> pd.DataFrame:
    """Samples a fit may use: flagged ones (throttled, invalid, warm-up) are kept on disk but left out."""
    return frame[frame["flag"].fillna("") == ""]


def select(measurements: pd.DataFrame, probe: str, metric: str, **params) -> pd.DataFrame:
    """Usable samples of ``probe``'s ``metric`` at the given parameters; none if a parameter's column is
    absent (a run of other probes only)."""
    if any(name not in measurements for name in params):
        return measurements.iloc[:0]
    frame = measurements[(measurements["probe"] == probe) & (measurements["metric"] == metric)]
    for name, value in params.items():
        frame = frame[frame[name] == value]
    return usable(frame)


def median_ci(values, confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Median and its percentile-bootstrap confidence interval."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (np.nan, np.nan, np.nan)
    rng = np.random.default_rng(seed)
    medians = np.median(values[rng.integers(0, values.size, (resamples, values.size))], axis=1,
                        overwrite_input=True)  # the resampled array is a temporary: no copy
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(medians, [tail, 100 - tail])
    return float(np.median(values)), float(lo), float(hi)


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
    ratios = (np.median(num[rng.integers(0, num.size, (resamples, num.size))], axis=1)
              / np.median(den[rng.integers(0, den.size, (resamples, den.size))], axis=1))
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(num) / np.median(den)), float(lo), float(hi)
