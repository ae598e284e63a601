"""Matmul throughput: what users get, and the lecture's §7.8 roofline (Triton kernels in triton_kernels.py).

* ``matmul.library`` -- BF16 C = A·B at 8192^3 through cuBLAS (torch.matmul; CuPy 14 has no bfloat16) and
  through a Triton tl.dot kernel (tutorial 03: grouped launch order, a few Hopper-sized configs that fit the
  device's shared memory, the fastest measured).
* ``matmul.roofline`` -- Triton square tiles BLOCK_M = BLOCK_N = BLOCK_K = BLOCK, row-major launch order (the
  lecture's per-program model), every BLOCK whose double-buffered tiles fit one block's shared memory.  Its
  intensity is BLOCK/2 FLOP/byte; ``analysis/roofline.py`` predicts min(peak, intensity x HBM bandwidth) from
  the same run's measured ceilings and sets the measured points beside the prediction.

Operands are random normal bf16 (never zeros: zeros run faster).  Every launch is timed with CUDA events on
torch's current stream, and the SM clock is read after each sample.  Results are checked before and after
timing: sampled rows of C against an fp64 product of the same rows, relative Frobenius error below CHECK_TOLERANCE.
FLOP/s above what any tensor core so far could do on this device's SMs and clock is flagged ``invalid``.
"""
from __future__ import annotations

import math

from analysis.roofline import feasible_blocks, matmul_flops, smem_budget, tile_smem_bytes
from probes.harness import EventTimer, Sample, launch_seconds, repeat_until_stable
from probes.registry import probe

LIBRARY_SIDE = 8192
ROOFLINE_SIDES = {"quick": (4096,), "full": (4096, 8192)}
#: Tutorial-03 style configs for Hopper (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); those that fit
#: the device's shared memory are each timed once and the fastest is measured.
TRITON_CONFIGS = ((128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 3))
GROUP_M = 8
#: Rows of C checked against an fp64 product, and the bound on their relative Frobenius error (bf16 output
#: rounding is 2^-9 relative; fp32 accumulation order adds far less).
CHECK_ROWS, CHECK_TOLERANCE = 16, 1e-2
#: Validity: dense BF16 FLOP per clock per SM, twice the densest tensor core so far (8192: Blackwell's
#: dense BF16 rate is about 8192 FLOP/clk/SM, Hopper's 4096).  Above it x SMs x max clock a sample is invalid.
MAX_FLOP_PER_CLK_SM = 2 * 8192


def flop_bound(device: dict) -> float | None:
    if not device.get("sm_clock_max_hz"):
        return None
    return MAX_FLOP_PER_CLK_SM * device["sm_count"] * device["sm_clock_max_hz"]


def roofline_warps(block: int) -> int:
    """Warps per program: one per 32x32 of the tile (a power of two), 1 to 8; 4+ gives a warpgroup (wgmma)."""
    return max(1, min(8, block * block // 1024))


def library_configs(device: dict) -> list[tuple]:
    """TRITON_CONFIGS whose num_stages buffers of A (BLOCK_M x BLOCK_K) and B tiles fit the device."""
    fits = [c for c in TRITON_CONFIGS if c[4] * (c[0] + c[1]) * c[2] * 2 <= smem_budget(device)]
    if not fits:
        raise RuntimeError("no Triton matmul config fits this device's shared memory per block")
    return fits


# -- torch / Triton plumbing (imported lazily: `gpuatlas list` runs without them) ----------------------------

def torch_stream():
    """Torch's current stream as a CuPy stream: where torch and Triton launch, so where their events go."""
    import cupy
    import torch

    return cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)


def torch_timer(launch, min_sample_s: float) -> EventTimer:
    """An EventTimer whose events are recorded on torch's current stream, where torch and Triton launch."""
    return EventTimer(launch, min_sample_s, stream=torch_stream())


def random_bf16(shape, seed: int):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)


def triton_matmul(a, b, c, block_m: int, block_n: int, block_k: int, group_m: int, num_warps: int,
                  num_stages: int):
    """A launcher for ``matmul_kernel`` on shapes that are multiples of the blocks."""
    from probes.triton_kernels import matmul_kernel

    (m, k), (_, n) = a.shape, b.shape
    if m % block_m or n % block_n or k % block_k:
        raise ValueError(f"{m}x{k}x{n} is not a multiple of the blocks {block_m}x{block_n}x{block_k}")
    grid = (m // block_m * (n // block_n),)

    def launch():
        matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                            c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
                            num_warps=num_warps, num_stages=num_stages)
    return launch


