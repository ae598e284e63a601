"""The report's figures: each one's file stem, the probe whose data it needs, its heading and caption, and how
it is drawn (analysis.chapters places each in its chapter)."""
from __future__ import annotations

from typing import Callable, NamedTuple

from analysis import (atlas, compute_figures, execution_figures, geometry_figures, hierarchy_figures, hopper_figures,
                      mshr_figure, telemetry)


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
               "\"not measured\".", lambda meta, m, d: atlas.atlas(meta, d)),
)
#: The report's figures in order; analysis.chapters says which chapter shows each.
FIGURES = (
    FigureSpec("latency-staircase", "chase.latency", "Latency staircase",
               "Cycles per dependent load of a pointer chase against its footprint, CuPy and Numba, through L1 "
               "and L2-only loads (median, interquartile band). Dashed: the fitted latency of each level; dotted: "
               "the fitted capacities (95% CI shaded) and the driver's L2 size.",
               lambda meta, m, d: hierarchy_figures.latency_staircase(m, meta["device"], d)),
    FigureSpec("access-latency", "chase.access", "Single-access latency",
               "Distribution of one SM's single-access latencies at footprints beyond L1, the recording's cost "
               "taken off: near-partition L2 hits, far-partition hits (shaded) and HBM misses, with the derived "
               "latencies marked.",
               lambda meta, m, d: hierarchy_figures.access_latency(m, meta["device"], d)),
    FigureSpec("tlb-staircase", "chase.tlb", "TLB staircase",
               "One load per block of 0.5 MiB to 256 MiB, each at a random sector of its block, the lines "
               "L2-resident: latency against the footprint the blocks span, with the fitted TLB reaches. Where a "
               "knee stays put as the blocks grow, one TLB entry covers more than a block.",
               lambda meta, m, d: hierarchy_figures.tlb_staircase(m, d)),
    FigureSpec("hbm-latency", "chase.miss", "HBM latency",
               "A cold path (the L2 flushed, no line visited twice, so every access misses the L2) against the "
               "footprint its lines are drawn from: plain and L2-only loads, the HBM latency inside and past the "
               "TLB's reach, and the reach.", lambda meta, m, d: hierarchy_figures.hbm_latency(m, d)),
    FigureSpec("l2-capacity", "chase.every_sm", "L2 capacity from every SM",
               "An L2-only chase run from every SM at once, each SM on its own stretch of one random cycle: "
               "latency against footprint, with its knee, the capacity the bandwidth miss model fits, and the "
               "driver's L2 size.", lambda meta, m, d: hierarchy_figures.l2_capacity(m, meta["device"], d)),
    FigureSpec("line-by-capacity", "chase.latency", "Line size by capacity",
               "The capacity knee of the chase at each stride between its elements (95% CI bars): flat while "
               "elements share a line, rising once each element has a line of its own; dashed, the line-count "
               "model C x max(1, stride / line) of the measured line.",
               lambda meta, m, d: hierarchy_figures.line_by_capacity(m, d)),
    FigureSpec("fill-block", "chase.line", "Fill block",
               "Address-order chase against stride: latency rises until the stride passes the block a miss "
               "fills (not the line: a line holds several such sectors), through L1 and L2 only.",
               lambda meta, m, d: hierarchy_figures.line_size(m)),
    FigureSpec("bank-conflicts", "smem.banks", "Shared-memory bank conflicts",
               "Cycles per warp-wide shared load against the stride between lanes, per access size: dependent "
               "loads (latency, left) and independent loads (throughput, right); lines CuPy, crosses Numba.",
               lambda meta, m, d: hierarchy_figures.bank_conflicts(m)),
    FigureSpec("coalescing", "bw.stride", "Coalescing",
               "Useful HBM bandwidth over the stride-1 bandwidth against the element stride between lanes, per "
               "element size, with the 32-B sector, 64-B and 128-B segment models' predictions.",
               lambda meta, m, d: hierarchy_figures.coalescing(m)),
    FigureSpec("bandwidth-footprint", "bw.l2", "Bandwidth against footprint",
               "Read bandwidth of every SM through L2 only against footprint, with the fitted L2 miss model and "
               "capacity (95% CI shaded); shared memory, L1 and HBM read bandwidth for scale.",
               lambda meta, m, d: hierarchy_figures.bandwidth_by_footprint(m, meta["device"], d)),
    FigureSpec("launch-overhead", "launch.overhead", "Launch overhead",
               "Time per empty-kernel launch, plain launches against a CUDA graph (median, interquartile range).",
               lambda meta, m, d: compute_figures.launch_overhead(m)),
    FigureSpec("occupancy-throughput", "occupancy.throughput", "Occupancy against throughput",
               "Read bandwidth against resident warps per SM, one line per ILP, from HBM and L2 with 4- and "
               "16-byte loads; dashed: Little's-law fits; the HBM panels mark HBM read bandwidth and the "
               "fitted ILP-1 knee.", lambda meta, m, d: compute_figures.occupancy_throughput(m, meta["device"], d)),
    FigureSpec("compute-peaks", "compute.vector", "Compute peaks",
               "Measured dense peaks with 95% CIs: vector units (FP64, FP32, FP16x2, INT32), mma.sync, wgmma, "
               "and cuBLAS and Triton matmuls.", lambda meta, m, d: compute_figures.compute_peaks(d)),
    FigureSpec("roofline", "matmul.roofline", "Roofline",
               "Square-tiled Triton matmul on the run's measured roofline: HBM and L2 bandwidth slopes under the "
               "BF16 tensor peak; each BLOCK's predicted (hollow) and measured (filled) point.",
               lambda meta, m, d: compute_figures.roofline(m, d)),
    FigureSpec("fused-softmax", "fusion.softmax", "Fused softmax",
               "Softmax of a bf16 matrix: time and counted bytes, three unfused kernels against one fused kernel.",
               lambda meta, m, d: compute_figures.fusion(m)),
    FigureSpec("wave-quantization", "matmul.waves", "Wave quantization",
               "Time of a BLOCK 128 bf16 matmul against its program count (median, interquartile bars); dotted: "
               "multiples of the SM count; dashed: multiples of the fitted wave size.",
               lambda meta, m, d: compute_figures.wave_quantization(m, meta["device"], d)),
    FigureSpec("decode-gemm", "matmul.decode", "Decode GEMM against the batch",
               "Bytes a decode-shaped bf16 GEMM (M x 4096 by 4096 x N, weights past the L2) moves per second "
               "against the batch M, beside the measured HBM read bandwidth.",
               lambda meta, m, d: compute_figures.decode_gemm(m, d)),
    FigureSpec("instruction-latency-throughput", "exec.inst", "Instruction latency against throughput",
               "Per unit, each instruction's dependent-chain latency (cycles, one thread's chain) against its "
               "full-SM throughput (thread instructions per clock per SM), 95% CI bars; STS, with no result to "
               "chain, is drawn at latency 0.", lambda meta, m, d: execution_figures.latency_throughput_figure(d)),
    FigureSpec("warp-scheduling", "exec.schedule", "Warp scheduling",
               "FFMA warp instructions per clock per SM against resident warps per SM, one line per ILP; dotted, "
               "the plateau as the fitted schedulers times each one's issue rate; dashed, the scheduler count.",
               lambda meta, m, d: execution_figures.schedule_figure(m, d)),
    FigureSpec("divergence", "exec.diverge", "Branch divergence",
               "Useful FFMA throughput of warps split over 2 to 32 branches of one body each, over the unsplit "
               "warps', beside 1 / ways.", lambda meta, m, d: execution_figures.divergence_figure(m)),
    FigureSpec("l1-sets", "geometry.l1", "L1 ways, sets and replacement",
               "Left: lines a cyclic chain holds before its first L1 miss against the power-of-two stride between "
               "its lines (each access timed alone), with the pattern max(ways, capacity / stride) of the derived "
               "ways and sets, and the lines held at random places (fewer than the capacity unless the L1 is fully "
               "associative). Right: the miss fraction past the ways at strides that fill one set, against the "
               "LRU-like and random replacement models.",
               lambda meta, m, d: geometry_figures.l1_sets(m, d)),
    FigureSpec("l1-random-sets", "geometry.l1", "L1 sets at random places", "Misses per pass of a cyclic chain of 128-B lines at random places against its length (points), beside the misses balls-into-bins predicts for LRU-like sets of 2, 4, 8 and 16 ways (capacity / ways sets, the capacity the lines a 128-B-strided chain holds) and for one fully associative set: every line of a set given more lines than its ways misses on every pass.", lambda meta, m, d: geometry_figures.l1_random_sets(m)),
    FigureSpec("l1-carveout", "geometry.l1", "L1/shared carve-out",
               "L1 capacity (lines a 128-B-strided chain holds before its first miss) against the dynamic shared "
               "memory the walking block allocates, and their sum: what the unified L1/shared array gives the L1 "
               "at each allocation.", lambda meta, m, d: geometry_figures.l1_carveout(m, d)),
    FigureSpec("l2-partition-map", "geometry.l2_partition", "L2 partition map",
               "One SM's L2-only loads over lines in address order, each a cold miss (the L2 flushed) timed alone: "
               "misses to addresses the SM's near partition homes return sooner than far-homed ones, so the "
               "record is the partition map at line resolution (first walk shown).",
               lambda meta, m, d: geometry_figures.l2_partition(m, d)),
    FigureSpec("l2-sm-map", "geometry.l2_sm_map", "L2 partition map from every SM",
               "Each SM's L2-only loads over the same lines in address order, each a cold miss (the L2 flushed before "
               "every SM's walk) timed alone: one row per SM, grouped by the side whose map it shares (white lines), "
               "dark where the SM's near partition homes the line.", lambda meta, m, d: geometry_figures.l2_sm_map(m)),
    FigureSpec("l2-sets", "geometry.l2_sets", "Lines the L2 keeps",
               "Hit fraction (accesses as fast as the near partition's hits, each timed alone) of cyclic L2-only "
               "chases in steady state against the chain's footprint: one SM or every SM (each its own stretch), "
               "contiguous or random lines; dotted, the balls-into-bins LRU curve of the fitted ways and sets; grey, "
               "the half-hit footprints.", lambda meta, m, d: geometry_figures.l2_sets(m, d)),
    FigureSpec("mshr-knee", "geometry.mshr", "Misses in flight per SM",
               "One block on one SM keeping distinct lines in flight, every one an L1 miss: lines per cycle against "
               "the lines in flight (median over SMs and repeats, interquartile bars), each curve's two-segment fit "
               "(rising as lines / latency, then flat) and its knee's 95% interval shaded. A count of miss "
               "registers keeps its knee from the L2 and from HBM; a rate keeps its plateau instead.",
               lambda meta, m, d: mshr_figure.knee(m)),
    FigureSpec("const-staircase", "geometry.const", "Constant caches",
               "Cycles per dependent constant-memory load (LDC) of a random chain against the footprint it spans "
               "in __constant__ memory (median, interquartile bars), with the fitted levels (dashed) and "
               "capacities (dotted).", lambda meta, m, d: geometry_figures.const_staircase(m, d)),
)
#: The "Hopper units" section's figures, in the same form.
HOPPER_FIGURES = (
    FigureSpec("dsmem-latency", "hopper.dsmem_latency", "DSMEM latency",
               "Chase latency against cluster size: the next block's shared memory (DSMEM), the block's own "
               "through the same generic path, and its own by LDS (median, interquartile bars).",
               lambda meta, m, d: hopper_figures.dsmem_latency(m, d)),
    FigureSpec("tma-latency", "hopper.tma_latency", "TMA latency",
               "Cycles from issuing one bulk copy to its completion against copy size, 1-D and 2-D, from L2 and "
               "HBM, with the load-to-use latencies of one ld.global.", lambda meta, m, d: hopper_figures.tma_latency(m, d)),
    FigureSpec("copy-bandwidth", "hopper.copy_bandwidth", "Global to shared copy bandwidth",
               "Streaming bandwidth from global into shared memory against chunk size: TMA, cp.async and plain "
               "loads, from HBM (solid) and L2 (dashed).", lambda meta, m, d: hopper_figures.copy_bandwidth(m, d)),
)

