"""The lecture's quantitative claims (../shared/lecture/gpu-hardware-lecture.txt), judged against a run.

The lecture describes an H100 SXM.  Claims are judged as mechanisms, not datasheets:

* a claim about a device property (SMs, L2 size) is compared with this GPU's driver-reported property;
* a latency in cycles or a ratio is compared as is (cycles and ratios do not depend on the part);
* a figure the lecture derived from its datasheet inputs (bytes in flight, warps needed, the per-SM share of
  HBM) is recomputed from this run's measured inputs and shown beside the lecture's;
* a claim whose quantity this run did not measure says so, and names what would measure it.

Every number of the lecture's "Numbers worth memorizing" table and of §7.1-7.13 that can be judged is a claim
with an id and a kind -- measured, recomputed (the lecture's formula with this run's inputs, shown in the row),
property (the driver's) or reference (``ref:`` data) -- the lecture's exact words, the unit convention its
number is read in and a tolerance from its own precision.  A number this hardware cannot test says why; a
measurement that is not like for like with the lecture's says so instead of a verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
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
    mechanism: str | Callable[[dict, dict], str] = ""  # why the hardware differs (or a function of the
    # measured quantities and the device that says it), shown when the claim deviates
    id: str = ""  # stable claim id (lecture.<section>.<what>)
    kind: str = "measured"  # measured | recomputed | property | reference
    quote: tuple[str, ...] = ()  # the lecture's exact words (each a substring of the lecture text)
    units: str = ""  # the unit convention the lecture's number is read in
    precision: str = ""  # the lecture's own precision word that sets the tolerance ("~", "a few", "exact")
    bounds: tuple[float, float] | None = None  # a range the lecture's words allow, instead of +-tolerance
    untestable: str = ""  # why this hardware cannot test the number (then the row says so)
    unlike: str | Callable[[dict, dict], str] = ""  # why the measured side is not like for like (or a function
    # that says so, empty when it is)
    inputs: tuple[str, ...] = ()  # the measured quantities or driver properties a recomputation uses
    figure: str = ""  # the report figure (its file stem) that shows a deviation


def quantity(name: str) -> Callable:
    def measure(d: dict, device: dict) -> Measured | None:
        return d.get(name)

    measure.inputs = (name,)
    return measure


def device_property(key: str, scale: float = 1.0) -> Callable:
    def measure(d: dict, device: dict) -> Measured | None:
        value = device.get(key)
        return None if value is None else (value * scale,) * 3

    measure.inputs = (key,)
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

    measure.inputs = names
    return measure


def _per_sm_load(d: dict, device: dict) -> float:
    return 128.0 * device["sm_count"]


def first_of(*measures: Callable) -> Callable:
    """The first measure this run can answer: a direct measurement before a recomputation from others."""
    def measure(d: dict, device: dict) -> Measured | None:
        return next((m for m in (f(d, device) for f in measures) if m is not None), None)

    measure.inputs = tuple(dict.fromkeys(n for f in measures for n in getattr(f, "inputs", ())))
    return measure


def ratio(numerator: str, denominator: str) -> Callable:
    """A figure recomputed as the ratio of two measured quantities."""
    def measure(d: dict, device: dict) -> Measured | None:
        if numerator not in d or denominator not in d:
            return None
        n, dn = d[numerator], d[denominator]
        return n[0] / dn[0], n[1] / dn[2], n[2] / dn[1]

    measure.inputs = (numerator, denominator)
    return measure


#: How the lecture writes sizes: a per-SM "256 KB" is 256 KiB, an L2 "50 MB" 50 MiB (the datasheet's binary
#: sizes), but its sums count KB and MB as 10^3 and 10^6 B (132 x 256 KB = 33.8 MB).  A driver size in bytes
#: becomes the lecture's by reading its binary count with decimal units.
KB_UNITS = "KB = 10^3 B, MB = 10^6 B; a driver size in KiB (MiB) is read as that many KB (MB), as the lecture "\
           "reads the datasheet's"


def lecture_bytes(key: str, binary: int, per_sm: bool = False) -> Callable:
    """A driver size (``key``, in bytes) in the lecture's units: its count of ``binary`` units read as that many
    decimal ones; with ``per_sm``, times the SM count (the lecture's chip totals)."""
    def measure(d: dict, device: dict) -> Measured | None:
        if key not in device or (per_sm and "sm_count" not in device):
            return None
        value = device[key] * (4 if key == "regs_per_sm" else 1) / binary * 1000 ** round(math.log(binary, 1024))
        value *= device["sm_count"] if per_sm else 1
        return (value,) * 3

    measure.inputs = (key, "sm_count") if per_sm else (key,)
    return measure


def on_chip_bytes(device: dict) -> float | None:
    """Registers + shared memory of every SM, plus the L2: the lecture's "on-chip total", in its units (KiB per SM
    and MiB of L2 counted as 10^3 and 10^6 B, as its 33.8 + 30.1 + 50 = 114 MB does)."""
    keys = ("sm_count", "regs_per_sm", "smem_per_sm_bytes", "l2_bytes")
    if any(k not in device for k in keys):
        return None
    per_sm = (4 * device["regs_per_sm"] + device["smem_per_sm_bytes"]) / 1024 * 1000
    return device["sm_count"] * per_sm + device["l2_bytes"] / (1 << 20) * 1e6


def on_chip(scale_into: float | None = None) -> Callable:
    """The on-chip total from driver properties; with ``scale_into``, how many times it fits into that many
    bytes (the lecture's 13.5 GB of 7B-model weights)."""
    def measure(d: dict, device: dict) -> Measured | None:
        total = on_chip_bytes(device)
        if total is None:
            return None
        value = total if scale_into is None else scale_into / total
        return (value,) * 3

    measure.inputs = ("sm_count", "regs_per_sm", "smem_per_sm_bytes", "l2_bytes")
    return measure


CLAIMS = (
    Claim("§7.1", "132 SMs", 132, "1", 0.0, device_property("sm_count"), "driver-reported SM count"),
    Claim("§7.1", "2,048 threads (64 warps) per SM", 2048, "1", 0.0, device_property("max_threads_per_sm"),
          "driver-reported threads per SM"),
    Claim("Numbers worth memorizing", "256 KB of registers per SM", 256 * 1024, "B", 0.0,
          device_property("regs_per_sm", 4), "driver-reported 32-bit registers per SM x 4 B"),
    Claim("§7.3", "228 KB of shared memory per SM", 228 * 1024, "B", 0.0, device_property("smem_per_sm_bytes"),
          "driver-reported shared memory per SM"),
    Claim("§7.3", "shared memory ~30 cycles", 30, "cycles", 0.2,
          first_of(quantity("smem.index_latency_cycles"), quantity("smem.latency_cycles")),
          "dependent-load chase in shared memory computing each address from the loaded index, as published "
          "chases do (chase.smem_index); the pure-LDS chase when the run has no such chase",
          "each load's address is the previous load's value (no index arithmetic between loads); chases "
          "that compute an index per step, as most published ones do, add those instructions' latency",
          unlike=lambda d, device: "" if "smem.index_latency_cycles" in d else (
              "the ~30 comes from chases that compute an index between loads; this run's chase is pure LDS (each "
              "address is the previous load's value), so it measures less by those instructions' latency")),
    Claim("§7.3", "L2 50 MB", 50e6, "B", 0.0, lecture_bytes("l2_bytes", 1 << 20), "driver-reported L2 size, its "
          "MiB written as the lecture's MB",
          "the lecture's part is an H100 SXM; the all-SM read sweep (bw.l2, when it extends past the L2) puts "
          "this GPU's usable capacity at l2.capacity_bytes (a derived quantity)"),
    Claim("§7.3", "L2 \"a few hundred cycles\" (taken as 200-400)", 300, "cycles", 1 / 3,
          quantity("l2.latency_cycles"), "L2-only chase, near partition"),
    Claim("Numbers worth memorizing; §7.3", "HBM latency ~500 cycles", 500, "cycles", 0.2,
          quantity("dram.latency_cycles"), "L2-only chase beyond the L2",
          lambda d, device: _hbm_mechanism(d)),
    Claim("§7.3", "500 cycles at 1.8 GHz is ~278 ns", 278e-9, "s", 0.2, quantity("dram.latency_ns"),
          "the same chase timed with %globaltimer"),
    Claim("§7.3", "one SM's fair share of HBM is 14.1 B/cycle", 14.1, "B/cycle", 0.2,
          quantity("dram.read_bytes_per_clk_sm"),
          "recomputed: measured HBM read bandwidth / (SMs x the clock measured with it)",
          "the share scales with this GPU's own HBM bandwidth per SM and clock"),
    Claim("§7.4", "~0.93 MB in flight saturates HBM", 0.93e6, "B", 0.2,
          first_of(quantity("littles.bytes_in_flight"),
                   product("dram.read_bandwidth_bytes_per_s", "dram.latency_ns")),
          "the Little's-law fit of the occupancy sweep (plateau x loaded latency); without that probe, "
          "measured HBM read bandwidth x unloaded chase latency",
          "bytes in flight = bandwidth x latency, both of this GPU; HBM latency under load exceeds the idle "
          "chase's"),
    Claim("§7.4", "~55 warps per SM, one 128-B load each", 55, "1", 0.2,
          first_of(quantity("occupancy.warps_to_saturate_dram_ilp1"),
                   product("dram.read_bandwidth_bytes_per_s", "dram.latency_ns", divide_by=_per_sm_load)),
          "the occupancy sweep's fitted knee in warps per SM at one 128-B load each; without that probe, "
          "bandwidth x chase latency / 128 B / SMs",
          "warps needed = this GPU's bytes in flight / 128 B / SMs; above the SM's warp limit, only ILP "
          "(several loads in flight per warp) saturates HBM"),
    Claim("Numbers worth memorizing; §7.6", "fp32 at stride >= 32 moves 1/32 useful bytes", 1 / 32, "1", 0.2,
          quantity("coalescing.efficiency_stride32_fp32"), "stride-32 fp32 bandwidth over stride-1",
          lambda d, device: _strided_mechanism(d)),
    Claim("§7.3", "shared memory moves ~128 B/cycle/SM", 128, "B/cycle", 0.1,
          quantity("smem.bandwidth_bytes_per_clk_sm"), "16-byte shared loads from every SM"),
    Claim("§7.6", "shared memory has 32 banks", 32, "1", 0.0, quantity("smem.banks"),
          "bank count that best explains the conflict curve"),
    Claim("Exercise 3", "staging a fp16 column read through a shared tile recovers 64x", 64, "1", 0.2,
          quantity("smem.column_read_recovery"), "staged over direct useful bandwidth, 4096 x 4096 fp16: a "
          "comparison of two implementations (the staged kernel is not at HBM's read rate), not of the hardware",
         
          "the direct read moves 32-byte sectors and reuses them from L1/L2, so it is far from 1/64 efficient"),
    Claim("§7.10; Lecture 2", "a kernel launch costs ~5 us", 5e-6, "s", 0.5, quantity("launch.overhead_s"),
          "back-to-back empty-kernel launches from Python"),
    Claim("Numbers worth memorizing; §7.7", "dense BF16 tensor cores ~989 TFLOP/s", 989e12, "FLOP/s", 0.1,
          quantity("tc.bf16.peak_flops"), "wgmma BF16 burst peak (short launches from a rested GPU, before "
          "the power limit lowers the clock; tc.bf16.sustained_flops is the rate held under it)"),
    Claim("Numbers worth memorizing; §7.7", "FP32 vector ~67 TFLOP/s", 67e12, "FLOP/s", 0.1,
          quantity("fp32.peak_flops"), "FP32 FMA peak"),
    Claim("Numbers worth memorizing; §7.7", "tensor vs vector peak ~15x", 989 / 67, "1", 0.1,
          ratio("tc.bf16.peak_flops", "fp32.peak_flops"), "recomputed: measured BF16 tensor burst peak / FP32 peak"),
    Claim("Numbers worth memorizing; §7.8", "ridge point 295 FLOP/byte (bf16)", 295, "1", 0.2,
          ratio("tc.bf16.peak_flops", "dram.read_bandwidth_bytes_per_s"),
          "recomputed: measured BF16 tensor burst peak / measured HBM read bandwidth",
          "both sides are this GPU's own: its HBM is faster than the H100 SXM's"),
    Claim("Numbers worth memorizing; §7.8", "SMEM tiling (BLOCK 128-256) reaches ~43% of peak", 0.43, "1", 0.25,
          first_of(quantity("roofline.lecture_tile_fraction_of_peak"), quantity("roofline.tiled_fraction_of_peak")),
          "Triton matmul in the lecture's BLOCK 256 tiles with BLOCK_K 64 over the BF16 burst peak "
          "(matmul.lecture_tile); the square BLOCK_K = BLOCK tiles when the run has no such probe",
          mechanism="the measured tile also reuses operands through the L2, which the lecture's HBM-only 43% "
                    "leaves out, and its accumulator spills from the register file",
          unlike=lambda d, device: "" if "roofline.lecture_tile_fraction_of_peak" in d else (
              "the lecture's 43% is BLOCK 256 with BLOCK_K 64 and HBM-only reuse (128 FLOP/B x 3,350 GB/s); this "
              "run's tiled matmul is BLOCK_K = BLOCK (BLOCK 256 does not fit that way, so BLOCK 128 ran), and it "
              "reuses operands through the L2 as well, a different mechanism")),
    Claim("Numbers worth memorizing; §7.3", "on-chip total ~114 MB (registers + shared memory + L2)", 114e6,
          "B", 0.1, on_chip(), "recomputed from driver properties: SMs x (registers + shared) + L2",
          "the H200's 60 MiB L2 against the H100 SXM's 50 MB"),
    Claim("Numbers worth memorizing; §7.3", "a 7B model's 13.5 GB is 118x the on-chip total", 118, "1", 0.1,
          on_chip(scale_into=13.5e9), "recomputed: 13.5 GB / this GPU's on-chip total",
          "the H200's larger L2 makes its on-chip total larger, so the weights are fewer times it"),
    Claim("Numbers worth memorizing; §7.10", "fused softmax: 5 passes become 2, 2.5x faster", 2.5, "1", 0.2,
          quantity("fusion.softmax_speedup"), "fused Triton softmax over three unfused kernels, 4096^2 bf16"),
)


# -- every number of the lecture: recomputations, properties, references ------------------------------------

#: Tolerance from the lecture's own precision: "~" / "≈" / "about" a figure, a figure stated plainly (a measured
#: or recomputed rate: 10% for a measurement's spread), a count or a size the driver reports (exact).
TOLERANCE = {"~": 0.2, "plain": 0.1, "exact": 0.0}

BW, PEAK, CLOCK = "dram.read_bandwidth_bytes_per_s", "tc.bf16.peak_flops", "clock.sm_hz"
N4096 = 4096 ** 3  # the lecture's 4096^3 matmul: M·N·K


def calc(fn: Callable[[dict], float], *inputs: str) -> Callable:
    """A figure recomputed by the lecture's own formula ``fn`` from measured quantities and driver properties
    (``inputs``, each a derived-quantity id or a device key); the CI from the inputs' CI ends.  No inputs: the
    lecture's arithmetic on its own numbers."""
    def measure(d: dict, device: dict) -> Measured | None:
        vals = {}
        for n in inputs:  # a derived quantity's id is dotted (l2.latency_cycles); a device key is not
            if "." in n and n in d:
                vals[n] = d[n]
            elif "." not in n and device.get(n) is not None:
                vals[n] = (float(device[n]),) * 3
            else:
                return None
        ends = [fn({n: v[i] for n, v in vals.items()}) for i in range(3)]
        return ends[0], min(ends), max(ends)

    measure.inputs = inputs
    return measure


def _reference(name: str) -> dict:
    from analysis.references import REFERENCE_DIR

    frame = pd.read_csv(REFERENCE_DIR / f"{name}.csv")
    return dict(zip(frame["quantity"], frame["value"]))


def from_reference(fn: Callable[[dict], float], *inputs: str) -> Callable:
    """A figure recomputed from ``ref:`` data: each input is "<reference>:<quantity>"."""
    def measure(d: dict, device: dict) -> Measured | None:
        vals = {}
        for n in inputs:
            name, q = n.split(":")
            table = _reference(name)
            if q not in table:
                return None
            vals[n] = float(table[q])
        value = fn(vals)
        return value, value, value

    measure.inputs = tuple(f"ref:{n}" for n in inputs)
    return measure


def none(d: dict, device: dict) -> None:
    return None


def _waves(v: dict) -> tuple[int, int]:
    programs = (4096 // 128) ** 2
    return programs // int(v["sm_count"]), programs % int(v["sm_count"])


def _tiles() -> tuple[Claim, ...]:
    """§7.8's table: at each square BLOCK, the attainable rate (BLOCK/2 FLOP/B x HBM) and the memory time."""
    rows = ((32, "32\t8.59 GB\t16\t53.6 TFLOP/s\t2.56 ms\t32×", 53.6e12, 2.56e-3, 8.59e9),
            (64, "64\t4.29 GB\t32\t107 TFLOP/s\t1.28 ms\t64×", 107e12, 1.28e-3, 4.29e9),
            (128, "128\t2.15 GB\t64\t214 TFLOP/s\t0.64 ms\t128×", 214e12, 0.64e-3, 2.15e9),
            (256, "256\t1.07 GB\t128\t429 TFLOP/s\t0.32 ms\t256×", 429e12, 0.32e-3, 1.07e9))
    out = []
    for block, row, rate, time, size in rows:
        out += [Claim("§7.8", f"BLOCK {block}: attainable {fmt_value(rate, 'FLOP/s')}", rate, "FLOP/s",
                      TOLERANCE["plain"], calc(lambda v, b=block: b / 2 * v[BW], BW),
                      f"recomputed: BLOCK/2 = {block // 2} FLOP/B x measured HBM read bandwidth",
                      id=f"7.8.tile{block}_attainable", kind="recomputed", quote=(row,), precision="plain",
                      figure="roofline"),
                Claim("§7.8", f"BLOCK {block}: memory time {fmt_value(time, 's')}", time, "s", TOLERANCE["plain"],
                      calc(lambda v, b=block: 2 * N4096 * 2 / b / v[BW], BW),
                      f"recomputed: 2 B x 4096^3 x 2/{block} bytes / measured HBM read bandwidth",
                      id=f"7.8.tile{block}_time", kind="recomputed", quote=(row,), precision="plain",
                      units="GB = 10^9 B", figure="roofline"),
                Claim("§7.8", f"BLOCK {block}: HBM bytes 2·4096³·2/BLOCK", size, "B", 0.005e9 / size,
                      calc(lambda v, b=block: 2 * N4096 * 2 / b), "the lecture's arithmetic (no hardware input)",
                      id=f"7.8.tile{block}_bytes", kind="recomputed", quote=(row,), precision="its digits",
                      units="GB = 10^9 B")]
    return tuple(out)


def _ratio_of(num: str, den: str) -> Callable:
    return calc(lambda v: v[num] / v[den], num, den)


_NAIVE_UNTESTABLE = ("zero-reuse byte accounting, not a hardware figure: gpuatlas reads no DRAM byte counter, "
                     "and a real naive kernel reuses rows and columns through L1 and L2 (the lecture's own "
                     "footnote)")
_TPU = "a TPU v1 figure: no TPU here; the row checks the lecture's arithmetic on the paper's inputs"
_WORKLOAD = "a property of a transformer's operator mix (Lecture 2's accounting), not of the hardware"

LECTURE = (
    # §7.1-7.2
    Claim("§7.1", "64 warps per SM", 64, "1", 0.0, calc(lambda v: v["max_threads_per_sm"] / v["warp_size"],
          "max_threads_per_sm", "warp_size"), "driver-reported threads per SM / warp size", id="7.1.warps_per_sm",
          kind="property", quote=("132 / 64 / 2,048", "the hardware's ceiling is 64 warps per SM",
                                  "64 warps vs ~55 (§7.4)"), precision="exact"),
    Claim("§7.1", "33.8 MB of registers on the chip", 33.8e6, "B", 0.05 / 33.8,
          lecture_bytes("regs_per_sm", 1024, per_sm=True), "driver: SMs x registers x 4 B, KiB read as KB",
          id="7.1.register_file_chip", kind="property", units=KB_UNITS, precision="its digits (33.8)",
          quote=("256 KB/SM → 33.8 MB", "its register file — 33.8 MB", "132 × each")),
    Claim("§7.2", "a warp is 32 threads", 32, "1", 0.0, device_property("warp_size"), "driver-reported warp size",
          id="7.2.warp_size", kind="property", precision="exact",
          quote=("warp\t32 threads", "never issues fewer than 32 lanes")),
    Claim("§7.2", "a block is up to 1,024 threads", 1024, "1", 0.0, device_property("max_threads_per_block"),
          "driver-reported threads per block", id="7.2.block_threads", kind="property", precision="exact",
          quote=("up to 1,024 threads",)),
    Claim("§7.2", "four warp schedulers per SM", 4, "1", 0.05, quantity("sm.schedulers"),
          "FFMA issue's plateau over one warp's rate, warps 1..64 per SM at ILP 8 (exec.schedule)",
          "the plateau over one warp's issue rate is the number of warps issuing at once; a count off four "
          "means a warp alone does not issue every clock (its ILP too short for the FFMA latency) or the "
          "plateau is held below issue by another limit", id="7.2.schedulers", precision="exact",
          quote=("Each SM has four warp schedulers",), figure="warp-scheduling"),
    Claim("§7.2", "a 32-way divergent branch runs at 1/32 throughput", 1 / 32, "1", 0.1,
          quantity("divergence.throughput_fraction_32way"),
          "useful FFMA rate of warps split 32 ways over the unsplit warps' (exec.diverge)",
          "each of the 32 branches also issues its own loop and branch instructions, which the unsplit warp "
          "issues once", id="7.2.divergence", precision="exact",
          quote=("a 32-way divergent branch runs at 1/32 throughput",), figure="divergence"),
    # §7.3
    Claim("§7.3", "shared memory is the same physical SRAM array as the L1, carved up by configuration: each "
          "byte given to shared memory is a byte the L1 loses", 1, "1", 0.1, quantity("l1.shared_trade_ratio"),
          "L1 capacity measured beside a block holding from the record's few KiB to all of its opt-in shared memory: "
          "L1 bytes lost per shared byte allocated (geometry.l1)",
          "the driver gives shared memory in carve-out steps (and reserves some per block), so an allocation "
          "takes the next step up from the L1; l1.unified_bytes is the largest L1 + shared sum measured",
          id="7.3.unified_array", precision="exact", figure="l1-carveout",
          quote=("Shared memory is the same physical SRAM array as the L1 cache, carved up by configuration",)),
    Claim("§7.3", "30.1 MB of shared memory on the chip", 30.1e6, "B", 0.05 / 30.1,
          lecture_bytes("smem_per_sm_bytes", 1024, per_sm=True), "driver: SMs x shared memory per SM, KiB read "
          "as KB", id="7.3.smem_chip", kind="property", units=KB_UNITS, precision="its digits (30.1)",
          quote=("228 KB/SM → 30.1 MB", "the H100's entire 30.1 MB")),
    Claim("§7.3", "HBM ~500+ cycles", 500, "cycles", 0.2, quantity("dram.latency_cycles"),
          "L2-missing dependent chase inside the TLBs' reach", id="7.3.hbm_latency_500plus",
          quote=("~500+ cycles",), precision="~500+: about 500 or more, holds from 400 up",
          bounds=(400, float("inf")), figure="hbm-latency"),
    Claim("§7.3", "80 GB of HBM", 80e9, "B", 0.05, lecture_bytes("total_memory_bytes", 1 << 30),
          "driver-reported memory, GiB read as GB", id="7.3.hbm_capacity", kind="property",
          units="GB = 10^9 B; the driver's GiB read as GB (the H100's 80 GB is 80 GiB of stacks, less what the "
                "driver reserves: +-5%)", precision="plain", quote=("50 MB / 80 GB", "HBM3\t80 GB"),
          mechanism="this GPU carries more HBM than the H100 SXM's 80 GB"),
    Claim("§7.3", "HBM 3,350 GB/s", 3.35e12, "B/s", 0.1, quantity(BW), "measured HBM read bandwidth",
          id="7.3.hbm_bandwidth", quote=("3,350 GB/s", "HBM's 3.35", "32 consecutive fp32, aligned\t1\t128 / "
                                         "128\t1\t3,350 GB/s"), precision="plain", units="GB = 10^9 B",
          mechanism="this GPU's HBM3e is faster than the H100 SXM's HBM3", figure="bandwidth-footprint"),
    Claim("§7.3", "HBM 3,350 GB/s at the pins", 3.35e12, "B/s", 0.01,
          calc(lambda v: v["memory_clock_hz"] * v["memory_bus_bits"] / 8 * 2, "memory_clock_hz",
               "memory_bus_bits"), "driver: memory clock x bus width / 8 x 2 (double data rate)",
          id="7.3.hbm_pins", kind="property", quote=("3,350 GB/s",), precision="a datasheet figure: 1% for the "
          "driver's clock in MHz", units="GB = 10^9 B", mechanism="this GPU's HBM3e has a wider, faster bus"),
    Claim("§7.3", "L2 bandwidth a few x HBM", 3, "1", 0.0, _ratio_of("l2.bandwidth_bytes_per_s", BW),
          "measured L2 read bandwidth / HBM read bandwidth", id="7.3.l2_bandwidth", kind="recomputed",
          quote=("a few × HBM", "a few times HBM bandwidth"), precision="a few: 2x to 5x", bounds=(2, 5),
          figure="bandwidth-footprint"),
    Claim("§7.3", "aggregate shared memory ≈ 30 TB/s", 30e12, "B/s", 0.2,
          calc(lambda v: v["smem.bandwidth_bytes_per_clk_sm"] * v["sm_count"] * v[CLOCK],
               "smem.bandwidth_bytes_per_clk_sm", "sm_count", CLOCK),
          "recomputed: measured shared bytes per cycle per SM x SMs x measured clock", id="7.3.smem_aggregate",
          kind="recomputed", quote=("128 × 132 × 1.8 GHz ≈ 30 TB/s",), precision="~", units="TB = 10^12 B",
          figure="bandwidth-footprint"),
    Claim("§7.3", "aggregate shared memory ~10x HBM", 10, "1", 0.2,
          calc(lambda v: v["smem.bandwidth_bytes_per_clk_sm"] * v["sm_count"] * v[CLOCK] / v[BW],
               "smem.bandwidth_bytes_per_clk_sm", "sm_count", CLOCK, BW),
          "recomputed: aggregate shared bandwidth / measured HBM read bandwidth", id="7.3.smem_over_hbm",
          kind="recomputed", quote=("~10× HBM", "~an order of magnitude above HBM, aggregate"), precision="~",
          mechanism="the shared side is the same 128 B/cycle per SM, while this GPU's HBM is faster",
          figure="bandwidth-footprint"),
    Claim("§7.3", "decode floor 13.5 GB / 3,350 GB/s = 4.0 ms", 4.0e-3, "s", 0.1, calc(lambda v: 13.5e9 / v[BW], BW),
          "recomputed: 13.5 GB / measured HBM read bandwidth", id="7.3.decode_floor", kind="recomputed",
          quote=("4.0 ms decode floor — 13.5 GB ÷ 3,350 GB/s", "the floor of 4.0 ms", "4.0 ms memory floor",
                 "4.0 ms batch-1 decode floor"), precision="plain", units="GB = 10^9 B",
          mechanism="this GPU's HBM streams the same bytes faster", figure="bandwidth-footprint"),
    Claim("§7.3", "HBM ~500 vs SMEM ~30 cycles: a ~17x gap", 17, "1", 0.2,
          first_of(_ratio_of("dram.latency_cycles", "smem.index_latency_cycles"),
                   _ratio_of("dram.latency_cycles", "smem.latency_cycles")),
          "recomputed: measured HBM chase latency / measured shared-memory chase latency (the index-computing "
          "chase, as the lecture's ~30 is, when the run has it)", id="7.3.latency_gap",
          kind="recomputed", quote=("a ~17× gap",), precision="~",
          mechanism="the HBM chase pays the whole miss path (the L2, then HBM) beyond the lecture's ~500",
          figure="latency-staircase"),
    Claim("§7.3", "a 1.8 GHz working clock", 1.8e9, "Hz", 0.1, quantity(CLOCK),
          "measured SM clock with every SM busy", id="7.3.clock", quote=("at 1.8 GHz",), precision="plain",
          mechanism="this GPU holds its 1.98 GHz maximum when not power-limited", figure="clock-power"),
    Claim("§7.3", "3,350 / 132 ≈ 25.4 GB/s per SM", 25.4e9, "B/s", 0.2,
          calc(lambda v: v[BW] / v["sm_count"], BW, "sm_count"), "recomputed: measured HBM read / SMs",
          id="7.3.hbm_per_sm", kind="recomputed", quote=("3,350 ÷ 132 ≈ 25.4 GB/s",), precision="~",
          mechanism="this GPU's HBM is faster on the same 132 SMs", figure="bandwidth-footprint"),
    Claim("§7.3", "a 36x shortfall against the SM's issue width", 36, "1", 0.1,
          calc(lambda v: 4 * 32 * 4 / v["dram.read_bytes_per_clk_sm"], "dram.read_bytes_per_clk_sm"),
          "recomputed: 4 schedulers x 32 lanes x 4 B = 512 B/cycle (the lecture's 36 x 14.1) / measured HBM share "
          "per SM per cycle", id="7.3.shortfall", kind="recomputed",
          quote=("a 36× shortfall", "the 36× shortfall"), precision="plain",
          mechanism="each SM's share of this GPU's faster HBM is larger", figure="bandwidth-footprint"),
    # §7.4
    Claim("§7.4", "7,270 loads of 128 B in flight", 7270, "1", 0.2,
          first_of(calc(lambda v: v["littles.bytes_in_flight"] / 128, "littles.bytes_in_flight"),
                   calc(lambda v: v[BW] * v["dram.latency_ns"] / 128, BW, "dram.latency_ns")),
          "recomputed: bytes in flight (the Little's-law fit, else bandwidth x chase latency) / 128 B",
          id="7.4.loads_in_flight", kind="recomputed", quote=("≈ 7,270 × 128 B", "7,270 loads in flight"),
          precision="~", mechanism="bytes in flight = this GPU's bandwidth x its loaded latency",
          figure="occupancy-throughput"),
    Claim("§7.4", "HBM delivers 1,861 B/cycle", 1861, "B/cycle", 0.1,
          calc(lambda v: v[BW] / v[CLOCK], BW, CLOCK), "recomputed: measured HBM read / measured SM clock",
          id="7.4.hbm_bytes_per_cycle", kind="recomputed", quote=("1,861 B/cycle × 500",), precision="plain",
          mechanism="this GPU's HBM is faster per SM clock", figure="bandwidth-footprint"),
    Claim("§7.4", "one pointer chase: 3.6 million dependent loads/s", 3.6e6, "1/s", 0.1,
          calc(lambda v: 1 / v["dram.latency_ns"], "dram.latency_ns"), "recomputed: 1 / measured HBM chase latency",
          id="7.4.chase_rate", kind="recomputed", quote=("3.6 million dependent loads/s",), precision="plain",
          figure="hbm-latency"),
    Claim("§7.4", "one pointer chase moves ≈29 MB/s", 29e6, "B/s", 0.2,
          calc(lambda v: 8 / v["dram.latency_ns"], "dram.latency_ns"),
          "recomputed: an 8-byte pointer / measured HBM chase latency", id="7.4.chase_bandwidth",
          kind="recomputed", quote=("≈29 MB/s of useful traffic",), precision="~", units="MB = 10^6 B",
          figure="hbm-latency"),
    Claim("§7.4", "the chase is about 116,000x below the machine", 116000, "1", 0.2,
          calc(lambda v: v[BW] * v["dram.latency_ns"] / 8, BW, "dram.latency_ns"),
          "recomputed: measured HBM read / (8 B / measured chase latency)", id="7.4.chase_shortfall",
          kind="recomputed", quote=("about 116,000× below",), precision="~",
          mechanism="this GPU's HBM bandwidth grew more than its latency shrank", figure="hbm-latency"),
    Claim("§7.4", "decode at 1 FLOP/B is 0.34% of peak", 0.0034, "1", 0.1,
          calc(lambda v: v[BW] / v[PEAK], BW, PEAK), "recomputed: 1 FLOP/B x measured HBM read / measured BF16 "
          "burst peak", id="7.4.decode_fraction", kind="recomputed",
          quote=("at 0.34% of the arithmetic peak", "3.35 TFLOP/s — 0.34% of peak"), precision="plain",
          mechanism="this GPU's ridge is lower: more bandwidth per FLOP", figure="roofline"),
    *(Claim("§7.4", f"at {lat} cycles, {warps} warps per SM", warps, "1", 0.1,
            calc(lambda v, c=lat: v[BW] * c / v[CLOCK] / 128 / v["sm_count"], BW, CLOCK, "sm_count"),
            f"recomputed: measured HBM read x {lat} cycles / measured clock / 128 B / SMs",
            id=f"7.4.warps_at_{lat}", kind="recomputed", quote=(quote,), precision="plain",
            mechanism="bytes in flight scale with this GPU's faster HBM", figure="occupancy-throughput")
      for lat, warps, quote in ((400, 44, "at 400 cycles it is 44"), (600, 66, "at 600 it is 66"))),
    # §7.5
    Claim("§7.5", "65,536 registers per SM", 65536, "1", 0.0, device_property("regs_per_sm"),
          "driver-reported 32-bit registers per SM", id="7.5.registers", kind="property", precision="exact",
          quote=("65,536 32-bit registers per SM", "65,536 ÷ 64 = 1,024 threads")),
    Claim("§7.5", "255 registers per thread at most", 255, "1", 0.0, none, "-", id="7.5.registers_per_thread",
          kind="property", precision="exact", quote=("any single thread caps at 255",),
          untestable="the driver's properties do not report it: it is ptxas's per-thread limit, a fact of the "
                     "compiler and ISA that no timing measures"),
    Claim("§7.5", "32 resident blocks per SM", 32, "1", 0.0, device_property("max_blocks_per_sm"),
          "driver-reported blocks per SM", id="7.5.blocks_per_sm", kind="property", precision="exact",
          quote=("a resident-block limit (32 on Hopper)", "2,048 threads / 32 blocks")),
    *(Claim("§7.5", f"{regs} registers per thread: {occ:.0%} occupancy", occ, "1", 0.0,
            calc(lambda v, r=regs: min(v["regs_per_sm"] // r, v["max_threads_per_sm"]) / v["max_threads_per_sm"],
                 "regs_per_sm", "max_threads_per_sm"),
            "driver: registers per SM / registers per thread, over threads per SM", id=f"7.5.occupancy_{regs}",
            kind="property", precision="exact", quote=(row,))
      for regs, occ, row in ((32, 1.0, "32\t2,048\t64\t100%"), (64, 0.5, "64\t1,024\t32\t50%"),
                             (128, 0.25, "128\t512\t16\t25%"))),
    Claim("Exercise 1", "64 registers, 256 threads, 32 KB: registers bind at 1,024 threads", 1024, "1", 0.0,
          calc(lambda v: min(v["regs_per_sm"] // (64 * 256), v["smem_per_sm_bytes"] // (32 << 10),
                             v["max_threads_per_sm"] // 256, v["max_blocks_per_sm"]) * 256,
               "regs_per_sm", "smem_per_sm_bytes", "max_threads_per_sm", "max_blocks_per_sm"),
          "driver: min over the register, shared-memory, thread and block budgets", id="ex1.occupancy",
          kind="property", precision="exact",
          quote=("Registers: 65,536 ÷ 64 = 1,024 threads = 4 blocks", "SMEM: ⌊228 ÷ 32⌋ = 7 blocks = 1,792 threads")),
    # §7.6
    Claim("§7.6", "the memory system moves 128-byte segments", 128, "B", 0.0, quantity("coalescing.block_bytes"),
          "block size whose byte accounting best predicts the HBM stride sweep", id="7.6.segment",
          quote=("the memory system services it in 128-byte aligned segments",), precision="exact",
          figure="coalescing"),
    Claim("§7.6", "a misaligned fp32 stream is ~1 amortized", 1.0, "1", 0.2,
          quantity("coalescing.efficiency_misaligned_fp32"), "misaligned over aligned consecutive fp32 bandwidth",
          id="7.6.misaligned", quote=("consecutive fp32, misaligned\t2\t256 / 128\t1/2 for that warp; ~1 "
                                      "amortized over a stream\t≈3,350 GB/s",), precision="~",
          figure="coalescing"),
    Claim("§7.6", "stride-2 fp32 moves 1/2 useful bytes", 0.5, "1", 0.1,
          quantity("coalescing.efficiency_stride2_fp32"), "stride-2 over aligned consecutive fp32 bandwidth",
          id="7.6.stride2", quote=("stride-2 fp32\t2\t256 / 128\t1/2\t~1,675 GB/s",), precision="plain",
          figure="coalescing"),
    Claim("§7.6", "stride-2 fp32 ~1,675 GB/s", 1675e9, "B/s", 0.2,
          calc(lambda v: v["coalescing.efficiency_stride2_fp32"] * v[BW], "coalescing.efficiency_stride2_fp32", BW),
          "recomputed: measured stride-2 efficiency x measured HBM read", id="7.6.stride2_bandwidth",
          kind="recomputed", quote=("stride-2 fp32\t2\t256 / 128\t1/2\t~1,675 GB/s",), precision="~",
          units="GB = 10^9 B", figure="coalescing"),
    Claim("§7.6", "stride-32 fp32 ~105 GB/s effective", 105e9, "B/s", 0.2,
          calc(lambda v: v["coalescing.efficiency_stride32_fp32"] * v[BW], "coalescing.efficiency_stride32_fp32",
               BW), "recomputed: measured stride-32 efficiency x measured HBM read", id="7.6.stride32_bandwidth",
          kind="recomputed", quote=("1/32 → ~105 GB/s effective", "stride-32 fp32 (column read)\t32\t4,096 / "
                                    "128\t1/32\t~105 GB/s"), precision="~", units="GB = 10^9 B",
          mechanism="this GPU moves smaller blocks per strided load and its HBM is faster", figure="coalescing"),
    Claim("§7.6", "stride-64 fp16 moves 1/64 useful bytes", 1 / 64, "1", 0.2,
          quantity("coalescing.efficiency_stride64_fp16"), "stride-64 fp16 over aligned consecutive fp32 bandwidth",
          id="7.6.stride64_fp16", quote=("stride-64 fp16 (column read)\t32\t4,096 / 64\t1/64\t~52 GB/s",
                                         "→ 1/64 (exercise 3)", "useful = 32 × 2 = 64 B → 1/64"),
          precision="plain", mechanism="each lane's 2 bytes cost one fetch block, smaller than 128 B here",
          figure="coalescing"),
    Claim("§7.6", "stride-64 fp16 ~52 GB/s", 52e9, "B/s", 0.2,
          calc(lambda v: v["coalescing.efficiency_stride64_fp16"] * v[BW], "coalescing.efficiency_stride64_fp16",
               BW), "recomputed: measured stride-64 fp16 efficiency x measured HBM read",
          id="7.6.stride64_fp16_bandwidth", kind="recomputed",
          quote=("stride-64 fp16 (column read)\t32\t4,096 / 64\t1/64\t~52 GB/s", "3,350 ÷ 64 ≈ 52 GB/s"),
          precision="~", units="GB = 10^9 B", figure="coalescing"),
    Claim("§7.6", "fully strided decode: 32 x 4.0 = 128 ms per token", 0.128, "s", 0.1,
          calc(lambda v: 13.5e9 / (v["coalescing.efficiency_stride32_fp32"] * v[BW]),
               "coalescing.efficiency_stride32_fp32", BW),
          "recomputed: 13.5 GB / (measured stride-32 efficiency x measured HBM read)", id="7.6.strided_decode",
          kind="recomputed", quote=("32 × 4.0 = 128 ms per token", "4.0 ms → 128 ms"), precision="plain",
          mechanism="stride 32 costs this GPU less than 32x, and its HBM is faster", figure="coalescing"),
    Claim("§7.6", "fully strided decode: about 8 tokens/s", 8, "1/s", 0.2,
          calc(lambda v: v["coalescing.efficiency_stride32_fp32"] * v[BW] / 13.5e9,
               "coalescing.efficiency_stride32_fp32", BW), "recomputed: the inverse of the strided decode time",
          id="7.6.strided_tokens", kind="recomputed", quote=("about 8 tokens/s",), precision="~",
          figure="coalescing"),
    # §7.7
    Claim("Numbers worth memorizing; §7.7", "FP8 tensor cores ≈1,979 TFLOP/s", 1979e12, "FLOP/s", 0.1,
          quantity("tc.fp8.peak_flops"), "wgmma FP8 E4M3 burst peak (tc.fp8.sustained_flops is the power-capped "
          "rate)", id="7.7.fp8_peak", quote=("≈1,979 TFLOP/s", "1,979/3.35"), precision="plain (the table)",
          mechanism="FP8 wgmma does not reach twice the BF16 rate here", figure="compute-peaks"),
    Claim("Numbers worth memorizing; §7.7", "FP8 ridge 591 FLOP/byte", 591, "1", 0.2,
          _ratio_of("tc.fp8.peak_flops", BW), "recomputed: measured FP8 burst peak / measured HBM read",
          id="7.7.fp8_ridge", kind="recomputed", quote=("591 fp8", "1,979 ÷ 3.35 ≈ 591 FLOP/byte"), precision="plain",
          mechanism="this GPU's faster HBM lowers the ridge", figure="roofline"),
    Claim("§7.7", "989 / 132 ≈ 7.5 TFLOP/s of MMA per SM", 7.5e12, "FLOP/s", 0.2,
          calc(lambda v: v[PEAK] / v["sm_count"], PEAK, "sm_count"), "recomputed: measured BF16 burst peak / SMs",
          id="7.7.per_sm_peak", kind="recomputed", quote=("989 ÷ 132 ≈ 7.5 TFLOP/s", "132 SMs × 7.5 TFLOP/s"),
          precision="~", figure="compute-peaks"),
    Claim("§7.7", "n ≈ 885 crosses the ridge", 885, "1", 0.2, calc(lambda v: 3 * v[PEAK] / v[BW], PEAK, BW),
          "recomputed: n/3 = measured BF16 peak / measured HBM read", id="7.7.crossing_n", kind="recomputed",
          quote=("n ≈ 885 crosses 295",), precision="~", mechanism="this GPU's ridge is lower",
          figure="roofline"),
    Claim("§7.7", "a 128-wide tile from HBM keeps tensor cores at 14%", 0.14, "1", 0.1,
          calc(lambda v: 128 / 3 * v[BW] / v[PEAK], BW, PEAK),
          "recomputed: (128/3 FLOP/B) x measured HBM read / measured BF16 peak", id="7.7.tile_idle",
          kind="recomputed", quote=("tensor cores idle at 14%",), precision="plain",
          mechanism="this GPU's ridge is lower, so the same intensity reaches more of its peak", figure="roofline"),
    Claim("§7.7", "1 FLOP/B ops cap at 3.35 TFLOP/s", 3.35e12, "FLOP/s", 0.1, calc(lambda v: v[BW], BW),
          "recomputed: 1 FLOP/B x measured HBM read", id="7.7.elementwise_ceiling", kind="recomputed",
          quote=("1 × 3,350 GB/s = 3.35 TFLOP/s",), precision="plain", figure="roofline"),
    Claim("§7.7", "elementwise ops: 0.19% of FLOPs, ~15x the weight bytes", 0.0019, "1", 0.0, none, "-",
          id="7.7.operator_mix", quote=("0.19% of the FLOPs but ~15× the bytes",
                                        "0.19% of a transformer's FLOPs but ~15× the bytes"),
          untestable=_WORKLOAD),
    Claim("§7.7", "an n x n matmul's intensity is n/3 at bf16", 1 / 3, "1", 0.0, none, "-",
          id="7.7.matmul_intensity", quote=("2n³ FLOPs on 3n²·b bytes",), untestable=_NAIVE_UNTESTABLE),
    # §7.8
    Claim("Numbers worth memorizing; §7.8", "naive matmul: 0.5 FLOP/byte", 0.5, "1", 0.0, none, "-",
          id="7.8.naive_intensity", quote=("0.5 FLOP/byte → 0.17% of peak", "2MNK ÷ 4MNK",
                                           "(2·1·1/(2·2) = 0.5)", "2·M·N·K elements = 4·M·N·K bytes"),
          untestable=_NAIVE_UNTESTABLE + "; no naive-matmul probe in this run"),
    Claim("Numbers worth memorizing; §7.8", "naive matmul at 0.17% of peak", 0.0017, "1", 0.1,
          calc(lambda v: 0.5 * v[BW] / v[PEAK], BW, PEAK),
          "recomputed: 0.5 FLOP/B x measured HBM read / measured BF16 peak", id="7.8.naive_fraction",
          kind="recomputed", quote=("0.5 FLOP/byte → 0.17% of peak", "0.5/295", "0.17% of peak, which is 0.5/295"),
          precision="plain", mechanism="this GPU's ridge is lower", figure="roofline"),
    Claim("§7.8", "naive matmul attains 1.68 TFLOP/s", 1.68e12, "FLOP/s", 0.1, calc(lambda v: 0.5 * v[BW], BW),
          "recomputed: 0.5 FLOP/B x measured HBM read", id="7.8.naive_rate", kind="recomputed",
          quote=("0.5 × 3,350 GB/s = 1.68 TFLOP/s",), precision="plain", figure="roofline"),
    Claim("Numbers worth memorizing; §7.8", "tiled traffic b·MNK·(1/BM + 1/BN), BLOCK/2 FLOP/byte", 0.5, "1", 0.0,
          none, "-", id="7.8.traffic_formula", quote=("b·MNK·(1/BM + 1/BN); BLOCK/2 FLOP/byte",),
          untestable="HBM byte counts: gpuatlas reads no DRAM counter (the roofline figure sets each BLOCK's "
                     "measured rate beside this formula's prediction)"),
    Claim("Numbers worth memorizing; §7.8", "4096³: 137.4 GFLOP", 137.4e9, "FLOP", 0.05 / 137.4,
          calc(lambda v: 2 * N4096), "the lecture's arithmetic: 2 x 4096^3 (no hardware input)",
          id="7.8.flops_4096", kind="recomputed", quote=("137.4 GFLOP", "4096³ on H100", "b·MNK = 137.4 GB"),
          precision="its digits"),
    Claim("Numbers worth memorizing; §7.8", "4096³ compute floor 0.139 ms", 0.139e-3, "s", 0.1,
          calc(lambda v: 2 * N4096 / v[PEAK], PEAK), "recomputed: 2 x 4096^3 / measured BF16 burst peak",
          id="7.8.floor_4096", kind="recomputed", quote=("floor 0.139 ms", "0.139 ms next to it"),
          precision="plain", figure="compute-peaks"),
    Claim("Numbers worth memorizing; §7.8", "4096³ naive 82 ms", 82e-3, "s", 0.1,
          calc(lambda v: 4 * N4096 / v[BW], BW),
          "recomputed: 4 x 4096^3 bytes / measured HBM read (no naive-matmul probe ran to time it)",
          id="7.8.naive_4096", kind="recomputed", quote=("naive 82 ms", "274.9 GB before 82 ms", "vs 82 ms naive"),
          precision="plain", units="GB = 10^9 B", mechanism="this GPU's HBM is faster", figure="roofline"),
    Claim("Numbers worth memorizing; §7.8", "a naive 4096³ matmul takes 82 ms", 82e-3, "s", 0.1,
          quantity("matmul.naive_seconds"), "the naive kernel timed (one thread per output, no tiling, bf16 with "
          "fp32 accumulation)", id="7.8.naive_4096_measured", quote=("naive 82 ms", "vs 82 ms naive"),
          precision="plain", figure="roofline",
          mechanism="82 ms is the zero-reuse accounting; a real naive kernel re-reads rows and columns from L1 and "
                    "L2 (the lecture's own footnote), and this GPU's HBM is faster"),
    Claim("Numbers worth memorizing; §7.8", "4096³ at BLOCK 128: 2.15 GB in 0.64 ms", 0.64e-3, "s", 0.1,
          calc(lambda v: 2 * N4096 * 2 / 128 / v[BW], BW), "recomputed: 2.15 GB / measured HBM read",
          id="7.8.block128_4096", kind="recomputed", quote=("BLOCK=128 → 2.15 GB, 0.64 ms",), precision="plain",
          units="GB = 10^9 B", mechanism="this GPU's HBM is faster", figure="roofline"),
    *_tiles(),
    Claim("§7.8", "BLOCK 128, BLOCK_K 64 double-buffered: 64 KB of 228 KB", 64 / 228, "1", 0.005,
          calc(lambda v: 2 * (128 * 64 + 64 * 128) * 2 / v["smem_per_sm_bytes"], "smem_per_sm_bytes"),
          "driver: 64 KiB of tiles / shared memory per SM", id="7.8.block128_smem", kind="property",
          precision="its digits", units="KB as KiB (the per-SM sizes)",
          quote=("(128·64 + 64·128) elements × 2 bytes = 32 KB; double buffering (loading step k+1 while "
                 "computing step k) doubles it to 64 KB of the 228 KB",)),
    Claim("§7.8", "BLOCK 128's accumulator is a quarter of the register file", 0.25, "1", 0.0,
          calc(lambda v: 128 * 128 * 4 / (4 * v["regs_per_sm"]), "regs_per_sm"),
          "driver: 128^2 x 4 B / (registers per SM x 4 B)", id="7.8.block128_registers", kind="property",
          precision="exact", quote=("128·128·4 B = 64 KB of the 256 KB register file",)),
    Claim("Numbers worth memorizing; §7.8", "BLOCK 256's accumulator is the whole register file", 1.0, "1", 0.0,
          calc(lambda v: 256 * 256 * 4 / (4 * v["regs_per_sm"]), "regs_per_sm"),
          "driver: 256^2 x 4 B / (registers per SM x 4 B)", id="7.8.block256_registers", kind="property",
          precision="exact", quote=("256²·4 B = 256 KB", "256²·4 = 256 KB", "128 KB double-buffered")),
    Claim("§7.8", "reaching the ridge needs BLOCK ≈ 590", 590, "1", 0.2, calc(lambda v: 2 * v[PEAK] / v[BW], PEAK, BW),
          "recomputed: 2 x measured BF16 peak / measured HBM read", id="7.8.ridge_block", kind="recomputed",
          quote=("BLOCK ≈ 590", "590 = 295 ÷ 0.5", "the 590× bracket"), precision="~",
          mechanism="this GPU's ridge is lower", figure="roofline"),
    Claim("§7.8", "BLOCK 590's accumulator: 1.39 MB, 5.3x the register file", 5.3, "1", 0.1,
          calc(lambda v: (2 * v[PEAK] / v[BW]) ** 2 * 4 / (4 * v["regs_per_sm"]), PEAK, BW, "regs_per_sm"),
          "recomputed: (2 x measured ridge)^2 x 4 B / the driver's register file", id="7.8.ridge_registers",
          kind="recomputed", quote=("590²·4 B = 1.39 MB — 5.3× the register file",), precision="plain",
          mechanism="this GPU's lower ridge needs a smaller tile", figure="roofline"),
    Claim("§7.8", "BLOCK 590's double-buffered tiles ≈302 KB", 302e3, "B", 0.2,
          calc(lambda v: 2 * 2 * (2 * v[PEAK] / v[BW]) * 64 * 2, PEAK, BW),
          "recomputed: 2 buffers x (2 x BLOCK x 64) x 2 B at BLOCK = 2 x measured ridge", id="7.8.ridge_smem",
          kind="recomputed", quote=("≈302 KB against 228 KB",), precision="~", units="KB = 10^3 B",
          mechanism="this GPU's lower ridge needs a smaller tile", figure="roofline"),
    Claim("Numbers worth memorizing; §7.8", "square SMEM tiling ceiling 128 x 3,350 ≈ 429 TFLOP/s", 429e12,
          "FLOP/s", 0.1, calc(lambda v: 128 * v[BW], BW), "recomputed: 128 FLOP/B x measured HBM read",
          id="7.8.tiling_ceiling", kind="recomputed", quote=("128 × 3,350 = 429 TFLOP/s", "≈429 TFLOP/s"),
          precision="plain", mechanism="this GPU's HBM is faster", figure="roofline"),
    Claim("§7.8", "well-tuned matmuls exceed 90% of peak", 0.9, "1", 0.0,
          first_of(_ratio_of("matmul.cublas_bf16_flops", "tc.bf16.sustained_flops"),
                   _ratio_of("matmul.cublas_bf16_flops", PEAK)),
          "cuBLAS BF16 8192^3 / the BF16 wgmma rate held under the power limit (the burst peak when the run "
          "has no sustained one)", id="7.8.library_fraction",
          quote=("well-tuned matmuls exceed 90% of peak", "vendor GEMMs exceed 90%", "from 43% toward 90%+"),
          precision="more than 90%", bounds=(0.9, float("inf")), figure="roofline",
          unlike=lambda d, device: "" if "tc.bf16.sustained_flops" in d else (
              "cuBLAS's long launches run at the clock the power limit allows, and this run measured no "
              "sustained wgmma rate to hold them to (only the burst peak)")),
    Claim("§7.8", "register tiling: 8 FLOPs per SMEM element", 8, "1", 0.0,
          calc(lambda v: 2 * 8 * 8 / (8 + 8)), "the lecture's arithmetic: 2 TM TN / (TM + TN) at 8 x 8",
          id="7.8.register_tiling", kind="recomputed", precision="exact",
          quote=("reading TM + TN = 16 SMEM elements per 2·TM·TN = 128 FLOPs — 8 FLOPs per SMEM element",
                 "256 threads, a 128×128 tile → 64 accumulators per thread, an 8×8 micro-tile")),
    Claim("§7.8", "1,024 tiles on 132 SMs: 7 full waves and a tail of 100", 7, "1", 0.0,
          calc(lambda v: _waves(v)[0], "sm_count"), "driver: (4096/128)^2 programs // SMs (the time a ragged "
          "tail costs is not measured: no wave-quantization probe ran)", id="7.8.waves", kind="property",
          precision="exact", quote=("(4096/128)² = 1,024 programs on 132 SMs: 7 full waves of 132",)),
    Claim("§7.8", "a wave is 132 programs, one per SM", 132, "1", 0.0, quantity("waves.programs_per_wave"),
          "the wave size whose step model best fits a BLOCK 128 matmul's time against its program count "
          "(matmul.waves)", id="7.8.wave_size", quote=("7 full waves of 132",), precision="exact",
          figure="wave-quantization",
          mechanism="more than one BLOCK 128 program fits an SM at once here, so a wave is several per SM"),
    Claim("§7.8", "the tail wave has 100 programs while 32 SMs idle", 100, "1", 0.0,
          calc(lambda v: _waves(v)[1], "sm_count"), "driver: (4096/128)^2 programs mod SMs", id="7.8.tail",
          kind="property", precision="exact", quote=("then a tail wave of 100 while 32 SMs idle",
                                                     "with 131 other SMs")),
    # §7.9-7.10
    Claim("§7.9", "BLOCK 16: intensity 8, ≈27 TFLOP/s max", 27e12, "FLOP/s", 0.2, calc(lambda v: 8 * v[BW], BW),
          "recomputed: 8 FLOP/B x measured HBM read", id="7.9.block16", kind="recomputed",
          quote=("Intensity 8, so ≈27 TFLOP/s max",), precision="~", figure="roofline"),
    Claim("§7.10", "one 4096² bf16 traversal is 33.55 MB", 33.55e6, "B", 0.005 / 33.55,
          calc(lambda v: 4096 ** 2 * 2), "the lecture's arithmetic (no hardware input)", id="7.10.traversal",
          kind="recomputed", precision="its digits", units="MB = 10^6 B", quote=("S²·2 = 33.55 MB",)),
    Claim("§7.10", "unfused softmax: 167.8 MB in 50.1 µs", 50.1e-6, "s", 0.1,
          calc(lambda v: 5 * 4096 ** 2 * 2 / v[BW], BW), "recomputed: 5 traversals / measured HBM read",
          id="7.10.unfused_time", kind="recomputed", quote=("5 × 33.55 = 167.8 MB → 50.1 µs", "167.8 → 67.1 MB"),
          precision="plain", units="MB = 10^6 B", mechanism="this GPU's HBM is faster", figure="fused-softmax"),
    Claim("§7.10", "fused softmax: 67.1 MB in 20.0 µs", 20.0e-6, "s", 0.1,
          calc(lambda v: 2 * 4096 ** 2 * 2 / v[BW], BW), "recomputed: 2 traversals / measured HBM read",
          id="7.10.fused_time", kind="recomputed", quote=("2 traversals, 67.1 MB, 20.0 µs",), precision="plain",
          units="MB = 10^6 B", mechanism="this GPU's HBM is faster", figure="fused-softmax"),
    Claim("§7.10", "fused softmax intensity ≈ 1.25 FLOP/byte", 1.25, "1", 0.0, calc(lambda v: 5 / 4),
          "the lecture's arithmetic: 5 ops / 4 bytes (no hardware input)", id="7.10.softmax_intensity",
          kind="recomputed", precision="exact", quote=("intensity ≈ 1.25 FLOP/byte", "Show the 1.25")),
    Claim("§7.10; Exercise 5", "490 launches take 2.45 ms", 2.45e-3, "s", 0.2,
          first_of(quantity("launch.chain_490_s"), calc(lambda v: 490 * v["launch.overhead_s"], "launch.overhead_s")),
          "490 small kernels launched back to back and timed (launch.decode_chain; the same chain as one CUDA "
          "graph is shown beside it); without that probe, 490 x the measured empty-launch overhead",
          id="7.10.launches", kind="recomputed", inputs=("launch.chain_490_graph_s", "launch.graph_overhead_s"),
          quote=("about 490 launches for 2.45 ms of dispatch", "490 × 5 µs = 2.45 ms"), precision="~ (about 490)",
          figure="launch-overhead"),
    Claim("Numbers worth memorizing; §7.10", "an activation round trip: 1.443 GB", 1.443e9, "B",
          0.0005 / 1.443, calc(lambda v: 32768 * 11008 * 2 * 2), "the lecture's arithmetic (no hardware input)",
          id="7.10.activation_bytes", kind="recomputed", precision="its digits", units="GB = 10^9 B",
          quote=("32,768·11,008·2·2 B", "(32,768 tok, 7B up-proj)")),
    Claim("Numbers worth memorizing; §7.10", "an activation round trip: 0.43 ms, x32 layers", 0.43e-3, "s", 0.1,
          calc(lambda v: 32768 * 11008 * 2 * 2 / v[BW], BW), "recomputed: 1.443 GB / measured HBM read",
          id="7.10.activation_time", kind="recomputed", quote=("1.443 GB → 0.43 ms, ×32 layers",),
          precision="plain", mechanism="this GPU's HBM is faster", figure="bandwidth-footprint"),
    # §7.11-7.13
    Claim("Numbers worth memorizing; §7.11", "decode intensity ≈ M at M = 1", 1.0, "1", 0.2,
          calc(lambda v: 2 * 4096 * 4096 / (2 * (4096 + 4096 * 4096 + 4096))),
          "the lecture's arithmetic: 2MNK / (2(MK + KN + MN)) at M = 1, N = K = 4096 (no decode-GEMV probe ran "
          "to time it)", id="7.11.decode_cap", kind="recomputed", precision="~",
          quote=("≈ M (= B) FLOP/byte at bf16, any tiles", "At M = 1 that is ≈1 FLOP/byte", "K = N = 4,096")),
    Claim("§7.11", "a decode GEMM attains ≈ M FLOP/byte against HBM (M = 16)", 16, "1", 0.2,
          quantity("decode.m16_flop_per_hbm_byte"), "FLOP/s of a 16 x 4096 by 4096 x N bf16 GEMM (cuBLAS, "
          "weights past the L2) over the measured HBM read bandwidth", id="7.11.decode_measured",
          quote=("≈ M (= B) FLOP/byte at bf16, any tiles",), precision="~", figure="decode-gemm",
          mechanism="the GEMM does not stream its weights at the full HBM read rate"),
    Claim("§7.4", "batch-1 decode reaches the HBM floor", 1.0, "1", 0.0, _ratio_of(
          "decode.m1_bandwidth_bytes_per_s", BW), "bytes/s of a 1 x 4096 by 4096 x N bf16 GEMM (cuBLAS, weights "
          "past the L2) over the measured HBM read bandwidth", id="7.4.decode_floor_reached", kind="recomputed",
          quote=("So the floor of 4.0 ms is achievable",), precision="achievable: at least 80% of the HBM rate",
          bounds=(0.8, float("inf")), figure="decode-gemm"),
    Claim("§7.11; §7.13", "A100: 2,039 GB/s", 2.039e12, "B/s", 0.1,
          from_reference(lambda v: v["a100-sxm4-80gb:" + BW], "a100-sxm4-80gb:" + BW),
          "ref:a100-sxm4-80gb's measured read stream", id="7.11.a100_bandwidth", kind="reference",
          quote=("2,039 GB/s",), precision="plain", units="GB = 10^9 B",
          unlike="the reference's bandwidth is a measured read stream, the lecture's 2,039 the pins' rate"),
    Claim("§7.13", "A100 to H100: compute 3.2x", 3.2, "1", 0.1,
          from_reference(lambda v: v["h100-sxm:" + PEAK] / v["a100-sxm4-80gb:" + PEAK], "h100-sxm:" + PEAK,
                         "a100-sxm4-80gb:" + PEAK), "ref:h100-sxm over ref:a100-sxm4-80gb dense BF16 peak",
          id="7.13.compute_ratio", kind="reference", quote=("compute 3.2×",), precision="plain"),
    Claim("§7.13", "A100 to H100: bandwidth 1.6x", 1.6, "1", 0.1,
          from_reference(lambda v: v["h100-sxm:" + BW] / v["a100-sxm4-80gb:" + BW], "h100-sxm:" + BW,
                         "a100-sxm4-80gb:" + BW), "ref:h100-sxm over ref:a100-sxm4-80gb measured HBM read",
          id="7.13.bandwidth_ratio", kind="reference", quote=("bandwidth 1.6×",), precision="plain",
          mechanism="the references' measured streams reach different fractions of their pins"),
    Claim("§7.13", "A100 to H100: ridge 1.9x", 1.9, "1", 0.1,
          from_reference(lambda v: (v["h100-sxm:" + PEAK] / v["h100-sxm:" + BW])
                         / (v["a100-sxm4-80gb:" + PEAK] / v["a100-sxm4-80gb:" + BW]), "h100-sxm:" + PEAK,
                         "h100-sxm:" + BW, "a100-sxm4-80gb:" + PEAK, "a100-sxm4-80gb:" + BW),
          "ref: the two references' peak / measured HBM read, H100 over A100", id="7.13.ridge_ratio",
          kind="reference", quote=("ridge 1.9×",), precision="plain",
          mechanism="the references' measured streams reach different fractions of their pins"),
    Claim("§7.11; §7.13", "A100 ridge 153", 153, "1", 0.1,
          from_reference(lambda v: v["a100-sxm4-80gb:" + PEAK] / v["a100-sxm4-80gb:" + BW],
                         "a100-sxm4-80gb:" + PEAK, "a100-sxm4-80gb:" + BW),
          "ref:a100-sxm4-80gb dense BF16 peak / its measured read stream", id="7.13.a100_ridge",
          kind="reference", quote=("312 ÷ 2.039 → 153", "ridge 153"), precision="plain",
          unlike="the reference's bandwidth is a measured read stream, the lecture's 2.039 TB/s the pins' rate"),
    Claim("§7.12", "TPU v1: 65,536 MACs at 700 MHz ≈ 92 TOPS", 92e12, "op/s", 0.01,
          calc(lambda v: 65536 * 2 * 0.7e9), "the paper's inputs", id="7.12.tpu_tops", kind="recomputed",
          quote=("256 × 256 = 65,536 MACs at 700 MHz → 65,536 × 2 × 0.7e9 ≈ 92 TOPS",), precision="~",
          untestable=_TPU),
    Claim("§7.12; §7.13", "TPU v1 ridge ≈ 2,700", 2700, "1", 0.05, calc(lambda v: 92e12 / 34e9),
          "the paper's inputs", id="7.12.tpu_ridge", kind="recomputed", precision="~",
          quote=("92e12 ÷ 34e9 ≈ ~2,700", "92 ÷ 0.034 → ~2,700", "only 34 GB/s of DDR3"), untestable=_TPU),
    Claim("§7.8", "batch-1 decode at 1 FLOP/byte, a 4K prefill at ≈4,100", 4100, "1", 0.0, none, "-",
          id="7.8.workload_intensity", quote=("batch-1 decode sits at exactly 1 FLOP/byte, a 4K prefill at "
                                              "≈4,100",), untestable=_WORKLOAD),
)

#: The first 25 claims' ids, kinds and the lecture's own words for them (keyed by their text).
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
    "L2 \"a few hundred cycles\" (taken as 200-400)": ("7.3.l2_latency", "measured", ("a few hundred cycles",),
                                                      "a few hundred: 200 to 400"),
    "HBM latency ~500 cycles": ("7.3.hbm_latency", "measured", ("~500 cycles", "HBM at ~500 cycles"), "~"),
    "500 cycles at 1.8 GHz is ~278 ns": ("7.3.hbm_latency_ns", "measured", ("500 cycles is ≈ 278 ns",), "≈"),
    "one SM's fair share of HBM is 14.1 B/cycle": ("7.3.hbm_share", "recomputed", ("→ 14.1 B/cycle",), "~"),
    "~0.93 MB in flight saturates HBM": ("7.4.bytes_in_flight", "recomputed", ("~0.93 MB",), "~"),
    "~55 warps per SM, one 128-B load each": ("7.4.warps_needed", "recomputed", (
        "≈ 55 per SM", "~55 warps resident", "64 warps vs ~55 (§7.4)"), "~"),
    "fp32 at stride >= 32 moves 1/32 useful bytes": ("7.6.stride32", "measured", (
        "Coalescing worst case (fp32, stride ≥ 32)", "128 of 4,096 B", "1/32 → ~105 GB/s effective"), "plain"),
    "shared memory moves ~128 B/cycle/SM": ("7.3.smem_bandwidth", "measured", (
        "roughly 128 bytes per cycle per SM",), "~ (the lecture calls it approximate; 10%)"),
    "shared memory has 32 banks": ("7.6.banks", "measured", ("32 banks",), "exact"),
    "staging a fp16 column read through a shared tile recovers 64x": ("ex3.recovery", "measured", (
        "a 64× bandwidth recovery",), "~"),
    "a kernel launch costs ~5 us": ("7.10.launch", "measured", ("at ≈5 µs each", "≈5 µs launch"),
                                     "≈ (50%: a host-side figure)"),
    "dense BF16 tensor cores ~989 TFLOP/s": ("7.7.bf16_peak", "measured", (
        "989 vs ~67 TFLOP/s", "989 TFLOP/s dense BF16", "The flat ceiling, 989 TFLOP/s"), "plain"),
    "FP32 vector ~67 TFLOP/s": ("7.7.fp32_peak", "measured", ("about 67 TFLOP/s", "989 vs ~67 TFLOP/s"), "plain"),
    "tensor vs vector peak ~15x": ("7.7.tensor_over_vector", "recomputed", ("≈ 15×", "~15× the everything-else "
                                                                            "path", "989 vs 67 → 15×"), "plain"),
    "ridge point 295 FLOP/byte (bf16)": ("7.8.ridge", "recomputed", (
        "295 FLOP/byte bf16", "989/3.35", "989 ÷ 3.35 → 295", "The ridge point, 295 FLOP/byte"), "~"),
    "SMEM tiling (BLOCK 128-256) reaches ~43% of peak": ("7.8.tiled_fraction", "measured", (
        "BLOCK ≈ 128–256 → ≈429 TFLOP/s ≈ 43% of peak", "≈ 43% of peak", "register file: 256²·4 B = 256 KB"),
        "~ (25%)"),
    "on-chip total ~114 MB (registers + shared memory + L2)": ("7.3.on_chip", "property", (
        "~114 MB vs 13.5 GB", "33.8 + 30.1 + 50", "33.8 + 30.1 + 50 ≈ 114 MB"), "~ (10%)"),
    "a 7B model's 13.5 GB is 118x the on-chip total": ("7.3.weights_over_on_chip", "property", (
        "→ 118×", "13.5 GB / 114 MB ≈ 118×"), "~ (10%)"),
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


CLAIMS = tuple(_annotate(c) for c in CLAIMS) + LECTURE



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
    if "l2.dram_fetch_bytes" not in d:
        return "each lane's 4 bytes cost a whole fetch block of the memory system, whose size sets the ratio"
    block = d["l2.dram_fetch_bytes"][0]
    return (f"each lane's 4 bytes cost one fetch block from HBM, and this GPU fetches {block:.0f}-byte blocks "
            f"per L2 miss (l2.dram_fetch_bytes, the address-order fill-block chase), not 128-byte segments: "
            f"4/{block:.0f} = "
            f"1/{block / 4:.0f} predicted, measured 1/{1 / d['coalescing.efficiency_stride32_fp32'][0]:.1f}")


def _mechanism(claim: Claim, d: dict, device: dict) -> str:
    return claim.mechanism(d, device) if callable(claim.mechanism) else claim.mechanism


def _inputs(claim: Claim) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*getattr(claim.measure, "inputs", ()), *claim.inputs)))


def _unit_of(name: str) -> str:
    from analysis.quantities import QUANTITIES

    return QUANTITIES.get(name.split(":")[-1], ("",))[0] if "." in name else ""


def _shown(name: str, d: dict, device: dict) -> str:
    """One input of a recomputation, as "name = value" (or "name: not in this run")."""
    if name.startswith("ref:"):
        ref, q = name[4:].split(":")
        value = _reference(ref).get(q)
    else:
        value = d[name][0] if name in d else device.get(name)
    return f"{name} = {fmt_value(float(value), _unit_of(name))}" if value is not None else f"{name}: not in this run"


def tolerance_text(claim: Claim) -> str:
    """The tolerance the lecture's own precision allows, in words."""
    if claim.bounds is not None:
        return claim.precision
    band = "exact" if claim.tolerance == 0 else f"+-{claim.tolerance:.3g}" if claim.tolerance >= 0.01 else \
        f"+-{claim.tolerance:.2%}"
    if 0 < claim.tolerance and claim.tolerance >= 0.01:
        band = f"+-{claim.tolerance:.0%}"
    return f"{band} ({claim.precision})" if claim.precision else band


def group(section: str) -> str:
    """The lecture section a claim belongs to (its first §7.N; the exercises together)."""
    parts = [p.strip() for p in section.split(";")]
    return next((p for p in parts if p.startswith("§7.")), "Exercises" if parts[0].startswith("Exercise")
                else parts[0])


def _order(name: str) -> tuple:
    return (1, int(name[3:])) if name.startswith("§7.") else (0 if name == "Numbers worth memorizing" else 2, 0)


def _fmt(value: float, claim: Claim) -> str:
    """A value as the lecture writes it: sizes in decimal KB/MB/GB unless the claim reads KB as KiB."""
    if claim.unit != "B" or claim.units.startswith("KB as KiB") or not math.isfinite(value):
        return fmt_value(value, claim.unit)
    for prefix, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}"
    return f"{value:.4g} B"


