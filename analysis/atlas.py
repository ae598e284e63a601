"""The atlas: one diagram of the chip as the run measured it, drawn from its derived quantities alone.

The SM (schedulers, register file, the unified L1/shared array with its carve-out), the L2 as its near and far
partitions, the TLB levels, HBM and the links of a node run; each level with its capacity, latency (cycles and,
over the run's measured SM clock, ns) and bandwidth, with 95% CIs.  A quantity the run lacks is drawn as "not
measured".  Every number drawn is one Text whose gid names its source ("derived:<quantity>", or
"driver:<property>" for what only the driver reports), so a test can read each back against the run.
"""
from __future__ import annotations

from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.patches import FancyBboxPatch

from gpuatlas.analysis.report_figures import FigureSpec
from gpuatlas.analysis.shown import fmt_measured, fmt_value

#: The quantity that turns cycles into time.
CLOCK = "clock.sm_hz"


class Box(NamedTuple):
    """A level of the diagram: its name, where it sits (x, y, width, height in a 100 x 100 frame), and its lines
    as (label, source): a derived quantity, or "driver:<property>"."""
    name: str
    where: tuple
    lines: tuple
    colour: str


SM = Box("SM", (1, 50, 98, 42), (), "#EAF0F8")
BOXES = (
    Box("warp schedulers", (3, 73, 30, 13), (("schedulers", "sm.schedulers"), ("issue", "sm.issue_per_clk_per_scheduler")), "#FFFFFF"),
    Box("register file", (3, 53, 30, 15), (("registers (driver)", "driver:regs_per_sm"),), "#FFFFFF"),
    Box("unified L1 / shared array", (35, 52, 62, 35),
        (("size", "l1.unified_bytes"), ("L1 at the largest shared carve-out", "l1.capacity_bytes_at_carveout")),
        "#F6F6F6"),
    Box("shared memory", (37, 54, 29, 20), (("per SM (driver)", "driver:smem_per_sm_bytes"),
                                            ("latency", "smem.latency_cycles"),
                                            ("bandwidth per SM", "smem.bandwidth_bytes_per_clk_sm")), "#FFFFFF"),
    Box("L1", (67, 54, 29, 20), (("capacity", "l1.capacity_bytes"), ("latency", "l1.latency_cycles"),
                                 ("bandwidth per SM", "l1.bandwidth_bytes_per_clk_sm"),
                                 ("line", "l1.line_bytes")), "#FFFFFF"),
    Box("L2", (1, 22, 60, 25), (("capacity, every SM reading", "l2.capacity_bytes"),
                                ("bandwidth, every SM", "l2.bandwidth_bytes_per_s")), "#FBEFE3"),
    Box("near partition", (3, 24, 28, 13), (("capacity", "l2.partition_bytes"), ("latency", "l2.latency_cycles")),
        "#FFFFFF"),
    Box("far partition", (32, 24, 27, 13), (("one SM's reach", "l2.far_reach_bytes"),
                                            ("latency", "l2.far_latency_cycles")), "#FFFFFF"),
    Box("TLBs", (63, 22, 36, 25), (("first level's reach", "tlb.l1.reach_bytes"),
                                   ("its miss adds", "tlb.l1.miss_cycles"),
                                   ("second level's reach", "tlb.l2.reach_bytes"),
                                   ("its miss adds", "tlb.l2.miss_cycles")), "#EEF6EC"),
    Box("HBM", (1, 1, 60, 18), (("capacity (driver)", "driver:total_memory_bytes"),
                                ("latency", "dram.latency_cycles"),
                                ("read bandwidth", "dram.read_bandwidth_bytes_per_s")), "#F3ECF6"),
    Box("links to peer GPUs", (63, 1, 36, 18), (("NVLink links", "nvlink.links"),
                                                ("peer read latency", "p2p.latency_cycles"),
                                                ("peer copy bandwidth", "p2p.memcpy_bandwidth_bytes_per_s")),
        "#F6F3E6"),
)
#: Driver properties drawn, with the unit each is shown in.
DRIVER_UNITS = {"regs_per_sm": "1", "smem_per_sm_bytes": "B", "total_memory_bytes": "B", "sm_count": "1"}


