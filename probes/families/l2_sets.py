"""How many lines the L2 keeps (l2_sets.cu): cyclic chains of 128-B lines walked with L2-only loads, each
access timed alone, at chain lengths around the L2's capacity.  In steady state an LRU-like W-way set keeps
every line of the chain while the chain puts at most W lines in it, and loses them all (a cyclic walk evicts
each line before its reuse) once it puts more: the hit fraction h(N) of a chain of N lines is the share of
its lines in sets holding at most W of them.  Contiguous lines spread evenly over the sets, so h falls at
once at the capacity; lines at random places fill the sets of a hashed index unevenly, Poisson(N / sets) to a
set, so h falls gradually, at a rate set by the ways.

One SM walking shows one L2 partition as that SM sees it; every SM walking its own stretch of one chain shows
what the L2 keeps when every line is read from one side of the GPU (a far-homed line read from the far side
also takes a slot in the reader's near partition)."""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.registry import probe

#: Bytes between the chain's lines (the L2's line) and the timed passes per chain length after the warm ones.
LINE_BYTES, WARM_PASSES, TIMED_PASSES = 128, 2, 2
#: Chain lengths per config, geometric between the bounds below (multiples of the L2's size).
LENGTHS = 12
SPAN = {("one", "stride"): (1 / 4, 1.0), ("one", "random"): (1 / 16, 1.0),
        ("every", "stride"): (1 / 3, 1.2), ("every", "random"): (1 / 3, 1.2)}
#: Random lines are distinct 128-B blocks drawn from this many times the L2's bytes.
RANDOM_SPREAD = 4
#: l2_sets.cu's histogram: bins of BIN_CYCLES, the last holding every longer interval.
HIST_BINS, BIN_CYCLES = 256, 16


def walker_count(device: dict, walkers: str) -> int:
    return 1 if walkers == "one" else int(device["sm_count"])


