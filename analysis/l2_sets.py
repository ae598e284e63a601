"""The L2's capacity, ways and sets from geometry.l2_sets: the hit fraction h(N) of cyclic chains of N lines walked
with L2-only loads, each access timed alone.

In steady state an LRU-like W-way set keeps every line of a cyclic chain while the chain puts at most W lines
in it and none once it puts more.  Contiguous lines fill the sets evenly, so h falls from 1 to 0 at the
capacity: one SM's walk gives one partition's (l2.partition_bytes), every SM's walk of its own stretch what the
whole L2 keeps then (l2.capacity_every_sm_bytes).  Lines at random places land in the sets of a hashed index
as balls in bins: the lines sharing a line's set are Poisson(N / S), S = C / (W x line), so
h(N) = P(Poisson(N / S) <= W - 1); fitted over W and C, that gives the ways and sets.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.l2_partitions import far_home_fraction
from gpuatlas.analysis.quantities import derived_row, structure_row
from gpuatlas.analysis.stats import of_probe, usable
from gpuatlas.analysis.units import fmt_bytes

PROBE = "geometry.l2_sets"
#: Ways the balls-into-bins fit tries: powers of two, the points halfway between them, and 20.
WAYS_GRID = (4, 8, 12, 16, 20, 24, 32, 48, 64, 96, 128)
#: Capacities the fit tries for each W: this many log-spaced points over a factor of 2 each side of the
#: half-hit footprint.
CAPACITY_POINTS = 801
#: The W fitting within WAYS_SSE_RATIO of the best W's sum of squared residuals make the CI; the best W is
#: reported when they are it and its neighbours in WAYS_GRID at most (a curve one W explains), its RMS residual is
#: at most MAX_RMS, and its capacity is within CAPACITY_AGREEMENT of l2.partition_bytes.
WAYS_SSE_RATIO, MAX_RMS, CAPACITY_AGREEMENT = 4.0, 0.03, 0.10
BOOTSTRAP = 1000


def curves(measurements: pd.DataFrame) -> pd.DataFrame:
    """One row per timed pass: walkers, placement, lines, footprint (bytes), hit_fraction, cycles_per_access."""
    frame = usable(of_probe(measurements, PROBE))
    columns = ["walkers", "placement", "lines", "footprint", "hit_fraction", "cycles_per_access"]
    metrics = ("lines", "hit_fraction", "cycles_per_access")
    rows = frame[frame["metric"].isin(metrics)]
    line = frame.loc[frame["metric"] == "line_bytes", "value"]
    if rows.empty or line.empty:
        return pd.DataFrame(columns=columns)
    table = rows.pivot_table(index=["walkers", "placement", "repeat"], columns="metric", values="value",
                             aggfunc="first").reset_index().dropna(subset=list(metrics))
    table["footprint"] = table["lines"] * float(line.iat[0])
    return table[columns].sort_values(["walkers", "placement", "lines"]).reset_index(drop=True)


def half_crossing(footprints: np.ndarray, hits: np.ndarray) -> float | None:
    """The footprint where h first falls through 1/2, interpolated linearly in log footprint between the last
    point at or above 1/2 and the next; None when the curve does not cross inside the sweep."""
    order = np.argsort(footprints)
    f, h = np.asarray(footprints, float)[order], np.asarray(hits, float)[order]
    below = np.flatnonzero((h[:-1] >= 0.5) & (h[1:] < 0.5))
    if not below.size:
        return None
    i = below[0]
    t = (h[i] - 0.5) / (h[i] - h[i + 1])
    return float(np.exp(np.log(f[i]) + t * (np.log(f[i + 1]) - np.log(f[i]))))


def crossing_ci(curve: pd.DataFrame, seed: int = 0) -> tuple[float, float, float] | None:
    """half_crossing of the per-length median over the passes, and a bootstrap 95% CI: each resample takes one
    pass at random at every length."""
    groups = [g["hit_fraction"].to_numpy() for _, g in curve.groupby("footprint")]
    footprints = np.array(sorted(curve["footprint"].unique()))
    middle = half_crossing(footprints, np.array([np.median(g) for g in groups]))
    if middle is None:
        return None
    rng = np.random.default_rng(seed)
    draws = [half_crossing(footprints, np.array([g[rng.integers(g.size)] for g in groups]))
             for _ in range(BOOTSTRAP)]
    draws = np.array([d for d in draws if d is not None])
    lo, hi = np.percentile(draws, [2.5, 97.5]) if draws.size else (middle, middle)
    return middle, float(min(lo, middle)), float(max(hi, middle))


def balls_in_bins(lines: np.ndarray, ways: int, capacity_lines: float) -> np.ndarray:
    """h(N) = P(Poisson(N / S) <= W - 1), S = capacity / W sets: a line's set holds at most W of the chain."""
    from scipy.special import gammaincc

    return gammaincc(ways, np.asarray(lines, float) * ways / capacity_lines)


