"""Every level's latency and capacity from the pointer chases: the chase family's rows.

A dense footprint sweep (the ``full`` profile) is fitted as a staircase (gpuatlas.analysis.plateaus): through-L1
loads give the L1 plateau and its capacity; L2-only loads give the near-partition L2 plateau, the knee where
one partition's reach ends, and HBM; when the
curve has exactly one step between them (a far plateau), the knee where one SM's chase turns from
far-partition hits to HBM misses (``l2.far_reach_bytes``; the L2's capacity is the all-SM bandwidth fit of
gpuatlas.analysis.coalescing).  Past the partition the chase's average mixes far hits with misses in proportions that
move with the footprint (on an H200 it is a ramp, cut into steps in different places run to run), so the far
partition's latency comes from chase.access's access-by-access record instead (gpuatlas.analysis.miss_latency).  A sparse
sweep (``quick``: one footprint per level) falls back to the median of the samples in each level's footprint
window, sized from the device's own properties (gpuatlas.analysis.chase_levels).
"""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.chase_levels import CUPY_PROBE, chase_levels
from gpuatlas.analysis.family import Family
from gpuatlas.analysis.hierarchy import Level
from gpuatlas.analysis.l2_sets import l2_set_rows
from gpuatlas.analysis.linesize import fit_line_by_capacity, fit_line_size
from gpuatlas.analysis.miss_latency import access_bands, access_rows, cold_miss_rows
from gpuatlas.analysis.plateaus import fit_staircase, plateau_text
from gpuatlas.analysis.quantities import derived_row, structure_row
from gpuatlas.analysis.stats import median_ci, of_probe, select
from gpuatlas.analysis.units import fmt_bytes

#: A sweep with at least this many footprints is fitted as a staircase.
DENSE_FOOTPRINTS = 16
#: An every-SM chase after every SM walked the whole chain is swept at half the density (its warm walk is
#: long): fewer footprints suffice for its one knee.
SPARSE_FOOTPRINTS = 10
#: Plateaus within this factor of the first are sub-steps of L1 (translation effects), not another level.
SAME_LEVEL = 2.0


def hierarchy_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """Derived rows of every chase probe present in ``measurements``."""
    rows = l2_set_rows(measurements, device)
    if "footprint_bytes" not in measurements:
        return rows
    through_l1 = select(measurements, CUPY_PROBE, "latency", flavour="default", stride_bytes=128)
    l2_only = select(measurements, CUPY_PROBE, "latency", flavour="cg", stride_bytes=128)
    if through_l1["footprint_bytes"].nunique() >= DENSE_FOOTPRINTS:
        rows += _l1_rows(through_l1)
    if l2_only["footprint_bytes"].nunique() >= DENSE_FOOTPRINTS:
        rows += _l2_rows(l2_only, partition=of_probe(measurements, "geometry.l2_sets").empty)
    elif not through_l1.empty:
        rows += _window_rows(measurements, device, {r["quantity"] for r in rows})
    bands, lines = access_bands(measurements, device), _line_fits(measurements)  # each read twice below
    rows += access_rows(bands)
    rows += cold_miss_rows(measurements, device, bands, lines.get("cg"))
    rows += _every_sm_rows(select(measurements, "chase.every_sm", "latency"), device, rows)
    rows += _smem_rows(select(measurements, "chase.smem", "latency", stride_bytes=4))
    rows += _smem_rows(select(measurements, "chase.smem_index", "latency", stride_bytes=4), "smem.index_latency_cycles",
                       "chase.smem_index", "median of index-computing shared-memory chase samples (IMAD, LEA, LDS "
                       "per step; bootstrap 95% CI)")
    rows += _line_rows(lines)
    rows += _line_capacity_rows(measurements, rows)
    return rows


def _l1_knee(fit) -> int | None:
    """Index of the knee that ends L1 in a through-L1 staircase fit: after its last plateau within
    SAME_LEVEL of the first (sub-steps of L1 are translation effects), None if the sweep never leaves L1."""
    first = fit.plateaus[0]
    last = [i for i, p in enumerate(fit.plateaus) if p.latency < SAME_LEVEL * first.latency][-1]
    return last if last < len(fit.knees_bytes) else None


