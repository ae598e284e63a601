"""The knee figure of geometry.mshr: lines per cycle of one SM against the distinct lines it keeps in flight."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from gpuatlas.analysis.mshr import KEYS, fit_knee, launches  # noqa: E402
from gpuatlas.analysis.report_figures import FigureSpec  # noqa: E402
from gpuatlas.analysis.units import plain_log_axis  # noqa: E402

LABELS = {("plain", "l2", 1): "plain loads, L2 hits", ("plain", "dram", 1): "plain loads, HBM",
          ("plain", "l2", 4): "plain loads, L2 hits, 4 sectors a line", ("cg", "l2", 1): "L2-only loads, L2 hits",
          ("cg", "dram", 1): "L2-only loads, HBM", ("cg", "l2", 4): "L2-only loads, L2 hits, 4 sectors a line"}


def knee(measurements: pd.DataFrame):
    """Per load path (one panel each): per-n medians with the interquartile range over launches (placements
    and repeats), each curve's two-segment fit, and the knee with its 95% interval shaded where decided."""
    table = launches(measurements)
    if table.empty:
        return None
    loads = [load for load in ("plain", "cg") if (table["load"] == load).any()]
    fig, axes = plt.subplots(1, len(loads), figsize=(5 * len(loads), 4.2), squeeze=False, sharey=True)
    for ax, load in zip(axes[0], loads):
        for i, (key, curve) in enumerate(table[table["load"] == load].groupby(KEYS)):
            key = (key[0], key[1], int(key[2]))
            colour = f"C{i}"
            stats = curve.groupby("lines_in_flight")["lines_per_clk"].quantile([0.25, 0.5, 0.75]).unstack()
            n = stats.index.to_numpy(float)
            ax.errorbar(n, stats[0.5], yerr=[stats[0.5] - stats[0.25], stats[0.75] - stats[0.5]], fmt="o",
                        ms=3, color=colour, label=LABELS.get(key, str(key)))
            fit = fit_knee(curve["lines_in_flight"], curve["lines_per_clk"])
            if not fit["decided"]:
                continue
            grid = np.geomspace(n.min(), n.max(), 200)
            ax.plot(grid, fit["plateau"] * np.minimum(grid / fit["knee"], 1.0), "-", lw=1, color=colour)
            ax.axvspan(*fit["knee_ci"], color=colour, alpha=0.15, lw=0)
            if key[1:] == ("l2", 1):
                ax.annotate(f"knee {fit['knee']:.0f} lines", (fit["knee"], fit["plateau"]), xytext=(6, -14),
                            textcoords="offset points", fontsize=7, color=colour)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        plain_log_axis(ax.xaxis)
        plain_log_axis(ax.yaxis)
        ax.set_xlabel("distinct lines in flight on the SM (lines)")
        ax.set_title("plain loads (through the L1)" if load == "plain" else "L2-only loads (ld.global.cg)",
                     fontsize=9)
        ax.legend(fontsize=7, frameon=False, loc="lower right")
    axes[0][0].set_ylabel("lines per cycle of one SM (lines/cycle)")
    fig.suptitle("Misses in flight per SM: the knee of miss throughput", fontsize=10)
    fig.tight_layout()
    return axes[0][0]


#: The figure of the misses in flight, last of the geometry chapter.
FIGURES = (
    FigureSpec("mshr-knee", "geometry.mshr", "Misses in flight per SM",
               "One block on one SM keeping distinct lines in flight, every one an L1 miss: lines per cycle against "
               "the lines in flight (median over SMs and repeats, interquartile bars), each curve's two-segment fit "
               "(rising as lines / latency, then flat) and its knee's 95% interval shaded. A count of miss "
               "registers keeps its knee from the L2 and from HBM; a rate keeps its plateau instead.",
               lambda meta, m, d: knee(m), chapter="Geometry", after="l2-sets"),
)
