"""Figures: pure functions of a run's frames that draw on a matplotlib Axes (headless, Agg)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import EngFormatter, FixedLocator, FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from analysis.chase_levels import ACCESS_PROBE, CUPY_PROBE, NUMBA_PROBE  # noqa: E402
from analysis.latency import capacity_knees  # noqa: E402
from analysis.miss_latency import access_bands  # noqa: E402
from analysis.stats import usable  # noqa: E402
from analysis.units import fmt_bytes, plain_log_axis  # noqa: E402

LATENCY_LINES = {"smem.latency_cycles": "smem", "l1.latency_cycles": "L1", "l2.latency_cycles": "L2 near",
                 "l2.far_latency_cycles": "L2 far", "dram.latency_cycles": "HBM"}
KNEE_LINES = {"l1.capacity_bytes": "L1 capacity", "l2.partition_bytes": "L2 partition",
              "l2.far_reach_bytes": "L2 far reach (one SM)"}


FLAVOURS = {"cg": "L2 only (ld.global.cg)", "default": "through L1"}


def _bytes_axis(ax, label_inches: float = 0.75):
    """A log2 byte axis with ticks at powers of two, every 2**k-th one so that labels ``label_inches`` wide
    (a "256 MiB") never meet along the axes' width."""
    ax.set_xscale("log", base=2)
    lo, hi = ax.get_xlim()
    first, last = int(np.ceil(np.log2(lo))), int(np.floor(np.log2(hi)))
    room = ax.get_position().width * ax.figure.get_figwidth() / label_inches
    step = max(1, int(np.ceil((last - first + 1) / max(room, 1))))
    step = 2 ** int(np.ceil(np.log2(step)))  # 1, 2, 4, 8 powers apart: ticks stay on round sizes
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(first, last + 1) if k % step == 0]))
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


def latency_staircase(measurements: pd.DataFrame, device: dict, derived: pd.DataFrame, ax=None):
    """Chase latency (cycles) against footprint, log2 x, both front ends and load flavours, with the fitted
    levels (dashed, labelled on the right) and capacities (dotted, CI shaded) from derived.csv."""
    ax = ax or plt.figure(figsize=(9, 6)).gca()
    chase = usable(measurements[measurements["probe"].isin([CUPY_PROBE, NUMBA_PROBE])
                                & (measurements["metric"] == "latency")]).copy()
    front = chase["probe"].map({CUPY_PROBE: "CuPy", NUMBA_PROBE: "Numba"})
    chase["series"] = (front + ", " + chase["flavour"].map(FLAVOURS).fillna(chase["flavour"]) + ", "
                       + chase["stride_bytes"].astype(int).astype(str) + "-B stride")
    _median_lines(ax, chase, "footprint_bytes", "series", lambda name: name)
    _bytes_axis(ax)
    ax.set_ylim(bottom=0)
    d = derived.set_index("quantity")
    knees = color_palette("dark", len(KNEE_LINES) + 1)
    for (quantity, name), colour in zip(KNEE_LINES.items(), knees):
        if quantity in d.index:
            ax.axvline(d.loc[quantity, "value"], color=colour, lw=0.9, ls=":",
                       label=f"{name} {fmt_bytes(d.loc[quantity, 'value'])} (fit)")
            ax.axvspan(d.loc[quantity, "ci_low"], d.loc[quantity, "ci_high"], color=colour, alpha=0.06)
    ax.axvline(device["l2_bytes"], color="tab:red", lw=0.8, ls=":",
               label=f"L2 size reported by the driver, {fmt_bytes(device['l2_bytes'])}")
    levels = []
    for quantity, name in LATENCY_LINES.items():
        if quantity in d.index:
            ax.axhline(d.loc[quantity, "value"], color="grey", lw=0.7, ls="--")
            levels.append((d.loc[quantity, "value"], f"{name} {d.loc[quantity, 'value']:.0f}"))
    _level_labels(ax, levels)
    ax.set_xlabel("footprint")
    ax.set_ylabel("cycles per dependent load")
    ax.set_title("Pointer-chase latency against footprint (median, IQR band; dashed: fitted levels)")
    _legend(ax, below=True, ncol=2)
    return ax


