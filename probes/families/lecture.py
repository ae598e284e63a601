"""Probes for the lecture's own methods and configurations, where they differ from gpuatlas's (lecture.cu).

``chase.smem_index``: the shared-memory chase as published chases write it, ``j = chain[j]`` over element
numbers, so each step computes its address (a multiply by the stride and a scaled add) before the load.
gpuatlas's ``chase.smem`` loads each address straight from the previous load; the two differ by those integer
instructions' latency, and the lecture's "~30 cycles" is the index-computing kind.

``matmul.lecture_tile``: §7.8's own tile, BLOCK_M = BLOCK_N = 256 with BLOCK_K = 64, double-buffered (128 KiB
of shared memory), at 4096^3 bf16 -- the configuration behind its "43% of peak".  Its fp32 accumulator is the
whole register file of an SM, as the lecture says, so the compiler spills; the probe measures what it gets.
"""
from __future__ import annotations

import math

import numpy as np

from gpuatlas.analysis.roofline import matmul_flops, smem_budget
from gpuatlas.probes.kit.chain import measure_shared_chase, smem_footprints
from gpuatlas.probes.kit.harness import repeat_until_stable
from gpuatlas.probes.registry import probe

#: Fewer cycles per step than this cannot be a dependent shared load plus its address arithmetic.
MIN_CYCLES_PER_STEP = 4.0


@probe("chase.smem_index",
       sweeps={"quick": lambda d: {"footprint_bytes": smem_footprints(d)[:1], "stride_bytes": [4]},
               "full": lambda d: {"footprint_bytes": smem_footprints(d)[:2], "stride_bytes": [4]}},
       axes={"footprint_bytes": "bytes of shared memory the chain spans: the smallest two of chase.smem's footprints "
                                "(quick: the smallest, 1 KiB)",
             "stride_bytes": "bytes between chain elements"},
       quantities=("smem.index_latency_cycles",), kernels=("lecture.cu",))
def chase_smem_index(ctx, footprint_bytes: int, stride_bytes: int) -> list:
    """Cycles per step of a shared-memory chase that computes each address from the loaded index (IMAD, LEA,
    LDS), as published chases do."""
    from gpuatlas.probes.kit.cuda import kernel

    return measure_shared_chase(ctx, footprint_bytes, stride_bytes, kernel("lecture.cu", "chase_shared_index"),
                                "index chase", MIN_CYCLES_PER_STEP)


#: §7.8's tile: (BLOCK_M, BLOCK_N, BLOCK_K), warps and pipeline stages, and its problem size.
LECTURE_TILE, LECTURE_WARPS, LECTURE_STAGES, LECTURE_SIDE = (256, 256, 64), 8, 2, 4096


def lecture_tile_smem_bytes() -> int:
    """Double-buffered A and B tiles of bf16: stages x (BLOCK_M x BLOCK_K + BLOCK_K x BLOCK_N) x 2 B."""
    m, n, k = LECTURE_TILE
    return LECTURE_STAGES * (m * k + k * n) * 2


@probe("matmul.lecture_tile",
       sweeps={p: (lambda d: {"matrix_side": [LECTURE_SIDE]}) for p in ("quick", "full")},
       axes={"matrix_side": "M = N = K (4096, the lecture's example)"},
       quantities=("matmul.lecture_tile_bf16_flops", "roofline.lecture_tile_fraction_of_peak"), backend="triton",
       kernels=("triton_kernels.py",), min_cc=(8, 0))
def matmul_lecture_tile(ctx, matrix_side: int) -> list:
    """FLOP/s of a Triton matmul in the lecture's BLOCK 256 x 256 tiles with BLOCK_K 64, row-major launch order."""
    from gpuatlas.probes.kit.torch_kit import check_product, operands, measure_flops, triton_matmul

    side = int(matrix_side)
    if lecture_tile_smem_bytes() > smem_budget(ctx.device):
        raise ValueError(f"the lecture's tile needs {lecture_tile_smem_bytes()} B of shared memory per block, more "
                         f"than this device allows")
    a, b, c = operands(ctx, side)
    launch = triton_matmul(a, b, c, *LECTURE_TILE, 1, LECTURE_WARPS, LECTURE_STAGES)
    launch()
    check_product(c, a, b, f"lecture tile {side}^3", ctx.seed)
    samples = measure_flops(ctx, launch, matmul_flops(side, side, side))
    check_product(c, a, b, f"lecture tile {side}^3 after timing", ctx.seed + 1)
    return samples


#: Rows of the naive product checked against fp64, and the bound on their relative Frobenius error (fp32
#: accumulation of 4096 products of bf16 values).
NAIVE_CHECK_ROWS, NAIVE_TOLERANCE = 4, 1e-4


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, rounded to nearest even."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns -> float64."""
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@probe("matmul.naive",
       sweeps={p: (lambda d: {"matrix_side": [LECTURE_SIDE]}) for p in ("quick", "full")},
       axes={"matrix_side": "M = N = K (4096, the lecture's example)"},
       quantities=("matmul.naive_seconds",), kernels=("lecture.cu",))