def chain_lengths(device: dict, walkers: str, placement: str, count: int = LENGTHS) -> list[int]:
    """``count`` chain lengths (lines) from SPAN's bounds times the L2's lines, multiples of the walkers."""
    lo, hi = SPAN[(walkers, placement)]
    walking = walker_count(device, walkers)
    lines = device["l2_bytes"] / LINE_BYTES
    return sorted({max(1, int(n) // walking) * walking for n in np.geomspace(lo * lines, hi * lines, count)})


def chain_blocks(device: dict, placement: str, lines: int, rng: np.random.Generator) -> np.ndarray:
    """The 128-B blocks of a chain in the order walked: a random cyclic order over blocks 0..N-1 (``stride``),
    or over N distinct blocks drawn at random from RANDOM_SPREAD x the L2 (``random``)."""
    if placement == "stride":
        return rng.permutation(lines).astype(np.int64)
    return rng.choice(RANDOM_SPREAD * device["l2_bytes"] // LINE_BYTES, lines, replace=False).astype(np.int64)


def hit_split(pooled: np.ndarray, short: np.ndarray) -> int:
    """The first bin that is not a near-partition hit: the emptiest bin between the hit cluster (the most
    populated bin of the shortest chain, which the L2 holds whole) and twice its interval."""
    mode = int(np.argmax(short))
    top = min(2 * mode + 1, HIST_BINS - 1)
    return mode + 1 + int(np.argmin(pooled[mode + 1:top + 1]))


@probe("geometry.l2_sets",
       sweeps={"quick": lambda d: {"walkers": ["one", "every"], "placement": ["stride"], "lengths": [LENGTHS // 2]},
               "full": lambda d: {"walkers": ["one", "every"], "placement": ["stride", "random"],
                                  "lengths": [LENGTHS]}},
       axes={"walkers": "one SM walks the whole chain (one), or every SM walks its own stretch of it (every)",
             "placement": "the chain's lines: blocks 0..N-1 in a random cyclic order (stride), or N distinct "
                          "128-B blocks drawn at random from 4x the L2's bytes (random)",
             "lengths": "chain lengths measured, geometric over the config's span of L2 sizes"},
       quantities=("l2.partition_bytes", "l2.ways", "l2.sets", "l2.capacity_every_sm_bytes"),
       kernels=("l2_sets.cu",))
def geometry_l2_sets(ctx, walkers: str, placement: str, lengths: int = LENGTHS) -> list[Sample]:
    """Hit fraction of cyclic chains of 128-B lines walked with L2-only loads, each access timed alone, at
    chain lengths around the L2's capacity: accesses slower than the near partition's hits are misses."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    device = ctx.device
    count = walker_count(device, walkers)
    lengths = chain_lengths(device, walkers, placement, lengths)
    span = RANDOM_SPREAD * device["l2_bytes"] if placement == "random" else lengths[-1] * LINE_BYTES
    words = cupy.zeros(span // 8, dtype=cupy.uint64)
    base = np.uint64(words.data.ptr)
    walk = kernel("l2_sets.cu", "l2_sets_walk")
    hist = cupy.zeros(count * HIST_BINS, dtype=cupy.uint32)
    out = cupy.zeros(2 * count, dtype=cupy.uint64)
    rng = ctx.rng(count, ("stride", "random").index(placement))
    hz = ctx.sm_clock()
    flag = ctx.throttle_flag(hz)
    passes = []  # (lines, cycles per access, histogram summed over the walkers) per timed pass
    for lines in lengths:
        at = chain_blocks(device, placement, lines, rng).astype(np.uint64) * np.uint64(LINE_BYTES)
        words[cupy.asarray((at // np.uint64(8)).astype(np.int64))] = cupy.asarray(base + np.roll(at, -1))
        steps = lines // count
        starts = cupy.asarray(base + at[np.arange(count) * steps])
        sinks = base + at[(np.arange(count) * steps + steps) % lines]
        for rep in range(WARM_PASSES + TIMED_PASSES):  # each walker restarts at its own stretch's start
            walk((count,), (32,), (starts, np.int64(steps), hist, out))
            result = out.get().reshape(count, 2)
            if not np.array_equal(result[:, 1], sinks):
                bad = int(np.flatnonzero(result[:, 1] != sinks)[0])
                raise RuntimeError(f"L2 sets walk: walker {bad} of {count} ended at {int(result[bad, 1]):#x} after "
                                   f"{steps} steps of a {lines}-line chain, the chain says {int(sinks[bad]):#x}")
            if rep < WARM_PASSES:
                continue
            counts = hist.get().reshape(count, HIST_BINS).astype(np.int64)
            if not (counts.sum(axis=1) == steps).all():
                raise RuntimeError(f"L2 sets walk: histograms hold {counts.sum(axis=1).min()}..."
                                   f"{counts.sum(axis=1).max()} intervals per walker, not the {steps} steps walked")
            passes.append((lines, float(result[:, 0].sum()) / (steps * count), counts.sum(axis=0)))
    pooled = np.sum([h for _, _, h in passes], axis=0)
    split = hit_split(pooled, passes[0][2])
    samples = [Sample("line_bytes", float(LINE_BYTES), "1", 0, hz, "config"),
               Sample("hit_cycles", float(np.argmax(passes[0][2]) * BIN_CYCLES), "cycles", 0, hz, "clock", flag),
               Sample("hit_threshold_cycles", float(split * BIN_CYCLES), "cycles", 0, hz, "clock", flag)]
    for repeat, (lines, cycles, counts) in enumerate(passes):
        hit = float(counts[:split].sum()) / float(counts.sum())
        if not 0.0 <= hit <= 1.0:
            raise RuntimeError(f"L2 sets walk: hit fraction {hit} of a {lines}-line chain lies outside [0, 1]")
        samples += [Sample("lines", float(lines), "1", repeat, hz, "config"),
                    Sample("hit_fraction", hit, "1", repeat, hz, "clock", flag),
                    Sample("cycles_per_access", cycles, "cycles", repeat, hz, "clock", flag)]
    return samples