def check_product(c, a, b, what: str, seed: int) -> float:
    """Relative Frobenius error of CHECK_ROWS random rows of ``c`` against an fp64 product; raises above the
    tolerance (``c`` starts as NaN, so a kernel that wrote nothing fails too)."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    rows = torch.randint(0, a.shape[0], (CHECK_ROWS,), generator=gen, device="cuda")
    want = a[rows].double() @ b.double()
    got = c[rows].double()
    error = float(torch.linalg.norm(got - want) / torch.linalg.norm(want))
    if not math.isfinite(error) or error > CHECK_TOLERANCE:
        raise RuntimeError(f"{what}: sampled rows of C are off by {error:.3g} (relative Frobenius) from an fp64 "
                           f"product; the bound is {CHECK_TOLERANCE}")
    return error


def measure_flops(ctx, launch, flops: float, extra: tuple = ()) -> list[Sample]:
    """Event-time ``launch`` until stable: ``flop_rate`` (FLOP/s) and ``seconds`` per launch, per sample."""
    timer = torch_timer(launch, ctx.budget.min_sample_s)
    bound = flop_bound(ctx.device)

    def sample(repeat: int) -> list[Sample]:
        seconds = timer.seconds_per_launch()
        hz = ctx.sm_clock()
        rate = flops / seconds
        flag = "invalid" if bound is not None and rate > bound else ctx.throttle_flag(hz, power_limited=True)
        return [Sample("flop_rate", rate, "FLOP/s", repeat, hz, "cuda_event", flag),
                Sample("seconds", seconds, "s", repeat, hz, "cuda_event", flag),
                *(Sample(metric, value, unit, repeat, hz, "config", flag) for metric, value, unit in extra)]

    return repeat_until_stable(sample, "flop_rate", ctx.budget)


def operands(ctx, side: int):
    import torch

    a, b = random_bf16((side, side), ctx.seed * 7919 + 1), random_bf16((side, side), ctx.seed * 7919 + 2)
    # NaN, not torch.empty: a reused allocation may still hold the previous config's (correct) product
    return a, b, torch.full((side, side), float("nan"), device="cuda", dtype=torch.bfloat16)


@probe("matmul.library",
       sweeps={p: (lambda d: {"impl": ["cublas", "triton"], "matrix_side": [LIBRARY_SIDE]}) for p in ("quick", "full")},
       axes={"impl": "cublas (torch.matmul) or triton (tl.dot, tutorial 03, fastest of a few Hopper configs)",
             "matrix_side": "M = N = K (8192)"},
       quantities=("matmul.cublas_bf16_flops", "matmul.triton_bf16_flops"), backend="triton",
       kernels=("triton_kernels.py",), min_cc=(8, 0))
def matmul_library(ctx, impl: str, matrix_side: int) -> list[Sample]:
    """FLOP/s of a BF16 n x n x n matmul (2n^3 FLOP) through cuBLAS or a Triton tl.dot kernel."""
    import torch

    side = int(matrix_side)
    a, b, c = operands(ctx, side)
    extra = ()
    if impl == "cublas":
        def launch():
            torch.matmul(a, b, out=c)
    elif impl == "triton":
        candidates = {cfg: triton_matmul(a, b, c, *cfg[:3], GROUP_M, *cfg[3:]) for cfg in library_configs(ctx.device)}
        for run in candidates.values():
            run()  # compile
        # one warm-up launch waited for, then the fastest of 3 launches, each timed and waited for alone
        times = {cfg: launch_seconds(run, 3, warmup=1, wait_after_warmup=True, stream=torch_stream())
                 for cfg, run in candidates.items()}
        best = min(times, key=times.get)
        launch = candidates[best]
        extra = tuple((name, float(v), "1") for name, v in
                      zip(("block_m", "block_n", "block_k", "num_warps", "num_stages"), best))
    else:
        raise ValueError(f"unknown impl {impl!r}: choose cublas or triton")
    launch()
    check_product(c, a, b, f"{impl} {side}^3", ctx.seed)
    samples = measure_flops(ctx, launch, matmul_flops(side, side, side), extra)
    check_product(c, a, b, f"{impl} {side}^3 after timing", ctx.seed + 1)
    return samples


def _roofline_sweep(sides):
    return lambda device: {"block": feasible_blocks(device), "matrix_side": list(sides)}


@probe("matmul.roofline", sweeps={p: _roofline_sweep(s) for p, s in ROOFLINE_SIDES.items()},
       axes={"block": "square tile edge BLOCK = BLOCK_M = BLOCK_N = BLOCK_K, 16..256, those whose double-buffered "
                      "A and B tiles fit one block's opt-in shared memory",
             "matrix_side": "M = N = K (quick: 4096; full: 4096 and 8192)"},
       quantities=("roofline.tiled_fraction_of_peak",), backend="triton", kernels=("triton_kernels.py",),
       min_cc=(8, 0))
def matmul_roofline(ctx, block: int, matrix_side: int) -> list[Sample]:
    """FLOP/s of a Triton matmul tiled in BLOCK x BLOCK squares (intensity BLOCK/2 FLOP/byte at bf16)."""
    block, side = int(block), int(matrix_side)
    if tile_smem_bytes(block) > smem_budget(ctx.device):
        raise ValueError(f"BLOCK {block} does not fit this device's shared memory per block")
    a, b, c = operands(ctx, side)
    launch = triton_matmul(a, b, c, block, block, block, 1, roofline_warps(block), 2)
    launch()
    check_product(c, a, b, f"square-tiled BLOCK {block}, {side}^3", ctx.seed)
    samples = measure_flops(ctx, launch, matmul_flops(side, side, side),
                            (("num_warps", float(roofline_warps(block)), "1"),))
    check_product(c, a, b, f"square-tiled BLOCK {block}, {side}^3 after timing", ctx.seed + 1)
    return samples