def _l1_rows(frame) -> list[dict]:
    fit = fit_staircase(frame["footprint_bytes"], frame["value"])
    first = fit.plateaus[0]
    method = "staircase fit of the through-L1 chase (plateau levels: bootstrap 95% CI)"
    last = _l1_knee(fit)
    flat = ""
    if last is not None:
        medians = frame.groupby("footprint_bytes")["value"].median()
        medians = medians[medians.index <= 0.75 * fit.knees_bytes[last]]
        flat = (f"; medians from {fmt_bytes(medians.index.min())} to 3/4 of the capacity span "
                f"{medians.min():.2f}..{medians.max():.2f} cycles ({medians.max() / medians.min() - 1:.2%})")
    rows = [derived_row("l1.latency_cycles", first.latency, first.ci_low, first.ci_high, method, CUPY_PROBE,
                 f"plateaus: {plateau_text(fit)}{flat}")]
    if last is not None:
        lo, hi = fit.knee_ci[last]
        rows.append(derived_row("l1.capacity_bytes", fit.knees_bytes[last], lo, hi,
                         "knee where latency crosses the geometric mean of L1 and the next level", CUPY_PROBE,
                         "kernel uses no shared memory, so the whole unified L1/shared array is L1"))
    return rows


def _l2_rows(frame, partition: bool = True) -> list[dict]:
    """``partition``: the near partition's knee too (a run with geometry.l2_sets measures it by hit fraction)."""
    fit = fit_staircase(frame["footprint_bytes"], frame["value"])
    plateaus, knees = fit.plateaus, fit.knees_bytes
    method = "staircase fit of the L2-only (ld.global.cg) chase"
    note = f"plateaus: {plateau_text(fit)}"
    near = plateaus[0]
    rows = [derived_row("l2.latency_cycles", near.latency, near.ci_low, near.ci_high, method, CUPY_PROBE, note)]
    if len(plateaus) >= 2 and partition:
        rows.append(derived_row("l2.partition_bytes", knees[0], *fit.knee_ci[0],
                         "knee after the near-partition plateau", CUPY_PROBE))
    if len(plateaus) == 3:  # near, far, HBM.  A ramp cut into several steps has no one far plateau
        far = plateaus[1]
        rows.append(derived_row("l2.far_plateau_cycles", far.latency, far.ci_low, far.ci_high, method, CUPY_PROBE,
                         "the plateau between the near partition's knee and HBM: far hits mixed with misses"))
        rows.append(derived_row("l2.far_reach_bytes", knees[1], *fit.knee_ci[1],
                         "knee after the far plateau of one SM's dependent chase", CUPY_PROBE))
    return rows


def _window_rows(measurements, device, have: set) -> list[dict]:
    rows = []
    levels = chase_levels(measurements, device)
    for level, metric, quantity in (("l1", "latency", "l1.latency_cycles"), ("l2", "latency", "l2.latency_cycles")):
        hit = levels[(levels["level"] == level) & (levels["metric"] == metric)]
        if hit.empty or quantity in have:
            continue
        r = hit.iloc[0]
        shown = ", ".join(fmt_bytes(f) for f in r["footprints"][:4]) + (", ..." if len(r["footprints"]) > 4 else "")
        rows.append(derived_row(quantity, r["median"], r["ci_low"], r["ci_high"],
                         "median of chase samples in the level's footprint window (bootstrap 95% CI)",
                         CUPY_PROBE, f"{r['n']} samples at {shown}"))
    return rows


def _smem_rows(frame, quantity: str = "smem.latency_cycles", probe: str = "chase.smem",
               method: str = "median of dependent LDS chase samples (bootstrap 95% CI)") -> list[dict]:
    if frame.empty:
        return []
    med, lo, hi = median_ci(frame["value"])
    return [derived_row(quantity, med, lo, hi, method,
                 probe, f"footprints {', '.join(fmt_bytes(f) for f in sorted(frame['footprint_bytes'].unique()))}")]


