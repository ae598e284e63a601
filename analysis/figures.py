"""Figures: pure functions of a run's frames that draw on a matplotlib Axes (headless, Agg)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from analysis.latency import CUPY_PROBE, NUMBA_PROBE, level_windows  # noqa: E402
from analysis.stats import usable  # noqa: E402
from analysis.units import fmt_bytes  # noqa: E402

LEVEL_COLOURS = {"l1": "#4c72b0", "l2": "#55a868", "dram": "#c44e52"}


def latency_staircase(measurements: pd.DataFrame, device: dict, derived: pd.DataFrame, ax=None):
    """Chase latency (cycles) against footprint, log2 x, both front ends, level windows shaded."""
    ax = ax or plt.figure(figsize=(8, 4.5)).gca()
    chase = usable(measurements[measurements["probe"].isin([CUPY_PROBE, NUMBA_PROBE])
                                & (measurements["metric"] == "latency")]).copy()
    chase["series"] = chase["probe"].map({CUPY_PROBE: "CuPy", NUMBA_PROBE: "Numba"}) + " " + chase["flavour"]
    palette = dict(zip(sorted(chase["series"].unique()), sns.color_palette("deep")))
    for series, frame in chase.groupby("series"):
        stats = frame.groupby("footprint_bytes")["value"].quantile([0.25, 0.5, 0.75]).unstack()
        dense = len(stats) > 8  # a few footprints are drawn as points, not joined into a ramp
        ax.plot(stats.index, stats[0.5], marker="X" if series.startswith("Numba") else "o", markersize=5,
                linestyle="-" if dense else "none", color=palette[series], label=series)
        if dense:
            ax.fill_between(stats.index, stats[0.25], stats[0.75], color=palette[series], alpha=0.25)
    ax.legend(loc="upper left")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_bytes(x)))
    for level, (lo, hi) in level_windows(device).items():
        hi = min(hi, chase["footprint_bytes"].max() * 1.5)
        ax.axvspan(max(lo, chase["footprint_bytes"].min() / 1.5), hi, color=LEVEL_COLOURS[level], alpha=0.08)
        quantity = f"{level}.latency_cycles"
        row = derived[derived["quantity"] == quantity]
        if not row.empty:
            ax.axhline(row["value"].iat[0], color=LEVEL_COLOURS[level], lw=0.8, ls="--")
            ax.annotate(f"{level.upper()} {row['value'].iat[0]:.0f} cyc", (hi, row["value"].iat[0]),
                        fontsize=8, color=LEVEL_COLOURS[level], ha="right", va="bottom")
    ax.axvline(device["l2_bytes"], color="grey", lw=0.8, ls=":")
    ax.annotate("L2 (driver)", (device["l2_bytes"], ax.get_ylim()[1]), fontsize=8, color="grey",
                rotation=90, ha="right", va="top")
    ax.set_xlabel("footprint")
    ax.set_ylabel("latency (cycles per dependent load)")
    ax.set_title("Pointer-chase latency against footprint (median, IQR band)")
    return ax


def launch_overhead(measurements: pd.DataFrame, ax=None):
    """GPU time per empty-kernel launch, plain against CUDA graph, with host time per call."""
    ax = ax or plt.figure(figsize=(5, 3.5)).gca()
    frame = usable(measurements[measurements["probe"] == "launch.overhead"]).copy()
    frame["us"] = frame["value"] * 1e6
    sns.barplot(data=frame, x="mode", y="us", hue="metric", estimator="median", errorbar=("pi", 50), ax=ax)
    ax.set_ylabel("time per launch (us)")
    ax.set_xlabel("")
    ax.set_title("Empty-kernel launch overhead")
    return ax
