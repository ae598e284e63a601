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

from gpuatlas.analysis.roofline import feasible_blocks, matmul_flops, smem_budget, tile_smem_bytes
from gpuatlas.probes.kit.harness import Sample, launch_seconds
from gpuatlas.probes.kit.torch_kit import check_product, measure_flops, operands, torch_stream, triton_matmul
from gpuatlas.probes.registry import probe

LIBRARY_SIDE = 8192
ROOFLINE_SIDES = {"quick": (4096,), "full": (4096, 8192)}
#: Tutorial-03 style configs for Hopper (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); those that fit
#: the device's shared memory are each timed once and the fastest is measured.
TRITON_CONFIGS = ((128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 3))
GROUP_M = 8


def roofline_warps(block: int) -> int:
    """Warps per program: one per 32x32 of the tile (a power of two), 1 to 8; 4+ gives a warpgroup (wgmma)."""
    return max(1, min(8, block * block // 1024))


def library_configs(device: dict) -> list[tuple]:
    """TRITON_CONFIGS whose num_stages buffers of A (BLOCK_M x BLOCK_K) and B tiles fit the device."""
    fits = [c for c in TRITON_CONFIGS if c[4] * (c[0] + c[1]) * c[2] * 2 <= smem_budget(device)]
    if not fits:
        raise RuntimeError("no Triton matmul config fits this device's shared memory per block")
    return fits


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
