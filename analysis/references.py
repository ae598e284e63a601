"""Reference datasets: published figures for GPUs gpuatlas cannot measure, addressable as ``ref:<name>``.

Each ``analysis/reference/<name>.csv`` has the derived.csv columns plus ``source``: one row per quantity of
the vocabulary (analysis/quantities.py), in its SI unit, with ``probe`` = ``published`` and a ``source``
naming the repository file or page the number comes from. None of these numbers was measured by gpuatlas.
The files are generated, never typed: ``tools.reference_build.write_references()`` rebuilds them from
``../shared/reference`` (raw benchmark outputs, and the curated tables of PUBLISHED.md).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.results import BASE_DERIVED_COLUMNS

REFERENCE_DIR = Path(__file__).resolve().parent / "reference"
PREFIX = "ref:"
REFERENCE_COLUMNS = (*BASE_DERIVED_COLUMNS, "source")
PROBE = "published"

#: The GPU each reference describes, as it appears in a comparison's column label.
GPU_NAMES = {
    "a100-sxm4-80gb": "NVIDIA A100-SXM4-80GB",
    "a100-pcie": "NVIDIA A100-PCIE-40GB",
    "h100-sxm": "NVIDIA H100 80GB HBM3 (SXM5)",
    "h100-pcie": "NVIDIA H100 PCIe",
    "h800-pcie": "NVIDIA H800 PCIe",
    "h200": "NVIDIA H200 SXM 141GB",
}


def is_reference(arg) -> bool:
    """Whether a command-line argument names a reference dataset (``ref:<name>``) rather than a run."""
    return isinstance(arg, str) and arg.startswith(PREFIX)


def list_references() -> list[str]:
    """Names of the reference datasets shipped with gpuatlas (without the ``ref:`` prefix)."""
    return sorted(p.stem for p in REFERENCE_DIR.glob("*.csv"))


def _name(arg: str) -> str:
    return arg[len(PREFIX):] if is_reference(arg) else arg


def reference_path(name: str) -> Path:
    """The CSV of reference ``name`` (``ref:`` prefix optional); UsageError naming the others if unknown."""
    bare = _name(name)
    available = list_references()
    if bare not in available:
        listed = ", ".join(PREFIX + n for n in available) or f"none (no CSV in {REFERENCE_DIR})"
        raise UsageError(f"unknown reference '{PREFIX}{bare}': available references are {listed}")
    return REFERENCE_DIR / f"{bare}.csv"


def problems(frame: pd.DataFrame) -> list[str]:
    """Everything that makes ``frame`` not a valid reference dataset (empty when it is one)."""
    found = []
    if tuple(frame.columns) != REFERENCE_COLUMNS:
        return [f"columns are {list(frame.columns)}, expected {list(REFERENCE_COLUMNS)}"]
    if frame["quantity"].duplicated().any():
        found.append(f"duplicate quantities {sorted(set(frame.loc[frame['quantity'].duplicated(), 'quantity']))}")
    for row in frame.itertuples(index=False):
        q = row.quantity
        if q not in QUANTITIES:
            found.append(f"{q}: not in the quantity vocabulary (analysis/quantities.py)")
            continue
        if row.unit != QUANTITIES[q][0]:
            found.append(f"{q}: unit {row.unit!r}, the vocabulary's is {QUANTITIES[q][0]!r}")
        if not (isinstance(row.value, (int, float)) and math.isfinite(row.value) and row.value > 0):
            found.append(f"{q}: value {row.value!r} is not a positive number")
        lo, hi = row.ci_low, row.ci_high
        if pd.isna(lo) != pd.isna(hi):
            found.append(f"{q}: only one CI bound")
        elif not pd.isna(lo) and not lo <= row.value <= hi:
            found.append(f"{q}: value {row.value} outside its CI [{lo}, {hi}]")
        if row.probe != PROBE:
            found.append(f"{q}: probe {row.probe!r}, must be {PROBE!r} (never a gpuatlas probe)")
        for column in ("method", "note", "source"):
            text = getattr(row, column)
            if not isinstance(text, str) or not text.strip():
                found.append(f"{q}: empty {column}")
    return found


def read_reference_csv(path: Path) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a reference CSV ({exc.__class__.__name__}): restore it with "
                         "`python -m tools.reference_build`") from None
    return frame


def load_reference(name: str) -> tuple[str, pd.DataFrame]:
    """``(label, table)`` of a reference: the derived.csv columns plus ``source``; label like a run's."""
    path = reference_path(name)
    frame = read_reference_csv(path)
    found = problems(frame)
    if found:
        raise UsageError(f"{path} is damaged ({found[0]}): restore it with `python -m tools.reference_build`")
    bare = path.stem
    return f"{GPU_NAMES.get(bare, bare)} [{PREFIX}{bare}, published]", frame
