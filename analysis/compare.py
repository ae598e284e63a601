"""Compare GPUs: derived quantities of several runs side by side, as a pandas DataFrame."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.errors import UsageError
from analysis.results import RunDir


def load_derived(path: str | Path) -> tuple[str, pd.DataFrame]:
    """A run's label (GPU and run id) and its derived.csv."""
    run = RunDir(Path(path))
    meta = run.read_meta()
    return f"{meta['gpu']} [{meta['run_id']}]", run.read_derived()


def compare(paths: list[str | Path]) -> pd.DataFrame:
    """Quantity x GPU table of values; for each run after the first, a ``ratio: B / A`` column."""
    if len(paths) < 1:
        raise UsageError("compare needs at least one run directory")
    columns, units = {}, {}
    for path in paths:
        label, derived = load_derived(path)
        if label in columns:
            raise UsageError(f"{path} is given twice")
        columns[label] = derived.set_index("quantity")["value"]
        units.update(derived.set_index("quantity")["unit"].to_dict())
    table = pd.DataFrame(columns)
    table.index.name = "quantity"
    labels = list(columns)
    for label in labels[1:]:
        table[f"ratio: {label} / {labels[0]}"] = table[label] / table[labels[0]]
    table.insert(0, "unit", pd.Series(units))
    return table
