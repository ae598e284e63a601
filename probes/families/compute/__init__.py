"""Compute peaks of the vector units and warp-level mma.sync (CuPy RawModule, compute.cu), and the tensor-core
accounting, operands and checks the wgmma probe (wgmma.py) shares.

* ``compute.vector`` -- FP32 FFMA, FP64 DFMA, FP16x2 HFMA2 and INT32 IMAD throughput: 8 independent chains
  per thread, every SM filled with the blocks the driver grants.  An FMA is 2 FLOP, an HFMA2 4 FLOP (two
  fp16 lanes); an IMAD is counted as 2 integer ops (multiply and add), like an FMA.
* ``compute.latency`` -- cycles per dependent FP32 FMA (one warp, one chain, clock64).
* ``compute.mma_sync`` -- warp-level mma.sync: m16n8k16 BF16 and FP16, m16n8k8 TF32, m16n8k32 E4M3, all
  accumulating in FP32, operands in registers, 8 independent accumulators per warp.  sm_90 has no FP8
  mma.sync: ptxas unpacks E4M3 to FP16 and issues two FP16 HMMAs and FADDs per m16n8k32, and the e4m3 rate
  measures that (FLOP counted as the instruction defines them).

A dense m x n x k matrix product is 2 m n k FLOP.  Every launch is timed with CUDA events and carries the
SM clock it ran at (clock64 over %globaltimer in thread 0 of every block, the median over blocks), so
FLOP/clock/SM is the FLOP rate over SMs and that clock.  A rate above the bounds below is flagged
``invalid``; a vector unit's clock below the throttle threshold ``throttled`` (tensor-core probes run at
the clock the power limit allows, which is recorded, not flagged).  Operands are random and never zero;
every result is stored and checked on the host (see each kernel file's header).  Grids come from the
device's SM count and the driver's occupancy for each kernel, never from a GPU model.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import Sample, calibrate, repeat_until_stable
from gpuatlas.probes.kit.samplers import event_samples, kernel_clock_hz
from gpuatlas.probes.registry import probe

LANES = 32
#: compute.cu's constants.
VEC_THREADS, CHAINS, UNROLL, LATENCY_UNROLL = 256, 8, 64, 64
MMA_THREADS, MMA_ACC = 256, 8

#: op -> (kernel, work per chain step, unit of work).  An FMA is 2 FLOP; HFMA2 is two fp16 FMAs, 4 FLOP;
#: an IMAD is a multiply and an add, counted as 2 integer ops.
VECTOR_OPS = {"fp32": ("fp32_fma", 2, "FLOP"), "fp64": ("fp64_fma", 2, "FLOP"),
              "fp16x2": ("fp16x2_hfma2", 4, "FLOP"), "int32": ("int32_imad", 2, "op")}
TC_DTYPES = ("bf16", "fp16", "tf32", "e4m3")
#: FP8 (e4m3) mma.sync exists from compute capability 8.9 on (compute.cu leaves its kernel out below).
FP8_MMA_CC = (8, 9)
#: dtype -> (element bytes, mma.sync K, wgmma K): K x element bytes is 32 for every wgmma shape.
TC_SHAPES = {"bf16": (2, 16, 16), "fp16": (2, 16, 16), "tf32": (4, 8, 8), "e4m3": (1, 32, 32)}
MMA_M, MMA_N = 16, 8

#: Validity.  An SM has four sub-partitions, each issuing at most one warp instruction per clock, and a
#: vector instruction does one operation per lane: at most 4 x 32 ops per clock per SM, times the FLOP (or
#: integer ops) per lane-op; CLOCK_SLACK covers the measured clock's jitter.
SUBPARTITIONS, CLOCK_SLACK = 4, 1.05
#: No NVIDIA tensor core so far completes more than 1024 dense 16-bit FMAs per clock per sub-partition
#: (Hopper's: 512); narrower inputs go proportionally faster (8-bit: twice), TF32 half as fast.
TC_FMA_PER_CLK_SUBPARTITION_16BIT = 1024
#: A launch lasts about LAUNCH_S; a sample (several launches) at least SAMPLE_S.
LAUNCH_S, SAMPLE_S = 2e-3, 4e-3
LATENCY_TRIPS = 4096
MAX_TRIPS = 2**31 - 1
#: Tolerances of the host checks: floating-point chains against their fixed point b / (1 - a), by type.
CHAIN_RTOL = {"fp32": 1e-4, "fp64": 1e-9, "fp16x2": 3e-2}


# -- accounting and bounds (pure: the CPU tests check them) ----------------------------------------------------

def vector_work_per_launch(op: str, threads: int, trips: int) -> int:
    """FLOP (integer ops for int32) of one launch: every thread's CHAINS chains step UNROLL times a trip."""
    return threads * CHAINS * UNROLL * trips * VECTOR_OPS[op][1]


