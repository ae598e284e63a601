"""The lecture's quantitative claims (../shared/lecture/gpu-hardware-lecture.txt), judged against a run.

The lecture describes an H100 SXM.  Claims are judged as mechanisms, not datasheets:

* a claim about a device property (SMs, L2 size) is compared with this GPU's driver-reported property;
* a latency in cycles or a ratio is compared as is (cycles and ratios do not depend on the part);
* a figure the lecture derived from its datasheet inputs (bytes in flight, warps needed, the per-SM share of
  HBM) is recomputed from this run's measured inputs and shown beside the lecture's;
* a claim whose quantity this run did not measure says so, and names the issue whose probe will.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

from analysis.units import fmt_value

#: A measured value with its CI: (value, ci_low, ci_high).
Measured = tuple[float, float, float]


@dataclass(frozen=True)
class Claim:
    section: str
    text: str
    value: float
    unit: str
    tolerance: float  # relative deviation still judged "holds"
    measure: Callable[[dict, dict], Measured | None]  # (derived by quantity, device) -> measured
    tests: str  # what the measured side is, in words
    pending: str = ""  # the issue whose probe measures it, while unmeasured
    mechanism: str | Callable[[dict, dict], str] = ""  # why the hardware differs (or a function of the
    # measured quantities and the device that says it), shown when the claim deviates


def quantity(name: str) -> Callable:
    def measure(d: dict, device: dict) -> Measured | None:
        return d.get(name)

    return measure


def device_property(key: str, scale: float = 1.0) -> Callable:
    def measure(d: dict, device: dict) -> Measured | None:
        value = device.get(key)
        return None if value is None else (value * scale,) * 3

    return measure


def product(*names: str, divide_by: Callable[[dict, dict], float] = lambda d, dev: 1.0) -> Callable:
    """A figure recomputed from measured quantities: their product over a device-derived divisor."""
    def measure(d: dict, device: dict) -> Measured | None:
        if any(n not in d for n in names):
            return None
        value, low, high = 1.0, 1.0, 1.0
        for n in names:
            value, low, high = value * d[n][0], low * d[n][1], high * d[n][2]
        k = divide_by(d, device)
        return value / k, low / k, high / k

    return measure


def _per_sm_load(d: dict, device: dict) -> float:
    return 128.0 * device["sm_count"]


def first_of(*measures: Callable) -> Callable:
    """The first measure this run can answer: a direct measurement before a recomputation from others."""
    def measure(d: dict, device: dict) -> Measured | None:
        return next((m for m in (f(d, device) for f in measures) if m is not None), None)

    return measure


def ratio(numerator: str, denominator: str) -> Callable:
    """A figure recomputed as the ratio of two measured quantities."""
    def measure(d: dict, device: dict) -> Measured | None:
        if numerator not in d or denominator not in d:
            return None
        n, dn = d[numerator], d[denominator]
        return n[0] / dn[0], n[1] / dn[2], n[2] / dn[1]

    return measure


def on_chip_bytes(device: dict) -> float | None:
    """Registers + shared memory of every SM, plus the L2: the lecture's "on-chip total"."""
    keys = ("sm_count", "regs_per_sm", "smem_per_sm_bytes", "l2_bytes")
    if any(k not in device for k in keys):
        return None
    return device["sm_count"] * (4 * device["regs_per_sm"] + device["smem_per_sm_bytes"]) + device["l2_bytes"]


def on_chip(scale_into: float | None = None) -> Callable:
    """The on-chip total from driver properties; with ``scale_into``, how many times it fits into that many
    bytes (the lecture's 13.5 GB of 7B-model weights)."""
    def measure(d: dict, device: dict) -> Measured | None:
        total = on_chip_bytes(device)
        if total is None:
            return None
        value = total if scale_into is None else scale_into / total
        return (value,) * 3

    return measure


