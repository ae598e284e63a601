"""The lecture's own configurations (probes/families/lecture.py): an index-computing shared chase, the
lecture's tile, the naive matmul, the decode GEMM and its launch chain, the waves of a matmul."""
from __future__ import annotations

from fakes import CLOCK_HZ, DEVICE, HBM_READ, LEVELS, TC_PEAK, _flops, _samples
from gpuatlas.probes.kit.harness import Sample

#: Latency of one dependent integer instruction (IMAD, LEA): an index-computing chase step issues two of them.
INT_LATENCY = 4.0


def _smem_index(ctx, footprint_bytes, stride_bytes):
    return _samples(LEVELS["smem"] + 2 * INT_LATENCY, footprint_bytes)


def _lecture_tile(ctx, matrix_side):
    """The roofline at BLOCK 256: min(peak, 128 FLOP/B x HBM bandwidth)."""
    return _flops(min(TC_PEAK, 256 / 2 * HBM_READ))


def _naive(ctx, matrix_side):
    """The lecture's zero-reuse accounting: 4 n^3 bytes at the HBM read bandwidth."""
    seconds = 4.0 * matrix_side ** 3 / HBM_READ
    return [s for r in range(5) for s in (Sample("seconds", seconds, "s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("flop_rate", 2.0 * matrix_side ** 3 / seconds, "FLOP/s", r,
                                                  CLOCK_HZ, "cuda_event"))]


def _decode(ctx, batch):
    """Bandwidth-bound: A, the weights (4x the L2, 4096 rows) and C at the HBM read bandwidth."""
    k = 4096
    n = -(-4 * DEVICE["l2_bytes"] // (2 * k * 128)) * 128
    moved, flops = 2 * (batch * k + k * n + batch * n), 2.0 * batch * n * k
    seconds = moved / HBM_READ
    return [s for r in range(5) for s in (Sample("seconds", seconds, "s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("bandwidth", moved / seconds, "B/s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("flop_rate", flops / seconds, "FLOP/s", r, CLOCK_HZ, "cuda_event"))]


def _decode_chain(ctx, mode):
    """490 launches at the simulated per-launch interval of launch.overhead."""
    per = 2e-6 if mode == "plain" else 7e-7
    return [s for r in range(5) for s in (Sample("chain_seconds", 490 * per, "s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("launch_interval", per, "s", r, CLOCK_HZ, "cuda_event"))]


def _waves(ctx, tiles):
    """One BLOCK 128 program per SM at a time, each as long as its 2 x 128^2 x 4096 FLOPs at the SM's share of
    the tensor peak: the time steps at every multiple of the SM count."""
    per_wave = 2 * 128 * 128 * 4096 / (TC_PEAK / DEVICE["sm_count"])
    seconds = -(-tiles // DEVICE["sm_count"]) * per_wave + 3e-6
    return [Sample("seconds", seconds, "s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


#: probe id -> its fake.
FAKES = {"chase.smem_index": _smem_index, "matmul.lecture_tile": _lecture_tile, "matmul.naive": _naive,
         "matmul.decode": _decode, "launch.decode_chain": _decode_chain, "matmul.waves": _waves}