#: NVML's clock and power, drawn when the run recorded telemetry (results schema 2).
TELEMETRY_FIGURES = (
    FigureSpec("clock-power", None, "Clock and power per probe (NVML)",
               "NVML's board power and SM clock over the run, one slot per probe in run order: within its slot, a "
               "probe's samples lie by the time since it began, over its last sample's time (in brackets under "
               "it), in 60 time bins (point: the bin's median; bar: its min to max); bins with a sample taken "
               "while the SW power cap or a thermal slowdown was set are marked along the top.",
               lambda meta, m, d: telemetry.clock_power_strip(m, list(meta.get("probes", ())))),
    FigureSpec("power-trace", "compute.wgmma", "Clock and power over back-to-back tensor-core launches (NVML)",
               "Board power and SM clock read by NVML every 10 ms over a second and a half of back-to-back wgmma "
               "launches per data type: the clock the power limit allows once the board reaches its cap.",
               lambda meta, m, d: telemetry.power_trace(m)),
)


def figure_specs(measurements) -> tuple:
    """Every figure spec of the report; the NVML ones only for a run that recorded telemetry."""
    specs = (*SUMMARY_FIGURES, *FIGURES, *HOPPER_FIGURES)
    return specs + TELEMETRY_FIGURES if telemetry.has_telemetry(measurements) else specs


def drawn_figures(measurements) -> list[str]:
    """Names of the SVGs a report of these measurements holds (main and Hopper sections)."""
    measured = set(measurements["probe"].unique())
    return [f"{spec.stem}.svg" for spec in figure_specs(measurements) if spec.probe in measured or spec.probe is None]


def uses_derived(spec: FigureSpec) -> bool:
    """Whether the spec's draw reads its third argument, the derived quantities."""
    import dis

    code = spec.draw.__code__
    name = code.co_varnames[2]
    return name in code.co_cellvars or any(name in (i.argval if isinstance(i.argval, tuple) else (i.argval,))
               for i in dis.get_instructions(spec.draw) if i.opname.startswith("LOAD_FAST"))
