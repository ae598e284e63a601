"""The hierarchy report: one self-contained HTML file (figures inlined) and a Markdown twin.

In a paper's order (analysis.chapters): a one-screen summary under the title (the atlas, the compute peaks
beside the roofline, the lecture's verdicts), then chapters that open with their figures (FIGURES, each also
written as SVG) and a short table of key quantities, then appendices with the big tables: every derived
quantity, the claims one by one, the instruction table, the cross-checks, the device, probes and warnings.
"""
from __future__ import annotations

import io
import os
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, NamedTuple

import pandas as pd

from analysis import execution, figures
from analysis.chapters import claims_chapter, has_repro, report_sections
from analysis.chase_levels import frontend_agreement
from analysis.compare import display
from analysis.page import write_page as _write_page
from analysis.roofline import gap_explanation, roofline_table
from analysis.shown import fmt_interval, fmt_measured, fmt_value
from analysis.stats import SPREAD_WARNING, split_by_probe, unstable_configs
from analysis.units import fmt_bytes


def hierarchy_table(meta: dict, derived: pd.DataFrame) -> pd.DataFrame:
    """Level, capacity, latency in cycles and time, bandwidth, sharing scope; measured values with CIs.

    Time is cycles over the SM clock measured in the run (HBM's is read from %globaltimer directly)."""
    device = meta["device"]
    d = derived.set_index("quantity")
    clock = d["value"].get("clock.sm_hz")

    def measured(quantity: str, probe: str, unresolved: str = "") -> str:
        """The value with its CI; else whether its probe did not run or ran without resolving it."""
        if quantity in d.index:
            r = d.loc[quantity]
            return fmt_measured(r["value"], r["ci_low"], r["ci_high"], r["unit"])
        status = meta["probes"].get(probe, {}).get("status")
        if status == "ok":
            return f"not resolved by {probe} in this run" + (f" ({unresolved})" if unresolved else "")
        return f"not measured ({probe} {'not run' if status is None else status})"

    def as_time(quantity: str) -> str:
        if quantity not in d.index or not clock:
            return "-"
        return fmt_value(d.loc[quantity, "value"] / clock, "s")

    rows = [
        ("Shared memory", f"{fmt_bytes(device['smem_per_sm_bytes'])}/SM (driver)",
         measured("smem.latency_cycles", "chase.smem"), as_time("smem.latency_cycles"),
         measured("smem.bandwidth_bytes_per_clk_sm", "bw.onchip"), "one block"),
        ("L1", measured("l1.capacity_bytes", "chase.latency"), measured("l1.latency_cycles", "chase.latency"),
         as_time("l1.latency_cycles"), measured("l1.bandwidth_bytes_per_clk_sm", "bw.onchip"), "one SM"),
        ("L2, near partition", measured("l2.partition_bytes", "geometry.l2_sets"),
         measured("l2.latency_cycles", "chase.latency"), as_time("l2.latency_cycles"), "-", "the SMs beside it"),
        ("L2, far partition", ("one SM's reach " if "l2.far_reach_bytes" in d.index else "")
         + measured("l2.far_reach_bytes", "chase.latency", "no single far plateau in its staircase; the whole "
                    "L2's capacity is in the rows below"),
         measured("l2.far_latency_cycles", "chase.access"), as_time("l2.far_latency_cycles"), "-", "whole GPU"),
        ("L2, every SM reading", measured("l2.capacity_bytes", "bw.l2")
         + f"; driver {fmt_bytes(device['l2_bytes'])}", "-", "-", measured("l2.bandwidth_bytes_per_s", "bw.l2"),
         "whole GPU"),
        ("L2, every SM chasing", measured("l2.capacity_chase_bytes", "chase.every_sm"), "-", "-", "-", "whole GPU"),
        ("HBM", f"{fmt_bytes(device['total_memory_bytes'])} (driver)", measured("dram.latency_cycles", "chase.miss"),
         measured("dram.latency_ns", "chase.miss"),
         measured("dram.read_bandwidth_bytes_per_s", "bw.dram") + " read", "whole GPU"),
        ("HBM, past the first TLB level's reach", ("TLB reach " + measured("tlb.l1.reach_bytes", "chase.tlb"))
         if "tlb.l1.reach_bytes" in d.index else "-", measured("dram.latency_tlb_miss_cycles", "chase.miss"),
         measured("dram.latency_tlb_miss_ns", "chase.miss"), "-", "whole GPU"),
    ]
    if "tlb.l2.reach_bytes" in d.index:
        rows.append(("Second TLB level", "reach " + measured("tlb.l2.reach_bytes", "chase.tlb"),
                     "a miss adds " + measured("tlb.l2.miss_cycles", "chase.tlb"), "-", "-", "whole GPU"))
    for quantity, level in (("dram.near_latency_cycles", "HBM, address homed by the near L2 partition"),
                            ("dram.far_latency_cycles", "HBM, address homed by the far L2 partition")):
        if quantity in d.index:
            rows.append((level, "-", measured(quantity, "chase.access"), as_time(quantity), "-", "whole GPU"))
    return pd.DataFrame(rows, columns=["level", "capacity (95% CI)", "latency (cycles, 95% CI)", "latency (time)",
                                       "bandwidth", "shared by"])


