"""Shared-memory atomics (probes/families/smem_atomics.py)."""
from __future__ import annotations

from fakes import CLOCK_HZ, LEVELS
from fakes.execution import FFMA_DEPTH
from gpuatlas.probes.kit.harness import Sample

#: Shared-memory atomics of the simulated SM: a native int32 add is one trip through the shared array's atomic
#: unit; an fp32 add is the compare-and-swap loop (LDS, FADD, CAS), so its latency is the three in a row.  The
#: unit applies one add per word per clock and SMEM_ATOMIC_LANES adds a clock over distinct words; the fp32 loop
#: costs two shared accesses (the load and the CAS) per add, and a contended word one loop per add.
SMEM_ATOMIC_LATENCY, SMEM_ATOMIC_LANES = 40.0, 16


def _smem_atomic_latency(dtype):
    return SMEM_ATOMIC_LATENCY + (LEVELS["smem"] + FFMA_DEPTH if dtype == "f32" else 0.0)


def _exec_smem_atomics(ctx, dtype, mode):
    if mode == "latency":
        return [Sample("latency", _smem_atomic_latency(dtype), "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]
    if mode == "same":
        per_clk = 1.0 if dtype == "i32" else 1.0 / _smem_atomic_latency(dtype)
    else:
        per_clk = SMEM_ATOMIC_LANES / (1.0 if dtype == "i32" else 2.0)
    return [s for r in range(5) for s in (
        Sample("ops_per_clk_sm", per_clk, "1/cycle", r, CLOCK_HZ, "clock64"),
        Sample("ops_per_s_sm", per_clk * CLOCK_HZ, "1/s", r, CLOCK_HZ, "globaltimer"))]


#: probe id -> its fake.
FAKES = {"exec.smem_atomics": _exec_smem_atomics}
