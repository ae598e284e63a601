"""The lecture's exercise 3: a column read of a row-major fp16 matrix, straight from global memory against
staged through a 32 x 32 shared-memory tile (CuPy RawModule, column_read.cu).

A warp reading one column puts each of its 32 lanes 2n bytes from the next, in 32 different lines, for 64
useful bytes: the lecture counts 1/64 of each 128-byte segment used and claims that staging the tile through
shared memory (rows loaded coalesced, columns read from the banks) recovers 64x.  Both kernels sum every
column of the same matrix; the useful bandwidth is the matrix's bytes over the event-timed kernel time.  The
matrix comes from the file's own generator kernel (built ahead with the others, not a library generator
compiled at run time), two of its rows checked against the host; the column sums are checked against a
one-thread-per-column fp64 sum, with the outputs NaN until written.
``matrix_side`` n is the lecture's 4096 (a 32 MiB matrix: it may fit in L2) and the smallest power of two whose matrix
is at least four times L2, so the read also comes from device memory.
"""
from __future__ import annotations

import math

import numpy as np

from gpuatlas.probes.kit.harness import EventTimer, Sample, repeat_until_stable
from gpuatlas.probes.registry import probe

LECTURE_N = 4096
TILE, ROWS_PER_SPLIT = 32, 128  #: column_read.cu's tile; rows each block sums (4 tiles)
KERNELS = {"direct": "column_direct", "staged": "column_staged"}
#: Blocks of 256 threads that fill the matrix (a grid-stride loop).
FILL_BLOCKS = 1024


def hash_key(seed: int) -> np.uint32:
    """The generator's key for ``seed`` (a Weyl step of it, so nearby seeds give unrelated matrices)."""
    return np.uint32((seed * 0x9E3779B9) & 0xFFFFFFFF)


def uniform_halves(index: np.ndarray, key: np.uint32) -> np.ndarray:
    """fp16 bit patterns of column_read.cu's ``fill_uniform`` at ``index``: k / 1024, k the top 10 bits of
    lowbias32(index ^ key)."""
    x = index.astype(np.uint32) ^ key
    x ^= x >> 16
    x *= np.uint32(0x7FEB352D)
    x ^= x >> 15
    x *= np.uint32(0x846CA68B)
    x ^= x >> 16
    return ((x >> 22).astype(np.float32) / 1024).astype(np.float16).view(np.uint16)


def matrix_sides(device: dict) -> list[int]:
    """The lecture's n, and the smallest power of two whose fp16 matrix is at least 4x L2."""
    beyond_l2 = 2 ** math.ceil(math.log2(math.sqrt(4 * device["l2_bytes"] / 2)))
    return sorted({LECTURE_N, beyond_l2})


def _sweep(device: dict) -> dict:
    return {"matrix_side": matrix_sides(device), "method": list(KERNELS)}


@probe("smem.column_read", sweeps={"quick": _sweep, "full": _sweep},
       axes={"matrix_side": "matrix side: the lecture's 4096, and one whose fp16 matrix is 4x L2",
             "method": "direct (each warp reads its columns from global memory) or staged (through a "
                       "padded 32 x 32 shared tile)"},
       quantities=("smem.column_read_recovery",), kernels=("column_read.cu",))
def column_read(ctx, matrix_side: int, method: str) -> list[Sample]:
    """Useful bandwidth (matrix bytes per second) of summing every column of a row-major n x n fp16 matrix."""
    n = matrix_side
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    if n % ROWS_PER_SPLIT or n * n > 2**32:
        raise ValueError(f"matrix_side {n} must be a multiple of {ROWS_PER_SPLIT} with n^2 <= 2^32")
    column_sums = kernel("column_read.cu", KERNELS[method])
    matrix = cupy.empty((n, n), dtype=cupy.uint16)  # fp16 bit patterns
    key = hash_key(ctx.seed)
    kernel("column_read.cu", "fill_uniform")((FILL_BLOCKS,), (256,), (matrix, np.uint64(n * n), key))
    for row in (0, n - 1):  # the generator, checked against its host twin
        if not np.array_equal(matrix[row].get(), uniform_halves(np.arange(row * n, (row + 1) * n), key)):
            raise RuntimeError(f"column_read n={n}: row {row} of the generated matrix differs from the host's")
    reference = cupy.asarray(np.full(n, np.nan))
    kernel("column_read.cu", "column_reference")((-(-n // 256),), (256,), (matrix, np.int32(n), reference))
    splits = n // ROWS_PER_SPLIT
    partial = cupy.asarray(np.full((splits, n), np.nan, dtype=np.float32))
    grid, block = (n // TILE, splits), (TILE, 8)
    args = (matrix, np.int32(n), np.int32(ROWS_PER_SPLIT), partial)

    def launch():
        column_sums(grid, block, args)

    launch()
    got, want = partial.get().sum(axis=0, dtype=np.float64), reference.get()
    if not np.allclose(got, want, rtol=1e-4) or not want.min() > 0:
        raise RuntimeError(f"column_read {method} n={n}: the column sums do not match the matrix")
    timer = EventTimer(launch, ctx.budget.min_sample_s)

    def sample(repeat: int) -> list[Sample]:
        seconds = timer.seconds_per_launch()
        hz = ctx.sm_clock()
        flag = ctx.throttle_flag(hz)
        return [Sample("useful_bandwidth", n * n * 2 / seconds, "B/s", repeat, hz, "cuda_event", flag),
                Sample("time", seconds, "s", repeat, hz, "cuda_event", flag)]

    return repeat_until_stable(sample, "useful_bandwidth", ctx.budget)