def vector_bound_per_clk_sm(op: str) -> float:
    """Issue-limited ops per clock per SM: four warp instructions of 32 lanes, with clock slack."""
    return SUBPARTITIONS * LANES * VECTOR_OPS[op][1] * CLOCK_SLACK


def mma_flop(dtype: str) -> int:
    """FLOP of one mma.sync: 2 x 16 x 8 x K."""
    return 2 * MMA_M * MMA_N * TC_SHAPES[dtype][1]


def tensor_bound_per_clk_sm(dtype: str) -> float:
    """Largest dense tensor FLOP per clock per SM any tensor core could reach (see the constant's note)."""
    return SUBPARTITIONS * TC_FMA_PER_CLK_SUBPARTITION_16BIT * 2 * 2 / TC_SHAPES[dtype][0] * CLOCK_SLACK


def affine_power(a: int, b: int, n: int, modulus: int = 2**32) -> tuple[int, int]:
    """(A, B) with x -> A x + B equal to n steps of x -> a x + b (mod ``modulus``), by repeated squaring."""
    result, power = (1, 0), (a % modulus, b % modulus)
    while n:
        if n & 1:  # result after power: x -> pa (ra x + rb) + pb
            result = (power[0] * result[0] % modulus, (power[0] * result[1] + power[1]) % modulus)
        power = (power[0] * power[0] % modulus, (power[0] * power[1] + power[1]) % modulus)
        n >>= 1
    return result


