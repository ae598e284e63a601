"""Energy per operation from NVML's total energy counter (CuPy RawModule, energy.cu; wgmma.cu on sm_90).

``energy.per_operation`` -- one window per op, in the sweep's order: first ``idle`` (the GPU at rest, no
kernel), then FP32 FFMA (vector), BF16 and FP8 (e4m3) tensor-core matmul, and 16-byte reads from HBM, the L2
and shared memory.  Each op's kernel is launched back to back for WINDOW_S, longer where the counter moves
too rarely (``window``), in launches of about LAUNCH_S, each timed by CUDA events; meanwhile the host reads
NVML's energy counter every POLL_S and keeps the readings around each change of its value (``energy_t_s``,
``energy_mj``: the counter moves at the driver's update period, not at every read).  Beside them: the counter
read right before and after the window, each launch's end on the events' timeline (``launch_end_s``), the
work of one launch (FLOP or bytes, from the kernel's own counts), the in-kernel SM clock, and NVML's power,
SM clock and clock-event-reason readings over the window (``trace_*``).  Every op proves its result on the
host (a checksum or an exact value) and a rate above a physical bound is flagged ``invalid``.

Tensor ops use wgmma (m64n256, compute's wgmma.cu, loaded by its file name: the version hashes it, and a
full run has built it for sm_90a by then) where it exists (compute capability 9.0), else mma.sync from
energy.cu; FP8 is measured where the GPU has a native FP8 tensor instruction (wgmma on 9.0, mma.sync on
8.9 and 12.x) and left out of the sweep elsewhere (FP8_ABSENT says why).  Full profile only: the quick
profile's sweep is empty.
"""
from __future__ import annotations

import math
import time

import numpy as np

from probes.kit import telemetry
from probes.kit.cuda import blocks_per_sm, kernel
from probes.kit.harness import Sample, Sink, calibrate
from probes.kit.samplers import (HBM_FOOTPRINT_L2, L2_TOUCH_FRACTION, MAX_BYTES_PER_CLK_SM, MEMORY_FRACTION,
                                 Filled, bandwidth_bound, kernel_clock_hz, sum32)
from probes.registry import probe

RUN_ORDER = 335

OPS = ("idle", "fp32", "bf16", "fp8", "hbm", "l2", "smem")
#: Seconds of each window (NVML's counter must move many times inside it), of one launch, and between two
#: reads of the counter.  A rest before the idle window lasts REST_MIN_S..REST_MAX_S (telemetry.Recorder.rest).
WINDOW_S, LAUNCH_S, POLL_S = 1.1, 0.02, 1e-3
#: A window goes on past WINDOW_S (EXTEND_S more at a time), up to MAX_WINDOW_S, until the counter has moved
#: WANT_UPDATES times past SETTLE_PERIODS of its update periods (the analysis needs five such updates).
SETTLE_PERIODS, WANT_UPDATES, EXTEND_S, MAX_WINDOW_S = 2, 6, 0.1, 3.0
REST_MIN_S, REST_MAX_S = 0.3, 1.0
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
FP8_ABSENT = ("no native FP8 tensor instruction this probe drives here: mma.sync e4m3 needs compute capability "
              "8.9 and is emulated on 10.x (whose FP8 path is tcgen05), wgmma exists on 9.0 only")


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


def ops_for(device: dict) -> list[dict]:
    """Every op this GPU can run, idle first (its window must see the GPU at rest)."""
    return [{"op": op} for op in OPS if op != "fp8" or tensor_path(device, "fp8")]


def flop_bound_per_clk_sm(op: str) -> float:
    """Largest FLOP per clock per SM of ``op`` (fp32, bf16, fp8) any NVIDIA SM so far could do, with clock slack."""
    if op == "fp32":
        return SUBPARTITIONS * LANES * 2 * CLOCK_SLACK
    return SUBPARTITIONS * TC_FMA_16BIT * 2 * (2 if op == "fp8" else 1) * CLOCK_SLACK