def derived_table(derived: pd.DataFrame) -> pd.DataFrame:
    """Every derived quantity: value, 95% CI ("n/a" where there is none), the repeat-run interval where the run
    has one, method and note."""
    table = pd.DataFrame({
        "quantity": derived["quantity"],
        "value": [fmt_value(v, u) for v, u in zip(derived["value"], derived["unit"])],
        "95% CI": [fmt_interval(lo, hi, u)
                   for lo, hi, u in zip(derived["ci_low"], derived["ci_high"], derived["unit"])],
        "method": derived["method"],
        "note": derived["note"].fillna("").str.replace(r"(\d) us\b", "\\1 µs", regex=True),
    })
    if has_repro(derived):
        table.insert(3, "repro interval", [fmt_interval(lo, hi, u) for lo, hi, u in
                                           zip(derived["repro_low"], derived["repro_high"], derived["unit"])])
    return table


def banks_agreement_table(measurements: pd.DataFrame) -> pd.DataFrame:
    """smem.banks against its Numba twin at every config both measured: median cycles and their ratio."""
    keys = ["access_bytes", "stride_words", "form"]
    frame = measurements[measurements["probe"].isin(["smem.banks", "smem.banks_numba"])
                         & (measurements["offset_words"].fillna(0) == 0)]
    if frame.empty:
        return pd.DataFrame()
    table = frame.groupby(keys + ["probe"])["value"].median().unstack("probe").dropna()
    if table.shape[1] < 2:
        return pd.DataFrame()
    ratio = table["smem.banks_numba"] / table["smem.banks"]
    summary = ratio.groupby(level=["access_bytes", "form"]).agg(["count", "min", "max"]).reset_index()
    return pd.DataFrame({"access": summary["access_bytes"].astype(int).astype(str) + " B", "form": summary["form"],
                         "configs": summary["count"], "Numba/CuPy min": summary["min"].map("{:.4f}".format),
                         "Numba/CuPy max": summary["max"].map("{:.4f}".format)})


def agreement_table(measurements: pd.DataFrame) -> pd.DataFrame:
    table = frontend_agreement(measurements)
    return pd.DataFrame({
        "footprint": table["footprint_bytes"].map(fmt_bytes), "flavour": table["flavour"],
        "CuPy footprint": table["cupy_footprint"].map(fmt_bytes),
        "CuPy (cycles)": table["cupy"].map(lambda v: f"{v:.1f}"),
        "Numba (cycles)": table["numba"].map(lambda v: f"{v:.1f}"),
        "Numba / CuPy": table["ratio"].map(lambda v: f"{v:.3f}"),
    })


def roofline_display(table: pd.DataFrame) -> pd.DataFrame:
    """The roofline table with units."""
    return pd.DataFrame({
        "M = N = K": table["matrix_side"], "BLOCK": table["block"], "intensity (FLOP/B)": table["intensity"],
        "predicted": [fmt_value(v, "FLOP/s") if pd.notna(v) else "-" for v in table["predicted_flops"]],
        "bound": table["bound"].replace("", "-"),
        "measured": [f"{fmt_value(v, 'FLOP/s')} [{fmt_value(lo, 'FLOP/s')}, {fmt_value(hi, 'FLOP/s')}]"
                     for v, lo, hi in zip(table["measured_flops"], table["ci_low"], table["ci_high"])],
        "measured / predicted": ["-" if pd.isna(r) else f"{r:.2f}" for r in table["measured_over_predicted"]]})


def warnings(meta: dict, measurements: pd.DataFrame) -> list[str]:
    out = []
    for pid, state in meta["probes"].items():
        if state["status"] != "ok":
            out.append(f"{pid}: {state['status']}" + (f" ({state['error']})" if state.get("error") else ""))
    flagged = measurements[measurements["flag"].fillna("") != ""]
    for (probe, flag), group in flagged.groupby(["probe", "flag"]):
        out.append(f"{probe}: {len(group)} of {int((measurements['probe'] == probe).sum())} samples flagged "
                   f"{flag} and left out of fits")
    unstable = unstable_configs(measurements)
    for probe, group in unstable.groupby("probe", sort=False):
        worst = group.iloc[0]
        out.append(f"{probe}: {len(group)} configs spread more than {SPREAD_WARNING:.0%} (relative IQR); worst "
                   f"{worst['config']} {worst['metric']} at {worst['rel_iqr']:.1%}")
    return out


class FigureSpec(NamedTuple):
    """One report figure: its file stem, the probe whose data it needs (None: any), its heading and caption,
    and how to draw it from (meta, measurements, derived) -> Axes (None when the run has nothing to draw)."""
    stem: str
    probe: str
    title: str
    caption: str
    draw: Callable


