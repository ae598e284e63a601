"""Figures of launch, occupancy and compute: launch overhead, occupancy against throughput, the compute
peaks, the roofline, kernel fusion, wave quantization and the decode GEMM."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from gpuatlas.analysis.compute import PEAK_BARS, WGMMA_PROBE  # noqa: E402
from gpuatlas.analysis.figures import _legend, _no_data, _si_axis, color_palette  # noqa: E402
from gpuatlas.analysis.fusion import fusion_table  # noqa: E402
from gpuatlas.analysis.littles_law import (HEADLINE_LOAD_BYTES, fit_sweep, model, throughput_samples,  # noqa: E402
                                  throughput_table)
from gpuatlas.analysis.report_figures import FigureSpec  # noqa: E402
from gpuatlas.analysis.roofline import BANDWIDTH_QUANTITY, PEAK_QUANTITY, roofline_table  # noqa: E402
from gpuatlas.analysis.stats import usable  # noqa: E402
from gpuatlas.analysis.units import plain_log_axis  # noqa: E402


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


def occupancy_throughput(measurements: pd.DataFrame, device: dict, derived: pd.DataFrame):
    """Read bandwidth against resident warps per SM, one line per ILP; rows HBM and L2, columns 4- and
    16-byte loads; dashed: the panel's Little's-law fit min(SMs x warps x ILP x bytes / latency, peak) drawn
    at each ILP; HBM panels also show the bandwidth probe's HBM read and the fitted ILP-1 knee (CI shaded)."""
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
    fitted = derived.loc[derived["quantity"] == "waves.programs_per_wave", "value"].dropna()  # undecided: none
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


#: The compute figures, with the summary's peaks and roofline and the occupancy, decode and launch figures.
FIGURES = (
    FigureSpec("launch-overhead", "launch.overhead", "Launch overhead",
               "Time per empty-kernel launch, plain launches against a CUDA graph (median, interquartile range).",
               lambda meta, m, d: launch_overhead(m),
               chapter="Execution", after="divergence"),
    FigureSpec("occupancy-throughput", "occupancy.throughput", "Occupancy against throughput",
               "Read bandwidth against resident warps per SM, one line per ILP, from HBM and L2 with 4- and "
               "16-byte loads; dashed: Little's-law fits; the HBM panels mark HBM read bandwidth and the "
               "fitted ILP-1 knee.", lambda meta, m, d: occupancy_throughput(m, meta["device"], d),
               chapter="Bandwidth and coalescing", after="bank-conflicts"),
    FigureSpec("compute-peaks", "compute.vector", "Compute peaks",
               "Measured dense peaks with 95% CIs: vector units (FP64, FP32, FP16x2, INT32), mma.sync, wgmma, "
               "and cuBLAS and Triton matmuls.", lambda meta, m, d: compute_peaks(d),
               chapter="Summary", after="atlas"),
    FigureSpec("roofline", "matmul.roofline", "Roofline",
               "Square-tiled Triton matmul on the run's measured roofline: HBM and L2 bandwidth slopes under the "
               "BF16 tensor peak; each BLOCK's predicted (hollow) and measured (filled) point.",
               lambda meta, m, d: roofline(m, d),
               chapter="Summary", after="compute-peaks"),
    FigureSpec("fused-softmax", "fusion.softmax", "Fused softmax",
               "Softmax of a bf16 matrix: time and counted bytes, three unfused kernels against one fused kernel.",
               lambda meta, m, d: fusion(m),
               chapter="Compute and tensor cores", after="wave-quantization"),
    FigureSpec("wave-quantization", "matmul.waves", "Wave quantization",
               "Time of a BLOCK 128 bf16 matmul against its program count (median, interquartile bars); dotted: "
               "multiples of the SM count; dashed: multiples of the fitted wave size.",
               lambda meta, m, d: wave_quantization(m, meta["device"], d),
               chapter="Compute and tensor cores"),
    FigureSpec("decode-gemm", "matmul.decode", "Decode GEMM against the batch",
               "Bytes a decode-shaped bf16 GEMM (M x 4096 by 4096 x N, weights past the L2) moves per second "
               "against the batch M, beside the measured HBM read bandwidth.",
               lambda meta, m, d: decode_gemm(m, d),
               chapter="Bandwidth and coalescing", after="occupancy-throughput"),
)
