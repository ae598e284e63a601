"""Latency of each memory level from the pointer chase, and the CuPy/Numba agreement check.

Until the plateau fit lands (issue #3) a level's latency is the median of every usable sample whose
footprint lies in that level's window, sized from the device's own properties: well inside L1, between
L1 and a quarter of L2, and beyond twice L2.
"""
from __future__ import annotations

import pandas as pd

from analysis.stats import median_ci, usable

CUPY_PROBE, NUMBA_PROBE = "chase.latency", "chase.latency_numba"


def level_windows(device: dict) -> dict[str, tuple[float, float]]:
    """Footprint windows (bytes, inclusive) in which only one level can hold a chase's chain."""
    smem, l2 = device["smem_per_sm_bytes"], device["l2_bytes"]
    return {"l1": (0, smem / 8), "l2": (2 * smem, l2 / 4), "dram": (2 * l2, float("inf"))}


def level_of(footprint_bytes: float, device: dict) -> str | None:
    for level, (lo, hi) in level_windows(device).items():
        if lo <= footprint_bytes <= hi:
            return level
    return None


def chase_levels(measurements: pd.DataFrame, device: dict, probe: str = CUPY_PROBE,
                 flavour: str = "default") -> pd.DataFrame:
    """Per level: median latency (cycles and seconds) with bootstrap CIs, footprints used, samples."""
    rows = []
    chase = usable(measurements[(measurements["probe"] == probe) & (measurements["flavour"] == flavour)])
    if chase.empty:
        return pd.DataFrame(columns=["level", "metric", "median", "ci_low", "ci_high", "footprints", "n"])
    levels = chase["footprint_bytes"].map(lambda f: level_of(f, device))
    for level in level_windows(device):
        for metric in ("latency", "latency_time"):
            values = chase.loc[(levels == level) & (chase["metric"] == metric)]
            if values.empty:
                continue
            med, lo, hi = median_ci(values["value"])
            rows.append({"level": level, "metric": metric, "median": med, "ci_low": lo, "ci_high": hi,
                         "footprints": sorted(values["footprint_bytes"].astype(int).unique()),
                         "n": len(values)})
    return pd.DataFrame(rows)


def frontend_agreement(measurements: pd.DataFrame) -> pd.DataFrame:
    """CuPy vs Numba chase at the footprints both measured: medians (cycles) and their ratio."""
    chase = usable(measurements[measurements["probe"].isin([CUPY_PROBE, NUMBA_PROBE])
                                & (measurements["metric"] == "latency")])
    if chase.empty:
        return pd.DataFrame(columns=["footprint_bytes", "flavour", "cupy", "numba", "ratio"])
    table = (chase.groupby(["footprint_bytes", "flavour", "probe"])["value"].median()
             .unstack("probe").dropna())
    if NUMBA_PROBE not in table or CUPY_PROBE not in table:
        return pd.DataFrame(columns=["footprint_bytes", "flavour", "cupy", "numba", "ratio"])
    table = table.rename(columns={CUPY_PROBE: "cupy", NUMBA_PROBE: "numba"}).reset_index()
    table["ratio"] = table["numba"] / table["cupy"]
    return table[["footprint_bytes", "flavour", "cupy", "numba", "ratio"]]
