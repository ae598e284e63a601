"""The geometry family: the L1's sets and ways (gpuatlas.analysis.l1_sets), the L2 partitions' homes and sides
(gpuatlas.analysis.l2_partitions), the constant caches' staircase and L2 persistence's speedup."""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.l1_sets import l1_rows
from gpuatlas.analysis.l2_partitions import partition_rows, sm_map_rows
from gpuatlas.analysis.plateaus import fit_staircase
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select
from gpuatlas.analysis.units import fmt_bytes


def geometry_rows(measurements: pd.DataFrame) -> list[dict]:
    """The L1's rows (geometry.l1), the L2 partition map's (geometry.l2_partition), the constant caches'
    (geometry.const) and L2 persistence's (geometry.l2_persist)."""
    return l1_rows(measurements) + partition_rows(measurements) + sm_map_rows(measurements) + \
        const_rows(measurements) + persist_rows(measurements)


# -- the constant caches -----------------------------------------------------------------------------------

CONST_PROBE = "geometry.const"


def const_rows(measurements: pd.DataFrame) -> list[dict]:
    """The constant-memory chase's staircase: the first level's latency and capacity, and the next level's;
    its capacity when a third level shows within the 64 KiB a kernel's constant space spans."""
    if "footprint_bytes" not in measurements:
        return []
    latency = select(measurements, CONST_PROBE, "latency")
    if latency["footprint_bytes"].nunique() < 6:
        return []
    fit = fit_staircase(latency["footprint_bytes"].to_numpy(), latency["value"].to_numpy(), max_plateaus=3)
    if len(fit.plateaus) < 2:
        return []
    method = "random dependent LDC chase through __constant__ memory, staircase fit"
    first, second = fit.plateaus[0], fit.plateaus[1]
    top = fmt_bytes(latency["footprint_bytes"].max())
    rows = [derived_row("const.l1.latency_cycles", first.latency, first.ci_low, first.ci_high, method, CONST_PROBE),
            derived_row("const.l1.capacity_bytes", fit.knees_bytes[0], *fit.knee_ci[0], method, CONST_PROBE),
            derived_row("const.l15.latency_cycles", second.latency, second.ci_low, second.ci_high, method,
                        CONST_PROBE, "" if len(fit.plateaus) > 2 else
                        f"no further step up to {top}: this level holds the whole constant space")]
    if len(fit.plateaus) > 2:
        rows.append(derived_row("const.l15.capacity_bytes", fit.knees_bytes[1], *fit.knee_ci[1], method,
                                CONST_PROBE, f"beyond it: {fit.plateaus[2].latency:.0f} cycles"))
    return rows


# -- L2 persistence ----------------------------------------------------------------------------------------

PERSIST_PROBE = "geometry.l2_persist"


def persist_rows(measurements: pd.DataFrame) -> list[dict]:
    """l2.persisting_speedup: median seconds per launch with normal priority over with evict_last, the CI
    from the two medians' CIs."""
    if "hint" not in measurements:
        return []
    normal = select(measurements, PERSIST_PROBE, "seconds", hint="normal")["value"]
    persisting = select(measurements, PERSIST_PROBE, "seconds", hint="evict_last")["value"]
    if normal.empty or persisting.empty:
        return []
    (n, n_lo, n_hi), (p, p_lo, p_hi) = median_ci(normal), median_ci(persisting)
    hot = select(measurements, PERSIST_PROBE, "hot_bytes")["value"]
    stream = select(measurements, PERSIST_PROBE, "stream_bytes_per_round")["value"]
    note = (f"hot set {fmt_bytes(hot.iat[0])}, {fmt_bytes(stream.iat[0])} streamed between its reads"
            if len(hot) and len(stream) else "")
    return [derived_row("l2.persisting_speedup", n / p, n_lo / p_hi, n_hi / p_lo,
                        "seconds per launch re-reading a hot set between L2-sized streams: its loads at normal "
                        "L2 priority over evict_last (createpolicy; the persisting set-aside at its maximum)",
                        PERSIST_PROBE, note)]


FAMILY = Family(order=150, probe_modules=("geometry", "geometry.l2_partition", "l2_sets"),
                rows=lambda m, device: geometry_rows(m), quantities={
    "l1.ways": ("1", "L1 associativity: the lines one set holds (a plain index: what a chain confined to one set by "
                     "a power-of-two stride of the set span or more holds before its first miss; a hashed index: "
                     "the lines missing on every pass of the shortest missing chain at random places, minus one, "
                     "where longer such chains' misses fit balls into capacity/ways sets best at the same ways)"),
    "l1.sets": ("1", "L1 sets: the capacity in lines over the ways (a plain index: the stride where the lines held "
                     "stop falling, over the line; a hashed index: the lines a chain at the smallest stride holds, "
                     "over l1.ways)"),
    "l1.set_pattern_departures": ("1", "strides whose lines held before the first L1 miss depart from max(ways, "
                                       "capacity/stride): nonzero where the set index is hashed"),
    "l1.replacement_miss_fraction": ("1", "miss fraction of a cyclic walk of ways+1 lines in one L1 set (1 under "
                                          "LRU or FIFO, far below under random replacement); the verdict in the note"),
    "l1.capacity_bytes_at_carveout": ("B", "L1 capacity beside the most dynamic shared memory measured; the note "
                                           "lists the capacity at each shared allocation (the carve-out table)"),
    "l2.partition_interleave_bytes": ("B", "granularity of the L2 partitions' address interleave: the largest "
                                           "aligned power-of-two block whose lines one partition homes, from one "
                                           "SM's near- and far-homed miss latencies in address order"),
    "l2.far_home_fraction": ("1", "share of lines in an address-order walk that the SM's far L2 partition homes"),
    "l2.sm_sides": ("1", "groups of SMs that see the same lines as near-homed in their cold L2-only misses (each "
                         "group of two or more is a side of the GPU, nearest one L2 partition)"),
    "l2.sm_side_fraction": ("1", "share of the SMs on a side that are on the lowest-numbered one's side"),
    "l2.sm_map_consistency": ("1", "median over SMs of the share of lines on which an SM's near/far map agrees with "
                                   "its side's (1: every SM sees exactly its side's map)"),
    "const.l1.latency_cycles": ("cycles", "constant-cache (first level) hit latency: dependent LDC loads"),
    "const.l1.capacity_bytes": ("B", "capacity of the first constant-cache level (the staircase's first knee)"),
    "const.l15.latency_cycles": ("cycles", "latency of the level behind the constant L1 (the L1.5 constant cache when "
                                           "the 64 KiB constant space fits it)"),
    "const.l15.capacity_bytes": ("B", "capacity of the level behind the constant L1 (the staircase's second knee)"),
    "l2.persisting_speedup": ("1", "time of a launch re-reading a hot set between L2-sized streams, normal over "
                                   "persisting (evict_last) L2 priority for the hot set"),
    "l1.shared_trade_ratio": ("1", "L1 capacity lost per byte of shared memory allocated (1 when the two are one "
                                   "array carved up by configuration)"),
    "l1.unified_bytes": ("B", "L1 capacity plus the shared memory allocated beside it, the largest over the "
                              "allocations: a lower bound on the unified L1/shared array"),
})