def _line_fits(measurements) -> dict:
    """``{flavour: fit_line_size}`` of each address-order chase (chase.line) with three strides or more."""
    frame = select(measurements, "chase.line", "latency")
    fits = {}
    if frame.empty:
        return fits
    for flavour in ("default", "cg"):
        data = frame[frame["flavour"] == flavour]
        if data["stride_bytes"].nunique() >= 3:
            fits[flavour] = fit_line_size(data["stride_bytes"], data["value"])
    return fits


def _line_rows(fits: dict) -> list[dict]:
    """The fill blocks of the address-order chases (``_line_fits``), and the L1 sector they show."""
    rows = []
    method = "hinge fit hit + (miss-hit)*min(stride/L, 1), L a power of two"
    for quantity, flavour, what in (("l1.fill_bytes", "default", "L1 fill block (chain beyond L1, inside L2)"),
                                    ("l2.dram_fetch_bytes", "cg", "L2 fill block from HBM (chain beyond L2)")):
        if flavour not in fits:
            continue
        fit = fits[flavour]
        note = f"{what}: hit {fit['hit']:.1f}, miss {fit['miss']:.1f} cycles, R2 {fit['r2']:.3f}"
        rows.append(structure_row(quantity, fit["block_bytes"], fit["ci"], method, "chase.line", note))
        if quantity == "l1.fill_bytes":
            rows.append(structure_row(
                "l1.sector_bytes", fit["block_bytes"], fit["ci"],
                "the L1 fill block of the address-order chase through L1 (hinge fit), which is the sector when "
                "the L1 fills one sector per miss; a fill block smaller than l1.line_bytes shows that it does",
                "chase.line", note))
    return rows


#: Fewest footprints a chase at one stride needs for its capacity knee to be fitted.
KNEE_FOOTPRINTS = 16
#: Largest RMS (octaves) of the knees about C*max(1, s/L) for a line size to be reported: knees that do not
#: follow the line-count model measure something else.
MAX_MODEL_OCTAVES = 0.2


def capacity_knees(measurements: pd.DataFrame, flavour: str, min_stride: int = 0) -> dict:
    """``{stride: (knee, ci_low, ci_high)}``: where the chase at each stride leaves L1 (flavour ``default``,
    the knee that gives l1.capacity_bytes) or the near L2 partition (``cg``, the knee of l2.partition_bytes)."""
    frame = select(measurements, CUPY_PROBE, "latency", flavour=flavour)
    knees = {}
    if frame.empty or "stride_bytes" not in frame:
        return knees
    for stride, data in frame.groupby("stride_bytes"):
        if stride < min_stride or data["footprint_bytes"].nunique() < KNEE_FOOTPRINTS:
            continue
        fit = fit_staircase(data["footprint_bytes"], data["value"])
        which = _l1_knee(fit) if flavour == "default" else (0 if fit.knees_bytes else None)
        if which is not None:
            knees[int(stride)] = (fit.knees_bytes[which], *fit.knee_ci[which])
    return knees


def _line_capacity_rows(measurements, rows: list[dict]) -> list[dict]:
    """l1.line_bytes and l2.line_bytes by capacity counted in distinct lines, or a lower bound on each.  When
    the knee already moves between the two smallest strides, no line is named (the capacity counts blocks no
    larger than the smallest stride) and the knees go into the note of that level's capacity row in ``rows``."""
    out = []
    for level, flavour, what, capacity in (("l1", "default", "through-L1 chase's L1 knee", "l1.capacity_bytes"),
                                           ("l2", "cg", "L2-only chase's near-partition knee", "l2.partition_bytes")):
        knees = capacity_knees(measurements, flavour)
        if len(knees) < 2:
            continue
        fit = fit_line_by_capacity(knees)
        if fit["model_octaves"] > MAX_MODEL_OCTAVES:
            continue
        shown = "; ".join(f"stride {s} B: {fmt_bytes(k)} [{fmt_bytes(lo)}, {fmt_bytes(hi)}], "
                          f"{fit['ratios'][s]:.2f}x" for s, (k, lo, hi) in sorted(knees.items()))
        note = (f"knees of the {what} (x the smallest stride's): {shown}; RMS of the knees about "
                f"C*max(1, s/L): {fit['model_octaves']:.2f} octaves")
        method = ("capacity counted in distinct lines: the knee footprint K(s) = C*max(1, s/L) of random chases "
                  "at strides s stays put while s <= L; L is the largest stride whose knee is within half an "
                  "octave of the smallest stride's (bootstrap 95% CI over the knees' CIs)")
        if fit["lower_bound"]:
            top = float(fit["line_bytes"])
            out.append(derived_row(f"{level}.line_lower_bound_bytes", top, top, top,
                                   "no measured stride moved the capacity knee: the line is at least the "
                                   "largest stride", CUPY_PROBE, note))
            continue
        if fit["upper_bound"]:
            for row in rows:
                if row["quantity"] == capacity and row["probe"] == CUPY_PROBE:
                    row["note"] = "; ".join(filter(None, [row["note"], (
                        f"capacity counted at several strides moves with every stride, so it counts blocks no "
                        f"larger than the smallest stride, not lines: {note}")]))
            continue
        out.append(derived_row(f"{level}.line_bytes", fit["line_bytes"], *fit["ci"], method, CUPY_PROBE, note))
    return out


