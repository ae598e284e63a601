"""Figures of the L1 geometry chapter (geometry.l1): set construction, replacement and the carve-out."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from gpuatlas.analysis.geometry import CONST_PROBE  # noqa: E402
from gpuatlas.analysis.l1_sets import (MISS_FACTOR, PROBE, cyclic_miss_fraction, lines_held,  # noqa: E402
                                       overfill_misses, walks)
from gpuatlas.analysis.l2_partitions import PARTITION_PROBE, miss_valley, sm_maps, sm_sides  # noqa: E402
from gpuatlas.analysis.l2_sets import balls_in_bins, curves  # noqa: E402
from gpuatlas.analysis.report_figures import FigureSpec  # noqa: E402
from gpuatlas.analysis.stats import usable  # noqa: E402
from gpuatlas.analysis.units import fmt_bytes, plain_log_axis  # noqa: E402


def _bytes_axis(axis):
    axis.set_major_formatter(FuncFormatter(lambda x, _: fmt_bytes(x)))


def _value(derived: pd.DataFrame, quantity: str):
    if "quantity" not in derived:
        return None
    row = derived[derived["quantity"] == quantity]
    value = None if row.empty else float(row["value"].iat[0])
    return value if value is not None and math.isfinite(value) else None  # NaN: an undecided structure


def _ways_candidates(derived: pd.DataFrame) -> list[tuple[int, float]]:
    """(ways, sets) of the L2's balls-into-bins fit: the one pair where l2.ways is decided, both ends of its
    interval (the most ways with the fewest sets) where it is undecided; none where it was not fitted."""
    ways, sets = _value(derived, "l2.ways"), _value(derived, "l2.sets")
    if ways and sets:
        return [(int(ways), sets)]
    rows = {q: derived[derived["quantity"] == q] for q in ("l2.ways", "l2.sets")} if "quantity" in derived else {}
    if not rows or any(r.empty for r in rows.values()):
        return []
    w, s = rows["l2.ways"].iloc[0], rows["l2.sets"].iloc[0]
    if not all(math.isfinite(float(v)) for v in (w["ci_low"], w["ci_high"], s["ci_low"], s["ci_high"])):
        return []
    return [(int(w["ci_low"]), float(s["ci_high"])), (int(w["ci_high"]), float(s["ci_low"]))]


def l1_sets(measurements: pd.DataFrame, derived: pd.DataFrame):
    """Left: lines a chain holds before its first L1 miss against the stride, with the set-associative
    pattern max(ways, capacity / stride) where derived.  Middle: miss fraction past the ways at the strides
    that fill one set, against the LRU-like and random models.  Right: every access of the first missing
    walks, timed alone, with the miss threshold (twice the all-hit interval): hits and misses apart."""
    table = walks(measurements)
    held = lines_held(table)
    if not held:
        return None
    smallest = min(smem for _, smem, _ in held)
    strided = {s: n for (s, smem, place), n in held.items() if smem == smallest and place == "stride"}
    fig, (left, right, spread) = plt.subplots(1, 3, figsize=(14, 4))
    strides = np.array(sorted(strided))
    left.plot(strides, [strided[s] for s in strides], "o-", label="measured (strided lines)")
    random_held = held.get((int(strides[0]), smallest, "random"))
    if random_held is not None:
        left.axhline(random_held, color="tab:red", ls=":", label="lines at random places")
    ways, sets = _value(derived, "l1.ways"), _value(derived, "l1.sets")
    if _value(derived, "l1.set_pattern_departures") is not None:
        ways = sets = None  # a hashed index: ways and sets from the chain at random places, not this pattern
    if ways and sets:
        left.plot(strides, np.maximum(ways, ways * sets * strides[0] / strides), "k--", lw=0.8,
                  label=f"max(ways, capacity / stride): {ways:.0f} ways x {sets:.0f} sets")
    left.set_xscale("log", base=2)
    left.set_yscale("log", base=2)
    _bytes_axis(left.xaxis)
    plain_log_axis(left.yaxis)
    left.set_xlabel("stride between the chain's lines")
    left.set_ylabel("lines held before the first miss")
    left.set_title(f"L1 set construction ({fmt_bytes(smallest)} shared allocated)")
    left.legend(fontsize=7, frameon=False)
    if ways and sets:
        tail = table[(table["smem_bytes"] == smallest) & (table["placement"] == "stride")
                     & (table["stride_bytes"] >= sets * strides[0]) & (table["lines"] <= 2 * ways + 1)]
        points = tail.groupby("lines", as_index=False)[["fraction", "accesses"]].mean()
        right.plot(points["lines"] / ways, points["fraction"], "o", label="measured (strides pooled)")
        for policy, style in (("lru", "k--"), ("random", "k:")):
            model = [cyclic_miss_fraction(int(n), int(ways), policy, int(a)) for n, a in
                     zip(points["lines"], points["accesses"])]
            right.plot(points["lines"] / ways, model, style, lw=0.8,
                       label="LRU, FIFO, tree pseudo-LRU" if policy == "lru" else "random replacement")
        right.set_xlabel("lines in one set / ways")
        right.set_ylabel("miss fraction of the cyclic walk")
        right.set_title("Replacement: misses past the ways")
        right.legend(fontsize=7, frameon=False)
    else:
        right.set_axis_off()
        right.set_title("no set pattern: a hashed index")
    frame = usable(measurements[measurements["probe"] == PROBE])
    accesses = frame.loc[frame["metric"] == "access", "value"]
    hit = frame.loc[frame["metric"] == "hit_cycles", "value"]
    spread.hist(accesses, bins=np.geomspace(max(1.0, accesses.min()), accesses.max() + 1, 60), color="tab:blue")
    spread.axvline(MISS_FACTOR * hit.median(), color="k", ls="--", lw=0.8, label="miss threshold: 2 x all-hit")
    spread.set_xscale("log")
    spread.set_yscale("log")
    plain_log_axis(spread.xaxis)
    plain_log_axis(spread.yaxis)
    spread.set_xlabel("cycles per access (recording included)")
    spread.set_ylabel("accesses (count)")
    spread.set_title("Each access of the first missing walks")
    spread.legend(fontsize=7, frameon=False)
    return left


def l1_random_sets(measurements: pd.DataFrame):
    """Misses per pass of cyclic chains at random places (128-B lines, the least shared memory) against the
    chain length, with the balls-into-bins prediction of LRU-like sets of 2, 4, 8 and 16 ways (capacity / ways
    sets) and of one fully associative set."""
    table = walks(measurements)
    held = lines_held(table)
    line = min((s for s, _, _ in held), default=None)
    smem = min((m for _, m, _ in held), default=None)
    capacity = held.get((line, smem, "stride"))
    sweep = table[(table["stride_bytes"] == line) & (table["smem_bytes"] == smem) & (table["placement"] == "random")]
    if capacity is None or sweep.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    lines = np.unique(np.geomspace(sweep["lines"].min(), sweep["lines"].max(), 200).astype(int))
    styles = {2: ("tab:orange", ":"), 4: ("tab:green", "--"), 8: ("tab:red", "-."), 16: ("tab:purple", ":"),
              capacity: ("k", "-")}
    for ways, (color, style) in styles.items():
        label = "fully associative" if ways == capacity else f"{ways} ways x {capacity / ways:g} sets"
        ax.plot(lines, overfill_misses(lines, ways, capacity / ways), color=color, ls=style, lw=1.0, label=label)
    ax.plot(sweep["lines"], sweep["misses"] * sweep["lines"] / sweep["accesses"], "o", color="tab:blue", ms=4,
            label="measured")
    ax.set_xscale("log", base=2)
    ax.set_yscale("symlog", linthresh=1)
    plain_log_axis(ax.xaxis)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
    ax.set_ylim(0, None)
    ax.set_xlabel(f"lines in the chain ({line} B each, at random places)")
    ax.set_ylabel("L1 misses per pass (lines)")
    ax.set_title(f"L1 sets at random places: capacity {capacity} lines ({fmt_bytes(smem)} shared allocated)")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return ax


def l1_carveout(measurements: pd.DataFrame, derived: pd.DataFrame):
    """L1 capacity against the dynamic shared memory a co-resident block allocates, and their sum."""
    held = lines_held(walks(measurements))
    line = min((s for s, _, _ in held), default=None)
    carve = {smem: n * line for (s, smem, place), n in sorted(held.items()) if s == line and place == "stride"}
    if len(carve) < 2:
        return None
    ax = plt.figure(figsize=(7, 4)).gca()
    smem = np.array(sorted(carve))
    l1 = np.array([carve[s] for s in smem])
    ax.plot(smem, l1, "o-", label="L1 capacity (lines held x 128 B)")
    ax.plot(smem, l1 + smem, "s--", label="L1 capacity + shared allocated")
    _bytes_axis(ax.xaxis)
    _bytes_axis(ax.yaxis)
    ax.set_ylim(0, None)
    ax.set_xlabel("dynamic shared memory allocated by the walking block")
    ax.set_ylabel("bytes")
    ax.set_title("L1/shared carve-out")
    ax.legend(fontsize=7, frameon=False)
    return ax


def l2_partition(measurements: pd.DataFrame, derived: pd.DataFrame):
    """One SM's cold L2-only misses in address order (first walk of the finest stride): latency against the
    address offset, near- and far-homed misses on either side of the clusters' split."""
    frame = usable(measurements[(measurements["probe"] == PARTITION_PROBE)])
    if frame.empty:
        return None
    stride = int(frame["stride_bytes"].min())
    frame = frame[frame["stride_bytes"] == stride]
    lines = frame.loc[frame["metric"] == "walk_lines", "value"]
    walk = frame[frame["metric"] == "access"].sort_values("repeat")
    if lines.empty or walk.empty:
        return None
    walk = walk.iloc[:int(lines.iat[0])]
    ax = plt.figure(figsize=(10, 3.5)).gca()
    offsets = walk["repeat"].to_numpy() * stride
    ax.plot(offsets, walk["value"], ".", ms=2)
    valley = miss_valley(walk["value"].to_numpy())
    if valley is not None:
        ax.axhline(valley, color="k", ls="--", lw=0.8, label="split between the near- and far-homed clusters")
        ax.legend(fontsize=7, frameon=False, loc="upper right")
    interleave = _value(derived, "l2.partition_interleave_bytes")
    title = "L2 partition map seen from one SM"
    ax.set_title(title + (f": homes alternate in {fmt_bytes(interleave)} blocks" if interleave else ""))
    _bytes_axis(ax.xaxis)
    ax.set_xlabel(f"address offset (one line every {fmt_bytes(stride)})")
    ax.set_ylabel("cycles per cold miss (recording included)")
    return ax


