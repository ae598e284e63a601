"""What energy.per_operation holds for a second: each op's kernel, its launch for a count of trips (passes,
groups), the check that proves its result, its work per count and its physical bound (``*_work``: ``(run,
check, work, unit, too_fast)``), sized from the device's properties."""
from __future__ import annotations

import math

import numpy as np

from gpuatlas.probes.kit.cuda import blocks_per_sm, kernel
from gpuatlas.probes.kit.harness import Sink
from gpuatlas.probes.kit.samplers import (HBM_FOOTPRINT_L2, L2_TOUCH_FRACTION, MAX_BYTES_PER_CLK_SM, MEMORY_FRACTION,
                                 Filled, bandwidth_bound, sum32)

#: energy.cu's constants.
VEC_THREADS, CHAINS, UNROLL = 256, 8, 64
STREAM_THREADS, SMEM_THREADS, SMEM_VEC, SMEM_UNROLL = 256, 256, 1024, 16
MMA_THREADS, MMA_ACC, MMA_UNROLL = 256, 8, 16
GOLDEN, OFFSET = 0x9E3779B1, 0x7F4A7C15
#: wgmma.cu's constants: one warpgroup per CTA, STEPS wgmmas per group, 32 bytes of K per operand row; N used.
WG_THREADS, WGMMA_STEPS, ROW_BYTES, WGMMA_N = 128, 4, 32, 256
#: Tensor dtype -> (K of one instruction, bits of one 1.0 and one 1.5 element, element bytes).
TENSOR = {"bf16": (16, 0x3F80, 0x3FC0, 2), "fp8": (32, 0x38, 0x3C, 1)}
#: Bounds: an SM issues at most four warp instructions a clock (an FFMA is 2 FLOP a lane); no NVIDIA tensor
#: core so far completes more than 1024 dense 16-bit FMAs a clock per sub-partition (8-bit: twice that).
SUBPARTITIONS, LANES, CLOCK_SLACK, TC_FMA_16BIT = 4, 32, 1.05, 1024
#: Steps after which x -> b - x flips between two values (it takes one or two; UNROLL steps a trip is more).
ALTERNATION_STEPS = 16

def capability(device: dict) -> tuple[int, int]:
    return tuple(int(x) for x in device["compute_capability"].split("."))


def tensor_path(device: dict, dtype: str) -> str | None:
    """``wgmma``, ``mma`` or None (no native instruction for ``dtype`` here)."""
    cc = capability(device)
    if cc == (9, 0):
        return "wgmma"
    if dtype == "fp8":
        return "mma" if cc == (8, 9) or cc[0] == 12 else None
    return "mma"


def flop_bound_per_clk_sm(op: str) -> float:
    """Largest FLOP per clock per SM of ``op`` (fp32, bf16, fp8) any NVIDIA SM so far could do, with clock slack."""
    if op == "fp32":
        return SUBPARTITIONS * LANES * 2 * CLOCK_SLACK
    return SUBPARTITIONS * TC_FMA_16BIT * 2 * (2 if op == "fp8" else 1) * CLOCK_SLACK


def _flop_bound(ctx, op: str):
    """``too_fast(rate, hz)``: FLOP/s above flop_bound_per_clk_sm at the clock the launch ran at."""
    sms, bound = ctx.device["sm_count"], flop_bound_per_clk_sm(op)
    return lambda rate, hz: rate / sms / hz > bound

class _Clocks:
    """One (cycles, ns) pair per block of the grid last launched (every kernel records into it)."""

    array = None

    def at_least(self, blocks: int):
        import cupy

        if self.array is None or self.array.size < 2 * blocks:
            self.array = cupy.zeros(2 * blocks, dtype=cupy.uint64)
        self.blocks = blocks
        return self.array

    def get(self) -> np.ndarray:
        return self.array[:2 * self.blocks].get()


CLOCKS = _Clocks()


def _grid(func, threads: int, device: dict, smem: int = 0) -> int:
    return device["sm_count"] * blocks_per_sm(func, threads, smem)