def judge(derived: pd.DataFrame, device: dict) -> pd.DataFrame:
    """One row per claim, grouped by section: the lecture's words and value, the unit convention and tolerance,
    what tests it (with a recomputation's inputs), the measured value with CI, ratio, verdict and its reason, and
    the figure that shows a deviation."""
    d = {q: (v, lo, hi) for q, v, lo, hi in derived[["quantity", "value", "ci_low", "ci_high"]].itertuples(index=False)}
    rows = []
    for claim in CLAIMS:
        row = {"section": group(claim.section), "id": claim.id, "kind": claim.kind, "claim": claim.text,
               "quote": " | ".join(q.replace("\t", " / ") for q in claim.quote),
               "lecture": _fmt(claim.value, claim), "units": claim.units,
               "tolerance": tolerance_text(claim), "tested by": claim.tests,
               "inputs": "; ".join(_shown(n, d, device) for n in _inputs(claim))
               if claim.kind in ("recomputed", "reference") else "", "figure": ""}
        measured = claim.measure(d, device)
        if claim.untestable:
            arithmetic = "" if measured is None else (
                f"; the lecture's arithmetic gives {_fmt(measured[0], claim)}")
            rows.append({**row, "measured": "-" if measured is None else _fmt(measured[0], claim),
                         "ratio": "-", "verdict": "cannot be tested",
                         "reason": f"cannot be tested here: {claim.untestable}{arithmetic}"})
            continue
        if measured is None:
            missing = [n for n in _inputs(claim) if n not in d and device.get(n) is None]
            reason = (f"not measured in this run: needs {', '.join(missing)}" if missing else
                      f"not in this run: {claim.tests}")
            rows.append({**row, "measured": "-", "ratio": "-", "verdict": "not measured", "reason": reason})
            continue
        value, low, high = measured
        ratio = value / claim.value
        if claim.bounds is not None:
            holds = claim.bounds[0] <= value <= claim.bounds[1]
        else:
            holds = abs(ratio - 1) <= claim.tolerance + 1e-12
        ci = "" if low == high == value else f" [{_fmt(low, claim)}, {_fmt(high, claim)}]"
        row = {**row, "measured": _fmt(value, claim) + ci, "ratio": f"{ratio:.3g}"}
        unlike = claim.unlike(d, device) if callable(claim.unlike) else claim.unlike
        if unlike:
            rows.append({**row, "verdict": "cannot be tested",
                         "reason": f"not like for like ({ratio:.2f}x the lecture's figure): {unlike}"})
            continue
        reason = (("matches" if claim.tolerance == 0 and claim.bounds is None else
                   f"within the lecture's precision ({tolerance_text(claim)})")
                  if holds else
                  f"{ratio:.2f}x the lecture's figure"
                  + (f": {_mechanism(claim, d, device)}" if claim.mechanism else ""))
        rows.append({**row, "verdict": "holds" if holds else "deviates", "reason": reason,
                     "figure": "" if holds else _where_shown(claim)})
    table = pd.DataFrame(rows)
    return table.iloc[sorted(range(len(table)), key=lambda i: _order(table["section"].iat[i]))].reset_index(drop=True)


def _where_shown(claim: Claim) -> str:
    """Where the report shows a deviation: its figure's file, else the table that holds its inputs."""
    if claim.figure:
        return f"{claim.figure}.svg"
    if claim.kind == "property":
        return "Device, clocks and software (the driver's properties)"
    if claim.kind == "reference":
        return "the ref: datasets (gpuatlas compare)"
    return "the lecture's own arithmetic (no hardware input)"


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per section (in the lecture's order), how many claims hold, deviate, cannot be tested or were not
    measured in this run; a last row totals them."""
    verdicts = ("holds", "deviates", "cannot be tested", "not measured")
    counts = [(name, *(int((part["verdict"] == v).sum()) for v in verdicts))
              for name, part in table.groupby("section", sort=False)]
    counts.append(("all", *(int((table["verdict"] == v).sum()) for v in verdicts)))
    return pd.DataFrame(counts, columns=["section", *verdicts])
