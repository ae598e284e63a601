"""The pointer-chase probes, the footprint window each level alone holds, the median chase latency of each
window (what a sparse, ``quick`` sweep gives), and the CuPy/Numba agreement check."""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.stats import median_ci, of_probe, usable

CUPY_PROBE, NUMBA_PROBE, ACCESS_PROBE = "chase.latency", "chase.latency_numba", "chase.access"


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
    chase = of_probe(measurements, probe)
    chase = usable(chase[chase["flavour"] == flavour])
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


def frontend_agreement(measurements: pd.DataFrame, tolerance_octaves: float = 1 / 8) -> pd.DataFrame:
    """CuPy against Numba chase (median cycles) at each footprint Numba measured.

    The CuPy side is the same footprint, or in a jittered sweep the nearest one within ``tolerance_octaves``
    (footprints that close lie on the same plateau); ``cupy_footprint`` says which was used."""
    columns = ["footprint_bytes", "flavour", "cupy_footprint", "cupy", "numba", "ratio"]
    if not measurements["probe"].isin([CUPY_PROBE, NUMBA_PROBE]).any():
        return pd.DataFrame(columns=columns)
    chase = usable(measurements[measurements["probe"].isin([CUPY_PROBE, NUMBA_PROBE])
                                & (measurements["metric"] == "latency")])
    if "stride_bytes" in chase:
        chase = chase[chase["stride_bytes"] == 128]
    medians = chase.groupby(["probe", "flavour", "footprint_bytes"])["value"].median()
    if NUMBA_PROBE not in medians.index.get_level_values(0) or CUPY_PROBE not in medians.index.get_level_values(0):
        return pd.DataFrame(columns=columns)
    rows = []
    for (flavour, footprint), numba in medians[NUMBA_PROBE].items():
        if flavour not in medians[CUPY_PROBE].index.get_level_values(0):
            continue
        cupy = medians[CUPY_PROBE][flavour]
        distance = np.abs(np.log2(cupy.index.to_numpy(dtype=float) / footprint))
        nearest = int(np.argmin(distance))
        if distance[nearest] <= tolerance_octaves:
            rows.append({"footprint_bytes": footprint, "flavour": flavour, "cupy_footprint": cupy.index[nearest],
                         "cupy": cupy.iloc[nearest], "numba": numba, "ratio": numba / cupy.iloc[nearest]})
    return pd.DataFrame(rows, columns=columns)
