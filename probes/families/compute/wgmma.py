"""Hopper wgmma tensor-core peaks (CuPy RawModule, wgmma.cu, sm_90a only).

``compute.wgmma`` -- warpgroup ``wgmma.mma_async`` m64nNk16 BF16/FP16, m64nNk8 TF32, m64nNk32 E4M3 from
shared memory through matrix descriptors, N swept, several warpgroups per SM.  Dense tensor work draws
enough power to reach the board's limit, and the driver then lowers the clock (SW power cap).  So at the
largest N each dtype is also measured two more ways:

* ``burst_*`` -- single launches of about BURST_S, each from a rested GPU: the rate the tensor cores reach
  before the power limiter's slow loop acts.  The power a tensor core draws, so the clock a launch is
  allowed, depends on how many operand bits toggle, so the bursts run on two operand sets, interleaved:
  ``signed`` (random signs, exponents and mantissas, the operands of every other launch here; metrics
  ``burst_*``) and ``unit`` (uniform [0, 1) rounded to the dtype, the fill public suites use; metrics
  ``burst_unit_*``).  The full profile adds launches of about SHORT_BURST_S (``burst_short_*``, signed):
  where the clock a launch runs at depends on its length, the limiter acts within the launch.
* ``sustained_*`` -- signed launches back to back for the profile's seconds, one sample per
  SUSTAINED_SAMPLE_S (``sustained_t_s``: its end since the first launch), the rate the power limit allows.
  NVML's power, clock and clock-event reasons during those launches are recorded with every sample by the
  runner, and as a trace (``trace_*``, one sample per reading).

A rest lasts at least REST_MIN_S -- one refresh of NVML's power reading, and longer than the in-kernel
clock takes to fall to its power-capped level under continuous load -- then until NVML's power is within
REST_MARGIN of the lowest it has read (a board at a raised clock with no work draws more than at its idle
clock, which a rest of a fraction of a second does not reach), at most REST_MAX_S; each burst records its
rest (``*_rest_s``).  Every launch is timed with CUDA events and carries the SM clock it ran at; every set
of operands is checked against the host's matmul, and every result against the first of its kind.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.families.compute import (LAUNCH_S, MAX_TRIPS, TC_DTYPES, TC_SHAPES, check_identical, e4m3_value,
                                     measure_rate, occupancy_sample, random_operand, tensor_bound_per_clk_sm)
from gpuatlas.probes.kit import telemetry
from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import Budget, Sample, calibrate
from gpuatlas.probes.kit.samplers import kernel_clock_hz
from gpuatlas.probes.registry import probe

#: wgmma.cu's constants: one warpgroup per CTA, STEPS wgmmas per commit group, 32 bytes of K per row.
WG_THREADS, WGMMA_STEPS, WGMMA_M, ROW_BYTES = 128, 4, 64, 32
WGMMA_NS = (64, 128, 192, 256)
QUICK_WGMMA_NS = (256,)
#: Operand sets of the bursts: ``signed`` as every other launch, ``unit`` uniform [0, 1) rounded to the dtype.
OPERAND_SETS = ("signed", "unit")
#: Burst launches last about BURST_S (the full profile's short ones SHORT_BURST_S); rests as the docstring says.
BURST_S, SHORT_BURST_S = 6e-3, 5e-4
REST_MIN_S, REST_MAX_S, REST_MARGIN = 0.1, 0.25, 1.5
SUSTAINED_SAMPLE_S = 0.05
#: Per profile (told apart by its config budget, Budget.for_profile): (bursts per operand set, short
#: bursts, seconds of sustained launches).  The sustained rate settles within a tenth of a second, so the
#: quick profile's quarter second (its steady part from about 0.08 s) keeps its meaning, but it sees less of
#: the slow decline as the chip warms.
QUICK_PLAN, FULL_PLAN = (1, 0, 0.25), (3, 2, 1.5)
#: A one-group launch against the host's matmul, relative to the result's largest magnitude (the tensor
#: core's own fp32 accumulation keeps fewer bits for FP8; a misread layout is off by O(1)).
WGMMA_RTOL = 1e-2


def plan(budget: Budget) -> tuple[int, int, float]:
    """(bursts per operand set, short bursts, sustained seconds): the full plan at the full profile's budget."""
    return FULL_PLAN if budget.time_s >= Budget.for_profile("full").time_s else QUICK_PLAN


