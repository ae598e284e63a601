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

from analysis.family import Family
from analysis.latency import miss_valley
from analysis.plateaus import fit_staircase
from analysis.quantities import derived_row
from analysis.stats import median_ci, of_probe, select, usable
from analysis.units import fmt_bytes

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

def geometry_rows(measurements: pd.DataFrame) -> list[dict]:
    """The L1's rows (geometry.l1), the L2 partition map's (geometry.l2_partition), the constant caches'
    (geometry.const) and L2 persistence's (geometry.l2_persist)."""
    return l1_rows(measurements) + partition_rows(measurements) + sm_map_rows(measurements) + \
        const_rows(measurements) + persist_rows(measurements)


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


# -- the L2 partition map ----------------------------------------------------------------------------------

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
    """Side label of each SM: SMs whose maps agree on at least SAME_SIDE of the lines share a side, greedily in
    the given order (the first SM's side is 0)."""
    labels, seeds = np.full(len(far), -1), []
    for i, row in enumerate(far):
        for label, seed in enumerate(seeds):
            if np.mean(row == seed) >= SAME_SIDE:
                labels[i] = label
                break
        else:
            labels[i] = len(seeds)
            seeds.append(row)
    return labels


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
    consensus = np.array([far[labels == label].mean(axis=0) > 0.5 for label in range(sides)])
    agreement = np.mean(far == consensus[labels], axis=1)
    share = float(np.mean(labels == 0))
    complement = (f"; the two sides' maps are complements on {np.mean(consensus[0] != consensus[1]):.0%} of the "
                  "lines") if sides == 2 else ""
    block = _voted_interleave_bytes(far, labels)
    if block:
        complement += (f"; the first side's majority map alternates homes in aligned {fmt_bytes(block)} blocks "
                       f"(the largest over its {fmt_bytes(far.shape[1] * 128)})")
    method = (f"each of {ids.size} SMs' cold L2-only misses over the same {far.shape[1]} lines in address order "
              f"(L2 flushed before each), split near/far at its miss valley; SMs whose maps agree on "
              f"{SAME_SIDE:.0%} or more of the lines share a side")
    note = (f"sides of {', '.join(str(int(np.sum(labels == k))) for k in range(sides))} SMs; far-homed share "
            f"{far.mean():.0%}{complement}")
    lo, med, hi = np.percentile(agreement, [2.5, 50, 97.5])
    return [derived_row("l2.sm_sides", sides, sides, sides, method, SM_MAP_PROBE, note),
            derived_row("l2.sm_side_fraction", share, share, share, method + ": the first SM's side's share",
                        SM_MAP_PROBE, note),
            derived_row("l2.sm_map_consistency", float(med), float(lo), float(hi),
                        method + ": median agreement of an SM with its side's majority map (2.5..97.5 percentiles "
                        "over SMs)", SM_MAP_PROBE, note)]


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


FAMILY = Family(order=150, rows=lambda m, device: geometry_rows(m), quantities={
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
                         "group is a side of the GPU, nearest one L2 partition)"),
    "l2.sm_side_fraction": ("1", "share of SMs on the side of the lowest-numbered SM"),
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
