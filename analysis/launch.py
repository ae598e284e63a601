"""Launch overhead (``launch.overhead``): GPU time per empty kernel, launched plainly or replayed from a graph."""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select


def launch_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """GPU time per empty launch, plain and replayed from a graph: medians over batches, bootstrap CIs."""
    rows = []
    for mode, quantity in (("plain", "launch.overhead_s"), ("graph", "launch.graph_overhead_s")):
        values = select(measurements, "launch.overhead", "launch_interval", mode=mode)["value"]
        if len(values):
            rows.append(derived_row(quantity, *median_ci(values), f"CUDA events around batches of {mode} empty "
                                    "launches", "launch.overhead"))
    return rows


FAMILY = Family(order=20, probe_modules=("launch",), rows=launch_rows, quantities={
    "launch.overhead_s": ("s", "GPU time per launch of an empty kernel, back-to-back plain launches"),
    "launch.graph_overhead_s": ("s", "GPU time per empty kernel replayed from a CUDA graph"),
})