def quantities() -> list[str]:
    """Every derived quantity the atlas draws (or draws as "not measured")."""
    return [CLOCK] + [source for box in BOXES for _, source in box.lines if not source.startswith("driver:")]


def line_text(label: str, source: str, derived: pd.DataFrame, device: dict) -> tuple[str, str]:
    """(text, gid) of one line: the value with its CI, and ns beside cycles; or "not measured"."""
    if source.startswith("driver:"):
        key = source.split(":", 1)[1]
        return f"{label}: {fmt_value(float(device[key]), DRIVER_UNITS[key])}", source
    d = derived.set_index("quantity")
    if source not in d.index:
        return f"{label}: not measured", f"missing:{source}"
    row = d.loc[source]
    unit = "per cycle" if row["unit"] == "1/cycle" else row["unit"]
    text = f"{label}: {fmt_measured(row['value'], row['ci_low'], row['ci_high'], unit)}"
    if row["unit"] == "cycles" and CLOCK in d.index:
        text += f", {fmt_value(row['value'] / d.loc[CLOCK, 'value'], 's')}"
    return text, f"derived:{source}"


def _fit(text, right: float) -> None:
    """Shrink the text until it ends left of ``right`` (data units): a long interval stays inside its box."""
    renderer = text.figure.canvas.get_renderer()
    limit = text.axes.transData.transform((right, 0))[0]
    while text.get_window_extent(renderer).x1 > limit and text.get_fontsize() > 4.5:
        text.set_fontsize(text.get_fontsize() - 0.25)


def atlas(meta: dict, derived: pd.DataFrame, ax=None):
    """The atlas diagram of the run (``meta`` its run.json, ``derived`` its quantities) on ``ax``; None for a run
    that measured fewer than two of its levels."""
    device = meta["device"]
    measured = [box for box in BOXES if any(source in set(derived["quantity"]) for _, source in box.lines)]
    if len(measured) < 2:
        return None  # one level alone (or none) is no hierarchy: the chapters' tables show it
    if ax is None:
        ax = plt.figure(figsize=(9.5, 6.6)).gca()
        ax.figure.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.94)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 93)
    ax.set_axis_off()
    ax.set_title(f"{device['name']}, as this run measured it", fontsize=11, gid="driver:name")
    for box in (SM, *BOXES):
        x, y, w, h = box.where
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=1", fc=box.colour,
                                    ec="0.35", lw=0.8))
    x, y, w, h = SM.where
    ax.text(x + 1.5, y + h - 2.5, "SM", fontsize=10, weight="bold", va="center")
    count, gid = line_text("SMs", "driver:sm_count", derived, device)
    ax.text(x + 8, y + h - 2.5, count, fontsize=8, va="center", gid=gid)
    clock, gid = line_text("clock", CLOCK, derived, device)
    ax.text(x + 30, y + h - 2.5, clock, fontsize=8, va="center", gid=gid)
    for box in BOXES:
        x, y, w, h = box.where
        ax.text(x + 1.2, y + h - 2.2, box.name, fontsize=8.5, weight="bold", va="center")
        for i, (label, source) in enumerate(box.lines):
            text, gid = line_text(label, source, derived, device)
            _fit(ax.text(x + 1.2, y + h - 5.6 - 3.2 * i, text, fontsize=7, va="center", gid=gid,
                         color="0.45" if gid.startswith("missing:") else "black",
                         style="italic" if gid.startswith("missing:") else "normal"), x + w - 0.6)
    for x0, y0, x1, y1 in ((34, 50, 34, 47), (34, 22, 34, 19), (61, 34.5, 63, 34.5)):
        ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "<->", "color": "0.35", "lw": 0.8})
    return ax


#: The atlas's figure, the summary's first.
FIGURES = (
    FigureSpec("atlas", "chase.latency", "The atlas: the chip as this run measured it",
               "Each level of the memory hierarchy and the SM with its capacity, latency (cycles, and ns at the "
               "run's measured SM clock) and bandwidth, each with its 95% CI in brackets ([n/a]: the run has no "
               "interval); what only the driver reports is marked so; what the run did not measure is drawn as "
               "\"not measured\".", lambda meta, m, d: atlas(meta, d),
               chapter="Summary"),
)