def fit_ways(lines: np.ndarray, hits: np.ndarray, guess_lines: float) -> dict:
    """{W: (sse, capacity in lines)}: for each W of WAYS_GRID the capacity minimising the squared residuals of
    balls_in_bins, over a log grid around ``guess_lines``."""
    from scipy.special import gammaincc

    capacities = guess_lines * np.geomspace(0.5, 2.0, CAPACITY_POINTS)
    fits = {}
    for ways in WAYS_GRID:
        model = gammaincc(ways, np.outer(ways / capacities, np.asarray(lines, float)))
        sse = ((model - np.asarray(hits, float)) ** 2).sum(axis=1)
        best = int(np.argmin(sse))
        fits[ways] = (float(sse[best]), float(capacities[best]))
    return fits


def ways_verdict(fits: dict, points: int) -> dict:
    """The best W; the smallest ratio of a non-neighbour's misfit to its (must be at least WAYS_SSE_RATIO); its
    RMS residual; whether it is bracketed (not at either end of WAYS_GRID)."""
    best = min(fits, key=lambda w: fits[w][0])
    k = WAYS_GRID.index(best)
    others = [w for i, w in enumerate(WAYS_GRID) if abs(i - k) > 1]
    sse = max(fits[best][0], 1e-12)
    ratio = min(fits[w][0] / sse for w in others) if others else float("inf")
    return {"ways": best, "capacity_lines": fits[best][1], "ratio": ratio,
            "rms": float(np.sqrt(fits[best][0] / points)), "bracketed": 0 < k < len(WAYS_GRID) - 1}


def _config(table: pd.DataFrame, walkers: str, placement: str) -> pd.DataFrame:
    return table[(table["walkers"] == walkers) & (table["placement"] == placement)]


def l2_set_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """l2.partition_bytes (one SM, contiguous lines), l2.ways and l2.sets (one SM, random lines),
    l2.capacity_every_sm_bytes (every SM, contiguous lines)."""
    if "walkers" not in measurements or of_probe(measurements, PROBE).empty:
        return []
    table = curves(measurements)
    rows = []
    one = _config(table, "one", "stride")
    partition = crossing_ci(one) if len(one) else None
    method = ("footprint where the hit fraction of a steady-state L2-only chase crosses 1/2, interpolated in log "
              "footprint (bootstrap 95% CI over the timed passes)")
    if partition is not None:
        ways_rows, ways, capacity = _ways_rows(_config(table, "one", "random"), partition[0])
        note = "one SM's near partition: the hit fraction counts accesses as fast as the near partition's hits"
        if ways_rows:
            note += "; " + _even_fill_note(partition[0], ways, capacity, device)
        rows.append(derived_row("l2.partition_bytes", *partition, method + "; one SM, contiguous lines", PROBE,
                                note))
        rows += ways_rows
    every = _config(table, "every", "stride")
    capacity = crossing_ci(every) if len(every) else None
    if capacity is not None:
        note = []
        if partition is not None:
            far = far_home_fraction(measurements)
            if far is not None:
                predicted = 2 * partition[0] / (1 + far)
                note.append(f"a far-homed line read from the far side held twice (home + the reader's near "
                            f"partition) predicts 2 x l2.partition_bytes / (1 + l2.far_home_fraction) = 2 x "
                            f"{fmt_bytes(partition[0])} / {1 + far:.2f} = {fmt_bytes(predicted)}, "
                            f"{capacity[0] / predicted - 1:+.1%} from this")
        if device.get("l2_bytes"):
            note.append(f"{capacity[0] / device['l2_bytes']:.2f} of the driver's L2 ({fmt_bytes(device['l2_bytes'])})")
        rows.append(derived_row("l2.capacity_every_sm_bytes", *capacity,
                                method + "; every SM walking its own stretch of one chain, contiguous lines", PROBE,
                                "; ".join(note)))
    return rows