def ffma_work(ctx, op):
    """FFMA chains x = fma(x, -1, b): each chain flips between two values (its operand changes at every step,
    which a chain settled on a fixed point would not), and after an even number of steps (UNROLL is even) it
    holds exactly the value the host's float32 steps reach (``alternation``)."""
    import cupy

    func = kernel("energy.cu", "ffma_chains")
    blocks = _grid(func, VEC_THREADS, ctx.device)
    rng = ctx.rng(61)
    start = rng.uniform(-1, 1, blocks * VEC_THREADS * CHAINS).astype(np.float32)
    b = np.float32(rng.uniform(0.25, 1.0))
    want = cupy.asarray(alternation(start, b))
    init = cupy.asarray(start)
    out = cupy.zeros_like(init)
    clocks = CLOCKS.at_least(blocks)

    def run(trips: int):
        return lambda: func((blocks,), (VEC_THREADS,), (init, np.float32(-1.0), b, np.int32(trips), out, clocks))

    def check() -> None:
        wrong = int((out != want).sum())
        if wrong:
            raise RuntimeError(f"ffma_chains: {wrong} chains end off the value the host's float32 steps reach")

    threads = blocks * VEC_THREADS
    return run, check, lambda trips: float(threads * CHAINS * UNROLL * trips * 2), "FLOP", _flop_bound(ctx, op)


def alternation(start: np.ndarray, b: np.float32, steps: int = ALTERNATION_STEPS) -> np.ndarray:
    """Where x -> fma(x, -1, b) = b - x (one rounding, as numpy's float32 subtraction) leaves each of ``start``
    after any even number of steps from ``steps`` on: by then every chain flips between the same two values."""
    xs = [np.asarray(start, dtype=np.float32)]
    for _ in range(steps):
        xs.append(np.float32(b) - xs[-1])
    if not np.array_equal(xs[-1], xs[-3]):
        raise RuntimeError("x -> b - x has not settled into flipping between two values: pick other operands")
    return xs[-1]


def tensor_work(ctx, op):
    return (_wgmma if tensor_path(ctx.device, op) == "wgmma" else _mma)(ctx, op)


