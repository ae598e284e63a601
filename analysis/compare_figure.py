"""A comparison as a figure: every comparable ratio to the baseline GPU on a log axis, grouped by level
(matplotlib is imported when a figure is drawn, not when a comparison is made)."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from gpuatlas.analysis.compare import gpus, letters, ratios, resolve_baseline
from gpuatlas.analysis.errors import UsageError

#: Ratios an axis may be labelled at: every one in view while they fit, else the powers of two alone.
RATIO_TICKS = (1 / 16, 1 / 8, 1 / 4, 1 / 3, 1 / 2, 3 / 4, 1, 3 / 2, 2, 3, 4, 8, 16)


def ratio_figure(long: pd.DataFrame, baseline: str | None = None):
    """A figure of every comparable ratio to the baseline, one row per quantity, grouped by level (log axis:
    2x and 1/2x are the same distance from 1); each GPU's point a little apart from the others' on its row,
    with the ratio's interval where both sides have CIs ([low / base high, high / base low])."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from gpuatlas.analysis.figures import color_palette

    base = resolve_baseline(long, baseline)
    frame = ratios(long, base)
    frame = frame[frame["comparable"]]
    if frame.empty:
        raise UsageError(f"no quantity can be compared with {base}: nothing to plot")
    names = letters(gpus(long))
    by = long.set_index(["gpu", "quantity"])
    rows = list(dict.fromkeys(f"{lvl}: {q}" for lvl, q in zip(frame["level"], frame["quantity"])))
    numerators = list(dict.fromkeys(frame["numerator"]))
    fig, ax = plt.subplots(figsize=(8.5, 1.4 + 0.3 * len(rows)))
    for k, (gpu, colour) in enumerate(zip(numerators, color_palette("deep", len(numerators)))):
        part = frame[frame["numerator"] == gpu]
        y = [rows.index(f"{lvl}: {q}") + (k - (len(numerators) - 1) / 2) * 0.22
             for lvl, q in zip(part["level"], part["quantity"])]
        low, high = [], []
        for q, ratio in zip(part["quantity"], part["ratio"]):
            n, d = by.loc[(gpu, q)], by.loc[(base, q)]
            both = all(pd.notna(v) for v in (n["ci_low"], n["ci_high"], d["ci_low"], d["ci_high"]))
            lo, hi = (n["ci_low"] / d["ci_high"], n["ci_high"] / d["ci_low"]) if both else (ratio, ratio)
            low.append(max(ratio - lo, 0.0))
            high.append(max(hi - ratio, 0.0))
        ax.errorbar(part["ratio"], y, xerr=[low, high], fmt="o", ms=5, color=colour, capsize=2, lw=0.8,
                    label=f"{names[gpu]} = {gpu}")
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    ticks = [t for t in RATIO_TICKS if lo <= t <= hi]
    if len(ticks) > 9:
        ticks = [t for t in ticks if math.log2(t) == round(math.log2(t))]
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:.2g}x"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.axvline(1.0, color="0.4", lw=1)
    levels = [r.split(":")[0] for r in rows]
    for i in range(1, len(rows)):
        if levels[i] != levels[i - 1]:
            ax.axhline(i - 0.5, color="0.85", lw=1)
    ax.set_xlabel(f"ratio to {names[base]} = {base} (log scale; 95% CI bars where both have one)")
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.6 / (1.4 + 0.3 * len(rows)) - 0.02), frameon=False,
              fontsize="small")
    fig.tight_layout()
    return fig


def plot(long: pd.DataFrame, path: Path, baseline: str | None = None) -> Path:
    """Save ``ratio_figure`` to ``path`` (its suffix picks the format)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    if not path.parent.is_dir():
        raise UsageError(f"--plot {path}: folder {path.parent} does not exist")
    fig = ratio_figure(long, baseline)
    try:
        fig.savefig(path, dpi=200, bbox_inches="tight")
    except ValueError as exc:
        raise UsageError(f"--plot {path}: {exc}") from None
    finally:
        plt.close(fig)
    return path
