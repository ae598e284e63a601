"""Latencies past one SM's near L2 partition: the far partition's hits and the two HBM miss clusters from
chase.access's access-by-access record, and HBM's latency on chase.miss's cold paths.

Past the partition a chase's average mixes far hits with misses in proportions that move with the footprint,
so the far partition's latency comes from accesses timed one by one (``access_bands``); a cold path (the L2
flushed, no line visited twice) misses on every access, inside the TLBs' reach and past it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.chase_levels import ACCESS_PROBE, CUPY_PROBE
from gpuatlas.analysis.l2_partitions import miss_valley
from gpuatlas.analysis.plateaus import fit_staircase, noise_step, plateau_text
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, of_probe, select, usable
from gpuatlas.analysis.units import fmt_bytes

#: chase.access: the near-hit band ends at this percentile of a chain inside one partition (every access a
#: near hit); the miss band starts at this percentile of the cold paths of 2x the L2 or more (misses only).
NEAR_EDGE_PERCENTILE, MISS_EDGE_PERCENTILE = 99.5, 0.1


def access_bands(measurements: pd.DataFrame, device: dict) -> dict | None:
    """Split chase.access's recorded intervals into near hits, far-partition hits and misses.

    Footprints up to L2/4 hold only near-partition hits; from 2x the L2 on, chains are cold paths (the L2
    flushed, no line visited twice), so every access misses.
    Between one partition and the whole L2, the accesses that are slower than every near hit and faster than
    all but ``MISS_EDGE_PERCENTILE`` % of misses are far-partition hits.  The recording's own cost (the store
    and clock read per access) is the recording loop's cycles per step less the plain chase's over the
    near-only chain, where both walk identical hits.  ``None`` unless all three kinds of footprint were run."""
    frame = usable(of_probe(measurements, ACCESS_PROBE)) if "probe" in measurements else None
    if frame is None or frame.empty:
        return None
    l2 = device["l2_bytes"]
    footprint = frame["footprint_bytes"]
    near_only, mixed, beyond = frame[footprint <= l2 / 4], frame[(footprint > l2 / 2) & (footprint <= l2)], \
        frame[footprint >= 2 * l2]
    if near_only.empty or mixed.empty or beyond.empty:
        return None

    def metric(part, name):
        return part.loc[part["metric"] == name, "value"].to_numpy(dtype=float)

    near_edge = float(np.percentile(metric(near_only, "access"), NEAR_EDGE_PERCENTILE))
    miss_edge = float(np.percentile(metric(beyond, "access"), MISS_EDGE_PERCENTILE))
    if miss_edge <= near_edge:  # no gap between the near hits and the misses for far hits to fill
        return None
    offset = float(np.median(metric(near_only, "record_step")) - np.median(metric(near_only, "latency")))
    accesses = mixed[mixed["metric"] == "access"]
    far = accesses[(accesses["value"] > near_edge) & (accesses["value"] < miss_edge)]
    misses = metric(beyond, "access")
    return {"near_edge": near_edge, "miss_edge": miss_edge, "offset": offset, "far": far,
            "far_share": len(far) / max(len(accesses), 1), "mixed_footprints": sorted(mixed["footprint_bytes"].unique()),
            "misses": misses[misses >= miss_edge], "miss_split": miss_valley(misses[misses >= miss_edge])}


#: Fewest far-hit accesses a far latency is read from.
MIN_FAR_HITS = 100


def access_rows(bands) -> list[dict]:
    """The far latency and the two miss latencies from chase.access (``access_bands``), each when its cluster
    is there."""
    if bands is None:
        return []
    return _far_row(bands) + _miss_rows(bands)


def _far_row(bands) -> list[dict]:
    if len(bands["far"]) < MIN_FAR_HITS:
        return []
    far, offset = bands["far"], bands["offset"]
    med, lo, hi = median_ci(far["value"])
    by_footprint = ", ".join(f"{fmt_bytes(f)}: {g.median() - offset:.0f}"
                             for f, g in far.groupby("footprint_bytes")["value"])
    spans = bands["mixed_footprints"]
    return [derived_row(
        "l2.far_latency_cycles", med - offset, lo - offset, hi - offset,
        "median of one SM's L2-only accesses, recorded one by one, that are slower than every near-partition hit "
        "and faster than nearly every miss, less the recording's cost (bootstrap 95% CI)", ACCESS_PROBE,
        f"{bands['far_share']:.0%} of accesses at {fmt_bytes(spans[0])}..{fmt_bytes(spans[-1])} are far hits, "
        f"between {bands['near_edge']:.0f} and {bands['miss_edge']:.0f} recorded cycles; recording cost "
        f"{offset:.1f} cycles; per footprint: {by_footprint}")]


def _miss_rows(bands) -> list[dict]:
    valley, misses, offset = bands["miss_split"], bands["misses"], bands["offset"]
    if valley is None:
        return []
    rows = []
    for quantity, part, which in (("dram.near_latency_cycles", misses[misses < valley], "faster"),
                                  ("dram.far_latency_cycles", misses[misses >= valley], "slower")):
        med, lo, hi = median_ci(part)
        rows.append(derived_row(
            quantity, med - offset, lo - offset, hi - offset,
            f"median of the {which} of the two clusters of one SM's L2-only misses (chains of 2x the L2 or more, "
            "recorded access by access), less the recording's cost (bootstrap 95% CI)", ACCESS_PROBE,
            f"{part.size / misses.size:.0%} of {misses.size} misses; clusters split at {valley:.0f} recorded cycles"))
    return rows


MISS_PROBE = "chase.miss"
#: Noise multiple a step of the miss chase must exceed to count as a TLB level.
MISS_STEP_SIGMAS = 3.0


def last_octave_slope(frame) -> float:
    """Relative change of the median latency per octave of footprint over the sweep's last octave (a
    plateau is flat when this is well under 1%)."""
    medians = frame.groupby("footprint_bytes")["value"].median()
    last = medians[medians.index >= medians.index.max() / 2]
    if last.size < 2:
        return float("nan")
    slope = np.polyfit(np.log2(last.index.to_numpy(dtype=float)), np.log(last.to_numpy(dtype=float)), 1)[0]
    return float(np.expm1(slope))


def _span(frame, lo: float, hi: float):
    return frame[(frame["footprint_bytes"] >= lo) & (frame["footprint_bytes"] <= hi)]


def cold_miss_rows(measurements, device, bands, line_fit) -> list[dict]:
    """HBM latency of a plain dependent load from chase.miss's cold paths (every access a miss): the first
    plateau, inside the TLBs' reach, and the last, where translations miss too; with the L2-only path beside
    it and the other methods' figures in the note."""
    plain = select(measurements, MISS_PROBE, "latency", flavour="default")
    if plain.empty:
        return []
    times = select(measurements, MISS_PROBE, "latency_time", flavour="default")
    method = "cold path chase: a random walk through distinct lines of a footprint past the L2, L2 flushed first"
    if plain["footprint_bytes"].nunique() >= 6:
        fit = fit_staircase(plain["footprint_bytes"], plain["value"], min_step=noise_step(
            plain["footprint_bytes"], plain["value"], sigmas=MISS_STEP_SIGMAS))
        inside, past = fit.plateaus[0], (fit.plateaus[-1] if len(fit.plateaus) > 1 else None)
        spans = [(inside.lo_bytes, inside.hi_bytes)] + ([(past.lo_bytes, past.hi_bytes)] if past else [])
        plateaus = f"; plateaus: {plateau_text(fit)}"
    else:
        spans, plateaus, past = [(plain["footprint_bytes"].min(), plain["footprint_bytes"].max())], "", None
    checks = "; ".join(_miss_cross_checks(measurements, device, bands, line_fit))
    rows = []
    for (lo, hi), cycles_id, ns_id in zip(spans, ("dram.latency_cycles", "dram.latency_tlb_miss_cycles"),
                                          ("dram.latency_ns", "dram.latency_tlb_miss_ns")):
        level = _span(plain, lo, hi)
        where = f"{fmt_bytes(lo)}..{fmt_bytes(hi)}"
        note = f"footprints {where}{plateaus}"
        if cycles_id == "dram.latency_tlb_miss_cycles" or past is None:
            note += f"; last octave's slope {last_octave_slope(plain):+.2%} per octave"
        if cycles_id == "dram.latency_cycles":
            note += f"; {checks}" if checks else ""
        rows.append(derived_row(cycles_id, *median_ci(level["value"]), f"{method} (ld.global), over {where}",
                                MISS_PROBE, note))
        rows.append(derived_row(ns_id, *median_ci(_span(times, lo, hi)["value"]),
                                "globaltimer seconds per load of the same samples", MISS_PROBE))
    cg = _span(select(measurements, MISS_PROBE, "latency", flavour="cg"), *spans[0])
    if not cg.empty:
        rows.append(derived_row("dram.latency_cg_cycles", *median_ci(cg["value"]),
                                f"{method} (ld.global.cg, L2 only), over the same footprints", MISS_PROBE))
    return rows