#: The summary's own figures, drawn from the derived quantities alone (analysis.chapters places every figure).
SUMMARY_FIGURES = (
    FigureSpec("atlas", "chase.latency", "The atlas: the chip as this run measured it",
               "Each level of the memory hierarchy and the SM with its capacity, latency (cycles, and ns at the "
               "run's measured SM clock) and bandwidth, each with its 95% CI in brackets ([n/a]: the run has no "
               "interval); what only the driver reports is marked so; what the run did not measure is drawn as "
               "\"not measured\".", lambda meta, m, d: _atlas().atlas(meta, d)),
)
#: The report's figures in order; analysis.chapters says which chapter shows each.
FIGURES = (
    FigureSpec("latency-staircase", "chase.latency", "Latency staircase",
               "Cycles per dependent load of a pointer chase against its footprint, CuPy and Numba, through L1 "
               "and L2-only loads (median, interquartile band). Dashed: the fitted latency of each level; dotted: "
               "the fitted capacities (95% CI shaded) and the driver's L2 size.",
               lambda meta, m, d: figures.latency_staircase(m, meta["device"], d)),
    FigureSpec("access-latency", "chase.access", "Single-access latency",
               "Distribution of one SM's single-access latencies at footprints beyond L1, the recording's cost "
               "taken off: near-partition L2 hits, far-partition hits (shaded) and HBM misses, with the derived "
               "latencies marked.",
               lambda meta, m, d: figures.access_latency(m, meta["device"], d)),
    FigureSpec("tlb-staircase", "chase.tlb", "TLB staircase",
               "One load per block of 0.5 MiB to 256 MiB, each at a random sector of its block, the lines "
               "L2-resident: latency against the footprint the blocks span, with the fitted TLB reaches. Where a "
               "knee stays put as the blocks grow, one TLB entry covers more than a block.",
               lambda meta, m, d: figures.tlb_staircase(m, d)),
    FigureSpec("hbm-latency", "chase.miss", "HBM latency",
               "A cold path (the L2 flushed, no line visited twice, so every access misses the L2) against the "
               "footprint its lines are drawn from: plain and L2-only loads, the HBM latency inside and past the "
               "TLB's reach, and the reach.", lambda meta, m, d: figures.hbm_latency(m, d)),
    FigureSpec("l2-capacity", "chase.every_sm", "L2 capacity from every SM",
               "An L2-only chase run from every SM at once, each SM on its own stretch of one random cycle: "
               "latency against footprint, with its knee, the capacity the bandwidth miss model fits, and the "
               "driver's L2 size.", lambda meta, m, d: figures.l2_capacity(m, meta["device"], d)),
    FigureSpec("line-by-capacity", "chase.latency", "Line size by capacity",
               "The capacity knee of the chase at each stride between its elements (95% CI bars): flat while "
               "elements share a line, rising once each element has a line of its own; dashed, the line-count "
               "model C x max(1, stride / line) of the measured line.",
               lambda meta, m, d: figures.line_by_capacity(m, d)),
    FigureSpec("fill-block", "chase.line", "Fill block",
               "Address-order chase against stride: latency rises until the stride passes the block a miss "
               "fills (not the line: a line holds several such sectors), through L1 and L2 only.",
               lambda meta, m, d: figures.line_size(m)),
    FigureSpec("bank-conflicts", "smem.banks", "Shared-memory bank conflicts",
               "Cycles per warp-wide shared load against the stride between lanes, per access size: dependent "
               "loads (latency, left) and independent loads (throughput, right); lines CuPy, crosses Numba.",
               lambda meta, m, d: figures.bank_conflicts(m)),
    FigureSpec("coalescing", "bw.stride", "Coalescing",
               "Useful HBM bandwidth over the stride-1 bandwidth against the element stride between lanes, per "
               "element size, with the 32-B sector, 64-B and 128-B segment models' predictions.",
               lambda meta, m, d: figures.coalescing(m)),
    FigureSpec("bandwidth-footprint", "bw.l2", "Bandwidth against footprint",
               "Read bandwidth of every SM through L2 only against footprint, with the fitted L2 miss model and "
               "capacity (95% CI shaded); shared memory, L1 and HBM read bandwidth for scale.",
               lambda meta, m, d: figures.bandwidth_by_footprint(m, meta["device"], d)),
    FigureSpec("launch-overhead", "launch.overhead", "Launch overhead",
               "Time per empty-kernel launch, plain launches against a CUDA graph (median, interquartile range).",
               lambda meta, m, d: figures.launch_overhead(m)),
    FigureSpec("occupancy-throughput", "occupancy.throughput", "Occupancy against throughput",
               "Read bandwidth against resident warps per SM, one line per ILP, from HBM and L2 with 4- and "
               "16-byte loads; dashed: Little's-law fits; the HBM panels mark HBM read bandwidth and the "
               "fitted ILP-1 knee.", lambda meta, m, d: figures.occupancy_throughput(m, meta["device"], d)),
    FigureSpec("compute-peaks", "compute.vector", "Compute peaks",
               "Measured dense peaks with 95% CIs: vector units (FP64, FP32, FP16x2, INT32), mma.sync, wgmma, "
               "and cuBLAS and Triton matmuls.", lambda meta, m, d: figures.compute_peaks(d)),
    FigureSpec("roofline", "matmul.roofline", "Roofline",
               "Square-tiled Triton matmul on the run's measured roofline: HBM and L2 bandwidth slopes under the "
               "BF16 tensor peak; each BLOCK's predicted (hollow) and measured (filled) point.",
               lambda meta, m, d: figures.roofline(m, d)),
    FigureSpec("fused-softmax", "fusion.softmax", "Fused softmax",
               "Softmax of a bf16 matrix: time and counted bytes, three unfused kernels against one fused kernel.",
               lambda meta, m, d: figures.fusion(m)),
    FigureSpec("wave-quantization", "matmul.waves", "Wave quantization",
               "Time of a BLOCK 128 bf16 matmul against its program count (median, interquartile bars); dotted: "
               "multiples of the SM count; dashed: multiples of the fitted wave size.",
               lambda meta, m, d: figures.wave_quantization(m, meta["device"], d)),
    FigureSpec("decode-gemm", "matmul.decode", "Decode GEMM against the batch",
               "Bytes a decode-shaped bf16 GEMM (M x 4096 by 4096 x N, weights past the L2) moves per second "
               "against the batch M, beside the measured HBM read bandwidth.",
               lambda meta, m, d: figures.decode_gemm(m, d)),
    FigureSpec("instruction-latency-throughput", "exec.inst", "Instruction latency against throughput",
               "Per unit, each instruction's dependent-chain latency (cycles, one thread's chain) against its "
               "full-SM throughput (thread instructions per clock per SM), 95% CI bars; STS, with no result to "
               "chain, is drawn at latency 0.", lambda meta, m, d: execution.latency_throughput_figure(d)),
    FigureSpec("warp-scheduling", "exec.schedule", "Warp scheduling",
               "FFMA warp instructions per clock per SM against resident warps per SM, one line per ILP; dotted, "
               "the plateau as the fitted schedulers times each one's issue rate; dashed, the scheduler count.",
               lambda meta, m, d: execution.schedule_figure(m, d)),
    FigureSpec("divergence", "exec.diverge", "Branch divergence",
               "Useful FFMA throughput of warps split over 2 to 32 branches of one body each, over the unsplit "
               "warps', beside 1 / ways.", lambda meta, m, d: execution.divergence_figure(m)),
    FigureSpec("l1-sets", "geometry.l1", "L1 ways, sets and replacement",
               "Left: lines a cyclic chain holds before its first L1 miss against the power-of-two stride between "
               "its lines (each access timed alone), with the pattern max(ways, capacity / stride) of the derived "
               "ways and sets, and the lines held at random places (fewer than the capacity unless the L1 is fully "
               "associative). Right: the miss fraction past the ways at strides that fill one set, against the "
               "LRU-like and random replacement models.",
               lambda meta, m, d: _geometry_figures().l1_sets(m, d)),
    FigureSpec("l1-random-sets", "geometry.l1", "L1 sets at random places", "Misses per pass of a cyclic chain of 128-B lines at random places against its length (points), beside the misses balls-into-bins predicts for LRU-like sets of 2, 4, 8 and 16 ways (capacity / ways sets, the capacity the lines a 128-B-strided chain holds) and for one fully associative set: every line of a set given more lines than its ways misses on every pass.", lambda meta, m, d: _geometry_figures().l1_random_sets(m)),
    FigureSpec("l1-carveout", "geometry.l1", "L1/shared carve-out",
               "L1 capacity (lines a 128-B-strided chain holds before its first miss) against the dynamic shared "
               "memory the walking block allocates, and their sum: what the unified L1/shared array gives the L1 "
               "at each allocation.", lambda meta, m, d: _geometry_figures().l1_carveout(m, d)),
    FigureSpec("l2-partition-map", "geometry.l2_partition", "L2 partition map",
               "One SM's L2-only loads over lines in address order, each a cold miss (the L2 flushed) timed alone: "
               "misses to addresses the SM's near partition homes return sooner than far-homed ones, so the "
               "record is the partition map at line resolution (first walk shown).",
               lambda meta, m, d: _geometry_figures().l2_partition(m, d)),
    FigureSpec("l2-sm-map", "geometry.l2_sm_map", "L2 partition map from every SM",
               "Each SM's L2-only loads over the same lines in address order, each a cold miss (the L2 flushed before "
               "every SM's walk) timed alone: one row per SM, grouped by the side whose map it shares (white lines), "
               "dark where the SM's near partition homes the line.", lambda meta, m, d: _geometry_figures().l2_sm_map(m)),
    FigureSpec("l2-sets", "geometry.l2_sets", "Lines the L2 keeps",
               "Hit fraction (accesses as fast as the near partition's hits, each timed alone) of cyclic L2-only "
               "chases in steady state against the chain's footprint: one SM or every SM (each its own stretch), "
               "contiguous or random lines; dotted, the balls-into-bins LRU curve of the fitted ways and sets; grey, "
               "the half-hit footprints.", lambda meta, m, d: _geometry_figures().l2_sets(m, d)),
    FigureSpec("const-staircase", "geometry.const", "Constant caches",
               "Cycles per dependent constant-memory load (LDC) of a random chain against the footprint it spans "
               "in __constant__ memory (median, interquartile bars), with the fitted levels (dashed) and "
               "capacities (dotted).", lambda meta, m, d: _geometry_figures().const_staircase(m, d)),
)
#: The "Hopper units" section's figures, in the same form.
HOPPER_FIGURES = (
    FigureSpec("dsmem-latency", "hopper.dsmem_latency", "DSMEM latency",
               "Chase latency against cluster size: the next block's shared memory (DSMEM), the block's own "
               "through the same generic path, and its own by LDS (median, interquartile bars).",
               lambda meta, m, d: figures.dsmem_latency(m, d)),
    FigureSpec("tma-latency", "hopper.tma_latency", "TMA latency",
               "Cycles from issuing one bulk copy to its completion against copy size, 1-D and 2-D, from L2 and "
               "HBM, with the load-to-use latencies of one ld.global.", lambda meta, m, d: figures.tma_latency(m, d)),
    FigureSpec("copy-bandwidth", "hopper.copy_bandwidth", "Global to shared copy bandwidth",
               "Streaming bandwidth from global into shared memory against chunk size: TMA, cp.async and plain "
               "loads, from HBM (solid) and L2 (dashed).", lambda meta, m, d: figures.copy_bandwidth(m, d)),
)

