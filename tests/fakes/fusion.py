"""The fused softmax (probes/families/fusion.py): the bytes the kernels move, at the HBM read bandwidth."""
from __future__ import annotations

from fakes import CLOCK_HZ, HBM_READ
from gpuatlas.probes.kit.harness import Sample


def _softmax(ctx, launch, variant, matrix_side):
    """Bandwidth-bound: the bytes the kernels move at the HBM read bandwidth.  On a bf16 matrix with fp32
    per-row statistics, unfused: the row max reads x and writes the max; exp reads x and the max, writes e
    and the row sum; normalize reads e and the sum, writes y.  Fused: read x, write y."""
    matrix, stats = matrix_side * matrix_side * 2, matrix_side * 4
    moved = {"unfused": (matrix + stats) + (matrix + stats + matrix + stats) + (matrix + stats + matrix),
             "fused": matrix + matrix}[variant]
    seconds = moved / HBM_READ
    return [Sample("seconds", seconds, "s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


#: probe id -> its fake.
FAKES = {"fusion.softmax": _softmax}
