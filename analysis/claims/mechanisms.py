"""Why this GPU differs from the lecture's part, said from this run's measurements and its driver's
properties (run.json's device block), never from what one GPU happens to be: each sentence sets a measured or
driver figure beside the lecture's own, so its direction ("faster", "lower") is whatever the data says.  The
memory is named by its bus: HBM where the bus holds at least one HBM stack's 1,024 bits, plain device memory
otherwise; nothing else about the memory (its generation) is in the run, so nothing else is said.
"""
from __future__ import annotations

from typing import Callable

from gpuatlas.analysis.claims.model import BW, CLOCK, PEAK
from gpuatlas.analysis.units import fmt_value

#: Bits of one HBM stack's interface: no GDDR board has a bus this wide.
HBM_STACK_BITS = 1024
#: The lecture's own figures for its part (an H100 SXM), as it states them.
LECTURE_PART = "the lecture's H100 SXM"
LECTURE_BW, LECTURE_RIDGE, LECTURE_FP8_RIDGE, LECTURE_LATENCY_S = 3.35e12, 295.0, 591.0, 278e-9
LECTURE_SMS, LECTURE_L2, LECTURE_MEMORY, LECTURE_CLOCK = 132, 50e6, 80e9, 1.8e9


def memory(device: dict) -> str:
    """The memory's name as the run can tell it: HBM from a bus of HBM stacks, else device memory."""
    bits = device.get("memory_bus_bits")
    return "HBM" if bits is not None and bits >= HBM_STACK_BITS else "device memory"


def in_words(text: str, device: dict) -> str:
    """One of gpuatlas's own sentences about the memory, for this device (the lecture's words stay as quoted)."""
    name = memory(device)
    return text if name == "HBM" else text.replace("HBM", name)


def _x(value: float, lecture: float) -> str:
    return f"{value / lecture:.2f}x"


def versus(label: str, value: Callable[[dict, dict], float], lecture: float, unit: str) -> Callable:
    """A mechanism: this GPU's ``label`` (``value`` of the run and device) beside the lecture's figure."""
    def say(d: dict, device: dict) -> str:
        mine = value(d, device)
        return (f"this GPU's {in_words(label, device)} is {fmt_value(mine, unit)}, {_x(mine, lecture)} "
                f"the lecture's {fmt_value(lecture, unit)}")

    return say


def both(*parts: Callable) -> Callable:
    """Several mechanisms in one sentence."""
    return lambda d, device: "; ".join(part(d, device) for part in parts)


bandwidth = versus("HBM read bandwidth", lambda d, dev: d[BW][0], LECTURE_BW, "B/s")
ridge = versus("ridge (BF16 tensor peak / HBM read)", lambda d, dev: d[PEAK][0] / d[BW][0], LECTURE_RIDGE,
               "FLOP/B")
fp8_ridge = versus("FP8 ridge (FP8 tensor peak / HBM read)", lambda d, dev: d["tc.fp8.peak_flops"][0] / d[BW][0],
                   LECTURE_FP8_RIDGE, "FLOP/B")
per_sm_clock = versus("HBM read per SM per clock", lambda d, dev: d[BW][0] / d[CLOCK][0] / dev["sm_count"],
                      LECTURE_BW / LECTURE_CLOCK / LECTURE_SMS, "B/cycle")


def per_sm(d: dict, device: dict) -> str:
    """The HBM share of one SM: bandwidth over this GPU's SMs, beside the lecture's 3,350 GB/s over 132."""
    return (f"{bandwidth(d, device)}, shared by {device['sm_count']:.0f} SMs (the lecture's by "
            f"{LECTURE_SMS})")


def chase(d: dict, device: dict) -> str:
    """The chase's shortfall: bandwidth and latency, each beside the lecture's."""
    latency = d["dram.latency_ns"][0]
    return (f"{bandwidth(d, device)}, and its chase latency {fmt_value(latency, 's')}, "
            f"{_x(latency, LECTURE_LATENCY_S)} the lecture's {fmt_value(LECTURE_LATENCY_S, 's')}")


def clock(d: dict, device: dict) -> str:
    """The clock under load beside the driver's maximum: whether the GPU held it is what the data says."""
    measured, top = d[CLOCK][0], device.get("sm_clock_max_hz")
    held = "" if not top else f", {measured / top:.0%} of its {fmt_value(top, 'Hz')} maximum (the driver's)"
    return f"with every SM busy this GPU ran at {fmt_value(measured, 'Hz')}{held}"


