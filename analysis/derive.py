"""Measurements -> derived.csv: one row per reconstructed hardware parameter, with CI and method."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpuatlas.analysis import repro
from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.family import families as declared_families
from gpuatlas.analysis.family import independent
from gpuatlas.analysis.results import DERIVED_COLUMNS, RunDir
from gpuatlas.analysis.stats import split_by_probe

#: The row builders of the families whose rows are independent of each other, in family order (each
#: module's ``FAMILY``, found by ``gpuatlas.analysis.family.families``); those that read these rows (the roofline reads
#: the tensor peak and the HBM bandwidth) run after them, in ``_rows``.
INDEPENDENT = independent()
FAMILIES = tuple(family.rows for family in INDEPENDENT)
_LATE = tuple(family for family in declared_families().values() if family.reads_rows)

#: What forked family workers read: set before they fork, so the measurements are shared, not pickled.
_JOB: dict = {}


def _family(index: int) -> list[dict]:
    return FAMILIES[index](_JOB["measurements"], _JOB["device"])


def family(index: int, measurements: pd.DataFrame, device: dict) -> list[dict]:
    """The rows of ``FAMILIES[index]``, as a worker holding the measurements makes them on its own."""
    with split_by_probe(measurements):
        return FAMILIES[index](measurements, device)


def finished_family_rows(run_path: str, indices: tuple, finished: tuple, device: dict) -> list[list[dict]]:
    """The rows of ``FAMILIES[i]`` for each of ``indices``, from a run still measuring, read from its
    ``finished`` probes (in run order): the rows the end of the run makes, for families that read no probe of a
    family measured after their own (tests/test_derive_early.py holds every family to it)."""
    frame = RunDir(Path(run_path)).read_merged(finished)
    frame = frame[frame["probe"].isin(finished)]
    with split_by_probe(frame):
        return [FAMILIES[i](frame, device) for i in indices]


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
    return repro.attach(pd.DataFrame(rows, columns=list(DERIVED_COLUMNS)), meta["device"].get("name", ""))


def _rows(meta: dict, measurements: pd.DataFrame, parallel: bool, families=None) -> list[dict]:
    rows = _family_rows(measurements, meta["device"], parallel, families)
    for family in _LATE:
        rows += family.rows(measurements, meta["device"], rows)
    return rows


def fingerprint(root: Path = Path(__file__).resolve().parent) -> str:
    """What a derivation is a function of besides its run: the analysis's own files under ``root`` (its code and
    the tables it reads, the board spread among them) and the versions of Python and the numeric libraries.
    Deriving one run twice under one fingerprint gives one table, so a derivation recorded with its fingerprint
    stands until the fingerprint moves."""
    import hashlib
    import importlib.metadata
    import platform

    digest = hashlib.sha256(platform.python_version().rsplit(".", 1)[0].encode())
    for library in ("numpy", "pandas", "scipy", "pyarrow"):
        digest.update(f"{library} {importlib.metadata.version(library)}".encode())
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".csv") and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


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


#: Fields every row has (a structure two models fit equally well has no value: "undecided" in its note).
_REQUIRED = ("quantity", "unit", "method", "probe")