#: NVML's clock and power, drawn when the run recorded telemetry (results schema 2).
TELEMETRY_FIGURES = (
    FigureSpec("clock-power", None, "Clock and power per probe (NVML)",
               "NVML's board power and SM clock over the run, one slot per probe in run order: within its slot, a "
               "probe's samples lie by the time since it began, over its last sample's time (in brackets under "
               "it), in 60 time bins (point: the bin's median; bar: its min to max); bins with a sample taken "
               "while the SW power cap or a thermal slowdown was set are marked along the top.",
               lambda meta, m, d: _telemetry().clock_power_strip(m, list(meta.get("probes", ())))),
    FigureSpec("power-trace", "compute.wgmma", "Clock and power over back-to-back tensor-core launches (NVML)",
               "Board power and SM clock read by NVML every 10 ms over a second and a half of back-to-back wgmma "
               "launches per data type: the clock the power limit allows once the board reaches its cap.",
               lambda meta, m, d: _telemetry().power_trace(m)),
)


def _atlas():
    from analysis import atlas

    return atlas


def _telemetry():
    from analysis import telemetry

    return telemetry


def _geometry_figures():
    from analysis import geometry_figures

    return geometry_figures


def _figure_specs(measurements) -> tuple:
    """Every figure spec of the report; the NVML ones only for a run that recorded telemetry."""
    specs = (*SUMMARY_FIGURES, *FIGURES, *HOPPER_FIGURES)
    return specs + TELEMETRY_FIGURES if _telemetry().has_telemetry(measurements) else specs


