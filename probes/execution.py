"""The execution chapter (CuPy RawModule, execution.cu): instruction latency and throughput, warp-scheduler
issue and branch divergence.

* ``exec.inst`` -- per op of ``analysis.execution.OPS``: latency from one warp's dependent chains (clock64
  cycles of 2T trips less T trips, per instruction: the clock reads, the operand loads and the final store
  cancel), and throughput from every SM full of THR_THREADS-thread blocks of CHAINS independent chains
  per thread (CUDA events; thread instructions per clock per SM at the clock each launch ran at).
* ``exec.schedule`` -- FFMA warp instructions per clock per SM against resident warps per SM (1 up to the
  SM's limit) and ILP (1, 2, 4, 8), timed per SM in-kernel (the SM's blocks' work over its first start to
  last end, clock64), so launch overhead never enters.
* ``exec.diverge`` -- useful FFMA lane-operations per clock per SM of warps split 1..32 ways, every SM full.
* ``exec.mma_latency`` -- cycles per mma.sync (bf16, fp16, tf32, int8, fp64) in one warp's dependent
  accumulator chain; every accumulator element must come out exactly steps x K (operands all ones).
* ``exec.atomics`` -- global atom/red add on int32, fp32, fp64: one thread's dependent chain (each add's
  operand the previous return; the host replays the recurrence exactly), and the adds per second of a full
  grid on one address, one per warp or one per thread (every word checked against the adds it received).
* ``exec.sync`` -- cycles per __syncthreads of one block of 32 .. the largest block's threads (every thread's
  barriers counted).

Checks on the GPU: the throughput kernel run as long as the latency kernel's chain must reproduce it bit
for bit, every warp of a grid (same operands per lane) must hold the same results, every SM must hold the
blocks the layout intends, and a rate above the issue bound (4 sub-partitions x 32 lanes per clock, clock
slack) or a latency under one cycle is flagged ``invalid``.
"""
from __future__ import annotations

import numpy as np

from analysis.execution import OPS
from probes.cuda import blocks_per_sm
from probes.harness import EventTimer, Sample, calibrate, repeat_until_stable
from probes.kit import kernel_clock_hz
from probes.registry import probe

LANES = 32
#: execution.cu's constants.
LAT_UNROLL, THR_THREADS, CHAINS, UNROLL, LDS_WORDS = 64, 256, 8, 16, 256
SCHED_FFMA, DIVERGE_ILP, DIVERGE_UNROLL = 256, 4, 32
SCHEDULE_ILPS = (1, 2, 4, 8)
DIVERGE_WAYS = (1, 2, 4, 8, 16, 32)
#: Latency chains: T and 2T trips of LAT_UNROLL steps.
LAT_TRIPS = 32
#: An SM has four sub-partitions issuing at most one warp instruction a clock: 4 x 32 thread instructions.
ISSUE_BOUND, CLOCK_SLACK = 4 * LANES, 1.05
LAUNCH_S, SAMPLE_S, MAX_TRIPS = 1e-3, 1e-3, 2**31 - 1
#: Warp instructions each SM issues per schedule launch, and FFMA trips per warp of one diverge launch.
SCHEDULE_WORK, DIVERGE_TRIPS = 2**19, 512
#: A placement that leaves fewer SMs than this fraction with the intended blocks is refused.
PLACED_FRACTION = 0.5
#: Longest a config repeats for stability (the chapter is many short configs) and its warm-up.
INST_TIME_S, RATE_TIME_S, WARMUP_S = 0.1, 0.05, 0.005

_NP = {"u32": np.uint32, "u64": np.uint64, "f32": np.float32, "f64": np.float64}


def _budget(ctx, time_s: float):
    """The profile's repeats, within a shorter time per config."""
    import dataclasses

    return dataclasses.replace(ctx.budget, time_s=min(ctx.budget.time_s, time_s),
                               warmup_s=min(ctx.budget.warmup_s, WARMUP_S))


def _kernel(name: str):
    from probes.cuda import kernel

    return kernel("execution.cu", name)


# -- operands -----------------------------------------------------------------------------------------------

def _half_bits(values, bf16: bool) -> np.uint32:
    """Two 16-bit lanes of the same value, as one 32-bit word."""
    v = np.float32(values)
    lane = (np.array(v).view(np.uint32) >> 16) if bf16 else np.array(v, np.float16).view(np.uint16)
    lane = int(lane) & 0xFFFF
    return np.uint32(lane | lane << 16)


