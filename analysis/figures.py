"""Figures: pure functions of a run's frames that draw on a matplotlib Axes (headless, Agg).  This module holds
what they share: byte and SI axes, legends outside the axes, labelled reference levels and the palettes; the
figures are drawn by level (hierarchy_figures, compute_figures, hopper_figures, geometry_figures,
execution_figures, telemetry, atlas)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import EngFormatter, FixedLocator, FuncFormatter, Locator, NullFormatter  # noqa: E402

from gpuatlas.analysis.units import fmt_bytes  # noqa: E402


class PowersOfTwo(Locator):
    """Ticks at powers of two, every 2**k-th one so that labels ``label_inches`` wide (a "256 MiB") never meet
    along the axes' width as drawn: placed at draw time, after a layout has narrowed the axes for a legend."""

    def __init__(self, label_inches: float):
        self.label_inches = label_inches

    def __call__(self):
        return self.tick_values(*self.axis.get_view_interval())

    def tick_values(self, vmin, vmax):
        lo, hi = sorted((vmin, vmax))
        first, last = int(np.ceil(np.log2(max(lo, 1e-300)))), int(np.floor(np.log2(hi)))
        axes = self.axis.axes
        room = axes.get_position().width * axes.figure.get_figwidth() / self.label_inches
        step = max(1, int(np.ceil((last - first + 1) / max(room, 1))))
        step = 2 ** int(np.ceil(np.log2(step)))  # 1, 2, 4, 8 powers apart: ticks stay on round sizes
        return [2.0 ** k for k in range(first, last + 1) if k % step == 0]


def _bytes_axis(ax, label_inches: float = 0.75):
    """A log2 byte axis labelled in KiB/MiB/GiB at powers of two that never meet (PowersOfTwo)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(PowersOfTwo(label_inches))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: fmt_bytes(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _si_axis(axis, unit: str):
    """Tick labels with SI prefixes (TB/s, TFLOP/s) instead of raw powers of ten."""
    axis.set_major_formatter(EngFormatter(unit=unit, places=None, sep=" "))


def _legend(ax, below: bool = False, **kwargs):
    """The legend outside the axes (right, or below), so it never covers data."""
    where = (dict(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=kwargs.pop("ncol", 2)) if below
             else dict(loc="upper left", bbox_to_anchor=(1.02, 1)))
    return ax.legend(fontsize=7, borderaxespad=0, frameon=False, **where, **kwargs)


def _level_labels(ax, levels):
    """Label horizontal reference lines at y = value just outside the right edge, nudged apart so that close
    levels (L1 and shared memory) never overprint."""
    to_axes = ax.transScale + ax.transLimits
    placed = []
    for value, text in sorted(levels):
        y = to_axes.transform((1, value))[1]
        y = max(y, placed[-1][0] + 0.06) if placed else y
        placed.append((y, value, text))
    for y, value, text in placed:
        ax.annotate(text, xy=(1, value), xycoords=("axes fraction", "data"), xytext=(1.01, y),
                    textcoords="axes fraction", fontsize=7, color="dimgrey", va="center", annotation_clip=False,
                    arrowprops=dict(arrowstyle="-", color="lightgrey", lw=0.5, shrinkA=0, shrinkB=0))


#: seaborn's "deep" and "dark" palettes, kept here so that drawing a figure does not import seaborn (and, through
#: it, scipy.stats: a second of the report's start).
PALETTES = {"deep": ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C",
                     "#CCB974", "#64B5CD"),
            "dark": ("#001C7F", "#B1400D", "#12711C", "#8C0800", "#591E71", "#592F0D", "#A23582", "#3C3C3C",
                     "#B8850A", "#006374")}


def color_palette(name: str | None = None, n: int | None = None) -> list[tuple]:
    """RGB colours as ``seaborn.color_palette(name, n)`` gives them: the current colour cycle (None), a named
    palette above cycled to n, "husl" (through seaborn), or n colours sampled inside a matplotlib colormap."""
    if name == "husl":
        import seaborn

        return list(seaborn.color_palette("husl", n))
    if name is None or name in PALETTES:
        colours = PALETTES[name] if name else plt.rcParams["axes.prop_cycle"].by_key()["color"]
        n = n if n is not None else len(colours)
        return [matplotlib.colors.to_rgb(colours[i % len(colours)]) for i in range(n)]
    cmap = matplotlib.colormaps[name]
    return [tuple(c) for c in cmap(np.linspace(0, 1, (n or 6) + 2)[1:-1])[:, :3]]


def _no_data(ax, title: str):
    ax.set_title(title)
    ax.set_axis_off()
    return ax


def _median_lines(ax, frame: pd.DataFrame, x: str, by: str, label) -> None:
    """Median per x with an IQR band, one line per ``by`` group; sparse groups are drawn as points."""
    names = sorted(frame[by].unique())
    palette = dict(zip(names, color_palette("deep" if len(names) <= 10 else "husl", len(names))))
    for name, group in frame.groupby(by):
        stats = group.groupby(x)["value"].quantile([0.25, 0.5, 0.75]).unstack()
        dense = len(stats) > 8
        ax.plot(stats.index, stats[0.5], marker="X" if "Numba" in str(label(name)) else "o", markersize=4,
                linestyle="-" if dense else "none", color=palette[name], label=label(name))
        if dense:
            ax.fill_between(stats.index, stats[0.25], stats[0.75], color=palette[name], alpha=0.25)