#: Resolution at which a figure's text is measured to lay it out: the SVG is vector, but Agg measures text in
#: whole pixels, so a finer grid places labels and margins closer to their true extents.
LAYOUT_DPI = 200


def drawn_figures(measurements) -> list[str]:
    """Names of the SVGs a report of these measurements holds (main and Hopper sections)."""
    measured = set(measurements["probe"].unique())
    return [f"{spec.stem}.svg" for spec in _figure_specs(measurements) if spec.probe in measured or spec.probe is None]


def draw_figures(meta, measurements, derived, which=(*SUMMARY_FIGURES, *FIGURES, *HOPPER_FIGURES)):
    """Yield (spec, laid-out matplotlib Figure) for every figure whose probe the run measured; the caller
    closes them."""
    import matplotlib as mpl

    measured = set(measurements["probe"].unique())
    for spec in which:
        if spec.probe in measured or spec.probe is None:
            with mpl.rc_context({"figure.dpi": LAYOUT_DPI}):
                ax = spec.draw(meta, measurements, derived)
                if ax is None:  # nothing of its kind in this run (an NVML trace, say)
                    continue
                ax.figure.tight_layout()
            # laid out once: a layout engine left on the figure would make every savefig lay it out again
            ax.figure.set_layout_engine(None)
            yield spec, ax.figure


