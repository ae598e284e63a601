"""The SM clock (``clock.sm``): clock64 cycles per %globaltimer second while every SM spins."""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select


def clock_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """The clock with every SM busy: the median over repeats, with its bootstrap CI."""
    clock = select(measurements, "clock.sm", "sm_clock", busy_sms="all")["value"]
    if not len(clock):
        return []
    return [derived_row("clock.sm_hz", *median_ci(clock), "median over repeats, every SM spinning on globaltimer",
                        "clock.sm")]


FAMILY = Family(order=10, probe_modules=("clock",), rows=clock_rows, quantities={
    "clock.sm_hz": ("Hz", "effective SM clock with every SM busy (clock64 cycles per globaltimer second)"),
})