def access_latency(measurements: pd.DataFrame, device: dict, derived: pd.DataFrame, ax=None):
    """chase.access: the distribution of single-access latencies at each footprint, the recording's cost taken
    off, with the far-hit band shaded and the near, far and two miss latencies marked."""
    ax = ax or plt.figure(figsize=(9, 4.5)).gca()
    bands = access_bands(measurements, device)
    frame = usable(measurements[(measurements["probe"] == ACCESS_PROBE) & (measurements["metric"] == "access")])
    if frame.empty:
        return _no_data(ax, "Single-access latency: no chase.access samples")
    offset = bands["offset"] if bands else 0.0
    footprints = sorted(frame["footprint_bytes"].unique())
    colours = dict(zip(footprints, color_palette("viridis", len(footprints))))
    cycles = frame["value"] - offset
    bins = np.arange(np.floor(cycles.quantile(0.001) / 5) * 5, cycles.quantile(0.995) + 5, 5)
    for footprint, group in frame.groupby("footprint_bytes"):
        ax.hist(group["value"] - offset, bins=bins, histtype="step", density=True, lw=1.1,
                color=colours[footprint], label=f"{fmt_bytes(footprint)} ({footprint / device['l2_bytes']:.2g} × L2)")
    if bands:
        ax.axvspan(bands["near_edge"] - offset, bands["miss_edge"] - offset, color="tab:orange", alpha=0.1,
                   label="far-partition hits")
    values = derived.set_index("quantity")["value"]
    marks = (("l2.latency_cycles", "L2 near"), ("l2.far_latency_cycles", "L2 far"),
             ("dram.near_latency_cycles", "HBM, near-homed"), ("dram.far_latency_cycles", "HBM, far-homed"))
    for (quantity, name), style in zip(marks, ("--", "-.", (0, (5, 1, 1, 1, 1, 1)), ":")):
        if quantity in values:
            ax.axvline(values[quantity], color="black", lw=0.8, ls=style, label=f"{name} {values[quantity]:.0f} cycles")
    ax.set_xlabel(f"cycles per access (recording cost {offset:.1f} cycles taken off)")
    ax.set_ylabel("probability density (1/cycle)")
    ax.set_title("One SM's L2-only chase, access by access: near hits, far-partition hits, misses")
    _legend(ax)
    return ax


