"""The lecture's "Numbers worth memorizing" table (and the figures of §7.3-7.10 it repeats): the first 25
claims, each with its id, kind, the lecture's words and their precision word."""
from __future__ import annotations

from dataclasses import replace

from gpuatlas.analysis.claims import mechanisms as why
from gpuatlas.analysis.claims.model import (KB_UNITS, Claim, device_property, first_of, lecture_bytes, on_chip,
                                            per_sm_load, product, quantity, ratio)

_CLAIMS = (
    Claim("§7.1", "132 SMs", 132, "1", device_property("sm_count"), "driver-reported SM count"),
    Claim("§7.1", "2,048 threads (64 warps) per SM", 2048, "1", device_property("max_threads_per_sm"),
          "driver-reported threads per SM"),
    Claim("Numbers worth memorizing", "256 KB of registers per SM", 256 * 1024, "B",
          device_property("regs_per_sm", 4), "driver-reported 32-bit registers per SM x 4 B"),
    Claim("§7.3", "228 KB of shared memory per SM", 228 * 1024, "B", device_property("smem_per_sm_bytes"),
          "driver-reported shared memory per SM"),
    Claim("§7.3", "shared memory ~30 cycles", 30, "cycles",
          first_of(quantity("smem.index_latency_cycles"), quantity("smem.latency_cycles")),
          "dependent-load chase in shared memory computing each address from the loaded index, as published "
          "chases do (chase.smem_index); the pure-LDS chase when the run has no such chase",
          "each load's address is the previous load's value (no index arithmetic between loads); chases "
          "that compute an index per step, as most published ones do, add those instructions' latency",
          unlike=lambda d, device: "" if "smem.index_latency_cycles" in d else (
              "the ~30 comes from chases that compute an index between loads; this run's chase is pure LDS (each "
              "address is the previous load's value), so it measures less by those instructions' latency")),
    Claim("§7.3", "L2 50 MB", 50e6, "B", lecture_bytes("l2_bytes", 1 << 20), "driver-reported L2 size, its "
          "MiB written as the lecture's MB",
          "the lecture's part is an H100 SXM; the all-SM read sweep (bw.l2, when it extends past the L2) puts "
          "this GPU's usable capacity at l2.capacity_bytes (a derived quantity)"),
    Claim("§7.3", "L2 \"a few hundred cycles\" (taken as 200-500)", 300, "cycles", quantity("l2.latency_cycles"),
          "L2-only chase, near partition", counts=100),
    Claim("Numbers worth memorizing; §7.3", "HBM latency ~500 cycles", 500, "cycles",
          quantity("dram.latency_cycles"), "L2-only chase beyond the L2", why.hbm_latency),
    Claim("§7.3", "500 cycles at 1.8 GHz is ~278 ns", 278e-9, "s", quantity("dram.latency_ns"),
          "the same chase timed with %globaltimer"),
    Claim("§7.3", "one SM's fair share of HBM is 14.1 B/cycle", 14.1, "B/cycle",
          quantity("dram.read_bytes_per_clk_sm"),
          "recomputed: measured HBM read bandwidth / (SMs x the clock measured with it)", why.per_sm_clock),
    Claim("§7.4", "~0.93 MB in flight saturates HBM", 0.93e6, "B",
          first_of(quantity("littles.bytes_in_flight"), product("dram.read_bandwidth_bytes_per_s", "dram.latency_ns")),
          "the Little's-law fit of the occupancy sweep (plateau x loaded latency); without that probe, "
          "measured HBM read bandwidth x unloaded chase latency",
          "bytes in flight = bandwidth x latency, both of this GPU; HBM latency under load exceeds the idle "
          "chase's"),
    Claim("§7.4", "~55 warps per SM, one 128-B load each", 55, "1",
          first_of(quantity("occupancy.warps_to_saturate_dram_ilp1"),
                   product("dram.read_bandwidth_bytes_per_s", "dram.latency_ns", divide_by=per_sm_load)),
          "the occupancy sweep's fitted knee in warps per SM at one 128-B load each; without that probe, "
          "bandwidth x chase latency / 128 B / SMs",
          "warps needed = this GPU's bytes in flight / 128 B / SMs; above the SM's warp limit, only ILP "
          "(several loads in flight per warp) saturates HBM"),
    Claim("Numbers worth memorizing; §7.6", "fp32 at stride >= 32 moves 1/32 useful bytes", 1 / 32, "1",
          quantity("coalescing.efficiency_stride32_fp32"), "stride-32 fp32 bandwidth over stride-1", why.strided),
    Claim("§7.3", "shared memory moves ~128 B/cycle/SM", 128, "B/cycle", quantity("smem.bandwidth_bytes_per_clk_sm"),
          "16-byte shared loads from every SM"),
    Claim("§7.6", "shared memory has 32 banks", 32, "1", quantity("smem.banks"),
          "bank count that best explains the conflict curve"),
    Claim("Exercise 3", "staging a fp16 column read through a shared tile recovers 64x", 64, "1",
          quantity("smem.column_read_recovery"), "staged over direct useful bandwidth, 4096 x 4096 fp16: a "
          "comparison of two implementations (the staged kernel is not at HBM's read rate), not of the hardware",
          "the direct read moves 32-byte sectors and reuses them from L1/L2, so it is far from 1/64 efficient"),
    Claim("§7.10; Lecture 2", "a kernel launch costs ~5 us", 5e-6, "s", quantity("launch.overhead_s"),
          "back-to-back empty-kernel launches from Python"),
    Claim("Numbers worth memorizing; §7.7", "dense BF16 tensor cores ~989 TFLOP/s", 989e12, "FLOP/s",
          quantity("tc.bf16.peak_flops"), "the BF16 tensor-core peak through the best tensor path that ran "
          "(tc.bf16.peak_flops: wgmma's burst peak where the GPU has wgmma -- short launches from a rested GPU, "
          "before the power limit lowers the clock -- else mma.sync's; derived.csv's method says which)"),
    Claim("Numbers worth memorizing; §7.7", "FP32 vector ~67 TFLOP/s", 67e12, "FLOP/s", quantity("fp32.peak_flops"),
          "FP32 FMA peak"),
    Claim("Numbers worth memorizing; §7.7", "tensor vs vector peak ~15x", 989 / 67, "1",
          ratio("tc.bf16.peak_flops", "fp32.peak_flops"), "recomputed: measured BF16 tensor peak / FP32 peak"),
    Claim("Numbers worth memorizing; §7.8", "ridge point 295 FLOP/byte (bf16)", 295, "1",
          ratio("tc.bf16.peak_flops", "dram.read_bandwidth_bytes_per_s"),
          "recomputed: measured BF16 tensor peak / measured HBM read bandwidth", why.both(why.ridge, why.bandwidth)),
    Claim("Numbers worth memorizing; §7.8", "SMEM tiling (BLOCK 128-256) reaches ~43% of peak", 0.43, "1",
          first_of(quantity("roofline.lecture_tile_fraction_of_peak"), quantity("roofline.tiled_fraction_of_peak")),
          "Triton matmul in the lecture's BLOCK 256 tiles with BLOCK_K 64 over the BF16 tensor peak "
          "(matmul.lecture_tile); the square BLOCK_K = BLOCK tiles when the run has no such probe",
          mechanism="the measured tile also reuses operands through the L2, which the lecture's HBM-only 43% "
                    "leaves out, and its accumulator spills from the register file",
          unlike=lambda d, device: "" if "roofline.lecture_tile_fraction_of_peak" in d else (
              "the lecture's 43% is BLOCK 256 with BLOCK_K 64 and HBM-only reuse (128 FLOP/B x 3,350 GB/s); this "
              "run's tiled matmul is BLOCK_K = BLOCK (BLOCK 256 does not fit that way, so BLOCK 128 ran), and it "
              "reuses operands through the L2 as well, a different mechanism")),
    Claim("Numbers worth memorizing; §7.3", "on-chip total ~114 MB (registers + shared memory + L2)", 114e6,
          "B", on_chip(), "recomputed from driver properties: SMs x (registers + shared) + L2", why.on_chip),
    Claim("Numbers worth memorizing; §7.3", "a 7B model's 13.5 GB is 118x the on-chip total", 118, "1",
          on_chip(scale_into=13.5e9), "recomputed: 13.5 GB / this GPU's on-chip total", why.on_chip),
    Claim("Numbers worth memorizing; §7.10", "fused softmax: 5 passes become 2, 2.5x faster", 2.5, "1",
          quantity("fusion.softmax_speedup"), "fused Triton softmax over three unfused kernels, 4096^2 bf16"),
)