def l2_sm_map(measurements: pd.DataFrame):
    """Every SM's cold L2-only misses over the same lines: one row per SM (grouped by side, then SM id), one
    column per line in address order, coloured by latency; near-homed misses dark, far-homed light."""
    maps = sm_maps(measurements)
    if maps is None:
        return None
    ids, cycles, far = maps
    labels = sm_sides(far)
    order = np.lexsort((ids, labels))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    lo, hi = np.percentile(cycles, [2, 98])
    image = ax.imshow(cycles[order], aspect="auto", interpolation="nearest", cmap="viridis", vmin=lo, vmax=hi)
    fig.colorbar(image, ax=ax, label="cycles per cold miss (recording included)")
    edges = np.flatnonzero(np.diff(labels[order])) + 0.5
    for edge in edges:
        ax.axhline(edge, color="white", lw=1.2)
    ax.set_xlabel(f"line in address order (one every 128 B, {far.shape[1]} lines)")
    ax.set_ylabel(f"SM ({ids.size}), grouped by side")
    ax.set_yticks([])
    unmatched = int(np.sum(labels < 0))
    ax.set_title(f"L2 partition map from every SM: {int(labels.max()) + 1} sides"
                 + (f" ({unmatched} SM{'s' if unmatched > 1 else ''} on no side, the top rows)" if unmatched else ""))
    return ax


