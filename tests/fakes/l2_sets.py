"""The L2's sets (probes/families/l2_sets.py): hashed LRU sets in two partitions."""
from __future__ import annotations

import numpy as np

from fakes import CLOCK_HZ, DEVICE, LINE_BYTES, far_homed
from gpuatlas.probes.kit.harness import Sample

#: The simulated L2 of geometry.l2_sets: two partitions of L2_SET_WAYS-way LRU sets, half the L2 each, indexed
#: by a hash that spreads any aligned run of `sets` consecutive lines over every set once (a rotation chosen by a
#: seeded hash of the run's number), so contiguous lines fill the sets evenly and random ones unevenly.  A line
#: homed by the far partition (far_homed) and read from the far side is held twice: at home and in the reader's
#: near partition.  An access is a near-partition hit (L2_SET_HIT cycles) or not (L2_SET_MISS).
L2_SET_WAYS, L2_SET_HIT, L2_SET_MISS = 16, 350.0, 700.0


def l2_set_of(blocks: np.ndarray, sets: int) -> np.ndarray:
    run = np.asarray(blocks, dtype=np.uint64) // np.uint64(sets)
    rotation = (run * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)) >> np.uint64(40)
    return ((np.asarray(blocks, dtype=np.uint64) + rotation) % np.uint64(sets)).astype(np.int64)


def l2_set_hits(blocks: np.ndarray, walkers: int, ways: int = L2_SET_WAYS,
                partition_bytes: int = DEVICE["l2_bytes"] // 2) -> np.ndarray:
    """Which lines of a cyclic chain (blocks of LINE_BYTES, in walk order) hit in steady state: under LRU a
    line stays iff its set in the reader's near partition holds at most ``ways`` of the chain's lines.  One
    walker: one partition holds every line.  Several: walker w reads the w-th stretch from side w % 2; each line
    sits in its home partition, and a far-homed one also in the reader's."""
    sets = partition_bytes // (ways * LINE_BYTES)
    index = l2_set_of(blocks, sets)
    if walkers == 1:
        return np.bincount(index, minlength=sets)[index] <= ways
    side = (np.arange(blocks.size) // (blocks.size // walkers)) % 2
    home = far_homed(np.asarray(blocks) * LINE_BYTES).astype(np.int64)
    held = np.bincount(home * sets + index, minlength=2 * sets)
    held += np.bincount((side * sets + index)[home != side], minlength=2 * sets)
    return held[side * sets + index] <= ways


def _l2_sets(ctx, walkers, placement, lengths=12, ways=L2_SET_WAYS):
    from gpuatlas.probes.families.l2_sets import (LINE_BYTES as LINE, TIMED_PASSES, chain_blocks, chain_lengths,
                                                  walker_count)

    count = walker_count(DEVICE, walkers)
    rng = np.random.default_rng(count)
    samples = [Sample("line_bytes", float(LINE), "1", 0, CLOCK_HZ, "config"),
               Sample("hit_cycles", L2_SET_HIT, "cycles", 0, CLOCK_HZ, "clock"),
               Sample("hit_threshold_cycles", (L2_SET_HIT + L2_SET_MISS) / 2, "cycles", 0, CLOCK_HZ, "clock")]
    for k, lines in enumerate(chain_lengths(DEVICE, walkers, placement, lengths)):
        hit = float(l2_set_hits(chain_blocks(DEVICE, placement, lines, rng), count, ways).mean())
        for p in range(TIMED_PASSES):
            repeat = k * TIMED_PASSES + p
            samples += [Sample("lines", float(lines), "1", repeat, CLOCK_HZ, "config"),
                        Sample("hit_fraction", hit, "1", repeat, CLOCK_HZ, "clock"),
                        Sample("cycles_per_access", hit * L2_SET_HIT + (1 - hit) * L2_SET_MISS, "cycles", repeat,
                               CLOCK_HZ, "clock")]
    return samples


#: probe id -> its fake.
FAKES = {"geometry.l2_sets": _l2_sets}
