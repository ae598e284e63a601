"""L1 geometry from geometry.l1's set-filling chains: lines held at each stride, ways and sets, the
replacement policy, and the capacity at each shared-memory allocation.

At a stride S (a power of two) a cyclic chain of N lines spreads evenly over sets x line / S sets while S is
inside one set's span (sets x line) and falls into one set from the span on; so the lines held before the
first miss are capacity / S for strides inside the span and the ways beyond it.  A cache whose set index
hashes the upper address bits breaks that: no power-of-two stride puts the chain in one set, and the lines
held do not follow the pattern.  The analysis tests the pattern before it reports ways and sets; where it
fails, the chain at random places gives them: under LRU-like replacement the shortest chain that misses
overfills one set by one line, and those ways + 1 lines miss on every pass, while longer chains miss as many
lines per pass as land in overfilled sets (balls into bins over capacity / ways sets).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import of_probe, usable
from gpuatlas.analysis.units import fmt_bytes

PROBE = "geometry.l1"
#: A stride's lines held may differ from the pattern by this fraction (and at least one line).
PATTERN_TOLERANCE = 0.03
#: The probe's miss threshold: an access slower than this multiple of the all-hit interval missed the L1.
MISS_FACTOR = 2.0
#: A policy model farther than this (RMS of the miss fraction) from the measured curve does not fit.
POLICY_FIT = 0.15


def walks(measurements: pd.DataFrame) -> pd.DataFrame:
    """One row per measured chain: stride_bytes, smem_bytes, placement, lines, misses, accesses, fraction,
    missing."""
    frame = usable(of_probe(measurements, PROBE))
    frame = frame[frame["metric"].isin(("lines", "misses", "accesses"))]
    if frame.empty:
        return pd.DataFrame(columns=[*KEYS, "lines", "misses", "accesses", "fraction", "missing"])
    table = frame.pivot_table(index=[*KEYS, "repeat"], columns="metric",
                              values="value", aggfunc="first").reset_index().dropna()
    table["fraction"] = table["misses"] / table["accesses"]
    # a chain longer than its sets hold misses at least once per pass; half that (and 2) is not a stray access
    table["missing"] = table["misses"] >= np.maximum(2.0, table["accesses"] / (2.0 * table["lines"]))
    return table.sort_values([*KEYS, "lines"]).reset_index(drop=True)


KEYS = ("stride_bytes", "smem_bytes", "placement")


def lines_held(table: pd.DataFrame) -> dict[tuple[int, int, str], int]:
    """(stride, smem, placement) -> the most lines a chain held with no miss: one less than the shortest
    missing chain, when the chain one line shorter was measured and held (else the config is left out)."""
    held = {}
    for (stride, smem, placement), group in table.groupby(list(KEYS)):
        missing = group[group["missing"]]
        if missing.empty:
            continue
        first = int(missing["lines"].min())
        below = group[group["lines"] == first - 1]
        if first == 2 or (len(below) and not below["missing"].any()):
            held[(int(stride), int(smem), placement)] = first - 1
    return held


def set_geometry(held: dict[int, int], random_held: int | None = None) -> dict:
    """Ways, sets and the verdict from lines held per stride (the smallest stride is the line counted in).

    The pattern: held(S) = max(ways, capacity / S), ways = held at the largest stride, capacity = held at the
    smallest x that stride.  ``periodic`` is False when a stride departs from it, or when the sets would not
    be a whole number, or when fewer than two strides lie past the span (the flat tail unseen).  One set
    (fully associative) is also what a hashed index that spreads every power-of-two stride looks like; it
    stands only if a chain of lines at random places (``random_held``) holds the whole capacity too."""
    strides = sorted(held)
    line = strides[0]
    capacity_lines, ways = held[line], held[strides[-1]]
    sets = capacity_lines / ways
    predicted = {s: max(ways, capacity_lines * line / s) for s in strides}
    off = {s: held[s] - predicted[s] for s in strides
           if abs(held[s] - predicted[s]) > max(1.0, PATTERN_TOLERANCE * predicted[s])}
    span = sets * line
    tail = [s for s in strides if s >= span]
    if round(sets) == 1 and random_held is not None and \
            capacity_lines - random_held > max(1.0, PATTERN_TOLERANCE * capacity_lines):
        off["random"] = random_held - capacity_lines
    periodic = not off and abs(sets - round(sets)) < 1e-9 and len(tail) >= 2
    evidence = ", ".join(f"{fmt_bytes(s)}: {held[s]}" for s in strides)
    if random_held is not None:
        evidence += f"; at random places: {random_held}"
    return {"ways": ways, "sets": round(sets), "line": line, "capacity_bytes": capacity_lines * line,
            "span": span, "periodic": periodic, "departures": off, "evidence": evidence}


# -- replacement policy ------------------------------------------------------------------------------------

def cyclic_miss_fraction(lines: int, ways: int, policy: str, accesses: int, seed: int = 0) -> float:
    """Miss fraction of a cyclic walk of ``lines`` lines in one ``ways``-way set, after two warm passes, over
    ``accesses`` recorded accesses: ``lru`` (the line needed next is always the least recently used, so every
    access misses) or ``random`` (simulated with a seeded victim choice)."""
    if lines <= ways:
        return 0.0
    if policy == "lru":
        return 1.0
    rng = np.random.default_rng(seed)
    owner = np.full(ways, -1)
    resident: dict[int, int] = {}  # line -> way
    misses = 0
    for k in range(2 * lines + accesses):
        line = k % lines
        if line in resident:
            continue
        way = int(rng.integers(ways)) if len(resident) == ways else len(resident)
        if owner[way] >= 0:
            del resident[int(owner[way])]
        owner[way], resident[line] = line, way
        misses += k >= 2 * lines
    return misses / accesses


#: A cyclic walk one line too long misses (almost) every access under LRU, FIFO and tree pseudo-LRU alike:
#: the walk tells that family from random replacement, not its members from each other.
POLICY_NAMES = {"lru": "LRU-like (LRU, FIFO or tree pseudo-LRU, which a cyclic walk cannot tell apart)",
                "random": "random"}


def classify_policy(curve: pd.DataFrame, ways: int) -> dict:
    """The policy whose model miss fraction is nearest (RMS) the measured one over chains of ways+1 to
    2 x ways lines in one set; ``verdict`` is None when no model is within POLICY_FIT."""
    points = curve[(curve["lines"] > ways) & (curve["lines"] <= 2 * ways + 1)]
    points = points.groupby("lines", as_index=False)[["fraction", "accesses"]].mean()  # strides pooled
    distances = {}
    for policy in POLICY_NAMES:
        model = [np.mean([cyclic_miss_fraction(int(n), ways, policy, int(a), seed) for seed in range(2)])
                 for n, a in zip(points["lines"], points["accesses"])]
        distances[policy] = float(np.sqrt(np.mean((np.array(model) - points["fraction"].to_numpy()) ** 2)))
    best = min(distances, key=distances.get)
    return {"verdict": best if distances[best] <= POLICY_FIT else None, "distances": distances,
            "points": points}


# -- a hashed set index: ways from lines at random places -------------------------------------------------

def onset_positions(record: np.ndarray, lines: int, hit: float) -> dict:
    """The chain positions (access index mod ``lines``) that miss in a walk's access-by-access record:
    ``every``, those that miss on each of their visits; ``some``, those that miss at all; with ``misses`` and
    ``visits``, the misses and visits of the ``some`` positions."""
    missed = record > MISS_FACTOR * hit
    position = np.arange(record.size) % lines
    visits = np.bincount(position, minlength=lines)
    misses = np.bincount(position, weights=missed, minlength=lines)
    some = np.flatnonzero(misses > 0)
    return {"every": np.flatnonzero((misses == visits) & (visits > 0)), "some": some,
            "misses": int(misses[some].sum()), "visits": int(visits[some].sum())}


def overfill_misses(lines, ways: int, sets: float) -> np.ndarray:
    """Expected misses per pass of cyclic chains of ``lines`` lines at random places over ``sets`` sets of
    ``ways`` ways, LRU-like: every line of a set holding more than ``ways`` of them misses, so a line misses
    when at least ``ways`` of the other N - 1 share its set: N x P(Binomial(N - 1, 1 / sets) >= ways)."""
    from scipy.special import bdtrc  # P(Binomial(n, p) > k), without importing scipy.stats

    n = np.asarray(lines, dtype=np.int64)
    share = np.zeros(n.shape)
    over = n - 1 >= ways
    if sets <= 1:
        share[over] = 1.0
    elif over.any():
        share[over] = bdtrc(ways - 1, n[over] - 1, 1.0 / sets)
    return n * share


def candidate_ways(capacity_lines: int) -> list[int]:
    """Powers of two up to the capacity in lines, and the capacity itself (one set: fully associative)."""
    ways = [1 << k for k in range(int(np.log2(capacity_lines)) + 1)]
    return ways + ([capacity_lines] if capacity_lines not in ways else [])


def fit_ways(sweep: pd.DataFrame, capacity_lines: int) -> dict:
    """Each candidate ways' misfit to the misses per pass measured at random places (capacity / ways sets):
    the RMS over chain lengths of (measured - predicted) / sqrt(predicted + 1), a Poisson-like scale;
    ``best`` and ``runner_up`` the two least misfits."""
    measured = (sweep["misses"] * sweep["lines"] / sweep["accesses"]).to_numpy()
    misfits = {}
    for ways in candidate_ways(capacity_lines):
        predicted = overfill_misses(sweep["lines"].to_numpy(), ways, capacity_lines / ways)
        misfits[ways] = float(np.sqrt(np.mean((measured - predicted) ** 2 / (predicted + 1))))
    ranked = sorted(misfits, key=misfits.get)
    return {"best": ranked[0], "runner_up": ranked[1] if len(ranked) > 1 else None, "misfits": misfits}


def onset_policy(positions: dict, ways: int) -> dict:
    """The replacement verdict from the shortest missing chain's record: the ways + 1 lines of its overfilled
    set (the positions that miss at all) miss on every visit under LRU-like replacement, on fewer under random
    replacement (simulated); ``fraction``, their misses over their visits; ``verdict``, the nearer model within
    POLICY_FIT, None otherwise or when the missing positions are not ways + 1."""
    fraction = positions["misses"] / max(positions["visits"], 1)
    distances = {p: abs(float(np.mean([cyclic_miss_fraction(ways + 1, ways, p, positions["visits"], seed)
                                       for seed in range(2)])) - fraction) for p in POLICY_NAMES}
    best = min(distances, key=distances.get)
    fits = distances[best] <= POLICY_FIT and len(positions["some"]) == ways + 1
    return {"fraction": fraction, "verdict": best if fits else None, "distances": distances}


def hashed_geometry(measurements: pd.DataFrame, table: pd.DataFrame, smem: int, line: int,
                    capacity_lines: int) -> dict | None:
    """Ways and sets from the chain at random places (``line`` stride, ``smem`` allocated), two ways: the
    shortest missing chain's record (the positions that miss on every pass are one set's ways + 1 lines), and
    the ways whose balls-into-bins prediction fits the sweep's misses per pass best; ``agree`` when both give
    the same, ``whole`` when the capacity is a whole number of sets of those ways.  None without the random walks or an onset record covering two passes."""
    sweep = table[(table["stride_bytes"] == line) & (table["smem_bytes"] == smem)
                  & (table["placement"] == "random")]
    held = lines_held(sweep)
    if not held:
        return None
    lines = next(iter(held.values())) + 1
    frame = usable(of_probe(measurements, PROBE))
    frame = frame[(frame["stride_bytes"] == line) & (frame["smem_bytes"] == smem)
                  & (frame["placement"] == "random")]
    record = frame[frame["metric"] == "access"].sort_values("repeat")["value"].to_numpy(dtype=float)
    hit = frame.loc[frame["metric"] == "hit_cycles", "value"]
    if record.size < 2 * lines or hit.empty:
        return None
    positions = onset_positions(record, lines, float(hit.median()))
    onset_ways = len(positions["every"]) - 1 if len(positions["every"]) >= 2 else None
    fit = fit_ways(sweep, capacity_lines)
    return {"lines": lines, "positions": positions, "onset_ways": onset_ways, "fit": fit, "ways": fit["best"],
            "sets": capacity_lines / fit["best"], "agree": onset_ways == fit["best"],
            "whole": capacity_lines % fit["best"] == 0, "sweep": sweep}


# -- derived rows ----------------------------------------------------------------------------------------

def l1_rows(measurements: pd.DataFrame) -> list[dict]:
    """l1.ways, l1.sets and the replacement verdict from the record-only configs; the capacity beside each
    shared allocation and the unified array it implies."""
    if "placement" not in measurements or not (measurements["probe"] == PROBE).any():
        return []
    table = walks(measurements)
    held = lines_held(table)
    if not held:
        return []
    rows = []
    smallest = min(smem for _, smem, _ in held)
    by_stride = {s: n for (s, smem, place), n in held.items() if smem == smallest and place == "stride"}
    random_held = held.get((min(by_stride, default=0), smallest, "random"))
    if len(by_stride) >= 3:
        strided = table[(table["smem_bytes"] == smallest) & (table["placement"] == "stride")]
        rows += _set_rows(measurements, table, strided, by_stride, smallest, random_held)
    line = min(s for s, _, _ in held)
    carve = {smem: n * line for (s, smem, place), n in sorted(held.items()) if s == line and place == "stride"}
    if carve:
        listing = "; ".join(f"{fmt_bytes(smem)} shared: {fmt_bytes(c)}" for smem, c in carve.items())
        most = max(carve)
        rows.append(derived_row("l1.capacity_bytes_at_carveout", carve[most], carve[most], carve[most],
                                f"lines a cyclic chain at {line} B holds before its first L1 miss (bisection, "
                                "each access timed), beside the most dynamic shared memory measured",
                                PROBE, f"L1 capacity at each dynamic shared allocation: {listing}"))
        unified = {smem: smem + c for smem, c in carve.items()}
        top = max(unified, key=unified.get)
        rows.append(derived_row("l1.unified_bytes", unified[top], unified[top], unified[top],
                                "largest L1 capacity + shared allocation over the allocations measured (the "
                                "driver rounds each allocation up to a carve-out, so this is a lower bound)",
                                PROBE, f"at {fmt_bytes(top)} of shared memory allocated"))
    if len(carve) >= 2:
        least, most = min(carve), max(carve)
        trade = (carve[least] - carve[most]) / (most - least)
        rows.append(derived_row("l1.shared_trade_ratio", trade, trade, trade,
                                "L1 capacity lost over the shared memory allocated between the smallest and the "
                                "largest allocation measured", PROBE,
                                f"{fmt_bytes(carve[least])} of L1 beside {fmt_bytes(least)} of shared memory, "
                                f"{fmt_bytes(carve[most])} beside {fmt_bytes(most)}"))
    return rows


def _set_rows(measurements: pd.DataFrame, table: pd.DataFrame, strided: pd.DataFrame, held: dict[int, int],
              smem: int, random_held: int | None) -> list[dict]:
    geo = set_geometry(held, random_held)
    method = (f"lines held before the first L1 miss against the stride (powers of two), with {fmt_bytes(smem)} "
              f"of shared memory allocated")
    if not geo["periodic"]:
        return _hashed_rows(measurements, table, geo, smem, method)
    rows = [derived_row("l1.ways", geo["ways"], geo["ways"], geo["ways"], method, PROBE,
                        f"lines held per stride {geo['evidence']}; flat from the set span {fmt_bytes(geo['span'])}"),
            derived_row("l1.sets", geo["sets"], geo["sets"], geo["sets"], method, PROBE,
                        f"capacity {fmt_bytes(geo['capacity_bytes'])} / ({geo['ways']} ways x "
                        f"{geo['line']} B)")]
    tail = strided[strided["stride_bytes"] >= geo["span"]]
    policy = classify_policy(tail, geo["ways"])
    points = policy["points"]
    if len(points):
        first = points.iloc[points["lines"].argmin()]
        verdict = POLICY_NAMES[policy["verdict"]] if policy["verdict"] else "none of the models fits"
        distances = ", ".join(f"{p.upper() if p == 'lru' else p} model {d:.3f}"
                              for p, d in policy["distances"].items())
        rows.append(derived_row("l1.replacement_miss_fraction", first["fraction"], first["fraction"],
                                first["fraction"], "miss fraction of a cyclic walk of ways+1 lines in one set, "
                                                   "at strides of the set span and beyond", PROBE,
                                f"replacement: {verdict}; measured miss fraction from {int(points['lines'].min())} "
                                f"to {int(points['lines'].max())} lines: {points['fraction'].min():.2f}.."
                                f"{points['fraction'].max():.2f}; RMS distance to each model: {distances}"))
    return rows


def _hashed_rows(measurements: pd.DataFrame, table: pd.DataFrame, geo: dict, smem: int, method: str) -> list[dict]:
    """l1.set_pattern_departures; and l1.ways, l1.sets and the replacement verdict from the chain at random
    places where its onset record and its sweep give the same ways."""
    count = len(geo["departures"])
    note = ("no power-of-two stride confines the chain to one set (a hashed set index?): lines held per stride "
            f"{geo['evidence']}; held(S) = max(ways, capacity/S) fails at "
            + ", ".join(s if isinstance(s, str) else fmt_bytes(s) for s in geo["departures"]))
    capacity_lines = geo["capacity_bytes"] // geo["line"]
    hashed = hashed_geometry(measurements, table, smem, geo["line"], capacity_lines)
    rows = []
    if hashed is not None:
        positions, fit, ways = hashed["positions"], hashed["fit"], hashed["ways"]
        every = positions["every"]
        onset = f"the shortest missing chain at random places ({hashed['lines']} lines) misses at "
        onset += (f"{len(every)} positions on every pass ({', '.join(str(int(p)) for p in every[:12])}"
                  f"{', ...' if len(every) > 12 else ''}): {hashed['onset_ways']} ways"
                  if hashed["onset_ways"] else f"{len(every) or 'no'} position on every pass: no ways")
        runner = fit["runner_up"]
        sweep = (f"misses per pass of {len(hashed['sweep'])} chains at random places "
                 f"({int(hashed['sweep']['lines'].min())}..{int(hashed['sweep']['lines'].max())} lines) against "
                 f"balls into capacity/ways sets: best {fit['best']} ways (misfit {fit['misfits'][fit['best']]:.2f})"
                 + (f", runner-up {runner} ways (misfit {fit['misfits'][runner]:.2f})" if runner else ""))
        if hashed["agree"] and hashed["whole"]:
            note += f"; at random places the onset record and the sweep both give {ways} ways (l1.ways, l1.sets)"
            rows += _hashed_set_rows(hashed, geo, smem, f"{onset}; {sweep}")
        elif hashed["agree"]:
            note += (f"; at random places the onset record and the sweep both give {ways} ways, but the capacity "
                     f"({capacity_lines} lines) is no whole number of {ways}-way sets, so no ways or sets")
        else:
            note += f"; at random places {onset}, but the {sweep}: the two disagree, so no ways or sets"
    return [derived_row("l1.set_pattern_departures", count, count, count, method, PROBE, note)] + rows


def _hashed_set_rows(hashed: dict, geo: dict, smem: int, evidence: str) -> list[dict]:
    ways, sets, line = hashed["ways"], hashed["sets"], geo["line"]
    method = (f"a cyclic chain of lines at random places (the set index hashed), {fmt_bytes(smem)} of shared "
              "memory allocated: the positions of the shortest missing chain that miss on every pass (one set's "
              "ways + 1 lines, LRU-like), checked against the misses per pass of longer chains (balls into "
              "capacity/ways sets)")
    policy = onset_policy(hashed["positions"], ways)
    verdict = POLICY_NAMES[policy["verdict"]] if policy["verdict"] else "none of the models fits"
    distances = ", ".join(f"{p.upper() if p == 'lru' else p} model {d:.3f}" for p, d in policy["distances"].items())
    positions = hashed["positions"]
    return [derived_row("l1.ways", ways, ways, ways, method, PROBE, evidence),
            derived_row("l1.sets", sets, sets, sets, "the capacity in lines (lines held at the smallest stride, "
                        "the same shared allocation) over the ways", PROBE,
                        f"capacity {fmt_bytes(geo['capacity_bytes'])} / ({ways} ways x {line} B)"),
            derived_row("l1.replacement_miss_fraction", policy["fraction"], policy["fraction"], policy["fraction"],
                        "miss fraction of the lines of the one set the shortest missing chain at random places "
                        "overfills (its positions that miss at all)", PROBE,
                        f"replacement: {verdict}; {len(positions['some'])} positions miss, {positions['misses']} of "
                        f"their {positions['visits']} visits; distance to each model: {distances}")]