def _every_sm_rows(frame, device, rows: list[dict]) -> list[dict]:
    """The L2's capacity as every SM uses it: the knee before the miss plateau of the chase run from every SM
    at once (both partitions), beside the driver's size.  Where one SM's near and far hit latencies are in
    ``rows``, the note places the every-SM hits between them: hits at the near latency for a chain larger
    than one partition mean far-homed lines are served from copies in the reader's near partition.  The same
    chase after every SM walked the whole chain once is kept beside it; its timed walks are again each SM's own
    stretch, so copies the whole-chain walk made can age out before anything is timed: it does not measure what
    copies cost (geometry.l2_sets's every-SM capacity against its partition does)."""
    readers = frame["readers"].fillna("own") if "readers" in frame else pd.Series("own", index=frame.index)
    own = _every_sm_knee(frame[readers == "own"], DENSE_FOOTPRINTS)
    if own is None:
        return []
    fit, knee, lo, hi = own
    known = {r["quantity"]: r["value"] for r in rows}
    hits = ""
    if "l2.latency_cycles" in known and "l2.far_latency_cycles" in known:
        near, far, hit = known["l2.latency_cycles"], known["l2.far_latency_cycles"], fit.plateaus[-2].latency
        spans = fit.plateaus[-2]
        hits = (f"; its hits over {fmt_bytes(spans.lo_bytes)}..{fmt_bytes(spans.hi_bytes)} take {hit:.1f} cycles, "
                f"{(hit - near) / (far - near):.0%} of the way from one SM's near-partition hit ({near:.1f}) to its "
                f"far-partition hit ({far:.1f}): lines homed in the far partition are read from copies in the "
                "reader's near one")
    out = [derived_row("l2.capacity_chase_bytes", knee, lo, hi,
                       "knee before the miss plateau of an L2-only chase run from every SM at once, each SM walking "
                       "its own stretch of one random cycle (bootstrap 95% CI)", "chase.every_sm",
                       f"plateaus: {plateau_text(fit)}; {knee / device['l2_bytes']:.1%} of the driver's "
                       f"{fmt_bytes(device['l2_bytes'])}{hits}")]
    every = _every_sm_knee(frame[readers == "all"], SPARSE_FOOTPRINTS)
    if every is not None:
        fit_all, knee_all, lo_all, hi_all = every
        out.append(derived_row(
            "l2.capacity_chase_all_readers_bytes", knee_all, lo_all, hi_all,
            "knee before the miss plateau of the every-SM L2-only chase after every SM walked the whole cycle "
            "(every line read from both partitions; bootstrap 95% CI)", "chase.every_sm",
            f"plateaus: {plateau_text(fit_all)}; {knee_all / knee:.2f} of the knee when each line is read by "
            f"about one SM ({fmt_bytes(knee)}); the timed walks are each SM's own stretch, so copies the "
            f"whole-cycle walk made may age out first: no test of lines held in both partitions; "
            f"{knee_all / device['l2_bytes']:.1%} of the driver's {fmt_bytes(device['l2_bytes'])}"))
    return out