def operands(op: str, rng: np.random.Generator, table_address: int = 0):
    """``(init, a, b)``: one start value per lane and chain (LANES x CHAINS) and the two step constants, as
    the kernel takes them, chosen so a chain stays finite where the op allows (a < 1 in an FMA, a ~ 1 in a
    multiply, a small addend)."""
    spec = OPS[op]
    n = LANES * CHAINS
    dtype = _NP[spec.dtype]
    a = b = dtype(0)
    if spec.dtype in ("f32", "f64"):
        init = rng.uniform(0.5, 2.0, n).astype(dtype)
        a = dtype({"fadd": 2.0**-10, "dadd": 2.0**-10, "fmul": 1 + 2.0**-20, "dmul": 1 + 2.0**-40}.get(
            op, rng.uniform(0.5, 0.9)))
        b = dtype(rng.uniform(0.25, 1.0))
        return init, a, b
    if op in ("hadd2", "hmul2", "hfma2", "hfma2_bf16"):
        bf16 = op.endswith("bf16")
        init = np.array([_half_bits(v, bf16) for v in rng.uniform(0.5, 2.0, n)], np.uint32)
        a = _half_bits({"hadd2": 2.0**-10, "hmul2": 1.0}.get(op, rng.uniform(0.5, 0.9)), bf16)
        return init, a, _half_bits(rng.uniform(0.25, 1.0), bf16)
    if op in ("f2f_f32_f16", "f2f_f32_bf16", "f2i"):
        return rng.uniform(0.5, 2.0, n).astype(np.float32).view(np.uint32), a, b
    if op == "f2f_f16_f32":
        return rng.uniform(0.5, 2.0, n).astype(np.float16).view(np.uint16).astype(np.uint32), a, b
    if op == "ldg":  # the address of a word of the self-pointer table
        return (table_address + 8 * rng.integers(0, LDS_WORDS, n)).astype(np.uint64), a, b
    if op in ("lds", "sts"):
        return rng.integers(0, LDS_WORDS, n).astype(np.uint32), a, dtype(rng.integers(1, 2**31))
    bits = 64 if spec.dtype == "u64" else 32
    init = rng.integers(1, 2**bits - 1, n, dtype=np.uint64).astype(dtype)
    a = dtype(int(rng.integers(1, 2**31)) * 2 + 1)  # odd: multiplies never collapse a chain to 0
    if op == "shf":
        a = dtype(rng.integers(1, 31))
    return init, a, dtype(rng.integers(1, 2**31))


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.uint64 if values.dtype.itemsize == 8 else np.uint32)


# -- exec.inst ----------------------------------------------------------------------------------------------

def _inst_sweep(device):
    return {"op": list(OPS)}


@probe("exec.inst", sweeps={"quick": _inst_sweep, "full": _inst_sweep},
       axes={"op": "an instruction of the table (analysis.execution.OPS): fadd ... sts"},
       quantities=tuple(q for op in OPS for q in (f"inst.{op}.latency_cycles", f"inst.{op}.ops_per_clk_sm")
                        if OPS[op].latency or q.endswith("ops_per_clk_sm")),
       kernels=("execution.cu",))
