"""Figures of the memory hierarchy: latency staircases, single accesses, TLB reach, HBM latency, the L2's
capacity, lines, bank conflicts, coalescing and bandwidth against footprint."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from gpuatlas.analysis.capacity import bandwidth_model  # noqa: E402
from gpuatlas.analysis.chase_levels import ACCESS_PROBE, CUPY_PROBE, NUMBA_PROBE  # noqa: E402
from gpuatlas.analysis.coalescing import CAPACITY_FLOOR, l2_capacity_fit, stride_table  # noqa: E402
from gpuatlas.analysis.figures import (_bytes_axis, _legend, _level_labels, _median_lines, _no_data,  # noqa: E402
                                       _si_axis, color_palette)
from gpuatlas.analysis.latency import capacity_knees  # noqa: E402
from gpuatlas.analysis.miss_latency import access_bands  # noqa: E402
from gpuatlas.analysis.report_figures import FigureSpec  # noqa: E402
from gpuatlas.analysis.stats import usable  # noqa: E402
from gpuatlas.analysis.units import fmt_bytes, plain_log_axis  # noqa: E402


LATENCY_LINES = {"smem.latency_cycles": "smem", "l1.latency_cycles": "L1", "l2.latency_cycles": "L2 near",
                 "l2.far_latency_cycles": "L2 far", "dram.latency_cycles": "HBM"}
KNEE_LINES = {"l1.capacity_bytes": "L1 capacity", "l2.partition_bytes": "L2 partition",
              "l2.far_reach_bytes": "L2 far reach (one SM)"}


FLAVOURS = {"cg": "L2 only (ld.global.cg)", "default": "through L1"}


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
    ax.set_title("HBM latency: a cold path, every access an L2 miss", pad=10)  # clear of a top tick label
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


#: The models' prediction columns of gpuatlas.analysis.coalescing.stride_table and their line styles.
MODEL_STYLES = {"pred_32": "--", "pred_64": "-.", "pred_128": ":"}


def coalescing(measurements: pd.DataFrame, ax=None):
    """Useful-bandwidth efficiency against element stride from HBM (aligned), one panel per element size, with
    the 32-byte sector, 64-byte block and 128-byte segment models' predictions (dashed, dash-dotted, dotted)."""
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


#: The memory hierarchy's figures and the bandwidth chapter's first three.
FIGURES = (
    FigureSpec("latency-staircase", "chase.latency", "Latency staircase",
               "Cycles per dependent load of a pointer chase against its footprint, CuPy and Numba, through L1 "
               "and L2-only loads (median, interquartile band). Dashed: the fitted latency of each level; dotted: "
               "the fitted capacities (95% CI shaded) and the driver's L2 size.",
               lambda meta, m, d: latency_staircase(m, meta["device"], d),
               chapter="Memory hierarchy"),
    FigureSpec("access-latency", "chase.access", "Single-access latency",
               "Distribution of one SM's single-access latencies at footprints beyond L1, the recording's cost "
               "taken off: near-partition L2 hits, far-partition hits (shaded) and HBM misses, with the derived "
               "latencies marked.",
               lambda meta, m, d: access_latency(m, meta["device"], d),
               chapter="Memory hierarchy", after="latency-staircase"),
    FigureSpec("tlb-staircase", "chase.tlb", "TLB staircase",
               "One load per block of 0.5 MiB to 256 MiB, each at a random sector of its block, the lines "
               "L2-resident: latency against the footprint the blocks span, with the fitted TLB reaches. Where a "
               "knee stays put as the blocks grow, one TLB entry covers more than a block.",
               lambda meta, m, d: tlb_staircase(m, d),
               chapter="Memory hierarchy", after="access-latency"),
    FigureSpec("hbm-latency", "chase.miss", "HBM latency",
               "A cold path (the L2 flushed, no line visited twice, so every access misses the L2) against the "
               "footprint its lines are drawn from: plain and L2-only loads, the HBM latency inside and past the "
               "TLB's reach, and the reach.", lambda meta, m, d: hbm_latency(m, d),
               chapter="Memory hierarchy", after="tlb-staircase"),
    FigureSpec("l2-capacity", "chase.every_sm", "L2 capacity from every SM",
               "An L2-only chase run from every SM at once, each SM on its own stretch of one random cycle: "
               "latency against footprint, with its knee, the capacity the bandwidth miss model fits, and the "
               "driver's L2 size.", lambda meta, m, d: l2_capacity(m, meta["device"], d),
               chapter="Memory hierarchy", after="hbm-latency"),
    FigureSpec("line-by-capacity", "chase.latency", "Line size by capacity",
               "The capacity knee of the chase at each stride between its elements (95% CI bars): flat while "
               "elements share a line, rising once each element has a line of its own; dashed, the line-count "
               "model C x max(1, stride / line) of the measured line.",
               lambda meta, m, d: line_by_capacity(m, d),
               chapter="Memory hierarchy", after="l2-capacity"),
    FigureSpec("fill-block", "chase.line", "Fill block",
               "Address-order chase against stride: latency rises until the stride passes the block a miss "
               "fills (not the line: a line holds several such sectors), through L1 and L2 only.",
               lambda meta, m, d: line_size(m),
               chapter="Memory hierarchy", after="line-by-capacity"),
    FigureSpec("bank-conflicts", "smem.banks", "Shared-memory bank conflicts",
               "Cycles per warp-wide shared load against the stride between lanes, per access size: dependent "
               "loads (latency, left) and independent loads (throughput, right); lines CuPy, crosses Numba.",
               lambda meta, m, d: bank_conflicts(m),
               chapter="Bandwidth and coalescing", after="coalescing"),
    FigureSpec("coalescing", "bw.stride", "Coalescing",
               "Useful HBM bandwidth over the stride-1 bandwidth against the element stride between lanes, per "
               "element size, with the 32-B sector, 64-B and 128-B segment models' predictions.",
               lambda meta, m, d: coalescing(m),
               chapter="Bandwidth and coalescing", after="bandwidth-footprint"),
    FigureSpec("bandwidth-footprint", "bw.l2", "Bandwidth against footprint",
               "Read bandwidth of every SM through L2 only against footprint, with the fitted L2 miss model and "
               "capacity (95% CI shaded); shared memory, L1 and HBM read bandwidth for scale.",
               lambda meta, m, d: bandwidth_by_footprint(m, meta["device"], d),
               chapter="Bandwidth and coalescing"),
)
