"""The read-only path (probes/families/readonly.py): ld.global.nc and texture fetches through the L1."""
from __future__ import annotations

from fakes import CLOCK_HZ, DEVICE, L1_BYTES, L2_READ, LEVELS, LINE_BYTES, _samples
from gpuatlas.probes.kit.harness import Sample

#: The simulated read-only path: ld.global.nc hits the same L1 array as ld.global (READONLY_SHARES_L1) at
#: NC_L1_CYCLES, and past the L1 costs what a plain load does.  Read bandwidth per SM of every SM re-reading
#: an L1-resident region, per path; an L2-resident region reads at the L2's rate whichever the path.
READONLY_SHARES_L1, NC_L1_CYCLES = True, 30.0
#: A texture fetch goes through the same L1 array and costs the texture unit's TEX_EXTRA cycles more than a
#: plain load at every level.
TEX_EXTRA = 8.0
L1_READ_PER_CLK = {"plain": 96.0, "nc": 120.0}


def readonly_latency(footprint_bytes: int, path: str, shares_l1: bool = READONLY_SHARES_L1) -> float:
    """Cycles per step of a random cyclic chase at one element per 128-B line through an LRU L1 of L1_BYTES:
    every step hits while the lines a path's array must hold fit it, every step misses past that.  The mixed
    chase puts half its lines through each path: one array holds all of them, two arrays half each; its
    steps cost the two paths' latencies by turns."""
    def cost(one_path: str, lines_held: float) -> float:
        if lines_held * LINE_BYTES <= L1_BYTES:
            return NC_L1_CYCLES if one_path == "nc" else LEVELS["l1"]
        return LEVELS["l2"] if footprint_bytes <= DEVICE["l2_bytes"] else LEVELS["dram"]

    lines = footprint_bytes / LINE_BYTES
    if path == "tex":
        return cost("plain", lines) + TEX_EXTRA
    if path != "mixed":
        return cost(path, lines)
    held = lines if shares_l1 else lines / 2
    return (cost("plain", held) + cost("nc", held)) / 2


def readonly_read_per_clk(path: str, footprint_bytes: int) -> float:
    if footprint_bytes < DEVICE["smem_per_sm_bytes"]:
        return L1_READ_PER_CLK[path]
    return L2_READ / DEVICE["sm_count"] / CLOCK_HZ


def _readonly(ctx, measure, load, footprint_bytes, shares_l1=READONLY_SHARES_L1):
    if measure == "chase":
        return _samples(readonly_latency(footprint_bytes, load, shares_l1), footprint_bytes)
    per_clk = readonly_read_per_clk(load, footprint_bytes)
    return [s for r in range(5) for s in (
        Sample("bytes_per_clk_sm", per_clk, "B/cycle", r, CLOCK_HZ, "cuda_event"),
        Sample("bandwidth", per_clk * DEVICE["sm_count"] * CLOCK_HZ, "B/s", r, CLOCK_HZ, "cuda_event"))]


#: probe id -> its fake.
FAKES = {"geometry.readonly": _readonly}