def const_staircase(measurements: pd.DataFrame, derived: pd.DataFrame):
    """Cycles per dependent LDC against the footprint of the constant-memory chain (median, IQR bars), with
    the derived levels and capacities."""
    frame = usable(measurements[(measurements["probe"] == CONST_PROBE) & (measurements["metric"] == "latency")])
    if frame.empty:
        return None
    stats = frame.groupby("footprint_bytes")["value"].quantile([0.25, 0.5, 0.75]).unstack()
    ax = plt.figure(figsize=(7, 4)).gca()
    ax.errorbar(stats.index, stats[0.5], yerr=[stats[0.5] - stats[0.25], stats[0.75] - stats[0.5]], fmt="o-",
                ms=3, label="median, interquartile range")
    for quantity, label in (("const.l1.latency_cycles", "constant L1"), ("const.l15.latency_cycles", "next level")):
        value = _value(derived, quantity)
        if value:
            ax.axhline(value, color="grey", ls="--", lw=0.8)
            ax.annotate(f"{label}: {value:.0f}", (stats.index.min(), value), fontsize=7, va="bottom")
    for quantity in ("const.l1.capacity_bytes", "const.l15.capacity_bytes"):
        value = _value(derived, quantity)
        if value:
            ax.axvline(value, color="grey", ls=":", lw=0.8)
    ax.set_xscale("log", base=2)
    _bytes_axis(ax.xaxis)
    ax.set_xlabel("footprint of the chain in constant memory")
    ax.set_ylabel("cycles per dependent LDC")
    ax.set_title("Constant caches")
    ax.legend(fontsize=7, frameon=False, loc="lower right")
    return ax


