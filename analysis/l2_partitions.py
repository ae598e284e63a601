"""The L2's two partitions as cold misses show them: which lines each partition homes and which SMs sit on
which side of the chip.

A miss to a line the SM's far partition homes crosses the chip and back, so one SM's cold L2-only misses fall
in two clusters (``miss_valley`` splits them).  Read in address order (geometry.l2_partition) they give the
interleave of the partitions' homes and the far-homed share; read by every SM over the same lines
(geometry.l2_sm_map) they group the SMs into sides.  geometry declares the rows (gpuatlas.analysis.geometry's FAMILY).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import of_probe, usable
from gpuatlas.analysis.units import fmt_bytes

#: Bin width (cycles) of the miss histogram, and the least distance between the two miss clusters' peaks.
MISS_BIN, MISS_PEAK_SEPARATION = 5, 60


def miss_valley(misses: np.ndarray) -> float | None:
    """The emptiest bin between the two most populated clusters of miss latencies (misses to addresses the
    near L2 partition homes, and slower ones the far partition homes), or None if there is one cluster."""
    if misses.size < 200:
        return None
    edges = np.arange(misses.min(), np.percentile(misses, 99) + MISS_BIN, MISS_BIN)
    if edges.size < 4:
        return None
    counts = np.convolve(np.histogram(misses, edges)[0], np.ones(3) / 3, mode="same")
    first = int(np.argmax(counts))
    apart = np.abs(np.arange(counts.size) - first) * MISS_BIN >= MISS_PEAK_SEPARATION
    if not apart.any():
        return None
    second = int(np.argmax(np.where(apart, counts, -1)))
    lo, hi = sorted((first, second))
    valley = lo + int(np.argmin(counts[lo:hi + 1]))
    if counts[valley] > 0.5 * min(counts[lo], counts[hi]):  # no dip: one broad cluster, not two
        return None
    return float(edges[valley] + MISS_BIN / 2)


# -- one SM's map in address order ------------------------------------------------------------------------

PARTITION_PROBE = "geometry.l2_partition"
#: An aligned block counts as homed by one partition when this share of its lines agree; and the share of
#: blocks that must be so for the block size to be the interleave.
UNIFORM_BLOCKS = 0.98


def partition_map(measurements: pd.DataFrame, stride: int) -> tuple[np.ndarray, float] | None:
    """(far: one bool per line in address order, by the majority of the walks; agreement: the share of lines
    every walk put on the same side) from one stride's cold walks, or None without two miss clusters."""
    frame = of_probe(measurements, PARTITION_PROBE)
    frame = usable(frame[frame["stride_bytes"] == stride])
    per_walk = frame.loc[frame["metric"] == "walk_lines", "value"]
    frame = frame[frame["metric"] == "access"].sort_values("repeat")
    if per_walk.empty or frame.empty:
        return None
    lines = int(per_walk.iat[0])
    values = frame["value"].to_numpy()
    valley = miss_valley(values)
    if valley is None or values.size < lines:
        return None
    far = (values[:values.size // lines * lines] > valley).reshape(-1, lines)
    agreement = float(np.mean(far.all(axis=0) | (~far).all(axis=0)))
    return far.mean(axis=0) > 0.5, agreement


def interleave_lines(far: np.ndarray) -> int | None:
    """The largest power-of-two block of lines, aligned, within which (nearly) every block's lines share one
    home partition; None when the whole walk has one home (no interleave seen in it)."""
    if far.all() or not far.any():
        return None
    size = 1
    while 2 * size <= far.size // 2:
        blocks = far[:far.size // (2 * size) * 2 * size].reshape(-1, 2 * size).mean(axis=1)
        uniform = np.mean((blocks <= 1 - UNIFORM_BLOCKS) | (blocks >= UNIFORM_BLOCKS))
        if uniform < UNIFORM_BLOCKS:
            break
        size *= 2
    return size


def _partition_walk(measurements: pd.DataFrame):
    """(stride, far-homed mask, agreement of the walks, notes on the strides passed over) of the finest stride
    whose walk shows both homes, or None."""
    if "stride_bytes" not in measurements or of_probe(measurements, PARTITION_PROBE).empty:
        return None
    notes = []
    for stride in sorted(of_probe(measurements, PARTITION_PROBE)["stride_bytes"].unique()):
        mapped = partition_map(measurements, int(stride))
        if mapped is None:
            notes.append(f"{fmt_bytes(stride)}: one miss cluster")
            continue
        far, agreement = mapped
        if interleave_lines(far) is None:
            notes.append(f"{fmt_bytes(stride)}: every line homed alike over {fmt_bytes(far.size * stride)}")
            continue
        return int(stride), far, agreement, notes
    return None


def far_home_fraction(measurements: pd.DataFrame) -> float | None:
    """The share of lines one SM's far partition homes (l2.far_home_fraction's value), or None."""
    walk = _partition_walk(measurements)
    return None if walk is None else float(walk[1].mean())


def partition_rows(measurements: pd.DataFrame) -> list[dict]:
    """l2.partition_interleave_bytes from the finest stride whose walk shows both homes; l2.far_home_fraction."""
    walk = _partition_walk(measurements)
    if walk is None:
        return []
    stride, far, agreement, notes = walk
    interleave = interleave_lines(far) * stride
    share = float(far.mean())
    method = (f"one SM's cold L2-only misses in address order, every {fmt_bytes(stride)}, split into near- "
              f"and far-homed by the two miss clusters")
    note = (f"{agreement:.0%} of lines put on the same side by every walk; "
            f"{far.size} lines over {fmt_bytes(far.size * stride)}")
    block = consensus_interleave_bytes(measurements)
    if block and block != interleave:
        note += (f"; every SM's walks over one window (geometry.l2_sm_map), voted per side, alternate in "
                 f"aligned {fmt_bytes(block)} blocks: one SM's misread lines split this walk's blocks")
    return [derived_row("l2.partition_interleave_bytes", interleave, interleave, interleave,
                        method + ": the largest aligned power-of-two block whose lines share one home",
                        PARTITION_PROBE, note + ("; " + "; ".join(notes) if notes else "")),
            derived_row("l2.far_home_fraction", share, share, share,
                        method + ": the share of lines the far partition homes", PARTITION_PROBE, note)]


# -- the partition map from every SM ------------------------------------------------------------------------

SM_MAP_PROBE = "geometry.l2_sm_map"
#: Two SMs' maps are the same side's when they agree on at least this share of lines: halfway between maps
#: drawn independently (1/2) and identical ones (1), so the few lines each SM's record puts on the wrong side
#: (a few percent) do not split a side; two sides' maps are complements and agree on few lines.
SAME_SIDE = 0.75
#: The fewest SMs a side holds: the two SMs of a TPC share their GPC's path to the L2, so a side is never one
#: SM alone; an SM whose map matches no other SM's is one whose record was misread.
MIN_SIDE_SMS = 2


def sm_maps(measurements: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(SM ids, cycles: one row of cold-miss latencies per SM, far: the same as booleans split at each SM's
    miss valley, or the pooled one where an SM's own record shows one cluster) in the probe's SM order."""
    frame = usable(of_probe(measurements, SM_MAP_PROBE))
    lines = frame.loc[frame["metric"] == "walk_lines", "value"]
    ids = frame[frame["metric"] == "smid"].sort_values("repeat")["value"].to_numpy()
    values = frame[frame["metric"] == "access"].sort_values("repeat")["value"].to_numpy()
    if lines.empty or ids.size == 0 or values.size < ids.size * int(lines.iat[0]):
        return None
    cycles = values[:ids.size * int(lines.iat[0])].reshape(ids.size, -1)
    pooled = miss_valley(cycles.ravel())
    valleys = [miss_valley(row) or pooled for row in cycles]
    if any(v is None for v in valleys):
        return None
    return ids.astype(int), cycles, cycles > np.asarray(valleys, dtype=float)[:, None]


def sm_sides(far: np.ndarray) -> np.ndarray:
    """Side label of each SM, numbered by each side's first SM; -1 for an SM that matches no side.

    SMs whose maps agree on at least SAME_SIDE of the lines are grouped, greedily in the given order; a group
    of at least MIN_SIDE_SMS is a side (groups whose majority maps agree so are one), and every SM then joins
    the side whose majority map it agrees with most, if on SAME_SIDE of the lines: one misread SM, seed or not,
    neither splits a side nor makes one."""
    groups, seeds = np.full(len(far), -1), []
    for i, row in enumerate(far):
        for label, seed in enumerate(seeds):
            if np.mean(row == seed) >= SAME_SIDE:
                groups[i] = label
                break
        else:
            groups[i] = len(seeds)
            seeds.append(row)
    majorities: list[np.ndarray] = []
    for g in np.flatnonzero(np.bincount(groups) >= MIN_SIDE_SMS):
        majority = far[groups == g].mean(axis=0) > 0.5
        if not any(np.mean(majority == m) >= SAME_SIDE for m in majorities):  # a side the seed's misreads split
            majorities.append(majority)
    if not majorities:
        return np.full(len(far), -1)
    agreement = (far[:, None, :] == np.array(majorities)[None, :, :]).mean(axis=2)
    joined = np.where(agreement.max(axis=1) >= SAME_SIDE, agreement.argmax(axis=1), -1)
    kept = [g for g in dict.fromkeys(joined[joined >= 0]) if np.sum(joined == g) >= MIN_SIDE_SMS]
    return np.array([kept.index(g) if g in kept else -1 for g in joined])


def consensus_interleave_bytes(measurements: pd.DataFrame) -> int | None:
    """The partition interleave read off the first side's majority map (every SM of the side voting on each
    line, so one SM's misread lines do not split a block): the largest aligned power-of-two block of lines
    sharing one home, in bytes (lines are 128 B apart); None without the per-SM map or with one home."""
    maps = sm_maps(measurements) if not of_probe(measurements, SM_MAP_PROBE).empty else None
    if maps is None:
        return None
    far = maps[2]
    return _voted_interleave_bytes(far, sm_sides(far))


def _voted_interleave_bytes(far: np.ndarray, labels: np.ndarray) -> int | None:
    if not np.any(labels == 0):
        return None
    lines = interleave_lines(far[labels == 0].mean(axis=0) > 0.5)
    return None if lines is None else lines * 128


def sm_map_rows(measurements: pd.DataFrame) -> list[dict]:
    """l2.sm_sides, l2.sm_side_fraction and l2.sm_map_consistency from every SM's cold walk over the same
    lines."""
    if of_probe(measurements, SM_MAP_PROBE).empty:
        return []
    maps = sm_maps(measurements)
    if maps is None:
        return []
    ids, _, far = maps
    labels = sm_sides(far)
    sides = int(labels.max()) + 1
    method = (f"each of {ids.size} SMs' cold L2-only misses over the same {far.shape[1]} lines in address order "
              f"(L2 flushed before each), split near/far at its miss valley; SMs whose maps agree on "
              f"{SAME_SIDE:.0%} or more of the lines share a side of at least {MIN_SIDE_SMS} SMs")
    if sides == 0:
        note = f"undecided: no {MIN_SIDE_SMS} SMs' maps agree on {SAME_SIDE:.0%} of the lines"
        return [derived_row(q, np.nan, np.nan, np.nan, method, SM_MAP_PROBE, note)
                for q in ("l2.sm_sides", "l2.sm_side_fraction", "l2.sm_map_consistency")]
    consensus = np.array([far[labels == label].mean(axis=0) > 0.5 for label in range(sides)])
    matched = labels >= 0
    agreement = np.mean(far[matched] == consensus[labels[matched]], axis=1)
    share = float(np.mean(labels[matched] == 0))
    complement = (f"; the two sides' maps are complements on {np.mean(consensus[0] != consensus[1]):.0%} of the "
                  "lines") if sides == 2 else ""
    block = _voted_interleave_bytes(far, labels)
    if block:
        complement += (f"; the first side's majority map alternates homes in aligned {fmt_bytes(block)} blocks "
                       f"(the largest over its {fmt_bytes(far.shape[1] * 128)})")
    for i in np.flatnonzero(~matched):
        best = np.max(np.mean(far[i] == consensus, axis=1))
        complement += (f"; SM {ids[i]} matches no side (at most {best:.0%} of its lines agree with a side's map) "
                       f"and is left out")
    note = (f"sides of {', '.join(str(int(np.sum(labels == k))) for k in range(sides))} SMs; far-homed share "
            f"{far.mean():.0%}{complement}")
    lo, med, hi = np.percentile(agreement, [2.5, 50, 97.5])
    return [derived_row("l2.sm_sides", sides, sides, sides, method, SM_MAP_PROBE, note),
            derived_row("l2.sm_side_fraction", share, share, share,
                        method + ": the first side's share of the SMs on a side", SM_MAP_PROBE, note),
            derived_row("l2.sm_map_consistency", float(med), float(lo), float(hi),
                        method + ": median agreement of an SM with its side's majority map (2.5..97.5 percentiles "
                        "over SMs)", SM_MAP_PROBE, note)]
