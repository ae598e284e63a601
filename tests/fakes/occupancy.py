"""Occupancy against throughput (probes/families/occupancy/): Little's law exactly."""
from __future__ import annotations

import numpy as np

from fakes import CLOCK_HZ
from gpuatlas.probes.kit.harness import Sample

#: occupancy.throughput follows Little's law exactly: min(warp loads in flight x bytes / latency, peak).
OCCUPANCY_LATENCY_S = {"dram": 700e-9, "l2": 300e-9}
OCCUPANCY_PEAK = {"dram": 4.4e12, "l2": 9e12}


def _occupancy(ctx, resident_warps_per_sm, ilp, load_bytes, level):
    """Little's law: every resident warp keeps ``ilp`` warp-wide loads in flight, each of 32 lanes x
    ``load_bytes``, and each load returns one latency after it was issued; so the memory is asked for the
    bytes in flight once per latency, and serves at most its peak (beyond it, requests queue)."""
    bytes_in_flight = ctx.device["sm_count"] * resident_warps_per_sm * ilp * 32 * load_bytes
    bandwidth = min(bytes_in_flight / OCCUPANCY_LATENCY_S[level], OCCUPANCY_PEAK[level])
    rng = np.random.default_rng([resident_warps_per_sm, ilp, load_bytes])
    return [s for r in range(5) for s in (
        Sample("bandwidth", bandwidth * (1 + 0.002 * rng.standard_normal()), "B/s", r, CLOCK_HZ, "cuda_event"),
        Sample("resident_warps_per_sm_api", resident_warps_per_sm, "1", r, CLOCK_HZ, "config"),
        Sample("resident_warps_per_sm_calc", resident_warps_per_sm, "1", r, CLOCK_HZ, "config"))]


#: probe id -> its fake.
FAKES = {"occupancy.throughput": _occupancy}