def even_fill_capacity(half_hit: float, ways: int) -> float:
    """The capacity C whose W-way sets, filled evenly by contiguous lines, put the half-hit footprint at
    ``half_hit``: past C a share of the sets holds W + 1 lines and misses all of them, so h = 1/2 at
    C (1 + 1 / (2W + 1))."""
    return half_hit * (2 * ways + 1) / (2 * ways + 2)


def _even_fill_note(half_hit: float, ways: int, fitted: float, device: dict) -> str:
    capacity = even_fill_capacity(half_hit, ways)
    text = (f"W-way sets filled evenly cross 1/2 at C (1 + 1/(2W + 1)): with l2.ways = {ways}, C = "
            f"{fmt_bytes(capacity)}, {fitted / capacity - 1:+.1%} from the random-places fit's {fmt_bytes(fitted)}")
    if device.get("l2_bytes"):
        text += (f"; two partitions {fmt_bytes(2 * capacity)} = {2 * capacity / device['l2_bytes']:.2f} of the "
                 f"driver's L2")
    return text


def _ways_rows(curve: pd.DataFrame, partition_bytes: float) -> tuple[list[dict], int | None, float | None]:
    """l2.ways and l2.sets when the balls-into-bins fit names one W (to a neighbour) and its capacity agrees
    with the partition's (undecided where more than one W fits about as well), with the best W and its
    capacity; nothing otherwise."""
    if curve.empty:
        return [], None, None
    line = float((curve["footprint"] / curve["lines"]).iat[0])
    means = curve.groupby("lines")["hit_fraction"].median()
    guess = half_crossing(means.index.to_numpy(), means.to_numpy())
    if guess is None:
        return [], None, None
    fits = fit_ways(means.index.to_numpy(), means.to_numpy(), guess)
    verdict = ways_verdict(fits, len(means))
    capacity = verdict["capacity_lines"] * line
    agreement = capacity / partition_bytes - 1
    ways = verdict["ways"]
    near = [w for w in WAYS_GRID if fits[w][0] <= WAYS_SSE_RATIO * fits[ways][0]]
    if (verdict["ratio"] <= WAYS_SSE_RATIO or verdict["rms"] > MAX_RMS or not verdict["bracketed"]
            or abs(agreement) > CAPACITY_AGREEMENT):
        return [], None, None
    sets = capacity / (ways * line)
    sets_range = [fits[w][1] * line / (w * line) for w in near]
    misfits = ", ".join(f"W={w}: {fits[w][0] / fits[ways][0]:.1f}x" for w in WAYS_GRID if w != ways)
    note = (f"best W={ways}, C={fmt_bytes(capacity)} (RMS residual {verdict['rms']:.3f}); sum of squared "
            f"residuals of the other W over the best's: {misfits} (W beyond its neighbours at least "
            f"{verdict['ratio']:.1f}x); C is {agreement:+.1%} from l2.partition_bytes {fmt_bytes(partition_bytes)}")
    method = ("hashed index: associativity and sets fitted to the hit fraction of chains at random places under a "
              "balls-into-bins LRU model, h(N) = P(Poisson(N / S) <= W - 1), one SM; the CI spans the W within "
              f"{WAYS_SSE_RATIO:g}x the best misfit")
    decided = len(near) == 1
    sets_note = f"C / (W x {line:.0f} B); " + note
    if not decided:
        sets_note = (f"undecided: between {min(sets_range):.0f} and {max(sets_range):.0f} (as l2.ways is); "
                     + sets_note)
    return [structure_row("l2.ways", ways, (min(near), max(near)), method, PROBE, note,
                          why=f"the associativities within {WAYS_SSE_RATIO:g}x the best misfit"),
            derived_row("l2.sets", sets if decided else float("nan"), min(sets_range), max(sets_range), method,
                        PROBE, sets_note)], ways, capacity
