"""The instruction caches (generated CUDA source): one warp runs a loop whose body is N independent FFMAs of
straight-line code, N from 64 to 32768 (1 KiB to 512 KiB of 16-byte instructions), and the cycles per
instruction of every trip after the first are timed.

While the loop fits an instruction cache, every trip fetches from it and the warp issues at its own rate (eight
FFMA chains, each instruction's operand written eight instructions earlier, so no dependency stalls it); once
the loop outgrows a level, a cyclic walk through more lines than that level holds misses it on every line of
every trip, and the cycles per instruction step up by that level's miss cost per instruction.  The knees of
the staircase over the loop's size are the levels' capacities.  Instruction-cache sizes are not among the
device's properties: the sweep spans 1 KiB to 512 KiB, four times past the largest published level (Volta's
128 KiB L1 instruction cache, Jia et al. 2018).  Each size is its own kernel, and compiling it costs time in
proportion to its code, so the top of the sweep sets the probe's time.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.kit.samplers import STRIDE_WARMUP_S
from gpuatlas.probes.registry import geom, probe

INSTRUCTION_BYTES = 16  # every SASS instruction since Volta
#: Instructions a trip runs besides the FFMAs (the trip count's compare and add, the branch, the predicated clock
#: read): 9 on sm_90, 7 to 11 on the other targets (the CPU tests assert both), so at most 2 per trip are
#: miscounted: 3% of the smallest loop's, under 1% from 4 KiB on.
LOOP_INSTRUCTIONS = 9
CHAINS = 8  # independent FFMA chains: FFMA's latency (4 cycles) is covered at one instruction per cycle
PER_ASM = 64  # FFMAs per inline-asm statement (one asm per block keeps the front end's work linear in N)
LOWEST, HIGHEST = 1 << 10, 1 << 19
#: Instructions a launch executes, about (trips x N): 2 ms at one instruction per cycle, millions of cycles
#: against clock64's single-cycle count and the few cycles of reading it.
INSTRUCTIONS_PER_LAUNCH = 1 << 22
MIN_TRIPS = 4


def code_sizes(device: dict, per_octave: int = 4) -> list[int]:
    """Loop bodies of 1 KiB to 512 KiB, ``per_octave`` per doubling, whole instructions."""
    return geom(LOWEST, HIGHEST, per_octave=per_octave, align=INSTRUCTION_BYTES)


def loop_source(instructions: int) -> str:
    """CUDA source of ``icache_loop``: ``instructions`` FFMAs in CHAINS independent chains, inline PTX so the
    compiler neither folds nor reorders them, inside a loop that is not unrolled.  The clock starts at the
    second trip (the first brings the code in) and stops after the last; the chains' sum goes to ``sink``."""
    from gpuatlas.probes.kit.cuda import source

    ops = ", ".join(f'"+f"(a{c})' for c in range(CHAINS))
    statements = []
    for start in range(0, instructions, PER_ASM):
        text = "".join(f"fma.rn.f32 %{(start + i) % CHAINS}, %{(start + i) % CHAINS}, %{CHAINS}, %{CHAINS + 1};\\n\\t"
                       for i in range(min(PER_ASM, instructions - start)))
        statements.append(f'        asm volatile("{text}" : {ops} : "f"(x), "f"(y));')
    declare = " ".join(f"float a{c} = seed + {c}.0f;" for c in range(CHAINS))
    total = " + ".join(f"a{c}" for c in range(CHAINS))
    body = "\n".join(statements)
    return f"""{source("common.cuh")}
extern "C" __global__ void icache_loop(long long trips, float x, float y, float seed, unsigned long long* out,
                                       float* sink) {{
    {declare}
    unsigned long long c0 = 0, t0 = 0;
#pragma unroll 1
    for (long long t = 0; t < trips; ++t) {{
        if (t == 1) {{
            t0 = globaltimer_fenced();
            c0 = clock64_fenced();
        }}
{body}
    }}
    const unsigned long long c1 = clock64_fenced();
    const unsigned long long t1 = globaltimer_fenced();
    out[0] = c1 - c0;
    out[1] = t1 - t0;
    sink[threadIdx.x] = {total};
}}
"""


#: The program name of every loop's source (in NVRTC's messages and the cubin cache's file names).
SOURCE_NAME = "icache_loop.cu"


@functools.lru_cache(maxsize=None)
def loop_kernel(instructions: int):
    from gpuatlas.probes.kit.cuda import compiled

    return compiled(loop_source(instructions), SOURCE_NAME).get_function("icache_loop")


def kernel_sources(configs: list[dict]) -> list[tuple[str, str]]:
    """``(source, name)`` of the loop each config runs, largest first: what a run's compile workers build into
    the cubin cache before this probe needs it (compiling the largest takes seconds)."""
    sizes = sorted({c["code_bytes"] // INSTRUCTION_BYTES for c in configs}, reverse=True)
    return [(loop_source(n), SOURCE_NAME) for n in sizes]


def trips_for(instructions: int) -> int:
    return max(MIN_TRIPS, INSTRUCTIONS_PER_LAUNCH // instructions)


#: The FFMAs' operands: x just below 1 and a small y keep every chain finite and normal for any trip count.
X, Y, SEED = 0.999, 0.001, 1.0


@probe("geometry.icache",
       sweeps={"quick": lambda d: {"code_bytes": code_sizes(d, 2)}, "full": lambda d: {"code_bytes": code_sizes(d)}},
       axes={"code_bytes": "bytes of straight-line FFMAs in the loop body, 1 KiB..512 KiB (4 per octave; quick: 2)"},
       quantities=("icache.l0.cycles_per_instruction", "icache.l0.capacity_bytes",
                   "icache.l0.miss_cycles_per_instruction", "icache.l1.capacity_bytes",
                   "icache.l1.miss_cycles_per_instruction"))
def geometry_icache(ctx, code_bytes: int) -> list[Sample]:
    """Cycles per instruction (FFMAs and the loop's own) of one warp looping over ``code_bytes`` of
    independent FFMAs: the instruction caches' staircase."""
    import cupy

    if code_bytes % INSTRUCTION_BYTES or not LOWEST <= code_bytes <= HIGHEST:
        raise ValueError(f"code_bytes={code_bytes} must be a multiple of {INSTRUCTION_BYTES} in {LOWEST}..{HIGHEST}")
    instructions = code_bytes // INSTRUCTION_BYTES
    trips = trips_for(instructions)
    loop = loop_kernel(instructions)
    out = cupy.zeros(2, dtype=cupy.uint64)
    sink = cupy.zeros(32, dtype=cupy.float32)
    timed = (trips - 1) * (instructions + LOOP_INSTRUCTIONS)

    def sample(repeat: int) -> list[Sample]:
        loop((1,), (32,), (np.int64(trips), np.float32(X), np.float32(Y), np.float32(SEED), out, sink))
        cycles, ns = (float(v) for v in out.get())
        if not np.isfinite(sink.get()).all():
            raise RuntimeError(f"icache loop of {instructions} FFMAs: a chain left the finite numbers")
        hz = cycles / ns * 1e9
        return [Sample("cycles_per_instruction", cycles / timed, "cycles", repeat, hz, "clock64",
                       ctx.throttle_flag(hz))]

    # Every launch runs a first, untimed trip that brings the code in, and cycles count on the SM's own clock:
    # the short warm-up of the other long sweeps.
    budget = dataclasses.replace(ctx.budget, warmup_s=min(ctx.budget.warmup_s, STRIDE_WARMUP_S))
    return repeat_until_stable(sample, "cycles_per_instruction", budget)