def affine_chain(x0: np.ndarray, a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """x after n steps of x <- a x + b, in float64 (closed form; |a| < 1 so a^n may underflow to 0)."""
    an = np.power(a.astype(np.float64), n)
    return an * x0 + b * (1 - an) / (1 - a)


# -- operand data -------------------------------------------------------------------------------------------

def _signed_magnitudes(rng: np.random.Generator, size, low: float = 0.25, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, size) * rng.choice([-1.0, 1.0], size)


def e4m3_value(code: np.ndarray) -> np.ndarray:
    """The value of each E4M3 byte (1 sign, 4 exponent bits biased by 7, 3 mantissa bits; S.1111.111 NaN)."""
    code = np.asarray(code, dtype=np.int64)
    sign = np.where(code & 0x80, -1.0, 1.0)
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    value = np.where(exponent == 0, mantissa / 8 * 2.0**-6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    return np.where((code & 0x7F) == 0x7F, np.nan, sign * value)


def random_operand(rng: np.random.Generator, dtype: str, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes, values)``: a random row-major matrix of ``dtype`` with no zero, its raw bytes (uint8, rows
    contiguous) and its exact values (float64) as the tensor core sees them."""
    if dtype == "e4m3":
        codes = np.arange(256)
        values = e4m3_value(codes)
        usable = codes[np.isfinite(values) & (np.abs(values) >= 0.25) & (np.abs(values) <= 4)]
        chosen = rng.choice(usable, size=shape).astype(np.uint8)
        return chosen.reshape(shape[0], -1), e4m3_value(chosen)
    floats = _signed_magnitudes(rng, shape).astype(np.float32)
    if dtype == "fp16":
        halves = floats.astype(np.float16)
        return halves.view(np.uint8).reshape(shape[0], -1), halves.astype(np.float64)
    bits = floats.view(np.uint32)
    if dtype == "bf16":  # the top 16 bits of a float32 are a bf16
        top = (bits >> 16).astype(np.uint16)
        return top.view(np.uint8).reshape(shape[0], -1), (top.astype(np.uint32) << 16).view(np.float32).astype(
            np.float64)
    if dtype == "tf32":  # a float32 with the 13 low mantissa bits clear is exactly a tf32
        exact = (bits & np.uint32(0xFFFFE000)).view(np.float32)
        return exact.view(np.uint8).reshape(shape[0], -1), exact.astype(np.float64)
    raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(TC_DTYPES)}")


# -- the GPU side ---------------------------------------------------------------------------------------------

def _kernel(name: str, arch: str | None = None):
    from gpuatlas.probes.kit.cuda import kernel

    return kernel("compute.cu", name, arch)


def measure_rate(ctx, launch, clocks, check, work_per_launch: float, unit: str, bound_per_clk: float,
             power_limited: bool = False) -> list[Sample]:
    """Event-time ``launch`` until stable: ``per_clk_sm`` (work / clock / SM at the launch's own clock, the
    primary metric) and ``throughput`` (work / s); ``check()`` runs after every sample.  ``power_limited``:
    tensor-core work, whose lower clock is its sustained state, not a throttle (Context.throttle_flag)."""
    sms = ctx.device["sm_count"]

    def after(seconds: float, repeat: int) -> list[Sample]:
        hz = kernel_clock_hz(clocks.get())
        check()
        rate = work_per_launch / seconds
        per_clk = rate / sms / hz
        flag = "invalid" if per_clk > bound_per_clk else ctx.throttle_flag(hz, power_limited)
        return [Sample("per_clk_sm", per_clk, f"{unit}/cycle", repeat, hz, "cuda_event", flag),
                Sample("throughput", rate, f"{unit}/s", repeat, hz, "cuda_event", flag)]

    return event_samples(ctx, launch, after, "per_clk_sm", sample_s=SAMPLE_S)


def occupancy_sample(blocks: int, ctx, metric: str, per_block: int) -> Sample:
    """The resident warps (or warpgroups) per SM the grid ran with, recorded beside the rates."""
    return Sample(metric, blocks // ctx.device["sm_count"] * per_block, "1", 0, None, "config")


def _vector_operands(rng: np.random.Generator, op: str, count: int):
    """Random initial values and step constants (a, b) for ``count`` chains, as the kernel takes them, and
    the host's expected result of n steps: ``(init, a, b, expect(n) -> array of init's dtype/shape)``."""
    if op == "int32":
        init = rng.integers(1, 2**32, count, dtype=np.uint64).astype(np.uint32)
        a = int(rng.integers(0, 2**31)) * 2 + 1  # odd: the map stays a bijection, chains never collapse
        b = int(rng.integers(1, 2**32))

        def expect(n: int) -> np.ndarray:
            big_a, big_b = affine_power(a, b, n)
            return ((init.astype(np.uint64) * np.uint64(big_a) + np.uint64(big_b)) & np.uint64(0xFFFFFFFF)).astype(
                np.uint32)
        return init, np.uint32(a), np.uint32(b), expect
    a_val, b_val = rng.uniform(0.5, 0.9, 2), rng.uniform(0.25, 1.0, 2)
    if op == "fp16x2":
        init = rng.uniform(-1, 1, 2 * count).astype(np.float16)
        a16, b16 = a_val.astype(np.float16), b_val.astype(np.float16)

        def expect(n: int) -> np.ndarray:  # one row of two fp16 lanes per 32-bit word, low lane first
            lanes = np.arange(init.size) % 2
            return affine_chain(init.astype(np.float64), a16.astype(np.float64)[lanes],
                                b16.astype(np.float64)[lanes], n).reshape(-1, 2)
        return init.view(np.uint32), a16.view(np.uint32)[0], b16.view(np.uint32)[0], expect
    ftype = np.float32 if op == "fp32" else np.float64
    init = rng.uniform(-1, 1, count).astype(ftype)
    a, b = ftype(a_val[0]), ftype(b_val[0])
    return init, a, b, lambda n: affine_chain(init.astype(np.float64), np.float64(a), np.float64(b), n)


def _check_chains(op: str, got: np.ndarray, want: np.ndarray, what: str) -> None:
    if op == "int32":
        bad = np.count_nonzero(got != want)
    else:
        values = (got.view(np.float16).reshape(-1, 2) if op == "fp16x2" else got).astype(np.float64)
        bad = np.count_nonzero(~np.isclose(values, want, rtol=CHAIN_RTOL[op], atol=0))
    if bad:
        raise RuntimeError(f"{what}: {bad} of {want.size} chain results differ from the host's recomputation")


@probe("compute.vector",
       sweeps={"quick": lambda d: {"op": list(VECTOR_OPS)}, "full": lambda d: {"op": list(VECTOR_OPS)}},
       axes={"op": "fp32 (FFMA), fp64 (DFMA), fp16x2 (HFMA2, two fp16 lanes) or int32 (IMAD, 2 ops)"},
       quantities=("fp32.peak_flops", "fp64.peak_flops", "fp16.peak_flops", "int32.peak_ops",
                   "fp32.flop_per_clk_sm"),
       kernels=("compute.cu",))
def compute_vector(ctx, op: str) -> list[Sample]:
    """Vector-unit throughput: FLOP (or integer ops) per clock per SM and per second, every SM full."""
    import cupy

    if op not in VECTOR_OPS:
        raise ValueError(f"unknown op {op!r}: choose one of {', '.join(VECTOR_OPS)}")
    name, _, unit = VECTOR_OPS[op]
    func = _kernel(name)
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, VEC_THREADS)
    threads = blocks * VEC_THREADS
    init_host, a, b, expect = _vector_operands(ctx.rng(1, list(VECTOR_OPS).index(op)), op, threads * CHAINS)
    init = cupy.asarray(init_host)
    out = cupy.empty_like(init)
    clocks = cupy.zeros(2 * blocks, dtype=cupy.uint64)

    def run(trips: int):
        return lambda: func((blocks,), (VEC_THREADS,), (init, a, b, np.int32(trips), out, clocks))

    trips, _ = calibrate(run, 1, LAUNCH_S, max_count=MAX_TRIPS)
    want = expect(trips * UNROLL)
    first = slice(0, VEC_THREADS * CHAINS)  # the first block's chains, checked after every sample

    samples = measure_rate(ctx, run(trips), clocks,
                       lambda: _check_chains(op, out[first].get(), want[first], f"{name} block 0"),
                       vector_work_per_launch(op, threads, trips), unit, vector_bound_per_clk_sm(op))
    _check_chains(op, out.get(), want, name)
    return samples + [occupancy_sample(blocks, ctx, "warps_per_sm", VEC_THREADS // LANES)]


@probe("compute.latency",
       sweeps={"quick": lambda d: {"op": ["fp32"]}, "full": lambda d: {"op": ["fp32"]}},
       axes={"op": "fp32: a dependent chain of FFMA (x <- x a + b), one warp"},
       quantities=("fp32.latency_cycles",), kernels=("compute.cu",))
def compute_latency(ctx, op: str) -> list[Sample]:
    """Cycles per dependent FP32 FMA: one warp runs one chain, timed with clock64."""
    import cupy

    if op != "fp32":
        raise ValueError(f"unknown op {op!r}: only fp32")
    func = _kernel("latency_fp32")
    init_host, a, b, expect = _vector_operands(ctx.rng(2), "fp32", LANES)
    init = cupy.asarray(init_host)
    out = cupy.empty_like(init)
    cycles = cupy.zeros(1, dtype=cupy.int64)
    steps = LATENCY_TRIPS * LATENCY_UNROLL
    want = expect(steps)

    def sample(repeat: int) -> list[Sample]:
        func((1,), (LANES,), (init, a, b, np.int32(LATENCY_TRIPS), out, cycles))
        per_op = float(cycles.get()[0]) / steps
        _check_chains("fp32", out.get(), want, "latency_fp32")
        hz = ctx.sm_clock()
        return [Sample("latency", per_op, "cycles", repeat, hz, "clock64", ctx.throttle_flag(hz))]

    return repeat_until_stable(sample, "latency", ctx.budget)


def _tensor_fragments(rng: np.random.Generator, dtype: str, words: int) -> np.ndarray:
    """``words`` 32-bit registers of random non-zero ``dtype`` elements."""
    per_word = 4 // TC_SHAPES[dtype][0]
    raw, _ = random_operand(rng, dtype, (words, per_word))
    return raw.reshape(-1).view(np.uint32)


def check_identical(out: np.ndarray, what: str, units: str) -> None:
    """Every row of ``out`` (one per warp or CTA, all given the same operands) equals the first; finite,
    not all zero."""
    if not np.isfinite(out).all():
        raise RuntimeError(f"{what}: non-finite accumulators")
    if not np.any(out[0]):
        raise RuntimeError(f"{what}: every accumulator is zero")
    bad = np.count_nonzero(np.any(out != out[0], axis=1))
    if bad:
        raise RuntimeError(f"{what}: {bad} of {len(out)} {units} differ from the first, with the same operands")


def mma_dtypes(device: dict) -> dict:
    """Every mma.sync dtype the device has: e4m3 only from FP8_MMA_CC on."""
    cc = tuple(int(x) for x in str(device["compute_capability"]).split("."))
    return {"dtype": [d for d in TC_DTYPES if d != "e4m3" or cc >= FP8_MMA_CC]}


@probe("compute.mma_sync", sweeps={"quick": mma_dtypes, "full": mma_dtypes},
       axes={"dtype": "bf16, fp16 (m16n8k16), tf32 (m16n8k8), e4m3 (m16n8k32); fp32 accumulate"},
       quantities=("tc.bf16.mma_sync_peak_flops", "tc.fp16.mma_sync_peak_flops", "tc.tf32.mma_sync_peak_flops",
                   "tc.fp8.mma_sync_peak_flops",
                   # the tensor peaks where no wgmma runs (before compute capability 9.0)
                   "tc.bf16.peak_flops", "tc.fp16.peak_flops", "tc.tf32.peak_flops", "tc.fp8.peak_flops"),
       kernels=("compute.cu",))
def compute_mma_sync(ctx, dtype: str) -> list[Sample]:
    """Warp-level mma.sync throughput (dense FLOP per clock per SM and per second), operands in registers."""
    import cupy

    if dtype not in TC_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(TC_DTYPES)}")
    func = _kernel(f"mma_{dtype}")
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, MMA_THREADS)
    warps = blocks * MMA_THREADS // LANES
    rng = ctx.rng(3, TC_DTYPES.index(dtype))
    a_words = cupy.asarray(_tensor_fragments(rng, dtype, LANES * 4))
    b_words = cupy.asarray(_tensor_fragments(rng, dtype, LANES * MMA_ACC * 2))
    out = cupy.empty(blocks * MMA_THREADS * MMA_ACC * 4, dtype=cupy.float32)
    clocks = cupy.zeros(2 * blocks, dtype=cupy.uint64)

    def run(trips: int):
        return lambda: func((blocks,), (MMA_THREADS,), (a_words, b_words, np.int32(trips), out, clocks))

    trips, _ = calibrate(run, 1, LAUNCH_S, max_count=MAX_TRIPS)
    warp_floats = LANES * MMA_ACC * 4
    run(trips)()
    first = out[:warp_floats].get()  # every later launch of the same trips must reproduce warp 0 exactly

    def check() -> None:
        if not np.array_equal(out[:warp_floats].get(), first):
            raise RuntimeError(f"mma_{dtype}: warp 0's accumulators changed between identical launches")

    samples = measure_rate(ctx, run(trips), clocks, check, float(warps) * trips * MMA_ACC * mma_flop(dtype), "FLOP",
                       tensor_bound_per_clk_sm(dtype), power_limited=True)
    # Every warp went through the same chains of mma.sync with the same operands.
    check_identical(out.get().reshape(warps, -1), f"mma_{dtype}", "warps")
    return samples + [occupancy_sample(blocks, ctx, "warps_per_sm", MMA_THREADS // LANES)]
