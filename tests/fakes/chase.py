"""The pointer chases' fakes (probes/families/chase.py, chase_l2.py, chase_numba.py): each level's latency,
the TLB's reach, one SM's accesses timed one by one, every SM chasing at once."""
from __future__ import annotations

import numpy as np

from fakes import (CLOCK_HZ, DEVICE, DRAM_FETCH_BYTES, FAR_L2, FAR_MISS, LEVELS, NEAR_MISS, PAGE_BYTES, RECORDED,
                   RECORD_COST, SECTOR_BYTES, TLB_MISS, TLB_REACH, _samples, latency_of)
from gpuatlas.probes.kit.harness import Sample


def _chase(ctx, footprint_bytes, stride_bytes, flavour):
    return _samples(latency_of(footprint_bytes, stride_bytes, flavour), footprint_bytes)


def _translation(footprint_bytes, stride_bytes) -> float:
    """The TLB miss cost: a chain spans footprint / max(page, stride) pages, one translation each."""
    return TLB_MISS if footprint_bytes / max(PAGE_BYTES, stride_bytes) > TLB_REACH / PAGE_BYTES else 0.0


def _every_sm(ctx, footprint_bytes, stride_bytes, readers="own"):
    """Every SM chasing: hits while the chain fits the whole L2, misses past it.  The simulated L2 keeps a
    copy of a line in each partition that reads it, so a chain every SM has read fits half of it."""
    capacity = DEVICE["l2_bytes"] / (2 if readers == "all" else 1)
    return _samples(LEVELS["l2"] if footprint_bytes <= capacity else LEVELS["dram"], footprint_bytes)


def _miss(ctx, footprint_bytes, stride_bytes, flavour):
    return _samples(LEVELS["dram"] + _translation(footprint_bytes, stride_bytes), footprint_bytes)


def _access(ctx, footprint_bytes, stride_bytes, flavour):
    rng = np.random.default_rng(footprint_bytes)
    l2 = DEVICE["l2_bytes"]
    if footprint_bytes <= l2 / 2:
        centres, weights = [LEVELS["l2"]], [1.0]
    elif footprint_bytes <= l2:
        centres, weights = [FAR_L2, NEAR_MISS, FAR_MISS], [0.45, 0.45, 0.1]
    else:
        centres, weights = [NEAR_MISS, FAR_MISS], [0.5, 0.5]
    cycles = rng.choice(centres, RECORDED, p=weights) + rng.normal(0, 4, RECORDED)
    recorded = np.round(cycles + RECORD_COST)
    return ([Sample("access", float(v), "cycles", i, CLOCK_HZ, "clock") for i, v in enumerate(recorded)]
            + [Sample("record_step", float(recorded.mean()), "cycles", 0, CLOCK_HZ, "clock64"),
               Sample("latency", float(cycles.mean()), "cycles", 0, CLOCK_HZ, "clock64")])


def _line(ctx, footprint_bytes, stride_bytes, flavour):
    block, hit, miss = ((SECTOR_BYTES, LEVELS["l1"], LEVELS["l2"]) if flavour == "default"
                        else (DRAM_FETCH_BYTES, LEVELS["l2"], LEVELS["dram"]))
    return _samples(hit + (miss - hit) * min(stride_bytes / block, 1), stride_bytes)


def _tlb(ctx, footprint_bytes, stride_bytes, flavour):
    return _samples(LEVELS["l2"] + _translation(footprint_bytes, stride_bytes), footprint_bytes)


def _smem(ctx, footprint_bytes, stride_bytes):
    return _samples(LEVELS["smem"], footprint_bytes)


#: probe id -> its fake.
FAKES = {"chase.latency": _chase, "chase.latency_numba": _chase, "chase.access": _access, "chase.miss": _miss,
         "chase.every_sm": _every_sm, "chase.line": _line, "chase.tlb": _tlb, "chase.smem": _smem}