#: Text extents measured by the figures a process has drawn, by (renderer kind, its dpi, the rc settings that
#: measuring reads): see ``shared_text_metrics``.
_TEXT_METRICS: dict = {}
#: The rc settings, beside the font properties, that decide a string's measured extent.
_TEXT_RC = ("text.hinting", "text.usetex", "mathtext.fontset", "mathtext.fallback", "mathtext.default",
            "mathtext.rm", "mathtext.it", "mathtext.bf", "mathtext.sf", "mathtext.tt", "mathtext.cal")


@contextmanager
def shared_text_metrics():
    """Within the block, a string's measured extent (width, height, descent) is measured once per kind of
    renderer and dpi and reused by every later figure: matplotlib keeps its cache per renderer, and each figure
    lays itself out (Agg) and saves (SVG) through renderers of its own, so every figure measured its tick
    labels afresh.  The extent depends on the string, its font properties, math mode, the renderer's kind and
    dpi and the rc settings of _TEXT_RC (read as the block begins), which together key the cache."""
    import matplotlib as mpl
    import matplotlib.text as mtext
    from matplotlib.backends.backend_mixed import MixedModeRenderer

    rc = tuple(mpl.rcParams[key] for key in _TEXT_RC)

    def metrics_function(renderer):
        measuring = renderer._renderer if isinstance(renderer, MixedModeRenderer) else renderer
        table = _TEXT_METRICS.setdefault((type(measuring), getattr(measuring, "dpi", None), rc), {})

        def metrics(text, fontprop, ismath, dpi):
            key = (text, fontprop, ismath, dpi)
            if key not in table:
                table[key] = renderer.get_text_width_height_descent(text, fontprop, ismath)
            return table[key]
        return metrics

    original = getattr(mtext, "_get_text_metrics_function", None)
    if original is None:  # a matplotlib without the private hook: measure per figure, as matplotlib does
        yield
        return
    mtext._get_text_metrics_function = metrics_function
    try:
        yield
    finally:
        mtext._get_text_metrics_function = original


def _svg(fig) -> bytes:
    """The laid-out figure as SVG bytes, text kept as text and no date, so rebuilds are byte-identical."""
    import matplotlib as mpl

    with mpl.rc_context({"svg.hashsalt": "gpuatlas", "svg.fonttype": "none"}):
        svg = io.BytesIO()
        fig.savefig(svg, format="svg", metadata={"Date": None})
    return svg.getvalue()


#: Figures started first: the most panels (or a fit to redo), so that no long one is left for the pool's end.
DRAWN_FIRST = ("clock-power", "instruction-latency-throughput", "occupancy-throughput", "bandwidth-footprint",
               "l1-sets", "power-trace")

#: What a figure worker draws from: its job's (specs, meta, measurements), handed over as it forks, so the
#: frames are shared, not pickled.
_JOB: dict = {}


def _adopt(specs, meta, measurements) -> None:
    import gc

    # what the worker inherits (modules, the frames) lives as long as it does: the collector need not scan it
    gc.freeze()
    _JOB.update(specs=specs, meta=meta, measurements=measurements)


def _draw_one(spec_index: int, derived) -> tuple[int, bytes | None, float]:
    import matplotlib.pyplot as plt

    started = time.perf_counter()
    with shared_text_metrics():
        drawn = list(draw_figures(_JOB["meta"], _JOB["measurements"], derived, [_JOB["specs"][spec_index]]))
        if not drawn:
            return spec_index, None, time.perf_counter() - started
        (_, fig), = drawn
        svg = _svg(fig)
    plt.close(fig)
    return spec_index, svg, time.perf_counter() - started


def _derive_one(index: int) -> list[dict]:
    from analysis.derive import family

    return family(index, _JOB["measurements"], _JOB["meta"]["device"])


def uses_derived(spec: FigureSpec) -> bool:
    """Whether the spec's draw reads its third argument, the derived quantities."""
    import dis

    code = spec.draw.__code__
    name = code.co_varnames[2]
    return name in code.co_cellvars or any(name in (i.argval if isinstance(i.argval, tuple) else (i.argval,))
               for i in dis.get_instructions(spec.draw) if i.opname.startswith("LOAD_FAST"))


