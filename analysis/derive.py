"""Measurements -> derived.csv: one row per reconstructed hardware parameter, with CI and method."""
from __future__ import annotations

import pandas as pd

from analysis.banks import bank_rows
from analysis.coalescing import bandwidth_rows
from analysis.latency import hierarchy_rows
from analysis.quantities import QUANTITIES
from analysis.results import DERIVED_COLUMNS
from analysis.stats import median_ci, usable


def _row(quantity: str, values, method: str, probe: str, note: str = "") -> dict:
    med, lo, hi = median_ci(values)
    return {"quantity": quantity, "value": med, "unit": QUANTITIES[quantity][0], "ci_low": lo, "ci_high": hi,
            "method": method, "probe": probe, "note": note}


def _select(measurements: pd.DataFrame, probe: str, metric: str, **params) -> pd.Series:
    frame = measurements[(measurements["probe"] == probe) & (measurements["metric"] == metric)]
    for name, value in params.items():
        frame = frame[frame[name] == value]
    return usable(frame)["value"]


def derive(meta: dict, measurements: pd.DataFrame) -> pd.DataFrame:
    rows = []
    clock = _select(measurements, "clock.sm", "sm_clock", busy_sms="all") if "busy_sms" in measurements else ()
    if len(clock):
        rows.append(_row("clock.sm_hz", clock, "median over repeats, every SM spinning on globaltimer",
                         "clock.sm"))
    if "mode" in measurements:
        for mode, quantity in (("plain", "launch.overhead_s"), ("graph", "launch.graph_overhead_s")):
            values = _select(measurements, "launch.overhead", "launch_interval", mode=mode)
            if len(values):
                rows.append(_row(quantity, values, f"CUDA events around batches of {mode} empty launches",
                                 "launch.overhead"))
    rows += hierarchy_rows(measurements, meta["device"])
    rows += bank_rows(measurements)
    rows += bandwidth_rows(measurements, meta["device"])
    return pd.DataFrame(rows, columns=list(DERIVED_COLUMNS))

