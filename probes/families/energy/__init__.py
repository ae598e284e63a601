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

from gpuatlas.probes.families.energy.work import CLOCKS, ffma_work, smem_work, stream_work, tensor_path, tensor_work
from gpuatlas.probes.kit import telemetry
from gpuatlas.probes.kit.harness import Sample, calibrate
from gpuatlas.probes.kit.samplers import kernel_clock_hz
from gpuatlas.probes.registry import probe

OPS = ("idle", "fp32", "bf16", "fp8", "hbm", "l2", "smem")
#: Seconds of each window (NVML's counter must move many times inside it), of one launch, and between two
#: reads of the counter.  A rest before the idle window lasts REST_MIN_S..REST_MAX_S (telemetry.Recorder.rest).
WINDOW_S, LAUNCH_S, POLL_S = 1.1, 0.02, 1e-3
#: A window goes on past WINDOW_S (EXTEND_S more at a time), up to MAX_WINDOW_S, until the counter has moved
#: WANT_UPDATES times past SETTLE_PERIODS of its update periods (the analysis needs five such updates).
SETTLE_PERIODS, WANT_UPDATES, EXTEND_S, MAX_WINDOW_S = 2, 6, 0.1, 3.0
REST_MIN_S, REST_MAX_S = 0.3, 1.0
FP8_ABSENT = ("no native FP8 tensor instruction this probe drives here: mma.sync e4m3 needs compute capability "
              "8.9 and is emulated on 10.x (whose FP8 path is tcgen05), wgmma exists on 9.0 only")


def ops_for(device: dict) -> list[dict]:
    """Every op this GPU can run, idle first (its window must see the GPU at rest)."""
    return [{"op": op} for op in OPS if op != "fp8" or tensor_path(device, "fp8")]


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
    build = {"fp32": ffma_work, "bf16": tensor_work, "fp8": tensor_work, "hbm": stream_work, "l2": stream_work, "smem": smem_work}[op]
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
        try:
            value = energy()
        except Exception:  # a failed read is a missing reading (the next one places the update)
            value = None
        if value is not None:
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
    if not readings:
        raise RuntimeError("NVML's energy counter answered no read during the window")
    samples = [Sample("energy_before_mj", before, "mJ", 0, None, "nvml"),
               Sample("energy_after_mj", after, "mJ", 0, None, "nvml"),
               Sample("host_window_s", done, "s", 0, None, "monotonic"),
               Sample("energy_poll_s", float(np.median(np.diff([r[0] for r in readings]))) if len(readings) > 1
                      else math.nan, "s", 0, None, "monotonic")]
    samples += _changes(readings)
    if launch is not None:
        events[-1].synchronize()
        ends = np.cumsum([cupy.cuda.get_elapsed_time(a, b) * 1e-3 for a, b in zip(events[:-1], events[1:])])
        hz = kernel_clock_hz(CLOCKS.get())
        rate = per_launch * ends.size / ends[-1]
        per_clk = rate / ctx.device["sm_count"] / hz
        flag = "invalid" if too_fast(rate, hz) else ""
        samples += [Sample("launch_end_s", float(end), "s", i, hz, "cuda_event", flag) for i, end in enumerate(ends)]
        samples += [Sample("work_per_launch", per_launch, unit, 0, hz, "config", flag),
                    Sample("rate", rate, f"{unit}/s", 0, hz, "cuda_event", flag),
                    Sample("per_clk_sm", per_clk, f"{unit}/cycle", 0, hz, "cuda_event", flag)]
    return samples + telemetry.trace_samples(recorder, t0, t0 + done)


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