#: The claims' ids, kinds, the lecture's own words for them and their precision word (keyed by their text).
_ANNOTATIONS = {
    "132 SMs": ("7.1.sms", "property", ("132 / 64 / 2,048", "from 1 SM to 132"), "exact"),
    "2,048 threads (64 warps) per SM": ("7.1.threads_per_sm", "property", ("132 / 64 / 2,048",
                                        "64 warps, 2,048 threads"), "exact"),
    "256 KB of registers per SM": ("7.3.registers_per_sm", "property", ("256 KB/SM → 33.8 MB",), "exact"),
    "228 KB of shared memory per SM": ("7.3.smem_per_sm", "property", (
        "228 KB/SM → 30.1 MB", "Shared memory: 228 KB per SM", "the H100's 228 KB", "228 KB/SM\t164 KB/SM"),
        "exact"),
    "shared memory ~30 cycles": ("7.3.smem_latency", "measured", ("~30 cycles", "SMEM at ~30"), "~"),
    "L2 50 MB": ("7.3.l2_capacity", "property", ("50 MB / 80 GB", "50 MB, chip-shared", "its own 50 MB L2",
                                                  "the 50 MB L2 catches"), "exact"),
    "L2 \"a few hundred cycles\" (taken as 200-500)": ("7.3.l2_latency", "measured", ("a few hundred cycles",),
                                                      "a few"),
    "HBM latency ~500 cycles": ("7.3.hbm_latency", "measured", ("~500 cycles", "HBM at ~500 cycles"), "~"),
    "500 cycles at 1.8 GHz is ~278 ns": ("7.3.hbm_latency_ns", "measured", ("500 cycles is ≈ 278 ns",), "≈"),
    "one SM's fair share of HBM is 14.1 B/cycle": ("7.3.hbm_share", "recomputed", ("→ 14.1 B/cycle",), "plain"),
    "~0.93 MB in flight saturates HBM": ("7.4.bytes_in_flight", "recomputed", ("~0.93 MB",), "~"),
    "~55 warps per SM, one 128-B load each": ("7.4.warps_needed", "recomputed", (
        "≈ 55 per SM", "~55 warps resident", "64 warps vs ~55 (§7.4)"), "~"),
    "fp32 at stride >= 32 moves 1/32 useful bytes": ("7.6.stride32", "measured", (
        "Coalescing worst case (fp32, stride ≥ 32)", "128 of 4,096 B", "1/32 → ~105 GB/s effective"), "plain"),
    "shared memory moves ~128 B/cycle/SM": ("7.3.smem_bandwidth", "measured", (
        "roughly 128 bytes per cycle per SM",), "roughly"),
    "shared memory has 32 banks": ("7.6.banks", "measured", ("32 banks",), "exact"),
    "staging a fp16 column read through a shared tile recovers 64x": ("ex3.recovery", "measured", (
        "a 64× bandwidth recovery",), "plain"),
    "a kernel launch costs ~5 us": ("7.10.launch", "measured", ("at ≈5 µs each", "≈5 µs launch"), "≈"),
    "dense BF16 tensor cores ~989 TFLOP/s": ("7.7.bf16_peak", "measured", (
        "989 vs ~67 TFLOP/s", "989 TFLOP/s dense BF16", "The flat ceiling, 989 TFLOP/s"), "plain"),
    "FP32 vector ~67 TFLOP/s": ("7.7.fp32_peak", "measured", ("about 67 TFLOP/s", "989 vs ~67 TFLOP/s"), "about"),
    "tensor vs vector peak ~15x": ("7.7.tensor_over_vector", "recomputed", ("≈ 15×", "~15× the everything-else "
                                                                            "path", "989 vs 67 → 15×"), "≈"),
    "ridge point 295 FLOP/byte (bf16)": ("7.8.ridge", "recomputed", (
        "295 FLOP/byte bf16", "989/3.35", "989 ÷ 3.35 → 295", "The ridge point, 295 FLOP/byte"), "plain"),
    "SMEM tiling (BLOCK 128-256) reaches ~43% of peak": ("7.8.tiled_fraction", "measured", (
        "BLOCK ≈ 128–256 → ≈429 TFLOP/s ≈ 43% of peak", "≈ 43% of peak",
        "register file: 256²·4 B = 256 KB"),
        "≈"),
    "on-chip total ~114 MB (registers + shared memory + L2)": ("7.3.on_chip", "property", (
        "~114 MB vs 13.5 GB", "33.8 + 30.1 + 50", "33.8 + 30.1 + 50 ≈ 114 MB"), "~"),
    "a 7B model's 13.5 GB is 118x the on-chip total": ("7.3.weights_over_on_chip", "property", (
        "→ 118×", "13.5 GB / 114 MB ≈ 118×"), "≈"),
    "fused softmax: 5 passes become 2, 2.5x faster": ("7.10.softmax", "measured", (
        "5 passes → 2 passes; 2.5×, size-independent", "A 2.5× traffic cut — 5 passes to 2"), "plain"),
}

