"""The lecture's §7.10 fused softmax, measured: three unfused Triton kernels against one fused kernel.

Row softmax of a 4096 x 4096 bf16 matrix.  Unfused: row max; exp(x - max) and row sum, writing the
intermediate; normalize -- five traversals of the matrix.  Fused: one program per row holds its row on chip,
one read and one write -- two traversals (``analysis/fusion.py`` counts the bytes).  The lecture predicts
2.5x, since softmax is bandwidth-bound.

Each softmax reads a different input from a ring of buffers that together span several times the L2, so every
input comes from HBM, not from the previous launch's L2 lines.  (The intermediate of the unfused chain is
written and read back within one softmax: what of it the L2 keeps is the hardware's business, and part of the
answer.)  Launches are timed with CUDA events on torch's current stream, batched over the ring, either as plain
launches or replayed from a CUDA graph (no host gaps between kernels); the SM clock is read after each sample.
Every output is checked against torch.softmax in fp32 before timing and one ring slot after every sample (outputs start as
NaN, so a kernel that wrote nothing fails).  A
softmax faster than reading its input once at the HBM interface's peak is flagged ``invalid``.
"""
from __future__ import annotations

import math

from gpuatlas.analysis.fusion import LAUNCHES, VARIANTS, softmax_bytes, total_bytes
from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.kit.samplers import bandwidth_bound
from gpuatlas.probes.registry import probe

MATRIX_SIDE = 4096
#: The ring of inputs spans at least this many times the L2 (and at least two buffers).
RING_L2 = 4
#: ... and the ring's buffers take at most this fraction of device memory.
MEMORY_FRACTION = 0.25
#: bf16 softmax outputs: |y - ref| <= ATOL + RTOL |ref| against fp32 torch.softmax (bf16 keeps 8 bits; the
#: unfused chain rounds twice), and every row sums to 1 within ROW_SUM_TOLERANCE.
RTOL, ATOL, ROW_SUM_TOLERANCE = 2.0**-6, 1e-6, 1e-2
NUM_WARPS = 8


def ring_slots(device: dict, matrix_bytes: int, buffers_per_slot: int) -> int:
    """Inputs in the ring: enough that they span RING_L2 x L2, capped by MEMORY_FRACTION of device memory."""
    want = max(2, math.ceil(RING_L2 * device["l2_bytes"] / matrix_bytes))
    cap = int(device["total_memory_bytes"] * MEMORY_FRACTION) // (matrix_bytes * buffers_per_slot)
    return max(2, min(want, cap))


def _slot_buffers(side: int, slots: int, seed: int):
    import torch

    from gpuatlas.probes.kit.torch_kit import random_bf16

    def empty(*shape, dtype=torch.bfloat16):
        """NaN-filled: a reused allocation may hold a previous config's (correct) softmax."""
        return torch.full(shape, float("nan"), device="cuda", dtype=dtype)

    return [{"x": random_bf16((side, side), seed * 104729 + i), "e": empty(side, side), "y": empty(side, side),
             "max": empty(side, dtype=torch.float32), "sum": empty(side, dtype=torch.float32)} for i in range(slots)]


def _softmax_launches(variant: str, slots: list[dict], side: int):
    """A callable launching one softmax per ring slot."""
    import triton

    from gpuatlas.probes.kit.triton_kernels import exp_sum_kernel, normalize_kernel, row_max_kernel, softmax_kernel

    block, grid = triton.next_power_of_2(side), (side,)
    opts = {"BLOCK": block, "num_warps": NUM_WARPS}

    def unfused():
        for s in slots:
            row_max_kernel[grid](s["x"], s["max"], s["x"].stride(0), side, **opts)
            exp_sum_kernel[grid](s["x"], s["max"], s["e"], s["sum"], s["x"].stride(0), side, **opts)
            normalize_kernel[grid](s["e"], s["sum"], s["y"], s["x"].stride(0), side, **opts)

    def fused():
        for s in slots:
            softmax_kernel[grid](s["x"], s["y"], s["x"].stride(0), side, **opts)

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: choose one of {', '.join(VARIANTS)}")
    return unfused if variant == "unfused" else fused


def check_softmax(slot: dict, what: str) -> None:
    import torch

    ref = torch.softmax(slot["x"].float(), dim=-1)
    y = slot["y"].float()
    wrong = int((~((y - ref).abs() <= ATOL + RTOL * ref.abs())).sum())
    row_sums = y.sum(dim=-1)
    worst_sum = float((row_sums - 1).abs().max())
    if wrong or not worst_sum <= ROW_SUM_TOLERANCE:
        raise RuntimeError(f"{what}: {wrong} outputs differ from torch.softmax beyond {RTOL:.3g} relative; "
                           f"worst row sum is off by {worst_sum:.3g}")


def _graph(launch):
    """``launch`` captured once into a CUDA graph (already compiled and warm); returns its replay."""
    import torch

    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    torch.cuda.synchronize()
    return graph.replay


@probe("fusion.softmax",
       sweeps={p: (lambda d: {"launch": ["plain", "graph"], "variant": list(VARIANTS), "matrix_side": [MATRIX_SIDE]})
               for p in ("quick", "full")},
       axes={"launch": "plain launches, or the same launches replayed from a CUDA graph",
             "variant": "unfused (row max; exp and row sum writing the intermediate; normalize) or fused (one "
                        "kernel, one read, one write)",
             "matrix_side": "rows = columns (4096)"},
       quantities=("fusion.softmax_speedup",), backend="triton", kernels=("triton_kernels.py",), min_cc=(8, 0))
def fusion_softmax(ctx, launch: str, variant: str, matrix_side: int) -> list[Sample]:
    """Seconds per row softmax of a bf16 matrix, unfused (three kernels) or fused (one), and the counted bytes
    over that time."""
    from gpuatlas.probes.kit.torch_kit import torch_timer

    if launch not in LAUNCHES:
        raise ValueError(f"unknown launch {launch!r}: choose one of {', '.join(LAUNCHES)}")
    side = int(matrix_side)
    matrix_bytes = side * side * 2
    slots = _slot_buffers(side, ring_slots(ctx.device, matrix_bytes, 3), ctx.seed)
    run = _softmax_launches(variant, slots, side)
    run()  # compiles, and fills every output
    for i, slot in enumerate(slots):
        check_softmax(slot, f"{variant} softmax, ring slot {i}")
    if launch == "graph":
        run = _graph(run)
    timer = torch_timer(run, ctx.budget.min_sample_s)
    moved = total_bytes(side, side, variant)
    bound = bandwidth_bound(ctx.device, "dram")

    def sample(repeat: int) -> list[Sample]:
        seconds = timer.seconds_per_launch() / len(slots)
        check_softmax(slots[max(repeat, 0) % len(slots)], f"{variant} softmax after sample {repeat}")
        hz = ctx.sm_clock()
        flag = "invalid" if bound is not None and matrix_bytes / seconds > bound else ctx.throttle_flag(hz)
        return [Sample("seconds", seconds, "s", repeat, hz, "cuda_event", flag),
                Sample("bandwidth", moved / seconds, "B/s", repeat, hz, "cuda_event", flag),
                Sample("bytes_moved", float(moved), "B", repeat, hz, "config", flag),
                Sample("ring_slots", float(len(slots)), "1", repeat, hz, "config", flag),
                Sample("kernels", float(len(softmax_bytes(side, side)[variant])), "1", repeat, hz, "config", flag)]

    return repeat_until_stable(sample, "seconds", ctx.budget)