def tlb_staircase(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """Block-stride chase: latency against the footprint its blocks span, one line per block size; TLB
    reaches marked."""
    ax = ax or plt.figure(figsize=(7, 4)).gca()
    frame = usable(measurements[(measurements["probe"] == "chase.tlb") & (measurements["metric"] == "latency")])
    if "stride_bytes" in frame:
        frame = frame.assign(series=frame["stride_bytes"].astype(int))
    else:
        frame = frame.assign(series=2 << 20)
    _median_lines(ax, frame, "footprint_bytes", "series", lambda n: f"one load per {fmt_bytes(n)} block")
    _bytes_axis(ax)
    d = derived.set_index("quantity")
    for level, style in ((1, ":"), (2, "--")):
        quantity = f"tlb.l{level}.reach_bytes"
        if quantity in d.index:
            ax.axvline(d.loc[quantity, "value"], color="black", lw=0.8, ls=style,
                       label=f"TLB level {level} reach {fmt_bytes(d.loc[quantity, 'value'])}")
    ax.set_xlabel("footprint spanned by the blocks")
    ax.set_ylabel("cycles per dependent load")
    ax.set_title("Address translation: block-stride chase (L2-resident lines)")
    _legend(ax)
    return ax


def hbm_latency(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """The cold-path chase (every access an L2 miss): latency against the footprint the path is drawn from,
    plain and L2-only loads, with the HBM latency inside and past the TLB's reach and the reach marked."""
    ax = ax or plt.figure(figsize=(7, 4)).gca()
    frame = usable(measurements[(measurements["probe"] == "chase.miss") & (measurements["metric"] == "latency")])
    _median_lines(ax, frame, "footprint_bytes", "flavour", lambda n: FLAVOURS.get(n, n))
    _bytes_axis(ax)
    d = derived.set_index("quantity")
    for quantity, name, style in (("dram.latency_cycles", "HBM, inside the TLB reach", "--"),
                                  ("dram.latency_tlb_miss_cycles", "HBM with TLB misses", "-.")):
        if quantity in d.index:
            ax.axhline(d.loc[quantity, "value"], color="dimgrey", lw=0.8, ls=style,
                       label=f"{name}: {d.loc[quantity, 'value']:.0f} cycles")
    if "tlb.l1.reach_bytes" in d.index:
        ax.axvline(d.loc["tlb.l1.reach_bytes", "value"], color="black", lw=0.8, ls=":",
                   label=f"TLB reach {fmt_bytes(d.loc['tlb.l1.reach_bytes', 'value'])}")
    ax.set_xlabel("footprint the path's lines are drawn from")
    ax.set_ylabel("cycles per dependent load")
    ax.set_title("HBM latency: a cold path, every access an L2 miss")
    _legend(ax)
    return ax


def l2_capacity(measurements: pd.DataFrame, device: dict, derived: pd.DataFrame, ax=None):
    """The chase from every SM at once against footprint, with its knee, the bandwidth fit's capacity and the
    driver's size."""
    ax = ax or plt.figure(figsize=(7, 4)).gca()
    frame = usable(measurements[(measurements["probe"] == "chase.every_sm")
                                & (measurements["metric"] == "latency")])
    readers = frame["readers"].fillna("own") if "readers" in frame else "own"
    series = {"own": "each SM its own stretch", "all": "every SM the whole chain first"}
    _median_lines(ax, frame.assign(series=readers), "footprint_bytes", "series", lambda n: series.get(n, n))
    _bytes_axis(ax)
    d = derived.set_index("quantity")
    knees = color_palette("dark", 4)
    for (quantity, name, style), colour in zip((("l2.capacity_chase_bytes", "knee, each SM its own stretch", ":"),
                                                ("l2.capacity_chase_all_readers_bytes",
                                                 "knee, every SM the whole chain first", "--"),
                                                ("l2.capacity_bytes", "bandwidth miss-model fit", "-.")), knees):
        if quantity in d.index:
            ax.axvline(d.loc[quantity, "value"], color=colour, lw=1.0, ls=style,
                       label=f"{name}: {fmt_bytes(d.loc[quantity, 'value'])}")
    ax.axvline(device["l2_bytes"], color="tab:red", lw=0.8, ls=(0, (1, 1)),
               label=f"driver's L2 size: {fmt_bytes(device['l2_bytes'])}")
    ax.set_xlabel("footprint of the chain")
    ax.set_ylabel("cycles per load (median over SMs)")
    ax.set_title("L2 capacity, every SM chasing at once")
    _legend(ax, below=True, ncol=2)
    return ax


def line_size(measurements: pd.DataFrame, ax=None):
    """Address-order chase: latency against stride at a footprint beyond L1 and one beyond L2.  Latency stops
    rising where the stride reaches the block each miss fills (the sector where a cache fills sector by sector),
    not the line, which only the capacity counted in lines shows."""
    ax = ax or plt.figure(figsize=(7, 4)).gca()
    frame = usable(measurements[(measurements["probe"] == "chase.line") & (measurements["metric"] == "latency")])
    frame = frame.assign(series=frame["flavour"].map({"default": "through L1, chain beyond L1",
                                                      "cg": "L2 only (ld.global.cg), chain beyond L2"}))
    _median_lines(ax, frame, "stride_bytes", "series", lambda n: n)
    _bytes_axis(ax)
    ax.set_xlabel("stride between consecutive loads")
    ax.set_ylabel("cycles per dependent load")
    ax.set_title("Fill block (not the line): address-order chase against stride")
    _legend(ax, below=True, ncol=1)
    return ax


def line_by_capacity(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """Capacity knee against chase stride, log-log, with the knees' CIs: flat while the stride is at most the
    line (elements share lines), rising as the stride beyond it (one line per element); dashed, the line-count
    model C*max(1, s/L) for each measured line."""
    ax = ax or plt.figure(figsize=(7, 4)).gca()
    d = derived.set_index("quantity")["value"]
    drawn = False
    for level, flavour, min_stride, color in (("l1", "default", 0, "tab:blue"),
                                              ("l2", "cg", 0, "tab:orange")):
        knees = capacity_knees(measurements, flavour, min_stride)
        if not knees:
            continue
        strides = np.array(sorted(knees), dtype=float)
        k, lo, hi = (np.array([knees[s][i] for s in sorted(knees)]) for i in range(3))
        ax.errorbar(strides, k, yerr=[k - lo, hi - k], fmt="o-", color=color, capsize=3,
                    label=f"{'through L1: L1' if level == 'l1' else 'L2 only: near-partition'} knee")
        if f"{level}.line_bytes" in d:
            line = d[f"{level}.line_bytes"]
            ax.plot(strides, k[0] * np.maximum(1, strides / line), ls="--", color=color, lw=0.8,
                    label=f"C*max(1, s/L), L = {line:.0f} B")
        drawn = True
    if not drawn:
        return _no_data(ax, "Line by capacity: no dense chase at two or more strides")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    plain_log_axis(ax.xaxis)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_bytes(v)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("stride between chain elements (bytes)")
    ax.set_ylabel("capacity knee (footprint)")
    # pad: the top tick label may sit at the axes' edge, half above it
    ax.set_title("Line (tag) size: capacity counted in lines against stride", pad=12)
    _legend(ax)
    return ax


def launch_overhead(measurements: pd.DataFrame, ax=None):
    """Time per empty-kernel launch, plain against CUDA graph: GPU time between launches and the host's time
    per call (median bar, interquartile whiskers)."""
    ax = ax or plt.figure(figsize=(6, 3.5)).gca()
    frame = usable(measurements[measurements["probe"] == "launch.overhead"])
    metrics = {"launch_interval": "GPU time between launches", "host_call": "host time per call"}
    modes = {"plain": "plain launches", "graph": "CUDA graph"}
    palette = color_palette("deep", len(metrics))
    width = 0.8 / len(metrics)
    for j, (metric, label) in enumerate(metrics.items()):
        for i, mode in enumerate(modes):
            values = frame.loc[(frame["metric"] == metric) & (frame["mode"] == mode), "value"] * 1e6
            if values.empty:
                continue
            q25, q50, q75 = values.quantile([0.25, 0.5, 0.75])
            ax.bar(i + (j - (len(metrics) - 1) / 2) * width, q50, width, yerr=[[q50 - q25], [q75 - q50]],
                   color=palette[j], capsize=3, label=label if i == 0 else None)
    ax.set_xticks(range(len(modes)), list(modes.values()))
    ax.set_ylabel("time per launch (µs)")
    ax.set_title("Empty-kernel launch overhead")
    _legend(ax)
    return ax


def _gaps_broken(series: pd.Series) -> pd.Series:
    """A series over integer x with NaN put between x values more than 1 apart, so that a line drawn through
    it joins neighbouring measured strides only, never across strides not measured."""
    x = series.index.to_numpy(dtype=float)
    gaps = x[1:][np.diff(x) > 1] - 0.5
    return pd.concat([series, pd.Series(np.nan, index=gaps)]).sort_index()


def bank_conflicts(measurements: pd.DataFrame, ax=None):
    """Cycles per warp-wide shared load against lane stride, one panel per form: dependent loads (latency)
    and independent loads (throughput); a line per access size (CuPy), the Numba twin as crosses."""
    frame = usable(measurements[measurements["probe"].isin(["smem.banks", "smem.banks_numba"])
                                & (measurements["offset_words"].fillna(0) == 0)])
    forms = [f for f in ("latency", "throughput") if f in set(frame["form"])] or ["latency"]
    fig, axes = plt.subplots(1, len(forms), figsize=(5 * len(forms) + 2, 4.2), squeeze=False, sharey=True)
    sizes = sorted({int(a) for a in frame["access_bytes"]})
    palette = dict(zip(sizes, color_palette("deep", len(sizes))))
    titles = {"latency": "Latency: dependent loads", "throughput": "Throughput: independent loads"}
    for ax, form in zip(axes[0], forms):
        for (probe, access), group in frame[frame["form"] == form].groupby(["probe", "access_bytes"]):
            medians = _gaps_broken(group.groupby("stride_words")["value"].median())
            numba = probe == "smem.banks_numba"
            ax.plot(medians.index, medians.values, color=palette[int(access)], linestyle="none" if numba else "-",
                    marker="x" if numba else "o", markersize=5 if numba else 3,
                    label=f"{int(access)}-B loads, {'Numba' if numba else 'CuPy'}")
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.set_xlabel("stride between lanes (elements; 0 = broadcast)")
        ax.set_title(titles.get(form, form), fontsize=10)
    axes[0][0].set_ylabel("cycles per warp-wide load")
    _legend(axes[0][-1])
    fig.suptitle("Shared-memory bank conflicts (lines: CuPy; crosses: Numba)")
    return axes[0][0]


#: The models' prediction columns of analysis.coalescing.stride_table and their line styles.
MODEL_STYLES = {"pred_32": "--", "pred_64": "-.", "pred_128": ":"}


def coalescing(measurements: pd.DataFrame, ax=None):
    """Useful-bandwidth efficiency against element stride from HBM (aligned), one panel per element size, with
    the 32-byte sector, 64-byte block and 128-byte segment models' predictions (dashed, dash-dotted, dotted)."""
    from analysis.coalescing import stride_table

    table = stride_table(measurements)
    table = table[(table["level"] == "dram") & (table["aligned"] == "aligned")]
    elements = sorted(table["element_bytes"].unique()) or [4]
    fig, axes = plt.subplots(1, len(elements), figsize=(3.2 * len(elements) + 2, 4), squeeze=False, sharey=True)
    names = ("32-B sector model", "64-B block model", "128-B segment model")
    colour = color_palette("deep")[0]
    for ax, element in zip(axes[0], elements):
        group = table[table["element_bytes"] == element].sort_values("stride_elements")
        ax.plot(group["stride_elements"], group["efficiency"], "o-", markersize=3, color=colour,
                label="measured")
        for (column, style), name in zip(MODEL_STYLES.items(), names):
            ax.plot(group["stride_elements"], group[column], style, color="0.25", lw=0.8, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        plain_log_axis(ax.xaxis)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}" if y >= 1 else f"1/{1 / y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("stride between lanes (elements)")
        ax.set_title(f"{int(element)}-byte elements", fontsize=9)
    axes[0][0].set_ylabel("useful bandwidth / stride-1 bandwidth (ratio)")
    _legend(axes[0][-1])
    fig.suptitle("Coalescing from HBM: measured against the 32-, 64- and 128-byte models")
    return axes[0][0]


def bandwidth_by_footprint(measurements: pd.DataFrame, device: dict, derived: pd.DataFrame, ax=None):
    """All-SM L2-only read bandwidth against footprint with the fitted L2 miss model and capacity (CI shaded),
    beside the other levels for scale: shared memory and L1 (per-SM bytes per clock x SMs x the run's
    clock) and HBM read."""
    import numpy as np

    from analysis.capacity import bandwidth_model
    from analysis.coalescing import CAPACITY_FLOOR, l2_capacity_fit

    ax = ax or plt.figure(figsize=(7, 4)).gca()
    frame = usable(measurements[(measurements["probe"] == "bw.l2") & (measurements["metric"] == "bandwidth")])
    _median_lines(ax, frame.assign(series="L2-only reads, every SM"), "footprint_bytes", "series", lambda n: n)
    d = derived.set_index("quantity")
    fit = l2_capacity_fit(frame, device) if not frame.empty else None
    if fit is not None:
        f = np.geomspace(device["l2_bytes"] * CAPACITY_FLOOR, frame["footprint_bytes"].max(), 200)
        ax.plot(f, bandwidth_model(f, fit.capacity_bytes, fit.cache_bytes_per_s, fit.miss_bytes_per_s), "--",
                color="black", lw=0.8, label="L2 miss model, fitted")
        ax.axvline(fit.capacity_bytes, color="black", ls=":", lw=0.8,
                   label=f"L2 capacity {fmt_bytes(fit.capacity_bytes)} (fit)")
        ax.axvspan(*fit.ci, color="black", alpha=0.07)
    clock = d["value"].get("clock.sm_hz")
    for quantity, label, color in (("smem.bandwidth_bytes_per_clk_sm", "shared memory, every SM", "tab:green"),
                                   ("l1.bandwidth_bytes_per_clk_sm", "L1 hits, every SM", "tab:olive")):
        if quantity in d.index and clock:
            ax.axhline(d.loc[quantity, "value"] * device["sm_count"] * clock, color=color, ls="-.", lw=0.8,
                       label=label)
    dram = usable(measurements[(measurements["probe"] == "bw.dram") & (measurements["op"] == "read")
                               & (measurements["metric"] == "bandwidth")]) if "op" in measurements else frame.iloc[:0]
    if not dram.empty:
        ax.axhline(dram["value"].median(), color="tab:red", ls="--", lw=0.8, label="HBM read, every SM")
    ax.axvline(device["l2_bytes"], color="grey", ls=":", lw=0.8,
               label=f"L2 size reported by the driver, {fmt_bytes(device['l2_bytes'])}")
    _bytes_axis(ax)
    ax.set_yscale("log")
    _si_axis(ax.yaxis, "B/s")
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("footprint")
    ax.set_ylabel("bandwidth")
    ax.set_title("Bandwidth against footprint")
    _legend(ax)
    return ax


def occupancy_throughput(measurements: pd.DataFrame, device: dict, derived: pd.DataFrame):
    """Read bandwidth against resident warps per SM, one line per ILP; rows HBM and L2, columns 4- and
    16-byte loads; dashed: the panel's Little's-law fit min(SMs x warps x ILP x bytes / latency, peak) drawn
    at each ILP; HBM panels also show the bandwidth probe's HBM read and the fitted ILP-1 knee (CI shaded)."""
    import numpy as np

    from analysis.littles_law import HEADLINE_LOAD_BYTES, fit_sweep, model, throughput_samples, throughput_table

    samples, table = throughput_samples(measurements), throughput_table(measurements)
    levels = [lv for lv in ("dram", "l2") if lv in set(table["level"])]
    widths = sorted(table["load_bytes"].unique())
    fig, axes = plt.subplots(len(levels), len(widths), figsize=(6.5 * len(widths), 3.8 * len(levels)),
                             squeeze=False, sharex=True)
    palette = dict(zip(sorted(table["ilp"].unique()), color_palette("deep")))
    d = derived.set_index("quantity")
    max_warps = device["max_threads_per_sm"] // 32
    for row, level in enumerate(levels):
        for col, width in enumerate(widths):
            ax = axes[row][col]
            panel = table[(table["level"] == level) & (table["load_bytes"] == width)]
            fit = fit_sweep(samples, level, int(width), device["sm_count"], resamples=20)
            warps = np.geomspace(1, max_warps, 64)
            for ilp, group in panel.groupby("ilp"):
                group = group.sort_values("resident_warps_per_sm")
                ax.plot(group["resident_warps_per_sm"], group["bandwidth"], "o-", ms=4, color=palette[ilp],
                        label=f"ILP {ilp}")
                if fit:
                    ax.plot(warps, model(warps * ilp * device["sm_count"], fit["bytes_per_load"], fit["latency_s"],
                                         fit["peak_bytes_per_s"]), "--", lw=0.8, color=palette[ilp])
            if level == "dram" and "dram.read_bandwidth_bytes_per_s" in d.index:
                ax.axhline(d.loc["dram.read_bandwidth_bytes_per_s", "value"], color="tab:red", ls=":", lw=0.8,
                           label="HBM read (bandwidth probe)")
            if level == "dram" and width == HEADLINE_LOAD_BYTES and "occupancy.warps_to_saturate_dram_ilp1" in d.index:
                knee = d.loc["occupancy.warps_to_saturate_dram_ilp1"]
                ax.axvline(knee["value"], color="black", ls=":", lw=0.8,
                           label=f"ILP-1 knee, {knee['value']:.0f} warps")
                ax.axvspan(knee["ci_low"], knee["ci_high"], color="black", alpha=0.06)
            ax.axvline(max_warps, color="grey", lw=0.6, label=f"most warps an SM holds ({max_warps})")
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.set_ylim(bottom=0)
            _si_axis(ax.yaxis, "B/s")
            ax.set_title(f"{'HBM' if level == 'dram' else 'L2'}, {width}-byte loads ({32 * width} B per warp load)",
                         fontsize=9)
            ax.set_xlabel("resident warps per SM")
            ax.set_ylabel("read bandwidth")
            _legend(ax)
    return axes[0][0]


def compute_peaks(derived: pd.DataFrame, ax=None):
    """Measured peaks as a dot plot on a linear axis with 95% CIs: vector units (INT32 in integer ops), mma.sync,
    wgmma, and cuBLAS / Triton matmuls where measured."""
    from analysis.compute import PEAK_BARS, WGMMA_PROBE

    values = derived.set_index("quantity")
    bars = [(label, values.loc[q]) for label, q in PEAK_BARS.items() if q in values.index
            and not (label.startswith("wgmma") and values.loc[q, "probe"] != WGMMA_PROBE)]  # mma.sync's stand-in
    ax = ax or plt.figure(figsize=(8, 0.3 * max(len(bars), 4) + 1.2)).gca()
    families = {"FP": "vector", "INT": "vector", "mma.sync": "mma.sync", "wgmma": "wgmma", "cuBLAS": "library",
                "Triton": "library"}
    palette = dict(zip(dict.fromkeys(families.values()), color_palette("deep", 4)))
    named = set()
    for i, (label, row) in enumerate(bars):
        family = next(f for prefix, f in families.items() if label.startswith(prefix))
        ax.errorbar(row["value"] / 1e12, i, xerr=[[(row["value"] - row["ci_low"]) / 1e12],
                                                  [(row["ci_high"] - row["value"]) / 1e12]],
                    fmt="o", color=palette[family], capsize=2, label=None if family in named else family)
        named.add(family)
        ax.hlines(i, 0, row["value"] / 1e12, color=palette[family], lw=0.6, alpha=0.5)
        ax.annotate(f"{row['value'] / 1e12:.0f}", (row["value"] / 1e12, i), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize=7)
    ax.set_yticks(range(len(bars)), [label for label, _ in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    if bars:  # room for the largest value's label
        ax.set_xlim(right=max(row["value"] for _, row in bars) / 1e12 * 1.12)
    ax.set_xlabel("TFLOP/s, dense (INT32: tera integer ops/s)")
    ax.set_title("Dense compute peaks: vector units, mma.sync, wgmma, libraries")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, frameon=False, fontsize=7)
    return ax


#: The all-SM L2-only read bandwidth, the roofline's second slope.
L2_BANDWIDTH = "l2.bandwidth_bytes_per_s"


def roofline(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """The roofline, log-log: the run's measured ceilings (HBM read and L2 bandwidth as slopes, the BF16 tensor
    peak as the roof) with each square-tile BLOCK's predicted point (hollow) and measured point (filled);
    BLOCK is read off the top axis (intensity = BLOCK/2)."""
    from analysis.roofline import BANDWIDTH_QUANTITY, PEAK_QUANTITY, roofline_table

    ax = ax or plt.figure(figsize=(9, 5)).gca()
    table = roofline_table(measurements, derived)
    if table.empty:
        return _no_data(ax, "Roofline: no usable matmul.roofline samples (see the warnings)")
    d = derived.set_index("quantity")["value"]
    lo, hi = table["intensity"].min() / 2, max(table["intensity"].max() * 4, 1.0)
    if PEAK_QUANTITY in d and BANDWIDTH_QUANTITY in d:
        peak, bw = d[PEAK_QUANTITY], d[BANDWIDTH_QUANTITY]
        hi = max(hi, 4 * peak / bw)
        x = np.geomspace(lo, hi, 200)
        ax.plot(x, np.minimum(peak, x * bw), color="black", lw=1.2,
                label=f"HBM roof: {bw / 1e12:.2f} TB/s,\n"
                      f"BF16 peak {peak / 1e12:.0f} TFLOP/s (ridge {peak / bw:.0f} FLOP/B)")
        if L2_BANDWIDTH in d:
            l2 = d[L2_BANDWIDTH]
            ax.plot(x, np.minimum(peak, x * l2), color="black", lw=1.0, ls="--",
                    label=f"L2 roof: {l2 / 1e12:.2f} TB/s,\nsame peak (ridge {peak / l2:.0f} FLOP/B)")
    # predicted points of different sides can coincide: each side's hollow marker has its own shape and size
    hollow = iter((("o", 12), ("D", 7), ("s", 5), ("^", 4)))
    for (side, group), colour in zip(table.groupby("matrix_side"), color_palette("deep")):
        ax.plot(group["intensity"], group["measured_flops"], "o-", color=colour, ms=5, label=f"{side}³ measured")
        marker, size = next(hollow, ("v", 4))
        if group["predicted_flops"].notna().any():
            ax.plot(group["intensity"], group["predicted_flops"], marker, mfc="none", mew=1.2, color=colour,
                    ms=size, label=f"{side}³ predicted")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, numticks=20))
    ax.yaxis.set_minor_formatter(NullFormatter())
    _si_axis(ax.yaxis, "FLOP/s")
    blocks = sorted(table["block"].unique())
    top = ax.secondary_xaxis("top", functions=(lambda x: 2 * x, lambda b: b / 2))
    top.set_xticks(blocks, [f"{b:g}" for b in blocks], fontsize=7)
    top.set_xlabel("BLOCK (square tile side)", fontsize=8)
    ax.set_xlabel("arithmetic intensity (FLOP per HBM byte, square bf16 tiles: BLOCK/2)")
    ax.set_ylabel("throughput (FLOP/s)")
    ax.set_title("Roofline: square-tiled Triton matmul (hollow: predicted; filled: measured)")
    _legend(ax)
    return ax


def fusion(measurements: pd.DataFrame, ax=None):
    """Softmax of a bf16 matrix: time and counted bytes, three unfused kernels against one fused kernel."""
    from analysis.fusion import fusion_table

    table = fusion_table(measurements)
    if table.empty:
        return _no_data(ax or plt.figure(figsize=(6, 3)).gca(), "Fused softmax: no usable samples (see the warnings)")
    if ax is None:
        fig, (ax, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    else:
        right = ax.twinx()
    table = table.assign(us=table["seconds"] * 1e6, mib=table["bytes"] / 2**20)
    launches = list(dict.fromkeys(table["launch"]))
    palette = color_palette()
    for j, variant in enumerate(("unfused", "fused")):
        for i, launch in enumerate(launches):
            values = table.loc[(table["variant"] == variant) & (table["launch"] == launch), "us"]
            if values.empty:
                continue
            q25, q50, q75 = values.quantile([0.25, 0.5, 0.75])
            ax.bar(i + (j - 0.5) * 0.4, q50, 0.4, yerr=[[q50 - q25], [q75 - q50]], capsize=3, color=palette[j],
                   label=variant if i == 0 else None)
    ax.set_xticks(range(len(launches)), [{"graph": "CUDA graph", "plain": "plain launches"}.get(x, x)
                                         for x in launches])
    ax.legend(fontsize=7, loc="upper right", frameon=False)
    ax.set_ylim(top=ax.get_ylim()[1] * 1.25)  # headroom for the legend above the bars
    ax.set_ylabel("time per softmax (µs)")
    ax.set_title("Time")
    sizes = table.drop_duplicates("variant").set_index("variant").reindex(["unfused", "fused"]).dropna()
    right.bar(sizes.index, sizes["mib"], color=color_palette()[:len(sizes)])
    right.set_ylabel("bytes moved, counted (MiB)")
    right.set_title("Bytes (5 traversals against 2)")
    return ax


def dsmem_latency(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """Chase latency against cluster size: the next block's shared memory (DSMEM), the block's own through
    the same generic path, and its own by LDS; the run's shared-memory and L2 latencies dashed."""
    from analysis.hopper import DSMEM_LATENCY, refused_cluster_sizes

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
    from analysis.hopper import TMA_LATENCY, TMA_TENSOR

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
    from analysis.hopper import COPY_BANDWIDTH

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


def wave_quantization(measurements: pd.DataFrame, device: dict, derived: pd.DataFrame, ax=None):
    """Median time of a BLOCK 128 matmul against its program count (interquartile bars), with every multiple of
    the SM count dotted and the fitted wave size's multiples dashed: the time steps where a wave fills."""
    frame = usable(measurements[(measurements["probe"] == "matmul.waves") & (measurements["metric"] == "seconds")])
    if frame.empty:
        return None
    ax = ax or plt.figure(figsize=(6.5, 3.8)).gca()
    stats = frame.groupby("tiles")["value"].quantile([0.25, 0.5, 0.75]).unstack() * 1e6
    ax.errorbar(stats.index, stats[0.5], yerr=[stats[0.5] - stats[0.25], stats[0.75] - stats[0.5]], fmt="o-",
                capsize=3, label="measured (median)")
    sms = device["sm_count"]
    for k in range(1, int(stats.index.max() // sms) + 1):
        ax.axvline(k * sms, color="0.6", ls=":", lw=1, label="multiples of the SM count" if k == 1 else None)
    fitted = derived.loc[derived["quantity"] == "waves.programs_per_wave", "value"]
    if len(fitted):
        wave = float(fitted.iat[0])
        for k in range(1, int(stats.index.max() // wave) + 1):
            ax.axvline(k * wave, color="C3", ls="--", lw=1, label=f"fitted wave: {wave:.0f} programs" if k == 1
                       else None)
    ax.set_xlabel("programs in the grid (BLOCK 128 tiles)")
    ax.set_ylabel("time per launch (µs)")
    ax.set_title("Wave quantization")
    _legend(ax)
    return ax


def decode_gemm(measurements: pd.DataFrame, derived: pd.DataFrame, ax=None):
    """A decode GEMM's bytes per second against the batch M (median, interquartile bars), beside the measured HBM
    read bandwidth: flat while the weights bind, so its FLOP/s (and intensity) grow with M."""
    frame = usable(measurements[(measurements["probe"] == "matmul.decode") & (measurements["metric"] == "bandwidth")])
    if frame.empty:
        return None
    ax = ax or plt.figure(figsize=(6, 3.8)).gca()
    stats = frame.groupby("batch")["value"].quantile([0.25, 0.5, 0.75]).unstack() / 1e12
    ax.errorbar(stats.index, stats[0.5], yerr=[stats[0.5] - stats[0.25], stats[0.75] - stats[0.5]], fmt="o-",
                capsize=3, label="decode GEMM: bytes moved / time")
    hbm = derived.loc[derived["quantity"] == "dram.read_bandwidth_bytes_per_s", "value"]
    if len(hbm):
        ax.axhline(float(hbm.iat[0]) / 1e12, color="0.4", ls="--", lw=1, label="HBM read bandwidth")
    ax.set_xscale("log", base=2)
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("batch M (tokens decoded together)")
    ax.set_ylabel("TB/s")
    ax.set_ylim(bottom=0)
    ax.set_title("Decode GEMM against the batch")
    _legend(ax)
    return ax