class FigureJob:
    """Every figure the run has data for, drawn on every core by forked workers (in turn, in this process,
    where the platform does not fork).  Made from the measurements alone, it starts the derive families
    (``family_rows``) and then the figures that need no derived quantity at once, so the workers derive and draw
    while the caller waits; ``results(derived)`` draws the rest and gathers them all."""

    def __init__(self, meta, measurements, progress=None):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        measured = set(measurements["probe"].unique())
        specs = [spec for spec in _figure_specs(measurements) if spec.probe in measured or spec.probe is None]
        order = sorted(range(len(specs)), key=lambda i: specs[i].stem not in DRAWN_FIRST)
        self.specs, self.progress, self.done = specs, progress, {}
        self.waiting = [i for i in order if uses_derived(specs[i])]
        now = [i for i in order if i not in self.waiting]
        workers = min(len(specs), os.cpu_count() or 1)
        self.pool, self.futures, self.families = None, [], []
        # the measurements split by probe once, before the workers fork: they derive and draw from its parts
        self.split = ExitStack()
        self.split.enter_context(split_by_probe(measurements))
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            import scipy.optimize  # noqa: F401  the workers' fits import it: once here, not once in each

            from analysis.derive import FAMILIES

            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                            initializer=_adopt, initargs=(specs, meta, measurements))
            self.families = [self.pool.submit(_derive_one, i) for i in range(len(FAMILIES))]
            self.futures = [self.pool.submit(_draw_one, i, None) for i in now]
        else:
            _adopt(specs, meta, measurements)
            self.waiting = now + self.waiting

    def family_rows(self) -> list[list[dict]]:
        """Each derive family's rows, in FAMILIES order, as the workers made them (none without workers)."""
        return [future.result() for future in self.families]

    def _record(self, i, svg, seconds) -> None:
        self.done[i] = svg
        if self.progress:
            self.progress(f"figure {len(self.done)}/{len(self.specs)}: {self.specs[i].stem} ({seconds:.1f} s)")

    def results(self, derived) -> dict:
        """stem -> (spec, SVG) of every figure drawn, in report order; ``progress`` gets a line per figure
        as it is done."""
        from concurrent.futures import as_completed

        try:
            if self.pool is None:
                for i in self.waiting:
                    self._record(*_draw_one(i, derived))
            else:
                self.futures += [self.pool.submit(_draw_one, i, derived) for i in self.waiting]
                for future in as_completed(self.futures):
                    self._record(*future.result())
        finally:
            self.close()
        specs = self.specs
        return {specs[i].stem: (specs[i], self.done[i]) for i in sorted(self.done) if self.done[i] is not None}

    def close(self) -> None:
        """Let the workers go: a figure not yet begun is dropped, one being drawn is left to end on its own."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
        self.split.close()
        _JOB.clear()


def _sections(meta, measurements, derived, figures: FigureJob):
    """(title, content) in report order (analysis.chapters); the tables are made while ``figures`` is drawn."""
    device = meta["device"]
    soft = meta.get("software", {})
    facts = pd.DataFrame([
        ("GPU", f"{device['name']} (compute capability {device['compute_capability']}, {device['sm_count']} SMs)"),
        ("SM clock measured", fmt_value(_value(derived, "clock.sm_hz"), "Hz")),
        ("SM clock max (driver)", fmt_value(device.get("sm_clock_max_hz"), "Hz")),
        ("memory", f"{fmt_bytes(device['total_memory_bytes'])}, {device['memory_bus_bits']}-bit bus, "
                   f"clock {fmt_value(device.get('memory_clock_hz'), 'Hz')}"),
        ("L2 / shared per SM / registers per SM", f"{fmt_bytes(device['l2_bytes'])} / "
         f"{fmt_bytes(device['smem_per_sm_bytes'])} / {device['regs_per_sm']}"),
        ("driver / CUDA runtime", f"{device.get('driver', '-')} / {soft.get('cuda_runtime', '-')}"),
        ("software", ", ".join(f"{k} {v}" for k, v in soft.items() if k not in ("cuda_runtime", "cuda_driver"))),
        ("run", f"{meta['run_id']}, profile {meta['profile']}, {meta['started']} to {meta.get('ended') or '-'}"),
        ("command", " ".join(meta.get("argv", []))),
        ("git", f"{(meta.get('git') or {}).get('sha') or '-'}" + (" (dirty)" if (meta.get('git') or {}).get('dirty') else "")),
    ], columns=["", "value"])
    status = pd.DataFrame([(pid, s["status"], f"{s['configs_done']}/{s['configs_total']}", f"{s['seconds']:.1f} s",
                            s.get("error") or "") for pid, s in meta["probes"].items()],
                          columns=["probe", "status", "configs", "time", "error"])
    chapters = {"Memory hierarchy": [("Memory hierarchy, reconstructed", hierarchy_table(meta, derived))]}
    roof = roofline_table(measurements, derived)
    if not roof.empty:
        chapters["Compute and tensor cores"] = [
            ("Roofline: square tiles, predicted against measured", roofline_display(roof)),
            ("Roofline: the gap, explained", gap_explanation(roof, device))]
    chapters["Hopper's units"] = hopper_sections(meta, derived)
    cross = []
    agreement = agreement_table(measurements)
    if not agreement.empty:
        cross.append(("Pointer chase: CuPy against Numba", agreement))
    banks = banks_agreement_table(measurements) if "offset_words" in measurements else pd.DataFrame()
    if not banks.empty:
        cross.append(("Bank conflicts: CuPy against Numba", banks))
    run_warnings = warnings(meta, measurements)
    if not _telemetry().has_telemetry(measurements):
        chapters["Execution"] = [("Clock and power (NVML)", [
            "this run recorded no NVML telemetry (a run from before results schema 2, or NVML did not answer)"])]
    tables = {"warnings": run_warnings, "derived": derived_table(derived), "chapters": chapters,
              "cross-checks": cross,
              "run": [("Device, clocks and software", facts), ("Probes", status),
                      ("Warnings", run_warnings or ["none"])]}
    figs = {stem: drawn for stem, drawn in figures.results(derived).items()}
    return report_sections(meta, derived, figs, tables)


def claim_sections(derived: pd.DataFrame, device: dict) -> list:
    """The lecture's claims: how many hold, deviate, are undecided or cannot be tested per section, then one table
    per section (in the lecture's order), each deviation naming the figure that shows it."""
    return claims_chapter(derived, device)


def hopper_table(derived: pd.DataFrame) -> pd.DataFrame:
    """Each Hopper unit beside its classic path, as measured in this run, with their ratio."""
    from analysis.hopper import comparison_rows

    return pd.DataFrame([(name, fmt_value(value, unit), classic, fmt_value(base, unit), f"{ratio:.3g}")
                         for name, _, value, unit, classic, base, ratio in comparison_rows(derived)],
                        columns=["Hopper unit", "measured", "classic path", "classic measured", "unit / classic"])


def hopper_sections(meta, derived) -> list:
    """The Hopper units' tables: each unit against its classic path, or why the run has none."""
    states = {pid: s for pid, s in meta["probes"].items() if pid.startswith("hopper.")}
    if not states:
        return []
    skipped = [f"{pid}: {s['status']}" + (f" ({s['error']})" if s.get("error") else "")
               for pid, s in states.items() if s["status"] != "ok"]
    table = hopper_table(derived)
    sections = [("Hopper units: DSMEM, TMA, DPX against the classic path",
                 table if not table.empty else (skipped or ["no Hopper quantity and classic path both measured"]))]
    if skipped and not table.empty:
        sections.append(("Hopper units not measured", skipped))
    return sections


def _value(derived: pd.DataFrame, quantity: str):
    hit = derived.loc[derived["quantity"] == quantity, "value"]
    return float(hit.iat[0]) if len(hit) else None


def render(meta: dict, measurements: pd.DataFrame, derived: pd.DataFrame, out_dir: Path,
           progress: Callable[[str], None] | None = None, figures: FigureJob | None = None) -> Path:
    """Write ``index.html`` (self-contained), ``index.md`` and each figure as SVG; return the HTML path.
    ``progress`` is called with a line as each figure is done; ``figures``, a FigureJob started earlier on these
    measurements (with its own progress), else one is started here."""
    title = f"gpuatlas: {meta['gpu']} ({meta['run_id']})"
    figures = figures or FigureJob(meta, measurements, progress)
    try:
        sections = _sections(meta, measurements, derived, figures)
    finally:
        figures.close()
    return _write_page(title, sections, out_dir)


def spread_table(runs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Run-to-run spread of each quantity over several runs of one GPU: (max - min) / median."""
    values = pd.DataFrame({label: d.set_index("quantity")["value"] for label, d in runs.items()})
    units = pd.concat([d.set_index("quantity")["unit"] for d in runs.values()]).groupby(level=0).first()
    spread = (values.max(axis=1) - values.min(axis=1)) / values.median(axis=1).abs()
    return pd.DataFrame({"quantity": values.index, "runs": values.notna().sum(axis=1).values,
                         "median": [fmt_value(v, units[q]) for q, v in values.median(axis=1).items()],
                         "min": [fmt_value(v, units[q]) for q, v in values.min(axis=1).items()],
                         "max": [fmt_value(v, units[q]) for q, v in values.max(axis=1).items()],
                         "spread": [f"{v:.2%}" for v in spread.values]})


def render_comparison(long: pd.DataFrame, same_gpu_runs: dict[str, dict[str, pd.DataFrame]], out_dir: Path) -> Path:
    """A page comparing several runs and references (``analysis.compare.comparison``'s long form), grouped by
    level with CIs, ratios and numbered footnotes, and run-to-run spread for GPUs measured more than once."""
    from analysis.compare import ratio_figure
    from analysis.errors import UsageError

    shown, legend, notes = display(long)
    sections = []
    try:
        fig = ratio_figure(long)
    except UsageError:  # no quantity both sides measure alike: the tables say so
        fig = None
    if fig is not None:
        import matplotlib.pyplot as plt

        svg = _svg(fig)
        plt.close(fig)
        spec = FigureSpec("ratios", None, "Each GPU against the first",
                          "Every quantity measured alike on both sides, as its ratio to the first GPU's (log axis), "
                          "grouped by level; bars: the ratio's interval from both sides' 95% CIs.", None)
        sections.append(("", ("figure", spec, svg)))
    sections += [("Compared", legend), ("Derived quantities side by side", shown)]
    if notes:
        sections.append(("Notes: caveats, sources, ratios not given", notes))
    for gpu, runs in same_gpu_runs.items():
        if len(runs) > 1:
            sections.append((f"Run-to-run spread: {gpu} ({len(runs)} runs)", spread_table(runs)))
    return _write_page("gpuatlas: comparison", sections, out_dir)
