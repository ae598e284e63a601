"""The execution chapter (CuPy RawModule, execution.cu): instruction latency and throughput, warp-scheduler
issue and branch divergence (one warp's or thread's chains of mma.sync, atomics and barriers: exec_chains.py).

* ``exec.inst`` -- per op of ``gpuatlas.analysis.execution.OPS``: latency from one warp's dependent chains (clock64
  cycles of 2T trips less T trips, per instruction: the clock reads, the operand loads and the final store
  cancel), and throughput from every SM full of THR_THREADS-thread blocks of CHAINS independent chains
  per thread (CUDA events; thread instructions per clock per SM at the clock each launch ran at).
* ``exec.schedule`` -- FFMA warp instructions per clock per SM against resident warps per SM (1 up to the
  SM's limit) and ILP (1, 2, 4, 8), timed per SM in-kernel (the SM's blocks' work over its first start to
  last end, clock64), so launch overhead never enters.
* ``exec.diverge`` -- useful FFMA lane-operations per clock per SM of warps split 1..32 ways, every SM full.

Checks on the GPU: the throughput kernel run as long as the latency kernel's chain must reproduce it bit
for bit, every warp of a grid (same operands per lane) must hold the same results, every SM must hold the
blocks the layout intends, and a rate above the issue bound (4 sub-partitions x 32 lanes per clock, clock
slack) or a latency under one cycle is flagged ``invalid``.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.analysis.execution import OPS
from gpuatlas.probes.kit.chains import chain_latency, config_budget, kernel_file
from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import EventTimer, Sample, calibrate, repeat_until_stable
from gpuatlas.probes.kit.samplers import kernel_clock_hz
from gpuatlas.probes.registry import probe

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

_kernel = kernel_file("execution.cu")


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
       axes={"op": "an instruction of the table (gpuatlas.analysis.execution.OPS): fadd ... sts"},
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
            samples.append(chain_latency(ctx, lambda trips: chain_cycles(trips)[0], LAT_TRIPS,
                                         LAT_UNROLL * spec.per_step, repeat, hz=hz))
        return samples

    samples = repeat_until_stable(sample, "ops_per_clk_sm", config_budget(ctx, INST_TIME_S, WARMUP_S))
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
       quantities=("sm.schedulers", "sm.schedulers_ratio", "sm.issue_per_clk_per_scheduler"),
       kernels=("execution.cu",))
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

    samples = repeat_until_stable(sample, "warp_ipc_sm", config_budget(ctx, RATE_TIME_S, WARMUP_S))
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

    samples = repeat_until_stable(sample, "lane_ffma_per_clk_sm", config_budget(ctx, RATE_TIME_S, WARMUP_S))
    _check_warps(out.get(), DIVERGE_ILP, "diverge_ffma")
    return samples
