"""Compare GPUs: derived quantities of measured runs and published references, side by side in pandas."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.errors import UsageError
from analysis.references import is_reference, load_reference
from analysis.results import RunDir


def load_derived(source: str | Path) -> tuple[str, pd.DataFrame]:
    """A label and the derived quantities of a run directory, or of a reference such as ``ref:h100-sxm``."""
    if is_reference(source):
        return load_reference(source)
    run = RunDir(Path(source))
    meta = run.read_meta()
    return f"{meta['gpu']} [{meta['run_id']}]", run.read_derived()


def compare(sources: list[str | Path]) -> pd.DataFrame:
    """Quantity x GPU table of values, with a ``unit`` column and, for each source after the first, a
    ``ratio: B / A`` column.  Sources are run directories or ``ref:<name>`` references."""
    if not sources:
        raise UsageError("compare needs at least one run directory or ref:<name>")
    columns, units = {}, {}
    for source in sources:
        label, derived = load_derived(source)
        if label in columns:
            raise UsageError(f"{source} is given twice")
        columns[label] = derived.set_index("quantity")["value"]
        units.update(derived.set_index("quantity")["unit"].to_dict())
    table = pd.DataFrame(columns)
    table.index.name = "quantity"
    labels = list(columns)
    for label in labels[1:]:
        table[f"ratio: {label} / {labels[0]}"] = table[label] / table[labels[0]]
    table.insert(0, "unit", pd.Series(units))
    return table