def _every_sm_knee(frame, dense: int):
    """(fit, knee, CI low, CI high) of the last knee of an every-SM chase, or None with too few footprints
    or no knee."""
    if frame["footprint_bytes"].nunique() < dense:
        return None
    fit = fit_staircase(frame["footprint_bytes"], frame["value"])
    if len(fit.plateaus) < 2:
        return None
    return fit, fit.knees_bytes[-1], *fit.knee_ci[-1]


FAMILY = Family(order=30, probe_modules=("chase_l2", "chase", "chase_numba"), rows=hierarchy_rows,
                reads_later=("geometry.l2_partition", "l2_sets", "lecture"), quantities={
    "smem.latency_cycles": ("cycles", "shared-memory load-to-use latency"),
    "smem.index_latency_cycles": ("cycles", "one step of a shared-memory chase that computes each address from the "
                                            "loaded index (IMAD, LEA, LDS), as published chases do"),
    "l1.latency_cycles": ("cycles", "L1 hit load-to-use latency (dependent 64-bit loads)"),
    "l1.capacity_bytes": ("B", "L1 capacity seen by global loads"),
    "l1.line_bytes": ("B", "L1 line size: the tag's span, from the L1 capacity counted in distinct lines (the "
                           "capacity knee stays put for chase strides up to the line and moves with the stride "
                           "beyond it)"),
    "l1.line_lower_bound_bytes": ("B", "largest chase stride whose L1 capacity knee still equals the small-stride "
                                       "knee, when no measured stride moved it: the L1 line is at least this"),
    "l1.sector_bytes": ("B", "L1 sector: the smallest block the L1 fills per miss"),
    "l1.fill_bytes": ("B", "block the L1 fills per miss: address-order chase through L1, chain beyond L1 inside L2"),
    "l2.latency_cycles": ("cycles", "L2 hit latency, near partition"),
    "l2.far_latency_cycles": ("cycles", "L2 hit latency, far partition (accesses timed one by one and clustered)"),
    "l2.far_plateau_cycles": ("cycles", "one SM's chase past one L2 partition, where the published staircases show a "
                                        "plateau: far-partition hits mixed with misses, an average of both"),
    "l2.capacity_chase_bytes": ("B", "L2 capacity as the knee of an L2-only pointer chase run from every SM at once "
                                     "(both partitions): the capacity a chase over the whole GPU can use"),
    "l2.capacity_chase_all_readers_bytes": ("B", "L2 capacity as the knee of the every-SM L2-only chase after every SM "
                                                 "walked the whole chain (every line read from both partitions)"),
    "l2.line_bytes": ("B", "L2 line size: the tag's span, from the L2-only chase's capacity counted in distinct "
                           "lines"),
    "l2.line_lower_bound_bytes": ("B", "largest L2-only chase stride whose capacity knee still equals the "
                                       "small-stride knee, when no measured stride moved it"),
    "l2.dram_fetch_bytes": ("B", "block the L2 fetches from HBM per miss: address-order L2-only chase, chain "
                                 "beyond the L2"),
    "l2.partition_bytes": ("B", "capacity of one L2 partition as seen from one SM"),
    "l2.ways": ("1", "L2 ways per partition (hashed index): associativity fitted to the hit fraction of chains at "
                     "random places under a balls-into-bins LRU model"),
    "l2.sets": ("1", "L2 sets per partition (hashed index): sets fitted to the hit fraction of chains at random places "
                     "under a balls-into-bins LRU model"),
    "l2.capacity_every_sm_bytes": ("B", "lines the L2 keeps when every SM walks its own stretch of one chain: the "
                                        "half-hit footprint of a steady-state chase, contiguous lines"),
    "l2.far_reach_bytes": ("B", "footprint where one SM's dependent chase turns from far-partition L2 hits to HBM "
                                "misses: the L2 as one SM sees it"),
    "dram.near_latency_cycles": ("cycles", "HBM miss latency of an address the SM's near L2 partition homes "
                                           "(the faster of one SM's two miss clusters)"),
    "dram.far_latency_cycles": ("cycles", "HBM miss latency of an address the far L2 partition homes (the "
                                          "slower miss cluster: the crossing to the far partition and back added)"),
    "dram.latency_cycles": ("cycles", "device-memory (HBM) load-to-use latency of a plain dependent load that misses "
                                      "the L2, inside the TLBs' reach"),
    "dram.latency_ns": ("s", "the same HBM latency in seconds (globaltimer)"),
    "dram.latency_tlb_miss_cycles": ("cycles", "HBM latency of a dependent load whose page translation misses the "
                                               "first TLB level too (footprints past its reach)"),
    "dram.latency_tlb_miss_ns": ("s", "the same TLB-missing HBM latency in seconds (globaltimer)"),
    "dram.latency_cg_cycles": ("cycles", "HBM latency of a dependent L2-only load (ld.global.cg) that misses the L2, "
                                         "inside the TLBs' reach"),
})