def _flop_bound(ctx, op: str):
    """``too_fast(rate, hz)``: FLOP/s above flop_bound_per_clk_sm at the clock the launch ran at."""
    sms, bound = ctx.device["sm_count"], flop_bound_per_clk_sm(op)
    return lambda rate, hz: rate / sms / hz > bound


@probe("energy.per_operation", sweeps={"quick": lambda device: [], "full": ops_for},
       axes={"op": "idle (no kernel), fp32 (FFMA), bf16 and fp8 (tensor), hbm, l2, smem (16-byte reads)"},
       quantities=("energy.idle_power_w", *(f"energy.{op}.{kind}_pj_per_flop" for op in ("fp32", "bf16", "fp8")
                                            for kind in ("board", "net")),
                   *(f"energy.{level}.{kind}_pj_per_byte" for level in ("hbm", "l2", "smem")
                     for kind in ("board", "net"))),
       kernels=("energy.cu",), min_cc=(8, 0))
def energy_per_operation(ctx, op: str) -> list[Sample]:
    """Energy per FLOP and per byte read: NVML's energy counter over a kernel held for over a second."""
    if op == "fp8" and not tensor_path(ctx.device, "fp8"):
        raise ValueError(f"fp8 is not measured on compute capability {ctx.device['compute_capability']}: "
                         f"{FP8_ABSENT}")
    if op not in OPS:
        raise ValueError(f"op {op!r} is not measured here: choose one of "
                         f"{', '.join(c['op'] for c in ops_for(ctx.device))}")
    energy = telemetry.energy_reader(ctx.device.get("uuid"))
    if energy is None:
        raise RuntimeError("NVML's total energy counter does not answer on this GPU: no energy to measure")
    recorder = telemetry.recorder(ctx.device.get("uuid"))
    if op == "idle":
        recorder.rest(REST_MAX_S, REST_MIN_S)
        return window(ctx, energy, recorder, None)
    build = {"fp32": _ffma, "bf16": _tensor, "fp8": _tensor, "hbm": _stream, "l2": _stream, "smem": _smem}[op]
    run, check, work, unit, too_fast = build(ctx, op)
    count, _ = calibrate(run, 1, LAUNCH_S, max_count=2**31 - 1)
    samples = window(ctx, energy, recorder, (run(count), work(count), unit, too_fast))
    check()
    return samples


def window(ctx, energy, recorder, kernel_work) -> list[Sample]:
    """One window: launches queued back to back (or none: idle) with an event after each, the energy counter
    polled meanwhile; at least WINDOW_S, and on (more launches queued while two remain) until the counter has
    moved WANT_UPDATES times past SETTLE_PERIODS of its update periods, at most MAX_WINDOW_S."""
    import cupy

    launch = None
    events = [cupy.cuda.Event()]

    def queue(n: int) -> None:
        for _ in range(n):
            launch()
            events.append(cupy.cuda.Event())
            events[-1].record()

    if kernel_work is not None:
        launch, per_launch, unit, too_fast = kernel_work
        seconds = _one_launch_s(launch)
    before = energy()
    t0 = time.monotonic()
    events[0].record()
    if launch is not None:
        queue(max(2, math.ceil(WINDOW_S / seconds)))
    readings, changes = [], []
    while True:
        t = time.monotonic() - t0
        value = energy()
        if readings and value != readings[-1][1]:
            changes.append(t)
        readings.append((t, value))
        enough = settled_updates(changes) >= WANT_UPDATES or t >= MAX_WINDOW_S
        if launch is None and t >= WINDOW_S and enough:
            break
        if launch is not None and events[-1].done:
            break
        if launch is not None and not enough and events[-3].done:
            queue(max(1, math.ceil(EXTEND_S / seconds)))
        time.sleep(POLL_S)
    done = time.monotonic() - t0
    after = energy()
    samples = [Sample("energy_before_mj", before, "mJ", 0, None, "nvml"),
               Sample("energy_after_mj", after, "mJ", 0, None, "nvml"),
               Sample("host_window_s", done, "s", 0, None, "monotonic"),
               Sample("energy_poll_s", float(np.median(np.diff([r[0] for r in readings]))) if len(readings) > 1
                      else math.nan, "s", 0, None, "monotonic")]
    samples += _changes(readings)
    if launch is not None:
        events[-1].synchronize()
        ends = np.cumsum([cupy.cuda.get_elapsed_time(a, b) * 1e-3 for a, b in zip(events[:-1], events[1:])])
        hz = kernel_clock_hz(_CLOCKS.get())
        rate = per_launch * ends.size / ends[-1]
        per_clk = rate / ctx.device["sm_count"] / hz
        flag = "invalid" if too_fast(rate, hz) else ""
        samples += [Sample("launch_end_s", float(end), "s", i, hz, "cuda_event", flag) for i, end in enumerate(ends)]
        samples += [Sample("work_per_launch", per_launch, unit, 0, hz, "config", flag),
                    Sample("rate", rate, f"{unit}/s", 0, hz, "cuda_event", flag),
                    Sample("per_clk_sm", per_clk, f"{unit}/cycle", 0, hz, "cuda_event", flag)]
    for index, (t, power, hz, reasons, temperature) in enumerate(recorder.readings(t0, t0 + done)):
        samples += [Sample("trace_t_s", t - t0, "s", index, None, "nvml"),
                    Sample("trace_power_w", power, "W", index, None, "nvml"),
                    Sample("trace_sm_clock_hz", hz, "Hz", index, None, "nvml"),
                    Sample("trace_clock_event_reasons", reasons, "1", index, None, "nvml"),
                    Sample("trace_temperature_c", temperature, "C", index, None, "nvml")]
    return samples