def capacity(d: dict, device: dict) -> str:
    return (f"this GPU carries {device['total_memory_bytes'] / (1 << 30):.0f} GiB of {in_words('HBM', device)}, "
            f"against the lecture's {LECTURE_MEMORY / 1e9:.0f} GB")


def pins(d: dict, device: dict) -> str:
    rate = device["memory_clock_hz"] * device["memory_bus_bits"] / 8 * 2
    return (f"this GPU's {in_words('HBM', device)} bus is {device['memory_bus_bits']:.0f} bits at "
            f"{fmt_value(device['memory_clock_hz'], 'Hz')} (double data rate), "
            f"{fmt_value(rate, 'B/s')}, {_x(rate, LECTURE_BW)} the lecture's")


def on_chip(d: dict, device: dict) -> str:
    return (f"this GPU has {device['sm_count']:.0f} SMs and a {device['l2_bytes'] / (1 << 20):.0f} MiB L2, "
            f"against the lecture's {LECTURE_SMS} SMs and {LECTURE_L2 / 1e6:.0f} MB")


def fetch_block(d: dict, device: dict) -> str:
    """What a strided lane costs: this run's HBM fetch block where it measured one."""
    if "l2.dram_fetch_bytes" not in d:
        return "each lane's bytes cost a whole fetch block of the memory system, whose size sets the ratio"
    return (f"each lane's bytes cost one fetch block, and this GPU fetches {d['l2.dram_fetch_bytes'][0]:.0f}-byte "
            f"blocks per L2 miss (l2.dram_fetch_bytes), against the lecture's 128-byte segments")


def fp8_over_bf16(d: dict, device: dict) -> str:
    return (f"FP8 reaches {d['tc.fp8.peak_flops'][0] / d[PEAK][0]:.2f}x the BF16 tensor peak here, "
            "against the lecture's 2x")


def waves(d: dict, device: dict) -> str:
    if "waves.programs_per_wave" not in d:
        return ("a wave is the programs that fit every SM at once; this run's time steps did not decide how many "
                "(waves.programs_per_wave is undecided: its note names the sizes that fit)")
    wave = d["waves.programs_per_wave"][0]
    return (f"the fitted wave is {wave:.0f} BLOCK 128 programs, {wave / device['sm_count']:.2g} per SM of this "
            f"GPU's {device['sm_count']:.0f}: that many fit an SM at once")


def smem_over_memory(d: dict, device: dict) -> str:
    return (f"the shared side is {fmt_value(d['smem.bandwidth_bytes_per_clk_sm'][0], 'B/cycle')} per SM; "
            f"{bandwidth(d, device)}")


def hbm_latency(d: dict, device: dict) -> str:
    """Why a chase beyond the L2 is not ~500 cycles: which L2 partition homes each address, when measured."""
    text = ("a random dependent chase beyond the L2 pays the whole miss path (the L2, then HBM) and averages "
            "misses to addresses that either L2 partition homes")
    if "dram.near_latency_cycles" in d and "dram.far_latency_cycles" in d:
        text += (f": recorded access by access, a miss homed by the near partition takes "
                 f"{d['dram.near_latency_cycles'][0]:.0f} cycles and one homed by the far partition "
                 f"{d['dram.far_latency_cycles'][0]:.0f} ({d['dram.near_latency_cycles'][0] / 500:.2f}x and "
                 f"{d['dram.far_latency_cycles'][0] / 500:.2f}x the lecture's ~500)")
    return in_words(text, device)


def strided(d: dict, device: dict) -> str:
    """Why stride-32 fp32 is not 1/32 here, from the run's own fetch-block measurement when it has one."""
    if "l2.dram_fetch_bytes" not in d:
        return "each lane's 4 bytes cost a whole fetch block of the memory system, whose size sets the ratio"
    block = d["l2.dram_fetch_bytes"][0]
    return in_words(
        f"each lane's 4 bytes cost one fetch block from HBM, and this GPU fetches {block:.0f}-byte blocks per L2 "
        f"miss (l2.dram_fetch_bytes, the address-order fill-block chase), not 128-byte segments: "
        f"4/{block:.0f} = 1/{block / 4:.0f} predicted, measured "
        f"1/{1 / d['coalescing.efficiency_stride32_fp32'][0]:.1f}", device)