def wgmma_flop(dtype: str, n: int) -> int:
    """FLOP of one wgmma: 2 x 64 x N x K."""
    return 2 * WGMMA_M * n * TC_SHAPES[dtype][2]


def _round_to_e4m3(values: np.ndarray) -> np.ndarray:
    """The E4M3 byte nearest each non-negative value (ties to the even code)."""
    codes = np.arange(0x7F)  # 0x00 .. 0x7E: every non-negative finite E4M3, in increasing value
    table = e4m3_value(codes)
    above = np.clip(np.searchsorted(table, values), 1, len(table) - 1)
    below = above - 1
    d_below, d_above = values - table[below], table[above] - values
    pick_above = (d_above < d_below) | ((d_above == d_below) & (above % 2 == 0))
    return np.where(pick_above, above, below).astype(np.uint8)


def unit_operand(rng: np.random.Generator, dtype: str, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes, values)`` as ``random_operand``, of values uniform in [0, 1) rounded to nearest ``dtype``."""
    values = rng.uniform(0.0, 1.0, shape)
    if dtype == "e4m3":
        codes = _round_to_e4m3(values)
        return codes.reshape(shape[0], -1), e4m3_value(codes)
    if dtype == "fp16":
        halves = values.astype(np.float16)
        return halves.view(np.uint8).reshape(shape[0], -1), halves.astype(np.float64)
    bits = values.astype(np.float32).view(np.uint32)
    if dtype == "bf16":  # round the float32 to its top 16 bits, ties to even
        top = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        return top.view(np.uint8).reshape(shape[0], -1), (top.astype(np.uint32) << 16).view(np.float32).astype(
            np.float64)
    if dtype == "tf32":  # round away the 13 low mantissa bits, ties to even
        exact = ((bits + np.uint32(0xFFF) + ((bits >> 13) & 1)) & np.uint32(0xFFFFE000)).view(np.float32)
        return exact.view(np.uint8).reshape(shape[0], -1), exact.astype(np.float64)
    raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(TC_DTYPES)}")


def wgmma_fragment_to_matrix(out: np.ndarray, n: int) -> np.ndarray:
    """The 64 x N accumulator from one warpgroup's registers (``out``: 128 threads x N/2 floats).

    Register i of lane l in warp w holds row 16 w + l / 4 + 8 ((i mod 4) >= 2), column 8 (i / 4) +
    2 (l mod 4) + (i mod 2): the m16n8 accumulator layout, repeated over N/8 column blocks."""
    d = np.empty((WGMMA_M, n), dtype=out.dtype)
    t = np.arange(WG_THREADS)[:, None]
    i = np.arange(n // 2)[None, :]
    warp, lane = t // 32, t % 32
    rows = 16 * warp + lane // 4 + 8 * ((i % 4) >= 2)
    cols = 8 * (i // 4) + 2 * (lane % 4) + (i % 2)
    d[rows, cols] = out.reshape(WG_THREADS, n // 2)
    return d


def _kernel(name: str):
    from gpuatlas.probes.kit.cuda import kernel

    return kernel("wgmma.cu", name, "sm_90a")


def _wgmma_sweep(ns) -> callable:
    return lambda device: {"dtype": list(TC_DTYPES), "n": list(ns)}


@probe("compute.wgmma", sweeps={"quick": _wgmma_sweep(QUICK_WGMMA_NS), "full": _wgmma_sweep(WGMMA_NS)},
       axes={"dtype": "bf16, fp16 (m64nNk16), tf32 (m64nNk8), e4m3 (m64nNk32); fp32 accumulate",
             "n": "N of m64nNk: 64, 128, 192, 256 (quick: 256)"},
       quantities=("tc.bf16.peak_flops", "tc.fp16.peak_flops", "tc.tf32.peak_flops", "tc.fp8.peak_flops",
                   "tc.bf16.sustained_flops", "tc.fp16.sustained_flops", "tc.tf32.sustained_flops",
                   "tc.fp8.sustained_flops", "tc.bf16.flop_per_clk_sm", "tc.fp16.flop_per_clk_sm",
                   "tc.tf32.flop_per_clk_sm", "tc.fp8.flop_per_clk_sm", "tc.bf16_over_fp32"),
       kernels=("wgmma.cu",), min_cc=(9, 0), max_cc=(9, 0))
def compute_wgmma(ctx, dtype: str, n: int) -> list[Sample]:
    """Hopper wgmma throughput (dense FLOP per clock per SM and per second), operands in shared memory."""
    import cupy

    if dtype not in TC_DTYPES or int(n) not in WGMMA_NS:
        raise ValueError(f"bad wgmma config {dtype!r}, N={n}: dtypes {TC_DTYPES}, N in {WGMMA_NS}")
    if ctx.device["compute_capability"] != "9.0":
        raise RuntimeError(f"wgmma.cu is built for sm_90a, which runs on compute capability 9.0 only; this GPU "
                           f"is {ctx.device['compute_capability']}")
    n = int(n)
    what = f"wgmma_{dtype}_n{n}"
    func = _kernel(what)
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, WG_THREADS)
    out = cupy.empty(blocks * WG_THREADS * n // 2, dtype=cupy.float32)
    clocks = cupy.zeros(2 * blocks, dtype=cupy.uint64)
    cta_floats = WG_THREADS * n // 2

    def launcher(operand_set: str, *salt: int):
        """``run(groups) -> launch`` on a fresh draw of ``operand_set``, checked first against the host."""
        make = unit_operand if operand_set == "unit" else random_operand
        rng = ctx.rng(4, TC_DTYPES.index(dtype), n, *salt)
        elements = ROW_BYTES // TC_SHAPES[dtype][0]
        (a_raw, a_val), (b_raw, b_val) = make(rng, dtype, (WGMMA_M, elements)), make(rng, dtype, (n, elements))
        a_rows, b_rows = cupy.asarray(a_raw.reshape(-1)), cupy.asarray(b_raw.reshape(-1))

        def run(groups: int):
            return lambda: func((blocks,), (WG_THREADS,), (a_rows, b_rows, np.int64(groups), out, clocks))

        _check_one_group(run, out, blocks, n, a_val, b_val, f"{what} ({operand_set} operands)")
        return run

    run = launcher("signed")
    groups, _ = calibrate(run, 1, LAUNCH_S, max_count=MAX_TRIPS)
    run(groups)()
    first = out[:cta_floats].get()

    def check() -> None:
        if not np.array_equal(out[:cta_floats].get(), first):
            raise RuntimeError(f"{what}: CTA 0's accumulators changed between identical launches")

    flop_per_group = float(blocks) * WGMMA_STEPS * wgmma_flop(dtype, n)
    bound = tensor_bound_per_clk_sm(dtype)
    samples = measure_rate(ctx, run(groups), clocks, check, flop_per_group * groups, "FLOP", bound,
                           power_limited=True)
    if n == max(WGMMA_NS):
        bursts, short_bursts, sustained_s = plan(ctx.budget)
        unit_run = launcher("unit", 1)
        arms = []  # (prefix, launch, warm, count, flop), taken in turns so every set sees the same history
        for prefix, launches, length, count in (("burst", run, BURST_S, bursts),
                                                ("burst_unit", unit_run, BURST_S, bursts),
                                                ("burst_short", run, SHORT_BURST_S, short_bursts)):
            burst_groups = max(1, min(MAX_TRIPS, round(groups * length / LAUNCH_S)))
            arms.append((prefix, launches(burst_groups), launches(max(1, groups // 8)), count,
                         flop_per_group * burst_groups))
        samples += _bursts(ctx, arms, clocks, lambda: out[:cta_floats].get(), bound)
        samples += _sustained(ctx, run(groups), clocks, check, flop_per_group * groups, bound, sustained_s)
    check_identical(out.get().reshape(blocks, -1), what, "CTAs")
    return samples + [occupancy_sample(blocks, ctx, "warpgroups_per_sm", 1)]


def _check_one_group(run, out, blocks: int, n: int, a_val: np.ndarray, b_val: np.ndarray, what: str) -> None:
    """One commit group (STEPS wgmmas) against the host's matmul: proof that the descriptors read A and B as
    laid out, and the fragment layout is the one the host assumes."""
    run(1)()
    per_cta = out.get().reshape(blocks, -1)
    check_identical(per_cta, what, "CTAs")
    got = wgmma_fragment_to_matrix(per_cta[0], n).astype(np.float64)
    want = WGMMA_STEPS * a_val @ b_val.T
    error = np.abs(got - want).max() / np.abs(want).max()
    if error > WGMMA_RTOL:
        raise RuntimeError(f"{what}: one group's result is off the host matmul by {error:.3g} of its largest "
                           f"value (descriptor or fragment layout misread)")


def _rate_samples(ctx, prefix: str, flop: float, seconds: float, hz: float, bound: float, repeat: int):
    rate = flop / seconds
    per_clk = rate / ctx.device["sm_count"] / hz
    flag = "invalid" if per_clk > bound else ""
    return [Sample(f"{prefix}_throughput", rate, "FLOP/s", repeat, hz, "cuda_event", flag),
            Sample(f"{prefix}_per_clk_sm", per_clk, "FLOP/cycle", repeat, hz, "cuda_event", flag)]


def _bursts(ctx, arms, clocks, result, bound: float) -> list[Sample]:
    """Single launches, each from a rested GPU, CUDA-event timed, at the clock the launch ran at; ``arms``:
    (prefix, launch, warm, count, flop), taken in turns.  A short ``warm`` launch queued right before each
    lifts the clock out of its idle state; ``result()`` (CTA 0's accumulators) must be the same after every
    burst of an arm."""
    import cupy

    recorder = telemetry.recorder(ctx.device.get("uuid"))
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    firsts: dict[str, np.ndarray] = {}
    samples = []
    for repeat in range(max(count for *_, count, _ in arms)):
        for prefix, launch, warm, count, flop in arms:
            if repeat >= count:
                continue
            rested = recorder.rest(REST_MAX_S, REST_MIN_S, REST_MARGIN)
            warm()
            start.record()
            launch()
            stop.record()
            stop.synchronize()
            seconds = cupy.cuda.get_elapsed_time(start, stop) * 1e-3
            got = result()
            if not np.array_equal(got, firsts.setdefault(prefix, got)):
                raise RuntimeError(f"wgmma: CTA 0's accumulators changed between identical {prefix} launches")
            samples += _rate_samples(ctx, prefix, flop, seconds, kernel_clock_hz(clocks.get()), bound, repeat)
            samples.append(Sample(f"{prefix}_rest_s", rested, "s", repeat, None, "monotonic"))
    return samples


def _sustained(ctx, launch, clocks, check, flop_per_launch: float, bound: float, seconds_total: float):
    """Launches back to back for ``seconds_total``; one sample per SUSTAINED_SAMPLE_S of launches (the clock is
    the last launch's), ``sustained_t_s`` its end since the first launch; then NVML's readings over the same
    time as ``trace_*`` samples (``trace_t_s`` since the first launch)."""
    import time

    import cupy

    recorder = telemetry.recorder(ctx.device.get("uuid"))
    per_sample = max(1, round(SUSTAINED_SAMPLE_S / LAUNCH_S))
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    samples = []
    began = time.monotonic()
    repeat = 0
    while time.monotonic() - began < seconds_total:
        start.record()
        for _ in range(per_sample):
            launch()
        stop.record()
        stop.synchronize()
        seconds = cupy.cuda.get_elapsed_time(start, stop) * 1e-3
        hz = kernel_clock_hz(clocks.get())
        samples += _rate_samples(ctx, "sustained", flop_per_launch * per_sample, seconds, hz, bound, repeat)
        samples.append(Sample("sustained_t_s", time.monotonic() - began, "s", repeat, hz, "monotonic"))
        repeat += 1
    check()
    return samples + telemetry.trace_samples(recorder, began, time.monotonic())