def _wgmma(ctx, op):
    """wgmma m64n256 from shared memory: a one-group launch of uniform operands (A = 1, B = 1.5) must give
    STEPS x K x 1.5 in every element, whatever the layout; the held launches take random operands, and every
    CTA's accumulators must then be finite and identical."""
    import cupy

    k, one, one_half, size = TENSOR[op]
    func = kernel("wgmma.cu", f"wgmma_{'e4m3' if op == 'fp8' else op}_n{WGMMA_N}", "sm_90a")
    blocks = _grid(func, WG_THREADS, ctx.device)
    out = cupy.zeros(blocks * WG_THREADS * WGMMA_N // 2, dtype=cupy.float32)
    clocks = CLOCKS.at_least(blocks)

    def operands(a_bits: int, b_bits: int):
        per_row = ROW_BYTES // size
        dtype = np.uint16 if size == 2 else np.uint8
        a = np.full(64 * per_row, a_bits, dtype=dtype)
        b = np.full(WGMMA_N * per_row, b_bits, dtype=dtype)
        return cupy.asarray(a.view(np.uint8)), cupy.asarray(b.view(np.uint8))

    a_rows, b_rows = operands(one, one_half)
    func((blocks,), (WG_THREADS,), (a_rows, b_rows, np.int64(1), out, clocks))
    if not bool((out == np.float32(WGMMA_STEPS * k * 1.5)).all()):
        raise RuntimeError(f"wgmma {op}: a one-group launch of uniform operands is not {WGMMA_STEPS * k * 1.5} "
                           "in every element")
    a_rows, b_rows = (cupy.asarray(x) for x in _random_operand_bytes(ctx, op, 64, WGMMA_N))

    def run(groups: int):
        return lambda: func((blocks,), (WG_THREADS,), (a_rows, b_rows, np.int64(groups), out, clocks))

    def check() -> None:
        per_cta = out.reshape(blocks, -1)
        if not bool(cupy.isfinite(per_cta[0]).all()) or not bool((per_cta == per_cta[0]).all()):
            raise RuntimeError(f"wgmma {op}: the CTAs' accumulators are not finite and identical")

    flop_per_group = float(blocks) * WGMMA_STEPS * 2 * 64 * WGMMA_N * k
    return run, check, lambda groups: flop_per_group * groups, "FLOP", _flop_bound(ctx, op)


def _random_operand_bytes(ctx, op: str, rows_a: int, rows_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Random non-zero operands as raw bytes: bf16 of magnitude 0.25..2 with random signs, or e4m3 codes of
    exponent field 5..8 (magnitude 0.25..3.75, never NaN), as compute's signed operands draw them."""
    rng = ctx.rng(62, 0 if op == "bf16" else 1)
    if op == "bf16":
        values = (rng.uniform(0.25, 2.0, (rows_a + rows_b) * 16) * rng.choice([-1.0, 1.0], (rows_a + rows_b) * 16))
        raw = (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    else:
        codes = (rng.integers(5, 9, (rows_a + rows_b) * 32) << 3) | rng.integers(0, 8, (rows_a + rows_b) * 32)
        raw = (codes | (rng.integers(0, 2, codes.size) << 7)).astype(np.uint8)
    return raw[:rows_a * ROW_BYTES], raw[rows_a * ROW_BYTES:]


def _mma(ctx, op):
    """mma.sync with every element of A = 1 and of B = 1.5: each trip's accumulator j ends at j + UNROLL K 1.5,
    exactly, whatever the fragment layout; the sink must hold their sum over every thread and trip."""
    k, one, one_half, size = TENSOR[op]
    func = kernel("energy.cu", f"mma_{'e4m3' if op == 'fp8' else op}")
    blocks = _grid(func, MMA_THREADS, ctx.device)
    word = (lambda bits: bits * 0x00010001) if size == 2 else (lambda bits: bits * 0x01010101)
    sink = Sink(f"mma.sync {op}")
    clocks = CLOCKS.at_least(blocks)
    threads = blocks * MMA_THREADS
    per_thread_trip = 4 * sum(range(MMA_ACC)) + 4 * MMA_ACC * int(MMA_UNROLL * k * 1.5)

    def run(trips: int):
        def launch():
            func((blocks,), (MMA_THREADS,), (np.uint32(word(one)), np.uint32(word(one_half)), np.int32(trips),
                                             sink.array, clocks))
            sink.add(threads * trips * per_thread_trip)
        return launch

    sink.reset()
    flop_per_trip = float(threads // 32) * MMA_UNROLL * MMA_ACC * 2 * 16 * 8 * k
    return run, sink.check_added, lambda trips: flop_per_trip * trips, "FLOP", _flop_bound(ctx, op)


def stream_work(ctx, op):
    """16-byte L2-only reads of a buffer of fill_hash words: HBM_FOOTPRINT_L2 x L2 (at most MEMORY_FRACTION of
    memory) for hbm, L2_TOUCH_FRACTION x L2 for l2; the sink must hold passes x the buffer's sum."""
    device = ctx.device
    l2 = int(device["l2_bytes"])
    nbytes = (min(HBM_FOOTPRINT_L2 * l2, int(MEMORY_FRACTION * device["total_memory_bytes"]))
              if op == "hbm" else int(L2_TOUCH_FRACTION * l2))
    nbytes -= nbytes % (1 << 20)
    words = Filled.at_least(nbytes, device)
    per_pass = sum32(words, 0, nbytes // 4)
    func = kernel("energy.cu", "read_stream")
    blocks = _grid(func, STREAM_THREADS, device)
    sink = Sink(f"read_stream {op}")
    clocks = CLOCKS.at_least(blocks)
    sink.reset()

    def run(passes: int):
        def launch():
            func((blocks,), (STREAM_THREADS,), (words, np.int64(nbytes // 16), np.int32(passes), sink.array,
                                                 clocks))
            sink.add(passes * per_pass)
        return launch

    bound = bandwidth_bound(device, "dram" if op == "hbm" else "l2") or math.inf
    return run, sink.check_added, lambda passes: float(nbytes) * passes, "B", lambda rate, hz: rate > bound


def smem_work(ctx, op):
    """16-byte ld.shared of a block's known array: every trip reads each element SMEM_THREADS x SMEM_UNROLL /
    SMEM_VEC times, so the sink must hold blocks x trips x that x the array's word sum."""
    func = kernel("energy.cu", "smem_read")
    blocks = _grid(func, SMEM_THREADS, ctx.device)
    sink = Sink("smem_read")
    clocks = CLOCKS.at_least(blocks)
    words = np.arange(4 * SMEM_VEC, dtype=np.uint64)
    array_sum = int(((words * GOLDEN + OFFSET) & 0xFFFFFFFF).sum()) & 0xFFFFFFFF
    reads = SMEM_THREADS * SMEM_UNROLL // SMEM_VEC
    sink.reset()

    def run(trips: int):
        def launch():
            func((blocks,), (SMEM_THREADS,), (np.int32(trips), sink.array, clocks))
            sink.add(blocks * trips * reads * array_sum)
        return launch

    per_launch = float(blocks) * SMEM_THREADS * SMEM_UNROLL * 16
    sms = ctx.device["sm_count"]
    return (run, sink.check_added, lambda trips: per_launch * trips, "B",
            lambda rate, hz: rate / sms / hz > MAX_BYTES_PER_CLK_SM)
