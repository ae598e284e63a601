"""Measurements -> derived.csv: one row per reconstructed hardware parameter, with CI and method."""
from __future__ import annotations

import pandas as pd

from analysis.latency import CUPY_PROBE, chase_levels
from analysis.quantities import QUANTITIES
from analysis.results import DERIVED_COLUMNS
from analysis.stats import median_ci, usable
from analysis.units import fmt_bytes


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
    if "footprint_bytes" in measurements:
        levels = chase_levels(measurements, meta["device"])
        for level, quantity in (("l1", "l1.latency_cycles"), ("l2", "l2.latency_cycles"),
                                ("dram", "dram.latency_cycles")):
            rows += _level_rows(levels, level, "latency", quantity)
        rows += _level_rows(levels, "dram", "latency_time", "dram.latency_ns")
    return pd.DataFrame(rows, columns=list(DERIVED_COLUMNS))


def _level_rows(levels: pd.DataFrame, level: str, metric: str, quantity: str) -> list:
    hit = levels[(levels["level"] == level) & (levels["metric"] == metric)]
    if hit.empty:
        return []
    row = hit.iloc[0]
    footprints = ", ".join(fmt_bytes(f) for f in row["footprints"][:4]) + (", ..." if len(row["footprints"]) > 4 else "")
    return [{"quantity": quantity, "value": row["median"], "unit": QUANTITIES[quantity][0],
             "ci_low": row["ci_low"], "ci_high": row["ci_high"],
             "method": "median of chase samples in the level's footprint window (bootstrap 95% CI)",
             "probe": CUPY_PROBE, "note": f"{row['n']} samples at {footprints}"}]