def l2_sets(measurements: pd.DataFrame, derived: pd.DataFrame):
    """Hit fraction of steady-state L2-only chases against their footprint: one SM and every SM, contiguous
    and random lines; the balls-into-bins curve of the derived ways and sets over one SM's random lines; the
    half-hit footprints (l2.partition_bytes, l2.capacity_every_sm_bytes) as vertical marks."""
    table = curves(measurements)
    if table.empty:
        return None
    ax = plt.figure(figsize=(8, 4.5)).gca()
    mib = 2.0 ** 20
    labels = {("one", "stride"): "one SM, contiguous lines", ("one", "random"): "one SM, random lines",
              ("every", "stride"): "every SM, contiguous lines", ("every", "random"): "every SM, random lines"}
    for (walkers, placement), label in labels.items():
        curve = table[(table["walkers"] == walkers) & (table["placement"] == placement)]
        if curve.empty:
            continue
        median = curve.groupby("footprint")["hit_fraction"].median()
        ax.plot(median.index / mib, median.to_numpy(), "o-" if walkers == "one" else "s--", ms=4, lw=1,
                label=label)
    line = float((table["footprint"] / table["lines"]).iat[0])
    footprints = np.geomspace(table["footprint"].min(), table["footprint"].max(), 200)
    for (ways, sets), style in zip(_ways_candidates(derived), (":", "-.")):
        ax.plot(footprints / mib, balls_in_bins(footprints / line, ways, sets * ways), color="k", ls=style,
                lw=1.2, label=f"balls in bins: {ways} ways x {sets:.0f} sets x {line:.0f} B")
    for quantity, text in (("l2.partition_bytes", "one partition"), ("l2.capacity_every_sm_bytes", "every SM")):
        knee = _value(derived, quantity)
        if knee:
            ax.axvline(knee / mib, color="0.5", lw=0.8)
            ax.annotate(f"{text}: {knee / mib:.1f} MiB", (knee / mib, 0.25), xytext=(4, 0), textcoords="offset points",
                        fontsize=7, rotation=90, va="center", color="0.3")
    ax.set_xscale("log", base=2)
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("chain footprint (MiB)")
    ax.set_ylabel("hit fraction (near-partition hits)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title("Lines the L2 keeps: hit fraction of steady-state L2-only chases")
    ax.legend(fontsize=7, frameon=False, loc="lower left")
    return ax


#: The geometry figures, and the constant caches' staircase.
FIGURES = (
    FigureSpec("l1-sets", "geometry.l1", "L1 ways, sets and replacement",
               "Left: lines a cyclic chain holds before its first L1 miss against the power-of-two stride between "
               "its lines (each access timed alone), with the pattern max(ways, capacity / stride) of the derived "
               "ways and sets, and the lines held at random places (fewer than the capacity unless the L1 is fully "
               "associative). Right: the miss fraction past the ways at strides that fill one set, against the "
               "LRU-like and random replacement models.",
               lambda meta, m, d: l1_sets(m, d),
               chapter="Geometry"),
    FigureSpec("l1-random-sets", "geometry.l1", "L1 sets at random places",
               "Misses per pass of a cyclic chain of 128-B lines at random places against its length (points), "
               "beside the misses balls-into-bins predicts for LRU-like sets of 2, 4, 8 and 16 ways (capacity / ways "
               "sets, the capacity the lines a 128-B-strided chain holds) and for one fully associative set: every "
               "line of a set given more lines than its ways misses on every pass.",
               lambda meta, m, d: l1_random_sets(m),
               chapter="Geometry", after="l1-sets"),
    FigureSpec("l1-carveout", "geometry.l1", "L1/shared carve-out",
               "L1 capacity (lines a 128-B-strided chain holds before its first miss) against the dynamic shared "
               "memory the walking block allocates, and their sum: what the unified L1/shared array gives the L1 "
               "at each allocation.", lambda meta, m, d: l1_carveout(m, d),
               chapter="Geometry", after="l1-random-sets"),
    FigureSpec("l2-partition-map", "geometry.l2_partition", "L2 partition map",
               "One SM's L2-only loads over lines in address order, each a cold miss (the L2 flushed) timed alone: "
               "misses to addresses the SM's near partition homes return sooner than far-homed ones, so the "
               "record is the partition map at line resolution (first walk shown).",
               lambda meta, m, d: l2_partition(m, d),
               chapter="Geometry", after="l1-carveout"),
    FigureSpec("l2-sm-map", "geometry.l2_sm_map", "L2 partition map from every SM",
               "Each SM's L2-only loads over the same lines in address order, each a cold miss (the L2 flushed before "
               "every SM's walk) timed alone: one row per SM, grouped by the side whose map it shares (white lines), "
               "dark where the SM's near partition homes the line.", lambda meta, m, d: l2_sm_map(m),
               chapter="Geometry", after="l2-partition-map"),
    FigureSpec("l2-sets", "geometry.l2_sets", "Lines the L2 keeps",
               "Hit fraction (accesses as fast as the near partition's hits, each timed alone) of cyclic L2-only "
               "chases in steady state against the chain's footprint: one SM or every SM (each its own stretch), "
               "contiguous or random lines; dotted, the balls-into-bins LRU curve of the fitted ways and sets; grey, "
               "the half-hit footprints.", lambda meta, m, d: l2_sets(m, d),
               chapter="Geometry", after="l2-sm-map"),
    FigureSpec("const-staircase", "geometry.const", "Constant caches",
               "Cycles per dependent constant-memory load (LDC) of a random chain against the footprint it spans "
               "in __constant__ memory (median, interquartile bars), with the fitted levels (dashed) and "
               "capacities (dotted).", lambda meta, m, d: const_staircase(m, d),
               chapter="Memory hierarchy", after="fill-block"),
)
