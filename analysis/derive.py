"""Measurements -> derived.csv: one row per reconstructed hardware parameter, with CI and method."""
from __future__ import annotations

import pandas as pd

from analysis.banks import bank_rows
from analysis.coalescing import bandwidth_rows
from analysis.compute import compute_rows
from analysis.execution import execution_rows
from analysis.fusion import fusion_rows
from analysis.geometry import geometry_rows
from analysis.geometry_paths import path_rows
from analysis.hopper import hopper_rows
from analysis.l2_sets import l2_set_rows
from analysis.latency import hierarchy_rows
from analysis.links import link_rows
from analysis.lecture import lecture_rows
from analysis.littles_law import littles_rows
from analysis.quantities import derived_row
from analysis.errors import UsageError
from analysis.results import DERIVED_COLUMNS, RunDir
from analysis.roofline import matmul_rows
from analysis.stats import median_ci, select, split_by_probe
from analysis.sync import sync_rows
from analysis.tensor_latency import wgmma_latency_rows
from analysis.tensor_units import tensor_unit_rows


def _median_row(quantity: str, values, method: str, probe: str) -> dict:
    return derived_row(quantity, *median_ci(values), method, probe)


#: The per-family row builders, independent of each other (the roofline's, which reads their ceilings, runs
#: after them).
FAMILIES = (
    lambda m, device: hierarchy_rows(m, device),
    lambda m, device: bank_rows(m),
    lambda m, device: bandwidth_rows(m, device),
    lambda m, device: littles_rows(m, device),
    lambda m, device: compute_rows(m) + tensor_unit_rows(m) + fusion_rows(m) + hopper_rows(m) + link_rows(m),
    lambda m, device: execution_rows(m) + sync_rows(m) + wgmma_latency_rows(m),
    lambda m, device: geometry_rows(m),
    lambda m, device: l2_set_rows(m, device),
    lambda m, device: path_rows(m, device),
)

#: What forked family workers read: set before they fork, so the measurements are shared, not pickled.
_JOB: dict = {}


def _family(index: int) -> list[dict]:
    return FAMILIES[index](_JOB["measurements"], _JOB["device"])


def family(index: int, measurements: pd.DataFrame, device: dict) -> list[dict]:
    """The rows of ``FAMILIES[index]``, as a worker holding the measurements makes them on its own."""
    with split_by_probe(measurements):
        return FAMILIES[index](measurements, device)


def _family_rows(measurements: pd.DataFrame, device: dict, parallel: bool, families=None) -> list[dict]:
    """Every family's rows in FAMILIES order; with ``parallel``, on every core through forked workers (same
    functions, same rows); ``families()``, where given, hands back each family's rows made elsewhere."""
    import multiprocessing
    import os

    if families is not None:
        return [row for rows in families() for row in rows]
    workers = min(len(FAMILIES), os.cpu_count() or 1)
    if not parallel or workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [row for family in FAMILIES for row in family(measurements, device)]
    from concurrent.futures import ProcessPoolExecutor

    _JOB.update(measurements=measurements, device=device)
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return [row for rows in pool.map(_family, range(len(FAMILIES))) for row in rows]
    finally:
        _JOB.clear()


def derive(meta: dict, measurements: pd.DataFrame, parallel: bool = False, families=None) -> pd.DataFrame:
    """Every derived quantity of a run; ``parallel`` spreads the families over the cores (for the CLI), or
    ``families()`` gives their rows in FAMILIES order, made by workers already running (the report's)."""
    with split_by_probe(measurements):  # only read until the rows are made
        rows = _rows(meta, measurements, parallel, families)
    return pd.DataFrame(rows, columns=list(DERIVED_COLUMNS))


def _rows(meta: dict, measurements: pd.DataFrame, parallel: bool, families=None) -> list[dict]:
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
    rows += _family_rows(measurements, meta["device"], parallel, families)
    # last: the roofline's prediction takes the ceilings (tensor peak, HBM bandwidth) derived above
    rows += matmul_rows(measurements, rows)
    rows += lecture_rows(measurements, rows, meta["device"])
    return rows


def derived_for(run: RunDir, parallel: bool = False) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """``(meta, measurements, derived)`` of a run: the one derived source of ``report`` and ``compare``.

    The derived quantities are derived afresh from the measurements (reading them validates the parquet),
    so both commands see the same numbers by construction, and a run measured before an analysis fix gets
    the fix.  The run's own derived.csv is the export for other tools; it is not read for numbers, but a
    damaged one (not a CSV, cut mid-row, not ending in a newline) marks a damaged run, which is refused."""
    meta, measurements = read_checked(run)
    return meta, measurements, derive(meta, measurements, parallel=parallel)


def read_checked(run: RunDir, read: tuple | None = None) -> tuple[dict, pd.DataFrame]:
    """``(meta, measurements)`` of a run (``read``, if the caller has read them already), its derived.csv
    checked whole: what ``derived_for`` derives from."""
    meta, measurements = read or (run.read_meta(), run.read_measurements())
    if run.derived_path.exists():
        _check_export(run)
    return meta, measurements


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