def _miss_cross_checks(measurements, device, bands, line_fit) -> list[str]:
    """The other methods' HBM latency, and the L2 hits the cold paths' access record shows (``bands``, of
    ``access_bands``; ``line_fit``, the L2-only address-order chase's, or None)."""
    out = []
    if bands is not None:
        cold = select(measurements, ACCESS_PROBE, "access")
        cold = cold[cold["footprint_bytes"] >= 2 * device["l2_bytes"]]["value"]
        misses = bands["misses"]
        valley = bands["miss_split"]
        near = misses[misses < valley] if valley is not None else misses
        edge = np.median(near) - 5 * 1.4826 * np.median(np.abs(near - np.median(near)))
        out.append(f"cold paths' recorded accesses faster than every miss cluster (L2 hits): "
                   f"{np.mean(cold.to_numpy() < edge):.2%} of {cold.size}")
        out.append(f"access clusters' mean miss {np.mean(misses) - bands['offset']:.0f} cycles (L2-only, "
                   "recording cost taken off)")
    warm = select(measurements, CUPY_PROBE, "latency", flavour="default", stride_bytes=128)
    warm = warm[warm["footprint_bytes"] >= 2 * device["l2_bytes"]]
    if not warm.empty:
        out.append(f"the warm staircase (chain just written, walked in part, so partly L2-resident) reads "
                   f"{warm['value'].median():.0f} cycles at {fmt_bytes(warm['footprint_bytes'].min())}.."
                   f"{fmt_bytes(warm['footprint_bytes'].max())}")
    if line_fit is not None:
        out.append(f"address-order line chase past the L2: {line_fit['miss']:.0f} cycles (L2-only)")
    return out
