"""Measurements -> derived.csv: one row per reconstructed hardware parameter, with CI and method."""
from __future__ import annotations

import pandas as pd

from analysis.banks import bank_rows
from analysis.coalescing import bandwidth_rows
from analysis.compute import compute_rows
from analysis.fusion import fusion_rows
from analysis.hopper import hopper_rows
from analysis.latency import hierarchy_rows
from analysis.littles_law import littles_rows
from analysis.quantities import derived_row
from analysis.results import DERIVED_COLUMNS
from analysis.roofline import matmul_rows
from analysis.stats import median_ci, select


def _median_row(quantity: str, values, method: str, probe: str) -> dict:
    return derived_row(quantity, *median_ci(values), method, probe)


def derive(meta: dict, measurements: pd.DataFrame) -> pd.DataFrame:
    rows = []
    clock = select(measurements, "clock.sm", "sm_clock", busy_sms="all")["value"]
    if len(clock):
        rows.append(_median_row("clock.sm_hz", clock, "median over repeats, every SM spinning on globaltimer",
                                "clock.sm"))
    for mode, quantity in (("plain", "launch.overhead_s"), ("graph", "launch.graph_overhead_s")):
        values = select(measurements, "launch.overhead", "launch_interval", mode=mode)["value"]
        if len(values):
            rows.append(_median_row(quantity, values, f"CUDA events around batches of {mode} empty launches",
                                    "launch.overhead"))
    rows += hierarchy_rows(measurements, meta["device"])
    rows += bank_rows(measurements)
    rows += bandwidth_rows(measurements, meta["device"])
    rows += littles_rows(measurements, meta["device"])
    rows += compute_rows(measurements)
    rows += fusion_rows(measurements)
    rows += hopper_rows(measurements)
    # last: the roofline's prediction takes the ceilings (tensor peak, HBM bandwidth) derived above
    rows += matmul_rows(measurements, rows)
    return pd.DataFrame(rows, columns=list(DERIVED_COLUMNS))