CLAIMS = (
    Claim("§7.1", "132 SMs", 132, "1", 0.0, device_property("sm_count"), "driver-reported SM count", "#2"),
    Claim("§7.1", "2,048 threads (64 warps) per SM", 2048, "1", 0.0, device_property("max_threads_per_sm"),
          "driver-reported threads per SM", "#2"),
    Claim("Numbers worth memorizing", "256 KB of registers per SM", 256 * 1024, "B", 0.0,
          device_property("regs_per_sm", 4), "driver-reported 32-bit registers per SM x 4 B", "#2"),
    Claim("§7.3", "228 KB of shared memory per SM", 228 * 1024, "B", 0.0, device_property("smem_per_sm_bytes"),
          "driver-reported shared memory per SM", "#2"),
    Claim("§7.3", "shared memory ~30 cycles", 30, "cycles", 0.2, quantity("smem.latency_cycles"),
          "dependent-load chase in shared memory", "#3",
          "each load's address is the previous load's value (no index arithmetic between loads); chases "
          "that compute an index per step, as most published ones do, add those instructions' latency"),
    Claim("§7.3", "L2 50 MB", 50e6, "B", 0.0, device_property("l2_bytes"), "driver-reported L2 size", "#2",
          "the lecture's part is an H100 SXM; the all-SM read sweep (bw.l2, when it extends past the L2) puts "
          "this GPU's usable capacity at l2.capacity_bytes (a derived quantity)"),
    Claim("§7.3", "L2 \"a few hundred cycles\" (taken as 200-400)", 300, "cycles", 1 / 3,
          quantity("l2.latency_cycles"), "L2-only chase, near partition", "#3"),
    Claim("Numbers worth memorizing; §7.3", "HBM latency ~500 cycles", 500, "cycles", 0.2,
          quantity("dram.latency_cycles"), "L2-only chase beyond the L2", "#3",
          lambda d, device: _hbm_mechanism(d)),
    Claim("§7.3", "500 cycles at 1.8 GHz is ~278 ns", 278e-9, "s", 0.2, quantity("dram.latency_ns"),
          "the same chase timed with %globaltimer", "#3"),
    Claim("§7.3", "one SM's fair share of HBM is 14.1 B/cycle", 14.1, "B/cycle", 0.2,
          quantity("dram.read_bytes_per_clk_sm"),
          "recomputed: measured HBM read bandwidth / (SMs x the clock measured with it)", "#4",
          "the share scales with this GPU's own HBM bandwidth per SM and clock"),
    Claim("§7.4", "~0.93 MB in flight saturates HBM", 0.93e6, "B", 0.2,
          first_of(quantity("littles.bytes_in_flight"),
                   product("dram.read_bandwidth_bytes_per_s", "dram.latency_ns")),
          "the Little's-law fit of the occupancy sweep (plateau x loaded latency); without that probe, "
          "measured HBM read bandwidth x unloaded chase latency", "#6",
          "bytes in flight = bandwidth x latency, both of this GPU; HBM latency under load exceeds the idle "
          "chase's"),
    Claim("§7.4", "~55 warps per SM, one 128-B load each", 55, "1", 0.2,
          first_of(quantity("occupancy.warps_to_saturate_dram_ilp1"),
                   product("dram.read_bandwidth_bytes_per_s", "dram.latency_ns", divide_by=_per_sm_load)),
          "the occupancy sweep's fitted knee in warps per SM at one 128-B load each; without that probe, "
          "bandwidth x chase latency / 128 B / SMs", "#6",
          "warps needed = this GPU's bytes in flight / 128 B / SMs; above the SM's warp limit, only ILP "
          "(several loads in flight per warp) saturates HBM"),
    Claim("Numbers worth memorizing; §7.6", "fp32 at stride >= 32 moves 1/32 useful bytes", 1 / 32, "1", 0.2,
          quantity("coalescing.efficiency_stride32_fp32"), "stride-32 fp32 bandwidth over stride-1", "#4",
          lambda d, device: _strided_mechanism(d)),
    Claim("§7.3", "shared memory moves ~128 B/cycle/SM", 128, "B/cycle", 0.1,
          quantity("smem.bandwidth_bytes_per_clk_sm"), "16-byte shared loads from every SM", "#4"),
    Claim("§7.6", "shared memory has 32 banks", 32, "1", 0.0, quantity("smem.banks"),
          "bank count that best explains the conflict curve", "#5"),
    Claim("Exercise 3", "staging a fp16 column read through a shared tile recovers 64x", 64, "1", 0.2,
          quantity("smem.column_read_recovery"), "staged over direct useful bandwidth, 4096 x 4096 fp16", "#5",
          "the direct read moves 32-byte sectors and reuses them from L1/L2, so it is far from 1/64 efficient"),
    Claim("§7.10; Lecture 2", "a kernel launch costs ~5 us", 5e-6, "s", 0.5, quantity("launch.overhead_s"),
          "back-to-back empty-kernel launches from Python", "#2"),
    Claim("Numbers worth memorizing; §7.7", "dense BF16 tensor cores ~989 TFLOP/s", 989e12, "FLOP/s", 0.1,
          quantity("tc.bf16.peak_flops"), "wgmma BF16 burst peak (short launches from a rested GPU, before "
          "the power limit lowers the clock; tc.bf16.sustained_flops is the rate held under it)", "#7"),
    Claim("Numbers worth memorizing; §7.7", "FP32 vector ~67 TFLOP/s", 67e12, "FLOP/s", 0.1,
          quantity("fp32.peak_flops"), "FP32 FMA peak", "#7"),
    Claim("Numbers worth memorizing; §7.7", "tensor vs vector peak ~15x", 989 / 67, "1", 0.1,
          ratio("tc.bf16.peak_flops", "fp32.peak_flops"), "recomputed: measured BF16 tensor burst peak / FP32 peak",
          "#7"),
    Claim("Numbers worth memorizing; §7.8", "ridge point 295 FLOP/byte (bf16)", 295, "1", 0.2,
          ratio("tc.bf16.peak_flops", "dram.read_bandwidth_bytes_per_s"),
          "recomputed: measured BF16 tensor burst peak / measured HBM read bandwidth", "#7",
          "both sides are this GPU's own: its HBM is faster than the H100 SXM's"),
    Claim("Numbers worth memorizing; §7.8", "SMEM tiling (BLOCK 128-256) reaches ~43% of peak", 0.43, "1", 0.25,
          quantity("roofline.tiled_fraction_of_peak"), "Triton tiled matmul at BLOCK 128-256 over the BF16 burst peak",
          "#7"),
    Claim("Numbers worth memorizing; §7.3", "on-chip total ~114 MB (registers + shared memory + L2)", 114e6,
          "B", 0.1, on_chip(), "recomputed from driver properties: SMs x (registers + shared) + L2", "#2",
          "the H200's 60 MiB L2 against the H100 SXM's 50 MB"),
    Claim("Numbers worth memorizing; §7.3", "a 7B model's 13.5 GB is 118x the on-chip total", 118, "1", 0.1,
          on_chip(scale_into=13.5e9), "recomputed: 13.5 GB / this GPU's on-chip total", "#2",
          "the H200's larger L2 makes its on-chip total larger, so the weights are fewer times it"),
    Claim("Numbers worth memorizing; §7.10", "fused softmax: 5 passes become 2, 2.5x faster", 2.5, "1", 0.2,
          quantity("fusion.softmax_speedup"), "fused Triton softmax over three unfused kernels, 4096^2 bf16",
          "#8"),
    Claim("§7.3", "shared memory is the same physical SRAM array as the L1, carved up by configuration: each "
          "byte given to shared memory is a byte the L1 loses", 1, "1", 0.1, quantity("l1.shared_trade_ratio"),
          "L1 capacity measured beside a block holding from the record's few KiB to all of its opt-in shared memory: "
          "L1 bytes lost per shared byte allocated", "#20",
          "the driver gives shared memory in carve-out steps (and reserves some per block), so an allocation "
          "takes the next step up from the L1; l1.unified_bytes is the largest L1 + shared sum measured"),
)


