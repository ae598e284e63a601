"""Figures of Hopper's units: DSMEM latency against cluster size, TMA latency against copy size, and global to
shared copy bandwidth by path."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from gpuatlas.analysis.figures import (_bytes_axis, _legend, _level_labels, _median_lines, _si_axis,  # noqa: E402
                                       color_palette)
from gpuatlas.analysis.hopper import (COPY_BANDWIDTH, DSMEM_LATENCY, TMA_LATENCY, TMA_TENSOR,  # noqa: E402
                                      refused_cluster_sizes)
from gpuatlas.analysis.report_figures import FigureSpec  # noqa: E402
from gpuatlas.analysis.stats import usable  # noqa: E402


def dsmem_latency(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """Chase latency against cluster size: the next block's shared memory (DSMEM), the block's own through
    the same generic path, and its own by LDS; the run's shared-memory and L2 latencies dashed."""
    ax = ax or plt.figure(figsize=(7, 4)).gca()
    frame = usable(measurements[(measurements["probe"] == DSMEM_LATENCY) & (measurements["metric"] == "latency")])
    labels = {"remote": "next block's shared memory (mapa + LD)", "self": "own, same generic path",
              "local": "own, LDS"}
    for (mode, group), colour in zip(frame.groupby("mode"), color_palette("deep")):
        stats = group.groupby("cluster_size")["value"].quantile([0.25, 0.5, 0.75]).unstack()
        ax.errorbar(stats.index, stats[0.5], yerr=[stats[0.5] - stats[0.25], stats[0.75] - stats[0.5]], marker="o",
                    color=colour, label=labels.get(mode, mode), capsize=3)
    d = derived.set_index("quantity")
    levels = []
    for quantity, name in (("smem.latency_cycles", "shared memory"), ("l2.latency_cycles", "L2 near")):
        if quantity in d.index:
            ax.axhline(d.loc[quantity, "value"], color="grey", lw=0.7, ls="--")
            levels.append((d.loc[quantity, "value"], f"{name} {d.loc[quantity, 'value']:.0f}"))
    ax.set_ylim(bottom=0)
    _level_labels(ax, levels)
    refused = refused_cluster_sizes(measurements, DSMEM_LATENCY)
    ax.set_xscale("log", base=2)
    ax.set_xticks([2, 4, 8, 16], ["2", "4", "8", "16"])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("cluster size (blocks)" + (f"; refused by the driver: {sorted(refused)}" if refused else ""))
    ax.set_ylabel("cycles per dependent load")
    ax.set_title("Distributed shared memory: latency against cluster size")
    _legend(ax, below=True, ncol=3)
    return ax


def tma_latency(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """Cycles from issuing one bulk copy to its completion against copy size, from L2 and HBM, with the
    run's load-to-use latencies of L2 and HBM (one 8-byte ld.global) dashed."""
    ax = ax or plt.figure(figsize=(7, 4)).gca()
    latency = usable(measurements[measurements["metric"] == "latency"])
    where = {"l2": "L2", "dram": "HBM"}
    bulk = latency[latency["probe"] == TMA_LATENCY]
    frame = bulk.assign(series="1-D bulk copy from " + bulk["level"].map(where))
    if "box_cols" in latency:
        boxes = latency[latency["probe"] == TMA_TENSOR]
        frame = pd.concat([frame, boxes.assign(series="2-D box (tensor map) from " + boxes["level"].map(where),
                                               copy_bytes=boxes["box_cols"] * boxes["box_rows"] * 4)])
    _median_lines(ax, frame, "copy_bytes", "series", lambda n: n)
    d = derived.set_index("quantity")
    for (quantity, name), style in zip((("l2.latency_cycles", "ld.global from L2"),
                                        ("dram.latency_cycles", "ld.global from HBM")), ("--", ":")):
        if quantity in d.index:
            ax.axhline(d.loc[quantity, "value"], color="grey", lw=0.8, ls=style,
                       label=f"{name}, {d.loc[quantity, 'value']:.0f} cycles")
    _bytes_axis(ax)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("bytes per copy")
    ax.set_ylabel("cycles, issue to mbarrier completion")
    ax.set_title("TMA latency against copy size")
    _legend(ax)
    return ax


def copy_bandwidth(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """Global -> shared streaming bandwidth against chunk size: TMA, cp.async and plain loads, from HBM
    (solid) and L2 (dashed), with the run's plain HBM read bandwidth dotted."""
    ax = ax or plt.figure(figsize=(8, 4.5)).gca()
    frame = usable(measurements[(measurements["probe"] == COPY_BANDWIDTH) & (measurements["metric"] == "bandwidth")])
    names = {"tma": "TMA", "cp_async": "cp.async", "ldg": "ld.global"}
    palette = dict(zip(names, color_palette("deep")))
    for (path, level), group in frame.groupby(["path", "level"]):
        medians = group.groupby("chunk_bytes")["value"].median()
        ax.plot(medians.index, medians.values, marker="o", markersize=4, color=palette.get(path),
                ls="-" if level == "dram" else "--", label=f"{names.get(path, path)}, {'HBM' if level == 'dram' else 'L2'}")
    d = derived.set_index("quantity")
    if "dram.read_bandwidth_bytes_per_s" in d.index:
        ax.axhline(d.loc["dram.read_bandwidth_bytes_per_s", "value"], color="tab:red", lw=0.8, ls=":",
                   label="HBM read (bandwidth probe)")
    _bytes_axis(ax)
    ax.set_ylim(bottom=0)
    _si_axis(ax.yaxis, "B/s")
    ax.set_xlabel("bytes per chunk (per pipeline stage)")
    ax.set_ylabel("bandwidth into shared memory")
    ax.set_title("Global → shared: TMA against cp.async and plain loads")
    _legend(ax)
    return ax


#: The Hopper units' figures.
FIGURES = (
    FigureSpec("dsmem-latency", "hopper.dsmem_latency", "DSMEM latency",
               "Chase latency against cluster size: the next block's shared memory (DSMEM), the block's own "
               "through the same generic path, and its own by LDS (median, interquartile bars).",
               lambda meta, m, d: dsmem_latency(m, d),
               chapter="Hopper's units"),
    FigureSpec("tma-latency", "hopper.tma_latency", "TMA latency",
               "Cycles from issuing one bulk copy to its completion against copy size, 1-D and 2-D, from L2 and "
               "HBM, with the load-to-use latencies of one ld.global.", lambda meta, m, d: tma_latency(m, d),
               chapter="Hopper's units", after="dsmem-latency"),
    FigureSpec("copy-bandwidth", "hopper.copy_bandwidth", "Global to shared copy bandwidth",
               "Streaming bandwidth from global into shared memory against chunk size: TMA, cp.async and plain "
               "loads, from HBM (solid) and L2 (dashed).", lambda meta, m, d: copy_bandwidth(m, d),
               chapter="Hopper's units", after="tma-latency"),
)