def _far_reach(c) -> str:
    return (("one SM's reach " if c.has("l2.far_reach_bytes") else "")
            + c.measured("l2.far_reach_bytes", "chase.latency", "no single far plateau in its staircase; the whole "
                         "L2's capacity is in the rows below"))


#: The memory hierarchy table's rows (gpuatlas.analysis.hierarchy): each level with what measures it.
LEVELS = (
    Level("Shared memory", lambda c: (
        f"{fmt_bytes(c.device['smem_per_sm_bytes'])}/SM (driver)", c.measured("smem.latency_cycles", "chase.smem"),
        c.as_time("smem.latency_cycles"), c.measured("smem.bandwidth_bytes_per_clk_sm", "bw.onchip")), "one block"),
    Level("L1", lambda c: (
        c.measured("l1.capacity_bytes", "chase.latency"), c.measured("l1.latency_cycles", "chase.latency"),
        c.as_time("l1.latency_cycles"), c.measured("l1.bandwidth_bytes_per_clk_sm", "bw.onchip")), "one SM"),
    Level("L2, near partition", lambda c: (
        c.measured("l2.partition_bytes", "geometry.l2_sets"), c.measured("l2.latency_cycles", "chase.latency"),
        c.as_time("l2.latency_cycles"), "-"), "the SMs beside it"),
    Level("L2, far partition", lambda c: (
        _far_reach(c), c.measured("l2.far_latency_cycles", "chase.access"), c.as_time("l2.far_latency_cycles"),
        "-"), "whole GPU"),
    Level("L2, every SM reading", lambda c: (
        c.measured("l2.capacity_bytes", "bw.l2") + f"; driver {fmt_bytes(c.device['l2_bytes'])}", "-", "-",
        c.measured("l2.bandwidth_bytes_per_s", "bw.l2")), "whole GPU"),
    Level("L2, every SM chasing", lambda c: (
        c.measured("l2.capacity_chase_bytes", "chase.every_sm"), "-", "-", "-"), "whole GPU"),
    Level("HBM", lambda c: (
        f"{fmt_bytes(c.device['total_memory_bytes'])} (driver)", c.measured("dram.latency_cycles", "chase.miss"),
        c.measured("dram.latency_ns", "chase.miss"),
        c.measured("dram.read_bandwidth_bytes_per_s", "bw.dram") + " read"), "whole GPU"),
    Level("HBM, past the first TLB level's reach", lambda c: (
        ("TLB reach " + c.measured("tlb.l1.reach_bytes", "chase.tlb")) if c.has("tlb.l1.reach_bytes") else "-",
        c.measured("dram.latency_tlb_miss_cycles", "chase.miss"), c.measured("dram.latency_tlb_miss_ns", "chase.miss"),
        "-"), "whole GPU"),
    Level("Second TLB level", lambda c: (
        "reach " + c.measured("tlb.l2.reach_bytes", "chase.tlb"),
        "a miss adds " + c.measured("tlb.l2.miss_cycles", "chase.tlb"), "-", "-"), "whole GPU", "tlb.l2.reach_bytes"),
    *(Level(level, lambda c, quantity=quantity: (
        "-", c.measured(quantity, "chase.access"), c.as_time(quantity), "-"), "whole GPU", quantity)
      for quantity, level in (("dram.near_latency_cycles", "HBM, address homed by the near L2 partition"),
                              ("dram.far_latency_cycles", "HBM, address homed by the far L2 partition"))),
)