_UNITS = {"7.3.l2_capacity": KB_UNITS, "7.3.on_chip": KB_UNITS, "7.3.weights_over_on_chip": KB_UNITS + "; GB = "
          "10^9 B", "7.3.registers_per_sm": "KB as KiB (the per-SM sizes)", "7.3.smem_per_sm": "KB as KiB (the "
          "per-SM sizes)", "7.3.hbm_latency_ns": "ns", "7.3.smem_bandwidth": "B per SM clock"}
_FIGURES = {"7.3.smem_latency": "latency-staircase", "7.3.l2_capacity": "l2-capacity", "7.3.l2_latency":
            "latency-staircase", "7.3.hbm_latency": "hbm-latency", "7.3.hbm_latency_ns": "hbm-latency",
            "7.3.hbm_share": "bandwidth-footprint", "7.4.bytes_in_flight": "occupancy-throughput",
            "7.4.warps_needed": "occupancy-throughput", "7.6.stride32": "coalescing", "7.3.smem_bandwidth":
            "bandwidth-footprint", "7.6.banks": "bank-conflicts", "ex3.recovery": "coalescing", "7.10.launch":
            "launch-overhead", "7.7.bf16_peak": "compute-peaks", "7.7.fp32_peak": "compute-peaks",
            "7.7.tensor_over_vector": "compute-peaks", "7.8.ridge": "roofline", "7.8.tiled_fraction": "roofline",
            "7.3.on_chip": "l2-capacity", "7.3.weights_over_on_chip": "l2-capacity", "7.10.softmax":
            "fused-softmax"}


def _annotate(claim: Claim) -> Claim:
    ident, kind, quote, precision = _ANNOTATIONS[claim.text]
    section = claim.section if "§" in claim.section or claim.section.startswith("Exercise") else \
        f"{claim.section}; §7.3"  # the table's register row is §7.3's
    return replace(claim, section=section, id=ident, kind=kind, quote=quote, precision=precision,
                   units=_UNITS.get(ident, ""), figure=_FIGURES.get(ident, ""))


NUMBERS = tuple(_annotate(c) for c in _CLAIMS)
