"""Write policies (probes/families/write_policy.py): write-through L1, write-allocate L2, read-modify-write
of partial sectors."""
from __future__ import annotations

from fakes import CLOCK_HZ, HBM_READ, HBM_WRITE, L2_READ, LEVELS, SECTOR_BYTES, _samples
from gpuatlas.probes.kit.harness import Sample

#: The simulated write policies: the L1 is write-through and a store evicts the line it writes into
#: (L1_KEEPS_STORES False), the L2 allocates the lines a kernel writes, and the HBM merges a partial sector by
#: reading it first (PARTIAL_RMW: a sector written in part costs a read and a write).
L1_KEEPS_STORES, L2_WRITE_ALLOCATES, PARTIAL_RMW = False, True, True


def write_chase_cycles(access: str, keeps: bool = L1_KEEPS_STORES) -> float:
    """A chain inside the L1: loads hit it; L2-only loads hit the L2; a stored line hits the L1 again only if the
    store kept it there."""
    if access == "cg" or (access == "store" and not keeps):
        return LEVELS["l2"]
    return LEVELS["l1"]


def allocate_cycles(device: dict, allocates: bool = L2_WRITE_ALLOCATES) -> tuple[float, float, float]:
    """Per-block cycles of the first, second and cold reads: each block's share of the L2's read rate, or of
    the HBM's, over the bytes it reads."""
    from gpuatlas.probes.families.write_policy import ALLOCATE_BLOCKS_PER_SM, ALLOCATE_ROUNDS, allocate_slice_bytes

    blocks = ALLOCATE_BLOCKS_PER_SM * device["sm_count"]
    per_block = ALLOCATE_ROUNDS * allocate_slice_bytes(device)
    hit, miss = (per_block / (rate / blocks) * CLOCK_HZ for rate in (L2_READ, HBM_READ))
    return (hit if allocates else miss), hit, miss


def written_bytes(device: dict) -> float:
    from gpuatlas.probes.families.write_policy import ALLOCATE_BLOCKS_PER_SM, ALLOCATE_ROUNDS, allocate_slice_bytes

    return float(ALLOCATE_ROUNDS * ALLOCATE_BLOCKS_PER_SM * device["sm_count"] * allocate_slice_bytes(device))


def partial_write_bandwidth(stride_words: int, rmw: bool = PARTIAL_RMW) -> float:
    """Useful bytes/s of 4-byte stores every ``stride_words`` words: whole sectors write at HBM_WRITE; a sector
    holding fewer written words is written whole, after being read if the memory merges by read-modify-write."""
    words_per_sector = SECTOR_BYTES // 4
    if stride_words == 1:
        return HBM_WRITE
    sector_rate = 1 / (1 / HBM_WRITE + 1 / HBM_READ) if rmw else HBM_WRITE
    return sector_rate / min(stride_words, words_per_sector)


def _write_policy(ctx, measure, access, keeps=L1_KEEPS_STORES, allocates=L2_WRITE_ALLOCATES, rmw=PARTIAL_RMW):
    if measure == "store_reload":
        return _samples(write_chase_cycles(access, keeps), 1)
    if measure == "write_allocate":
        first, second, cold = allocate_cycles(ctx.device, allocates)
        return [s for r in range(5) for s in (
            Sample("first_read_cycles", first, "cycles", r, CLOCK_HZ, "clock64"),
            Sample("second_read_cycles", second, "cycles", r, CLOCK_HZ, "clock64"),
            Sample("cold_read_cycles", cold, "cycles", r, CLOCK_HZ, "clock64"),
            Sample("written_hit_fraction", (cold - first) / (cold - second), "1", r, CLOCK_HZ, "clock64"),
            Sample("written_bytes", written_bytes(ctx.device), "B", r, CLOCK_HZ, "config"))]
    stride = {"full": 1, "word_per_sector": SECTOR_BYTES // 4}[access]
    return [s for r in range(5) for s in (
        Sample("bandwidth", partial_write_bandwidth(stride, rmw), "B/s", r, CLOCK_HZ, "cuda_event"),
        Sample("stride_words", float(stride), "1", r, CLOCK_HZ, "config"))]


#: probe id -> its fake.
FAKES = {"geometry.write_policy": _write_policy}
