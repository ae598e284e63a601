"""The instruction caches (probes/families/icache.py): an L0 and an L1, LRU."""
from __future__ import annotations

import numpy as np

from fakes import CLOCK_HZ
from gpuatlas.probes.kit.harness import Sample

#: The simulated instruction caches: an L0 and an L1 of these capacities, LRU, with 128-byte lines of 8
#: instructions; a line that misses the L0 comes from the L1 in ICACHE_L1_FETCH cycles, one that misses both from
#: beyond in ICACHE_BEYOND_FETCH.  A warp issues one instruction per cycle from the L0.
ICACHE_L0_BYTES, ICACHE_L1_BYTES, ICACHE_LINE = 32 << 10, 128 << 10, 128
ICACHE_L1_FETCH, ICACHE_BEYOND_FETCH = 8.0, 96.0


def icache_cycles_per_instruction(code_bytes: int) -> float:
    """A loop of ``code_bytes`` (and the loop's own instructions) walked cyclically: under LRU it hits the
    smallest level that holds it on every line and misses every smaller level on every line."""
    from gpuatlas.probes.families.icache import INSTRUCTION_BYTES, LOOP_INSTRUCTIONS

    size = code_bytes + LOOP_INSTRUCTIONS * INSTRUCTION_BYTES
    per_line = ICACHE_LINE // INSTRUCTION_BYTES
    if size <= ICACHE_L0_BYTES:
        return 1.0
    return 1.0 + (ICACHE_L1_FETCH if size <= ICACHE_L1_BYTES else ICACHE_BEYOND_FETCH) / per_line


def _icache(ctx, code_bytes):
    rng = np.random.default_rng(code_bytes)
    cpi = icache_cycles_per_instruction(code_bytes)
    return [Sample("cycles_per_instruction", cpi * (1 + 0.002 * rng.standard_normal()), "cycles", r, CLOCK_HZ,
                   "clock64") for r in range(5)]


#: probe id -> its fake.
FAKES = {"geometry.icache": _icache}