def settled_updates(changes: list[float]) -> int:
    """Counter updates (the times its value changed, since the window began) SETTLE_PERIODS median update
    periods or more past the start."""
    if len(changes) < 2:
        return 0
    period = float(np.median(np.diff(changes)))
    return sum(c >= SETTLE_PERIODS * period for c in changes)


def _changes(readings: list[tuple[float, int]]) -> list[Sample]:
    """The first and last readings, and each reading on either side of a change of the counter's value."""
    keep = {0, len(readings) - 1}
    for i in range(1, len(readings)):
        if readings[i][1] != readings[i - 1][1]:
            keep |= {i - 1, i}
    out = []
    for repeat, i in enumerate(sorted(keep)):
        out += [Sample("energy_t_s", readings[i][0], "s", repeat, None, "monotonic"),
                Sample("energy_mj", readings[i][1], "mJ", repeat, None, "nvml")]
    return out


def _one_launch_s(launch) -> float:
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    launch()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) * 1e-3


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


_CLOCKS = _Clocks()


def _grid(func, threads: int, device: dict, smem: int = 0) -> int:
    return device["sm_count"] * blocks_per_sm(func, threads, smem)


def _ffma(ctx, op):
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
    clocks = _CLOCKS.at_least(blocks)

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


def _tensor(ctx, op):
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
    clocks = _CLOCKS.at_least(blocks)

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
    clocks = _CLOCKS.at_least(blocks)
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


def _stream(ctx, op):
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
    clocks = _CLOCKS.at_least(blocks)
    sink.reset()

    def run(passes: int):
        def launch():
            func((blocks,), (STREAM_THREADS,), (words, np.int64(nbytes // 16), np.int32(passes), sink.array,
                                                 clocks))
            sink.add(passes * per_pass)
        return launch

    bound = bandwidth_bound(device, "dram" if op == "hbm" else "l2") or math.inf
    return run, sink.check_added, lambda passes: float(nbytes) * passes, "B", lambda rate, hz: rate > bound


def _smem(ctx, op):
    """16-byte ld.shared of a block's known array: every trip reads each element SMEM_THREADS x SMEM_UNROLL /
    SMEM_VEC times, so the sink must hold blocks x trips x that x the array's word sum."""
    func = kernel("energy.cu", "smem_read")
    blocks = _grid(func, SMEM_THREADS, ctx.device)
    sink = Sink("smem_read")
    clocks = _CLOCKS.at_least(blocks)
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
