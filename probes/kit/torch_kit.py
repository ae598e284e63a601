"""The torch and Triton kit: CUDA events on torch's stream, random bf16 operands, a product checked against
fp64, a FLOP/s sampler with its physical bound, and the launcher of the Triton tl.dot matmul.  torch and Triton
are imported lazily, so `gpuatlas list` runs without them.

Operands are random normal bf16 (never zeros: zeros run faster).  Results are checked before and after timing:
sampled rows of C against an fp64 product of the same rows, relative Frobenius error below CHECK_TOLERANCE.
FLOP/s above what any tensor core so far could do on this device's SMs and clock is flagged ``invalid``.
"""
from __future__ import annotations

import math

from gpuatlas.probes.kit.harness import EventTimer, Sample, repeat_until_stable


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
    from gpuatlas.probes.kit.triton_kernels import matmul_kernel

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