def exec_inst(ctx, op: str) -> list[Sample]:
    """One instruction's dependent-chain latency (cycles) and full-SM throughput (instructions/clock/SM)."""
    import cupy

    if op not in OPS:
        raise ValueError(f"unknown op {op!r}: choose one of {', '.join(OPS)}")
    spec = OPS[op]
    thr = _kernel(f"thr_{op}")
    lat = _kernel(f"lat_{op}")
    table = cupy.empty(LDS_WORDS, dtype=cupy.uint64)
    table[:] = np.uint64(table.data.ptr) + np.uint64(8) * cupy.arange(LDS_WORDS, dtype=cupy.uint64)  # own address
    init_host, a, b = operands(op, ctx.rng(11, list(OPS).index(op)), table.data.ptr)
    init = cupy.asarray(init_host)
    blocks = ctx.device["sm_count"] * blocks_per_sm(thr, THR_THREADS)
    threads = blocks * THR_THREADS
    out = cupy.zeros(threads * CHAINS, dtype=init.dtype)
    lat_out = cupy.zeros(LANES, dtype=init.dtype)
    cycles = cupy.zeros(1, dtype=cupy.int64)
    clocks = cupy.zeros(2 * blocks, dtype=cupy.uint64)

    def run(trips: int):
        return lambda: thr((blocks,), (THR_THREADS,), (init, a, b, np.int32(trips), out, clocks))

    def chain_cycles(trips: int) -> tuple[float, np.ndarray]:
        lat((1,), (LANES,), (init, a, b, np.int32(trips), lat_out, cycles))
        return float(cycles.get()[0]), lat_out.get()

    # The throughput kernel with as many steps per chain as the latency kernel's must end where it ends.
    _, chain = chain_cycles(LAT_TRIPS)
    run(LAT_TRIPS * LAT_UNROLL // UNROLL)()
    got = _bits(out.get().reshape(-1, LANES, CHAINS)[0, :, 0])
    if op in ("lds", "sts"):  # shared addresses: compared relative to lane 0's, whatever each kernel's base
        got, chain = got - got[0], chain - chain[0]
    if not np.array_equal(got, _bits(chain)):
        raise RuntimeError(f"{op}: the throughput kernel's chain 0 and the latency kernel's chain disagree "
                           "after the same steps")
    if op == "ldg" and not np.array_equal(chain, init_host.reshape(LANES, CHAINS)[:, 0]):
        raise RuntimeError("ldg: a self-pointer chase left its start address")

    trips, _ = calibrate(run, 1, LAUNCH_S, max_count=MAX_TRIPS)
    timer = EventTimer(run(trips), max(ctx.budget.min_sample_s, SAMPLE_S))
    instructions = float(threads) * CHAINS * UNROLL * trips * spec.per_step
    sms = ctx.device["sm_count"]

    def sample(repeat: int) -> list[Sample]:
        seconds = timer.seconds_per_launch()
        hz = kernel_clock_hz(clocks.get())
        rate = instructions / seconds
        per_clk = rate / sms / hz
        flag = "invalid" if per_clk > ISSUE_BOUND * CLOCK_SLACK else ctx.throttle_flag(hz)
        samples = [Sample("ops_per_clk_sm", per_clk, "1/cycle", repeat, hz, "cuda_event", flag),
                   Sample("throughput", rate, "1/s", repeat, hz, "cuda_event", flag)]
        if spec.latency:
            short, _ = chain_cycles(LAT_TRIPS)
            long, _ = chain_cycles(2 * LAT_TRIPS)
            per_inst = (long - short) / (LAT_TRIPS * LAT_UNROLL * spec.per_step)
            samples.append(Sample("latency", per_inst, "cycles", repeat, hz, "clock64",
                                  "invalid" if per_inst < 1 else ctx.throttle_flag(hz)))
        return samples

    samples = repeat_until_stable(sample, "ops_per_clk_sm", _budget(ctx, INST_TIME_S))
    _check_warps(out.get(), CHAINS, op)
    return samples


def _check_warps(out: np.ndarray, per_lane: int, what: str) -> None:
    """Every warp got the same operands per lane, so every warp must hold warp 0's results."""
    warps = _bits(out).reshape(-1, LANES * per_lane)
    bad = np.count_nonzero(np.any(warps != warps[0], axis=1))
    if bad:
        raise RuntimeError(f"{what}: {bad} of {len(warps)} warps differ from warp 0, with the same operands")


# -- per-SM timing (schedule, diverge) ----------------------------------------------------------------------

def per_sm_rates(rec: np.ndarray, work_per_block: float) -> tuple[np.ndarray, np.ndarray]:
    """Per SM that ran blocks: the blocks' work over the SM's span (first clock64 start to last end), and
    how many blocks it ran.  ``rec``: one row per block, (SM id, start, end, globaltimer start, end)."""
    rec = np.asarray(rec, dtype=np.uint64).reshape(-1, 5)
    sms = rec[:, 0].astype(np.int64)
    rates, counts = [], []
    for sm in np.unique(sms):
        mine = rec[sms == sm]
        span = float(mine[:, 2].max() - mine[:, 1].min())
        rates.append(len(mine) * work_per_block / span)
        counts.append(len(mine))
    return np.array(rates), np.array(counts)


def placed_rates(rec: np.ndarray, work_per_block: float, blocks_per_sm: int) -> np.ndarray:
    """Rates of the SMs holding exactly the intended blocks; refused if too few do."""
    rates, counts = per_sm_rates(rec, work_per_block)
    good = counts == blocks_per_sm
    if good.sum() < PLACED_FRACTION * max(len(counts), 1) or not good.any():
        raise RuntimeError(f"only {int(good.sum())} of {len(counts)} SMs were placed the intended "
                           f"{blocks_per_sm} blocks each")
    return rates[good]


def block_clock_hz(rec: np.ndarray) -> float:
    rec = np.asarray(rec, dtype=np.uint64).reshape(-1, 5).astype(float)
    ns = rec[:, 4] - rec[:, 3]
    ok = ns > 0
    return float(np.median((rec[ok, 2] - rec[ok, 1]) / ns[ok] * 1e9))


def schedule_warps(device: dict) -> list[int]:
    """Resident warps per SM from 1 to the SM's limit: every count to 8 (where the schedulers fill), then
    half octaves, and the limit itself."""
    top = device["max_threads_per_sm"] // LANES
    candidates = list(range(1, 9)) + [12, 16, 24, 32, 48, 64, 96, 128]
    return sorted({w for w in candidates if w <= top} | {top})


def schedule_layout(warps: int, device: dict) -> tuple[int, int]:
    """(blocks per SM, threads per block) putting ``warps`` warps on each SM in equal blocks."""
    per_block = device["max_threads_per_block"] // LANES
    blocks = -(-warps // per_block)
    while warps % blocks:
        blocks += 1
    return blocks, warps // blocks * LANES


def _ffma_operands(rng: np.random.Generator):
    init = rng.uniform(-1, 1, LANES * CHAINS).astype(np.float32)
    return init, np.float32(rng.uniform(0.5, 0.9)), np.float32(rng.uniform(0.25, 1.0))


def _sweep_schedule(ilps):
    return lambda device: {"resident_warps_per_sm": schedule_warps(device), "ilp": list(ilps)}


@probe("exec.schedule", sweeps={"quick": _sweep_schedule((1, 8)), "full": _sweep_schedule(SCHEDULE_ILPS)},
       axes={"resident_warps_per_sm": "warps per SM: 1..8 each, then half octaves to the SM's limit",
             "ilp": "independent FFMA chains per warp: 1, 2, 4, 8 (quick: 1, 8)"},
       quantities=("sm.schedulers", "sm.issue_per_clk_per_scheduler"), kernels=("execution.cu",))
def exec_schedule(ctx, resident_warps_per_sm: int, ilp: int) -> list[Sample]:
    """FFMA warp instructions per clock per SM against resident warps and ILP: the schedulers' saturation."""
    import cupy

    warps, ilp = int(resident_warps_per_sm), int(ilp)
    if ilp not in SCHEDULE_ILPS or warps not in schedule_warps(ctx.device):
        raise ValueError(f"bad schedule config: {warps} warps (choose from {schedule_warps(ctx.device)}), "
                         f"ILP {ilp} (choose from {SCHEDULE_ILPS})")
    func = _kernel(f"sched_ffma_ilp{ilp}")
    per_sm, threads = schedule_layout(warps, ctx.device)
    if blocks_per_sm(func, threads) < per_sm:
        raise RuntimeError(f"the driver grants fewer than {per_sm} blocks of {threads} threads per SM")
    blocks = per_sm * ctx.device["sm_count"]
    init_host, a, b = _ffma_operands(ctx.rng(12, ilp))
    init = cupy.asarray(init_host)
    out = cupy.zeros(blocks * threads * ilp, dtype=cupy.float32)
    rec = cupy.zeros(5 * blocks, dtype=cupy.uint64)
    trips = max(1, SCHEDULE_WORK // (warps * SCHED_FFMA))
    work_per_block = threads // LANES * trips * SCHED_FFMA

    def sample(repeat: int) -> list[Sample]:
        func((blocks,), (threads,), (init, a, b, np.int32(trips), out, rec))
        records = rec.get()
        rates = placed_rates(records, work_per_block, per_sm)
        hz = block_clock_hz(records)
        ipc = float(np.median(rates))
        flag = "invalid" if ipc * LANES > ISSUE_BOUND * CLOCK_SLACK else ctx.throttle_flag(hz)
        return [Sample("warp_ipc_sm", ipc, "1/cycle", repeat, hz, "clock64", flag)]

    samples = repeat_until_stable(sample, "warp_ipc_sm", _budget(ctx, RATE_TIME_S))
    _check_warps(out.get(), ilp, f"sched_ffma_ilp{ilp}")
    return samples


@probe("exec.diverge",
       sweeps={"quick": lambda d: {"ways": list(DIVERGE_WAYS)}, "full": lambda d: {"ways": list(DIVERGE_WAYS)}},
       axes={"ways": "branches a warp is split over: 1, 2, 4, 8, 16, 32"},
       quantities=("divergence.throughput_fraction_32way",), kernels=("execution.cu",))
def exec_diverge(ctx, ways: int) -> list[Sample]:
    """Useful FFMA lane-operations per clock per SM of warps split ``ways`` ways over branches."""
    import cupy

    ways = int(ways)
    if ways not in DIVERGE_WAYS:
        raise ValueError(f"bad ways {ways}: choose one of {DIVERGE_WAYS}")
    func = _kernel("diverge_ffma")
    per_sm = blocks_per_sm(func, THR_THREADS)
    blocks = per_sm * ctx.device["sm_count"]
    init_host, a, b = _ffma_operands(ctx.rng(13))
    init = cupy.asarray(init_host)
    out = cupy.zeros(blocks * THR_THREADS * DIVERGE_ILP, dtype=cupy.float32)
    rec = cupy.zeros(5 * blocks, dtype=cupy.uint64)
    trips = max(1, DIVERGE_TRIPS // ways)
    useful_per_block = THR_THREADS * trips * DIVERGE_ILP * DIVERGE_UNROLL

    def sample(repeat: int) -> list[Sample]:
        func((blocks,), (THR_THREADS,), (init, a, b, np.int32(ways), np.int32(trips), out, rec))
        records = rec.get()
        rate = float(np.median(placed_rates(records, useful_per_block, per_sm)))
        hz = block_clock_hz(records)
        flag = "invalid" if rate > ISSUE_BOUND * CLOCK_SLACK else ctx.throttle_flag(hz)
        return [Sample("lane_ffma_per_clk_sm", rate, "1/cycle", repeat, hz, "clock64", flag)]

    samples = repeat_until_stable(sample, "lane_ffma_per_clk_sm", _budget(ctx, RATE_TIME_S))
    _check_warps(out.get(), DIVERGE_ILP, "diverge_ffma")
    return samples


# -- exec.mma_latency ---------------------------------------------------------------------------------------

#: dtype -> (the word every A and B register holds: 1 in every element, the shape's K, accumulator type).
MMA_ONES = {"bf16": (0x3F803F80, 16, np.float32), "fp16": (0x3C003C00, 16, np.float32),
            "tf32": (0x3F800000, 8, np.float32), "int8": (0x01010101, 32, np.int32), "fp64": (1.0, 4, np.float64)}
MMA_UNROLL, MMA_TRIPS = 32, 16


@probe("exec.mma_latency",
       sweeps={"quick": lambda d: {"dtype": list(MMA_ONES)}, "full": lambda d: {"dtype": list(MMA_ONES)}},
       axes={"dtype": "bf16, fp16 (m16n8k16), tf32 (m16n8k8), int8 (m16n8k32, s32 accumulate), fp64 (m8n8k4)"},
       quantities=tuple(f"tc.{d}.mma_sync_latency_cycles" for d in MMA_ONES), kernels=("execution.cu",),
       min_cc=(8, 0))
def exec_mma_latency(ctx, dtype: str) -> list[Sample]:
    """Cycles per mma.sync in one warp's dependent accumulator chain."""
    import cupy

    if dtype not in MMA_ONES:
        raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(MMA_ONES)}")
    word, k, acc = MMA_ONES[dtype]
    func = _kernel(f"mma_lat_{dtype}")
    operand = np.float64(word) if dtype == "fp64" else np.uint32(word)
    per_lane = 2 if dtype == "fp64" else 4
    out = cupy.zeros(LANES * per_lane, dtype=acc)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    def chain(trips: int) -> float:
        func((1,), (LANES,), (operand, operand, np.int32(trips), out, cycles))
        want = trips * MMA_UNROLL * k  # every element: steps x (K products of 1 x 1)
        got = out.get()
        if not np.all(got == want):
            raise RuntimeError(f"mma_lat_{dtype}: accumulators {np.unique(got)[:4]} after {trips * MMA_UNROLL} "
                               f"steps, expected {want} in every element")
        return float(cycles.get()[0])

    def sample(repeat: int) -> list[Sample]:
        short, long = chain(MMA_TRIPS), chain(2 * MMA_TRIPS)
        per_mma = (long - short) / (MMA_TRIPS * MMA_UNROLL)
        hz = ctx.sm_clock()
        return [Sample("latency", per_mma, "cycles", repeat, hz, "clock64",
                       "invalid" if per_mma < 1 else ctx.throttle_flag(hz, power_limited=True))]

    return repeat_until_stable(sample, "latency", _budget(ctx, RATE_TIME_S))


# -- exec.atomics -------------------------------------------------------------------------------------------

ATOMIC_TYPES = {"i32": np.uint32, "f32": np.float32, "f64": np.float64}
ATOMIC_MODES = ("latency", "same", "warp", "distinct")
ATOM_UNROLL, ATOM_TRIPS = 32, 4
#: mode -> the red kernel's addressing: one address for the grid, one per warp, one per thread.
RED_MODE = {"same": 0, "warp": 1, "distinct": 2}


def atomic_chain(dtype: str, steps: int) -> tuple:
    """(x, memory) after ``steps`` of x <- atom.add(p, x) from x = 1, p = 0: each step returns the old value
    and adds the previous return (a Fibonacci recurrence), in the type's own arithmetic."""
    kind = ATOMIC_TYPES[dtype]
    x, p = kind(1), kind(0)
    with np.errstate(over="ignore"):
        for _ in range(steps):
            x, p = p, kind(p + x)
    return x, p


def red_expected(dtype: str, adds: int):
    """A word after ``adds`` red.add of 1: exact (integers wrap mod 2^32; fp32 stops growing at 2^24, where
    adding 1 rounds back to even)."""
    if dtype == "i32":
        return np.uint32(adds % 2**32)
    return ATOMIC_TYPES[dtype](min(adds, 2**24) if dtype == "f32" else adds)


@probe("exec.atomics",
       sweeps={"quick": lambda d: {"dtype": list(ATOMIC_TYPES), "mode": list(ATOMIC_MODES)},
               "full": lambda d: {"dtype": list(ATOMIC_TYPES), "mode": list(ATOMIC_MODES)}},
       axes={"dtype": "i32, f32, f64 (atom/red.global.add)",
             "mode": "latency (one thread's dependent chain) or throughput with every thread of a full grid "
                     "on one address (same), one per warp (warp) or its own (distinct)"},
       quantities=tuple(f"atomic.global.add_{t}_{m}" for t in ATOMIC_TYPES
                        for m in ("latency_cycles", "ops_per_s_same", "ops_per_s_warp", "ops_per_s_distinct")),
       kernels=("execution.cu",))
def exec_atomics(ctx, dtype: str, mode: str) -> list[Sample]:
    """Global atomic add: dependent-chain latency, or throughput against contention."""
    import cupy

    if dtype not in ATOMIC_TYPES or mode not in ATOMIC_MODES:
        raise ValueError(f"bad atomics config {dtype!r}, {mode!r}: dtypes {tuple(ATOMIC_TYPES)}, modes "
                         f"{ATOMIC_MODES}")
    kind = ATOMIC_TYPES[dtype]
    if mode == "latency":
        return _atomic_latency(ctx, dtype, kind)
    func = _kernel(f"red_{dtype}")
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, THR_THREADS)
    threads = blocks * THR_THREADS
    words = {"same": 1, "warp": threads // LANES, "distinct": threads}[mode]
    memory = cupy.zeros(words, dtype=kind)
    clocks = cupy.zeros(2 * blocks, dtype=cupy.uint64)
    launches = [0]

    def run(reps: int):
        def launch():
            func((blocks,), (THR_THREADS,), (memory, kind(1), np.int32(RED_MODE[mode]), np.int32(reps), clocks))
            launches[0] += reps
        return launch

    reps, _ = calibrate(run, 1, LAUNCH_S, max_count=MAX_TRIPS)
    memory.fill(0)
    launches[0] = 0
    timer = EventTimer(run(reps), max(ctx.budget.min_sample_s, SAMPLE_S))

    def sample(repeat: int) -> list[Sample]:
        seconds = timer.seconds_per_launch()
        hz = kernel_clock_hz(clocks.get())
        rate = threads * reps / seconds
        return [Sample("ops_per_s", rate, "1/s", repeat, hz, "cuda_event", ctx.throttle_flag(hz)),
                Sample("ops_per_clk", rate / hz, "1/cycle", repeat, hz, "cuda_event", ctx.throttle_flag(hz))]

    samples = repeat_until_stable(sample, "ops_per_s", _budget(ctx, RATE_TIME_S))
    per_word = launches[0] * threads // words  # adds of 1 every word received
    got = memory.get()
    if not np.all(got == red_expected(dtype, per_word)):
        raise RuntimeError(f"red_{dtype} ({mode}): words hold {np.unique(got)[:4]}, expected "
                           f"{red_expected(dtype, per_word)} after {per_word} adds of 1 each")
    return samples


def _atomic_latency(ctx, dtype: str, kind) -> list[Sample]:
    import cupy

    func = _kernel(f"atom_lat_{dtype}")
    memory = cupy.zeros(1, dtype=kind)
    out = cupy.zeros(1, dtype=kind)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    def chain(trips: int) -> float:
        memory.fill(0)
        func((1,), (1,), (memory, kind(1), np.int32(trips), out, cycles))
        want = atomic_chain(dtype, trips * ATOM_UNROLL)
        got = (out.get()[0], memory.get()[0])
        if not all(g == w for g, w in zip(got, want)):
            raise RuntimeError(f"atom_lat_{dtype}: returned and stored {got}, the recurrence gives {want}")
        return float(cycles.get()[0])

    def sample(repeat: int) -> list[Sample]:
        short, long = chain(ATOM_TRIPS), chain(2 * ATOM_TRIPS)
        per_atom = (long - short) / (ATOM_TRIPS * ATOM_UNROLL)
        hz = ctx.sm_clock()
        return [Sample("latency", per_atom, "cycles", repeat, hz, "clock64",
                       "invalid" if per_atom < 1 else ctx.throttle_flag(hz))]

    return repeat_until_stable(sample, "latency", _budget(ctx, RATE_TIME_S))


# -- exec.sync ----------------------------------------------------------------------------------------------

SYNC_UNROLL, SYNC_TRIPS = 16, 16


def sync_threads(device: dict) -> list[int]:
    """Block sizes from one warp to the largest block, doubling."""
    sizes, n = [], LANES
    while n <= device["max_threads_per_block"]:
        sizes.append(n)
        n *= 2
    return sizes


@probe("exec.sync", sweeps={"quick": lambda d: {"threads": sync_threads(d)},
                            "full": lambda d: {"threads": sync_threads(d)}},
       axes={"threads": "threads of the one block: 32, 64, ... up to the largest block"},
       quantities=("sync.syncthreads_cycles_one_warp", "sync.syncthreads_cycles"), kernels=("execution.cu",))
def exec_sync(ctx, threads: int) -> list[Sample]:
    """Cycles per __syncthreads (BAR.SYNC) of one block, against its size."""
    import cupy

    threads = int(threads)
    if threads not in sync_threads(ctx.device):
        raise ValueError(f"bad block size {threads}: choose one of {sync_threads(ctx.device)}")
    func = _kernel("sync_lat")
    passed = cupy.zeros(1, dtype=cupy.uint32)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    def chain(trips: int) -> float:
        func((1,), (threads,), (np.int32(trips), passed, cycles))
        if int(passed.get()[0]) != threads * trips * SYNC_UNROLL:
            raise RuntimeError(f"sync_lat: {int(passed.get()[0])} barrier passes counted, expected "
                               f"{threads * trips * SYNC_UNROLL}")
        return float(cycles.get()[0])

    def sample(repeat: int) -> list[Sample]:
        short, long = chain(SYNC_TRIPS), chain(2 * SYNC_TRIPS)
        per_barrier = (long - short) / (SYNC_TRIPS * SYNC_UNROLL)
        hz = ctx.sm_clock()
        return [Sample("latency", per_barrier, "cycles", repeat, hz, "clock64",
                       "invalid" if per_barrier < 1 else ctx.throttle_flag(hz))]

    return repeat_until_stable(sample, "latency", _budget(ctx, RATE_TIME_S))