def _hbm_mechanism(d: dict) -> str:
    """Why a chase beyond the L2 is not ~500 cycles: which L2 partition homes each address, when measured."""
    text = ("a random dependent chase beyond the L2 pays the whole miss path (the L2, then HBM) and averages "
            "misses to addresses that either L2 partition homes")
    if "dram.near_latency_cycles" in d and "dram.far_latency_cycles" in d:
        text += (f": recorded access by access, a miss homed by the near partition takes "
                 f"{d['dram.near_latency_cycles'][0]:.0f} cycles and one homed by the far partition "
                 f"{d['dram.far_latency_cycles'][0]:.0f} ({d['dram.near_latency_cycles'][0] / 500:.2f}x and "
                 f"{d['dram.far_latency_cycles'][0] / 500:.2f}x the lecture's ~500)")
    return text


def _strided_mechanism(d: dict) -> str:
    """Why stride-32 fp32 is not 1/32 here, from the run's own fetch-block measurement when it has one."""
    if "mem.sector_bytes" not in d:
        return "each lane's 4 bytes cost a whole fetch block of the memory system, whose size sets the ratio"
    block = d["mem.sector_bytes"][0]
    return (f"each lane's 4 bytes cost one fetch block from HBM, and this GPU fetches {block:.0f}-byte blocks "
            f"per L2 miss (mem.sector_bytes, the line-size chase), not 128-byte segments: 4/{block:.0f} = "
            f"1/{block / 4:.0f} predicted, measured 1/{1 / d['coalescing.efficiency_stride32_fp32'][0]:.1f}")


def _mechanism(claim: Claim, d: dict, device: dict) -> str:
    return claim.mechanism(d, device) if callable(claim.mechanism) else claim.mechanism


def judge(derived: pd.DataFrame, device: dict) -> pd.DataFrame:
    """One row per claim: lecture value, measured value with CI, ratio, verdict and its reason."""
    d = {q: (v, lo, hi) for q, v, lo, hi in derived[["quantity", "value", "ci_low", "ci_high"]].itertuples(index=False)}
    rows = []
    for claim in CLAIMS:
        row = {"section": claim.section, "claim": claim.text, "lecture": fmt_value(claim.value, claim.unit),
               "tested by": claim.tests}
        measured = claim.measure(d, device)
        if measured is None:
            rows.append({**row, "measured": "-", "ratio": "-", "verdict": "not measured",
                         "reason": f"not measured yet: the probe of issue {claim.pending} will measure it"})
            continue
        value, low, high = measured
        ratio = value / claim.value
        holds = abs(ratio - 1) <= claim.tolerance + 1e-12
        ci = "" if low == high == value else f" [{fmt_value(low, claim.unit)}, {fmt_value(high, claim.unit)}]"
        reason = (("matches" if claim.tolerance == 0 else f"within {claim.tolerance:.0%} of the lecture's figure")
                  if holds else
                  f"{ratio:.2f}x the lecture's figure"
                  + (f": {_mechanism(claim, d, device)}" if claim.mechanism else ""))
        rows.append({**row, "measured": fmt_value(value, claim.unit) + ci, "ratio": f"{ratio:.3g}",
                     "verdict": "holds" if holds else "deviates", "reason": reason})
    return pd.DataFrame(rows)