def matmul_naive(ctx, matrix_side: int) -> list:
    """Seconds per launch of §7.8's naive bf16 matmul (one thread per output, no tiling, fp32 accumulation)."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel
    from gpuatlas.probes.kit.harness import EventTimer, Sample

    n = int(matrix_side)
    rng = np.random.default_rng(ctx.seed)
    a_host = bf16_bits(rng.standard_normal((n, n), dtype=np.float32))
    b_host = bf16_bits(rng.standard_normal((n, n), dtype=np.float32))
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    c = cupy.full((n, n), cupy.nan, dtype=cupy.float32)
    naive = kernel("lecture.cu", "naive_matmul")
    block = (32, 8)
    grid = (n // block[0], n // block[1])

    def launch():
        naive(grid, block, (a, b, c, np.int32(n)))

    def check(what: str) -> None:
        rows = rng.choice(n, NAIVE_CHECK_ROWS, replace=False)
        want = bf16_values(a_host[rows]) @ bf16_values(b_host)
        got = cupy.asnumpy(c[cupy.asarray(rows)]).astype(np.float64)
        error = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        if not np.isfinite(error) or error > NAIVE_TOLERANCE:
            raise RuntimeError(f"naive matmul {n}^3 {what}: sampled rows off by {error:.3g} (relative Frobenius) "
                               f"from an fp64 product; the bound is {NAIVE_TOLERANCE}")

    launch()
    check("before timing")
    timer = EventTimer(launch, ctx.budget.min_sample_s)

    def sample(repeat: int) -> list:
        seconds = timer.seconds_per_launch()
        hz = ctx.sm_clock()
        return [Sample("seconds", seconds, "s", repeat, hz, "cuda_event", ctx.throttle_flag(hz)),
                Sample("flop_rate", 2.0 * n ** 3 / seconds, "FLOP/s", repeat, hz, "cuda_event",
                       ctx.throttle_flag(hz))]

    samples = repeat_until_stable(sample, "seconds", ctx.budget)
    check("after timing")
    return samples


#: §7.11's decode GEMM: M = the batch of tokens against a K x N bf16 weight matrix; K is the lecture's 4,096.
DECODE_K, DECODE_BATCHES = 4096, (1, 4, 16, 64)


def decode_n(device: dict) -> int:
    """Weight columns N: the smallest multiple of 128 whose K x N bf16 weights are 4x the L2, so every launch
    streams them from HBM."""
    return math.ceil(4 * device["l2_bytes"] / (2 * DECODE_K) / 128) * 128


def decode_bytes(m: int, n: int, k: int = DECODE_K) -> int:
    """Bytes a decode GEMM must move at least: A (M x K), the weights (K x N) and C (M x N), bf16."""
    return 2 * (m * k + k * n + m * n)


@probe("matmul.decode",
       sweeps={"quick": lambda d: {"batch": [1, 16]}, "full": lambda d: {"batch": list(DECODE_BATCHES)}},
       axes={"batch": "M, the tokens decoded together (1..64)"},
       quantities=("decode.m1_bandwidth_bytes_per_s", "decode.m16_flop_per_hbm_byte"), backend="triton",
       min_cc=(8, 0))
def matmul_decode(ctx, batch: int) -> list:
    """Time, bytes/s and FLOP/s of a decode-shaped bf16 GEMM (M x 4096 by 4096 x N, N sized past the L2) through
    cuBLAS."""
    import torch

    from gpuatlas.probes.kit.harness import Sample
    from gpuatlas.probes.kit.torch_kit import check_product, random_bf16, torch_timer

    m, n = int(batch), decode_n(ctx.device)
    a = random_bf16((m, DECODE_K), ctx.seed * 7919 + m)
    w = random_bf16((DECODE_K, n), ctx.seed * 7919 + 1)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)

    def launch():
        torch.matmul(a, w, out=c)

    launch()
    check_product(c, a, w, f"decode M={m}", ctx.seed)
    timer = torch_timer(launch, ctx.budget.min_sample_s)
    moved, flops = decode_bytes(m, n), 2.0 * m * n * DECODE_K

    def sample(repeat: int) -> list:
        seconds = timer.seconds_per_launch()
        hz = ctx.sm_clock()
        flag = ctx.throttle_flag(hz)
        return [Sample("seconds", seconds, "s", repeat, hz, "cuda_event", flag),
                Sample("bandwidth", moved / seconds, "B/s", repeat, hz, "cuda_event", flag),
                Sample("flop_rate", flops / seconds, "FLOP/s", repeat, hz, "cuda_event", flag)]

    samples = repeat_until_stable(sample, "seconds", ctx.budget)
    check_product(c, a, w, f"decode M={m} after timing", ctx.seed + 1)
    return samples


#: §7.10 / exercise 5: a forward-only decode step issues about this many kernel launches.
DECODE_LAUNCHES = 490


@probe("launch.decode_chain",
       sweeps={p: (lambda d: {"mode": ["plain", "graph"]}) for p in ("quick", "full")},
       axes={"mode": "490 plain launches back to back, or one CUDA graph of them"},
       quantities=("launch.chain_490_s", "launch.chain_490_graph_s"), kernels=("lecture.cu",))
def launch_decode_chain(ctx, mode: str) -> list:
    """GPU time of 490 small kernels (one block per SM, each adding 1 to its block's counter) launched back to back,
    or replayed as one CUDA graph: a decode step's dispatch."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel, replayed
    from gpuatlas.probes.kit.harness import EventTimer, Sample

    step = kernel("lecture.cu", "step_kernel")
    sms = int(ctx.device["sm_count"])
    counters = cupy.zeros(sms, dtype=cupy.uint64)
    stream = cupy.cuda.Stream(non_blocking=True)
    launched = 0

    def plain():
        for _ in range(DECODE_LAUNCHES):
            step((sms,), (128,), (counters,), stream=stream)

    run = replayed(plain, stream, mode)

    def counted():
        nonlocal launched
        run()
        launched += DECODE_LAUNCHES

    timer = EventTimer(counted, ctx.budget.min_sample_s, stream=stream)

    def sample(repeat: int) -> list:
        seconds = timer.seconds_per_launch()
        hz = ctx.sm_clock()
        flag = ctx.throttle_flag(hz)
        return [Sample("chain_seconds", seconds, "s", repeat, hz, "cuda_event", flag),
                Sample("launch_interval", seconds / DECODE_LAUNCHES, "s", repeat, hz, "cuda_event", flag)]

    samples = repeat_until_stable(sample, "chain_seconds", ctx.budget)
    stream.synchronize()
    got = cupy.asnumpy(counters)
    if not (got == launched).all():
        raise RuntimeError(f"decode chain ({mode}): counters read {sorted(set(got.tolist()))[:3]}, but "
                           f"{launched} launches were issued")
    return samples


#: §7.8's wave quantization: BLOCK 128 tiles (the lecture's example; BLOCK_K 64, 8 warps, 3 stages) of a
#: 128 x (128 T) x 4096 bf16 matmul, so the grid is T programs, one row of tiles sharing the same A strip.
WAVE_TILE, WAVE_K = (128, 128, 64, 8, 3), 4096


def wave_tiles(device: dict) -> list[int]:
    """Program counts at every half multiple of the SM count and one past each (0.5 .. 3 waves of one program per
    SM): a step in time at a multiple of the programs that run at once shows the wave."""
    sms = device["sm_count"]
    return sorted({max(1, k * sms // 2 + d) for k in range(1, 7) for d in (0, 1)})


@probe("matmul.waves",
       sweeps={"quick": lambda d: {"tiles": [t for t in wave_tiles(d) if t <= 2 * d["sm_count"] + 1]},
               "full": lambda d: {"tiles": wave_tiles(d)}},
       axes={"tiles": "programs in the grid: half multiples of the SM count, and one more than each"},
       quantities=("waves.programs_per_wave",), backend="triton", kernels=("triton_kernels.py",), min_cc=(8, 0))
def matmul_waves(ctx, tiles: int) -> list:
    """Time of a bf16 matmul of ``tiles`` BLOCK 128 programs (128 x 128T x 4096), checked against fp64 rows."""
    import torch

    from gpuatlas.probes.kit.harness import Sample
    from gpuatlas.probes.kit.torch_kit import check_product, random_bf16, torch_timer, triton_matmul

    bm, bn, bk, warps, stages = WAVE_TILE
    a = random_bf16((bm, WAVE_K), ctx.seed * 7919 + 1)
    b = random_bf16((WAVE_K, bn * int(tiles)), ctx.seed * 7919 + 2)
    c = torch.full((bm, bn * int(tiles)), float("nan"), device="cuda", dtype=torch.bfloat16)
    launch = triton_matmul(a, b, c, bm, bn, bk, 1, warps, stages)
    launch()
    check_product(c, a, b, f"wave matmul, {tiles} programs", ctx.seed)
    timer = torch_timer(launch, ctx.budget.min_sample_s)

    def sample(repeat: int) -> list:
        seconds = timer.seconds_per_launch()
        hz = ctx.sm_clock()
        return [Sample("seconds", seconds, "s", repeat, hz, "cuda_event", ctx.throttle_flag(hz, power_limited=True))]

    return repeat_until_stable(sample, "seconds", ctx.budget)
