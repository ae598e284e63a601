"""The memory hierarchy table: one row per level, each declared by a family beside its analysis (a module-level
``LEVELS = (Level(...), ...)``, found as ``gpuatlas.analysis.family`` finds a family), in family order.

A row's cells come from the run's derived quantities with their CIs (``Cells``): a quantity the run lacks is
"not resolved" where its probe ran and "not measured" where it did not; time is cycles over the SM clock
measured in the run (HBM's is read from %globaltimer directly)."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import pandas as pd

from gpuatlas.analysis.family import declared, families
from gpuatlas.analysis.shown import fmt_measured, fmt_value

COLUMNS = ["level", "capacity (95% CI)", "latency (cycles, 95% CI)", "latency (time)", "bandwidth", "shared by"]


class Level(NamedTuple):
    """One row of the table: the level, its cells (capacity, latency in cycles, latency in time, bandwidth) as
    made from a ``Cells`` by ``cells``, what shares it, and the quantity without which the row is left out
    ("": always shown)."""
    level: str
    cells: Callable
    shared_by: str
    when: str = ""


class Cells:
    """The run's quantities as the table's cells."""

    def __init__(self, meta: dict, derived: pd.DataFrame):
        self.device, self.probes = meta["device"], meta["probes"]
        self.d = derived.set_index("quantity")
        self.clock = self.d["value"].get("clock.sm_hz")

    def has(self, quantity: str) -> bool:
        return quantity in self.d.index

    def measured(self, quantity: str, probe: str, unresolved: str = "") -> str:
        """The value with its CI; else whether its probe did not run or ran without resolving it."""
        if self.has(quantity):
            r = self.d.loc[quantity]
            return fmt_measured(r["value"], r["ci_low"], r["ci_high"], r["unit"])
        status = self.probes.get(probe, {}).get("status")
        if status == "ok":
            return f"not resolved by {probe} in this run" + (f" ({unresolved})" if unresolved else "")
        return f"not measured ({probe} {'not run' if status is None else status})"

    def as_time(self, quantity: str) -> str:
        if not self.has(quantity) or not self.clock:
            return "-"
        return fmt_value(self.d.loc[quantity, "value"] / self.clock, "s")


def declared_levels() -> tuple[Level, ...]:
    """Every family's LEVELS, in family order (a module without a FAMILY after them, by name)."""
    order = {name: family.order for name, family in families().items()}
    found = declared("LEVELS")
    return tuple(level for name in sorted(found, key=lambda name: (order.get(name, math.inf), name))
                 for level in found[name])


def hierarchy_table(meta: dict, derived: pd.DataFrame) -> pd.DataFrame:
    """Level, capacity, latency in cycles and time, bandwidth, sharing scope; measured values with CIs."""
    cells = Cells(meta, derived)
    rows = [(level.level, *level.cells(cells), level.shared_by) for level in declared_levels()
            if not level.when or cells.has(level.when)]
    return pd.DataFrame(rows, columns=COLUMNS)
