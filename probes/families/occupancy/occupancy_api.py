"""Record CUDA's own occupancy answers (cuOccupancyMaxActiveBlocksPerMultiprocessor) for random configs.

The CPU tests check analysis/occupancy.py's calculator against these answers, so the calculator is tested
against the driver rather than against its own reading of the rules.  Run on a GPU:

    python -m gpuatlas.probes.families.occupancy.occupancy_api tests/fixtures/occupancy_api_<gpu>.csv
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

REGISTER_CAPS = (16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 168, 255)


def record(configs: int = 160, seed: int = 0) -> pd.DataFrame:
    import cupy
    from cupy_backends.cuda.api import driver

    from cupy.cuda import runtime

    from gpuatlas.probes.kit.cuda import source

    optin = runtime.deviceGetAttribute(runtime.cudaDevAttrMaxSharedMemoryPerBlockOptin, 0)
    kernels = {}
    for cap in REGISTER_CAPS:
        module = cupy.RawModule(code=source("occupancy_api.cu"), options=(f"--maxrregcount={cap}",))
        kernel = module.get_function("hungry")
        kernel.max_dynamic_shared_size_bytes = optin - kernel.shared_size_bytes
        kernels[cap] = kernel
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(configs):
        kernel = kernels[REGISTER_CAPS[rng.integers(len(REGISTER_CAPS))]]
        threads = int(32 * rng.integers(1, 33))
        smem = int(rng.choice([0, 0, int(rng.integers(0, 48 << 10)), int(rng.integers(0, optin + 1))]))
        blocks = driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, smem)
        rows.append({"registers_per_thread": kernel.num_regs, "threads_per_block": threads,
                     "smem_per_block_bytes": smem + kernel.shared_size_bytes, "api_blocks_per_sm": blocks})
    return pd.DataFrame(rows).assign(gpu=device["name"])


if __name__ == "__main__":
    record().to_csv(sys.argv[1], index=False)
