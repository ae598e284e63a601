"""wgmma latency (CuPy RawModule of wgmma_latency.cu, built for sm_90a): ``exec.wgmma_latency``.

One warpgroup runs a dependent chain of wgmma.mma_async m64nNk into one accumulator, each step fenced,
committed and waited for (wait_group 0), so a step is one wgmma's issue-to-result latency: clock64 cycles of
2T trips less T trips, per wgmma.  Every operand element is 1, so every accumulator element must come out
exactly steps x K.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.chains import chain_latency_samples, kernel_file, ones_chain
from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.registry import probe

#: wgmma_latency.cu's constants (WG_THREADS from wgmma.cuh, A_ROWS and ROW_BYTES from wgmma.cu).
WG_THREADS, A_ROWS, ROW_BYTES, WG_LAT_UNROLL = 128, 64, 32, 8
WG_LAT_TRIPS = 16
WGMMA_LATENCY_NS = (64, 256)
#: dtype -> (a 32-bit word of elements equal to 1, K of m64nNk for 32 bytes of K).
WGMMA_ONES = {"bf16": (0x3F803F80, 16), "fp16": (0x3C003C00, 16), "tf32": (0x3F800000, 8),
              "e4m3": (0x38383838, 32)}


_kernel = kernel_file("wgmma_latency.cu", arch="sm_90a")


def _sweep(device):
    return {"dtype": list(WGMMA_ONES), "n": list(WGMMA_LATENCY_NS)}


@probe("exec.wgmma_latency", sweeps={"quick": _sweep, "full": _sweep},
       axes={"dtype": "bf16, fp16 (m64nNk16), tf32 (m64nNk8), e4m3 (m64nNk32); fp32 accumulate",
             "n": "N of m64nNk: 64 and 256"},
       quantities=tuple(f"tc.{'fp8' if d == 'e4m3' else d}.wgmma_latency_cycles_n{n}" for d in WGMMA_ONES
                        for n in WGMMA_LATENCY_NS),
       kernels=("wgmma_latency.cu",), min_cc=(9, 0), max_cc=(9, 0))
def exec_wgmma_latency(ctx, dtype: str, n: int) -> list[Sample]:
    """Cycles per wgmma.mma_async in one warpgroup's dependent accumulator chain (wait_group 0 each step)."""
    import cupy

    n = int(n)
    if dtype not in WGMMA_ONES or n not in WGMMA_LATENCY_NS:
        raise ValueError(f"bad wgmma latency config {dtype!r}, N={n}: dtypes {tuple(WGMMA_ONES)}, N in "
                         f"{WGMMA_LATENCY_NS}")
    if ctx.device["compute_capability"] != "9.0":
        raise RuntimeError("wgmma_latency.cu is built for sm_90a, which runs on compute capability 9.0 only; "
                           f"this GPU is {ctx.device['compute_capability']}")
    word, k = WGMMA_ONES[dtype]
    func = _kernel(f"wgmma_lat_{dtype}_n{n}")
    a_rows = cupy.full(A_ROWS * ROW_BYTES // 4, word, dtype=cupy.uint32)
    b_rows = cupy.full(n * ROW_BYTES // 4, word, dtype=cupy.uint32)
    out = cupy.zeros(WG_THREADS * n // 2, dtype=cupy.float32)
    cycles = cupy.zeros(1, dtype=cupy.int64)

    chain = ones_chain(lambda trips: func((1,), (WG_THREADS,), (a_rows, b_rows, np.int32(trips), out, cycles)),
                       out, cycles, WG_LAT_UNROLL, k, f"wgmma_lat_{dtype}_n{n}")
    return chain_latency_samples(ctx, chain, WG_LAT_TRIPS, WG_LAT_UNROLL, power_limited=True)
