"""Measurements -> derived.csv: one row per reconstructed hardware parameter, with CI and method."""
from __future__ import annotations

import pandas as pd

from analysis.banks import bank_rows
from analysis.coalescing import bandwidth_rows
from analysis.compute import compute_rows
from analysis.execution import execution_rows
from analysis.fusion import fusion_rows
from analysis.hopper import hopper_rows
from analysis.latency import hierarchy_rows
from analysis.littles_law import littles_rows
from analysis.quantities import derived_row
from analysis.errors import UsageError
from analysis.results import DERIVED_COLUMNS, RunDir
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
    rows += execution_rows(measurements)
    rows += fusion_rows(measurements)
    rows += hopper_rows(measurements)
    # last: the roofline's prediction takes the ceilings (tensor peak, HBM bandwidth) derived above
    rows += matmul_rows(measurements, rows)
    return pd.DataFrame(rows, columns=list(DERIVED_COLUMNS))


def derived_for(run: RunDir) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """``(meta, measurements, derived)`` of a run: the one derived source of ``report`` and ``compare``.

    The derived quantities are derived afresh from the measurements (reading them validates the parquet),
    so both commands see the same numbers by construction, and a run measured before an analysis fix gets
    the fix.  The run's own derived.csv is the export for other tools; it is not read for numbers, but a
    damaged one (not a CSV, cut mid-row, not ending in a newline) marks a damaged run, which is refused."""
    meta = run.read_meta()
    measurements = run.read_measurements()
    if run.derived_path.exists():
        _check_export(run)
    return meta, measurements, derive(meta, measurements)


def _check_export(run: RunDir) -> None:
    """UsageError if derived.csv is not whole: unreadable, cut short, or with a row missing a field."""
    stored = run.read_derived()
    fix = ("the run is damaged: restore the file, or delete it (report and compare derive from the "
           "measurements)")
    text = run.derived_path.read_bytes()
    if not text.endswith(b"\n"):
        raise UsageError(f"{run.derived_path} does not end in a newline (cut short?): {fix}")
    incomplete = stored[list(_REQUIRED)].isna().any(axis=1)
    if incomplete.any():
        raise UsageError(f"{run.derived_path} has {int(incomplete.sum())} incomplete rows: {fix}")


_REQUIRED = ("quantity", "value", "unit", "method", "probe")
