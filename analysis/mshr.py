"""Misses in flight per SM (geometry.mshr): the knee of lines per cycle against distinct lines in flight.

One block on one SM keeps n distinct lines in flight, each an L1 miss.  Little's law: lines per cycle
X(n) = n / L0 while the misses are served in parallel (L0 the unloaded latency), flat at X_max once a per-SM
limit binds; the knee n* = X_max x L0 is the number of misses the SM holds in flight.  The fit is the
two-segment model log X = log X_max + min(log n - log n*, 0) (slope one, then flat), least absolute
deviations over the per-n medians, the knee searched on a grid and refined within a step of it; the 95%
interval comes from a bootstrap that resamples the launches (placements and repeats) at each n.  A knee is
undecided when fewer than MIN_SIDE swept n lie on either side of it, or its interval spans more than
MAX_CI_RATIO.

A knee is a count only if nothing else caps the plateau.  Two controls tell: a count keeps n* when the
latency changes (the DRAM source: the plateau falls as 1 / L0), a rate keeps its plateau instead; and a
byte bandwidth keeps its bytes per cycle when a line carries four sectors instead of one.  l1.mshr_per_sm
(plain loads) and l2.requests_in_flight_per_sm (ld.global.cg) are the L2-source knees where the controls
call them counts, undecided where they call them rates.  Lines are counted, one 32-byte sector of each.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import of_probe, usable

PROBE = "geometry.mshr"
KEYS = ["load", "source", "sectors_per_line"]
#: Swept n needed on each side of a knee, the widest interval (high / low) a decided knee may have, the knee
#: ratio within which two sources agree (a count), and the plateau ratio within which they agree (a rate).
MIN_SIDE, MAX_CI_RATIO, AGREE = 3, 2.0, 1.3
#: The 1-sector plateau is a byte ceiling when its bytes per cycle reach this fraction of the 4-sector one's.
BYTE_CEILING = 0.8
GRID, REFINE, BOOTSTRAP = 400, 40, 300
QUANTITY = {"plain": "l1.mshr_per_sm", "cg": "l2.requests_in_flight_per_sm"}
SECTOR, LINE = 32, 128


def launches(measurements: pd.DataFrame) -> pd.DataFrame:
    """One row per usable launch: load, source, sectors_per_line, warps, loads_per_thread, lines_in_flight,
    smid, lines_per_clk, pass_cycles, sm_clock_hz."""
    metrics = ["lines_in_flight", "loads_per_thread", "smid", "lines_per_clk", "pass_cycles"]
    frame = usable(of_probe(measurements, PROBE))
    frame = frame[frame["metric"].isin(metrics)]
    if frame.empty or any(k not in frame for k in KEYS + ["warps"]):
        return pd.DataFrame(columns=KEYS + ["warps"] + metrics + ["sm_clock_hz"])
    table = frame.pivot_table(index=KEYS + ["warps", "repeat"], columns="metric", values="value",
                              aggfunc="first").reset_index().dropna(subset=metrics)
    clocks = frame[frame["metric"] == "lines_per_clk"].groupby(KEYS + ["warps", "repeat"])["sm_clock_hz"].first()
    table = table.join(clocks, on=KEYS + ["warps", "repeat"])
    return table.astype({"sectors_per_line": int, "warps": int})


def _hinge(log_n: np.ndarray, log_x: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log n*, log X_max) of the least-absolute-deviation fit of log X = b + min(log n - c, 0) for each row of
    ``log_x`` (curves over ``log_n``): c searched on ``grid``, then within one grid step of each curve's best
    at REFINE times the grid's resolution, so that no interval end sits on a grid point; b is the median
    residual at each c."""
    c, _ = _hinge_on(log_n, log_x, np.broadcast_to(grid, (log_x.shape[0], grid.size)))
    step = grid[1] - grid[0]
    return _hinge_on(log_n, log_x, c[:, None] + np.linspace(-step, step, 2 * REFINE + 1)[None, :])


def _hinge_on(log_n: np.ndarray, log_x: np.ndarray, grids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The best c of each curve's own candidates (``grids``: curves x candidates) and its b."""
    low = np.minimum(log_n[None, None, :] - grids[:, :, None], 0.0)  # (curves, candidates, n)
    residual = log_x[:, None, :] - low
    b = np.median(residual, axis=2)
    best = np.argmin(np.abs(residual - b[..., None]).sum(axis=2), axis=1)
    rows = np.arange(log_x.shape[0])
    return grids[rows, best], b[rows, best]


def fit_knee(n, x, resamples: int = BOOTSTRAP, seed: int = 0) -> dict:
    """The knee n* and plateau X_max of lines per cycle ``x`` against lines in flight ``n`` (one value per
    launch), each with a 95% interval; ``decided`` False with ``why`` when the data do not place the knee."""
    n, x = np.asarray(n, float), np.asarray(x, float)
    keep = (n > 0) & (x > 0) & np.isfinite(x)
    n, x = n[keep], x[keep]
    levels = np.unique(n)
    if levels.size < 2 * MIN_SIDE:
        return {"decided": False, "why": f"{levels.size} swept n, fewer than {2 * MIN_SIDE}", "knee": np.nan,
                "plateau": np.nan, "knee_ci": (np.nan, np.nan), "plateau_ci": (np.nan, np.nan), "levels": levels}
    groups = [np.log(x[n == v]) for v in levels]
    log_n = np.log(levels)
    grid = np.linspace(log_n[0], log_n[-1], GRID)
    rng = np.random.default_rng(seed)
    medians = np.array([np.median(g) for g in groups])[None, :]
    drawn = np.stack([np.median(g[rng.integers(0, g.size, (resamples, g.size))], axis=1) for g in groups], axis=1)
    (c, *boot_c), (b, *boot_b) = _hinge(log_n, np.vstack([medians, drawn]), grid)
    knee_ci = tuple(float(v) for v in np.exp(np.percentile(boot_c, [2.5, 97.5])))
    plateau_ci = tuple(float(v) for v in np.exp(np.percentile(boot_b, [2.5, 97.5])))
    below, above = int((log_n < c).sum()), int((log_n > c).sum())
    why = ""
    if below < MIN_SIDE or above < MIN_SIDE:
        why = f"the knee is not inside the sweep ({below} swept n below it, {above} above)"
    elif knee_ci[1] > MAX_CI_RATIO * knee_ci[0]:
        why = f"its 95% interval spans more than {MAX_CI_RATIO:g}x"
    return {"decided": not why, "why": why, "knee": float(np.exp(c)), "plateau": float(np.exp(b)),
            "knee_ci": knee_ci, "plateau_ci": plateau_ci, "levels": levels,
            "unloaded_cycles": float(np.exp(c - b))}


def split_spread(curve: pd.DataFrame) -> float:
    """The largest ratio between the medians of two warps x loads splits of one n (1: every n's splits agree;
    a per-warp limit on loads in flight would part them)."""
    medians = curve.groupby(["lines_in_flight", "loads_per_thread"])["lines_per_clk"].median()
    ratios = medians.groupby(level=0).agg(lambda m: m.max() / m.min())
    return float(ratios.max()) if len(ratios) else 1.0


def fits(measurements: pd.DataFrame) -> dict[tuple, dict]:
    """(load, source, sectors_per_line) -> fit_knee of its launches."""
    table = launches(measurements)
    return {key: {**fit_knee(g["lines_in_flight"], g["lines_per_clk"]), "split_spread": split_spread(g),
                  "clock_hz": g["sm_clock_hz"].median()} for key, g in table.groupby(KEYS)}


def verdict(found: dict, load: str) -> tuple[bool, str]:
    """Whether the L2-source knee of ``load`` is a count, and what the controls say.  The DRAM control decides
    (a count keeps its knee as the latency grows, a rate its plateau); the 4-sector control then says what
    is counted: the same bytes per cycle as 1-sector lines means sectors (or a byte ceiling, which the DRAM
    control has already refused), a quarter of them means lines."""
    base = found.get((load, "l2", 1))
    dram, wide = found.get((load, "dram", 1)), found.get((load, "l2", 4))
    byte_ratio = None
    if wide and wide["decided"]:
        byte_ratio = base["plateau"] / (4 * wide["plateau"])
        wide_note = (f"1-sector lines reach {base['plateau'] * SECTOR:.3g} B/cycle, {byte_ratio:.2f}x the 4-sector "
                     f"lines' {wide['plateau'] * 4 * SECTOR:.3g} B/cycle")
    else:
        wide_note = "no 4-sector control decided"
    ceiling = byte_ratio is not None and byte_ratio >= BYTE_CEILING
    if not (dram and dram["decided"]):
        if ceiling:
            return False, f"a byte bandwidth is not excluded ({wide_note}) and no DRAM control decided"
        return True, f"no DRAM control decided: a rate limit is not excluded; {wide_note}"
    knees, plateaus = dram["knee"] / base["knee"], base["plateau"] / dram["plateau"]
    dram_note = (f"from HBM the knee is {dram['knee']:.0f} lines ({knees:.2f}x) and the plateau "
                 f"{dram['plateau']:.3g} lines/cycle (the L2's is {plateaus:.2f}x)")
    if 1 / AGREE <= knees <= AGREE and plateaus > AGREE:
        counted = ("" if byte_ratio is None else
                   "; it holds sectors, or 4-sector lines meet a byte ceiling (they carry no more bytes per cycle)"
                   if ceiling else f"; it holds lines, not sectors (4-sector lines carry {1 / byte_ratio:.1f}x the "
                   "bytes per cycle)")
        return True, f"a count (the knee stays, the plateau falls with latency){counted}: {dram_note}; {wide_note}"
    if plateaus <= AGREE:
        what = "a byte bandwidth" if ceiling else "a rate"
        return False, (f"{what}, not a count (the plateau stays as latency grows): at least {dram['knee']:.0f} "
                       f"misses in flight; {dram_note}; {wide_note}")
    return False, f"neither a count nor a rate: {dram_note}; {wide_note}"


def cross_check(fit: dict, load: str, device: dict, rows: list[dict]) -> str:
    """Little's law two ways: plateau x the chase's unloaded L2 latency against the knee, and the lines per SM
    the occupancy sweep's L2 fit needed in flight (littles.l2_bytes_in_flight / SMs / 128 B, L2-only loads)."""
    by_id = {r["quantity"]: r for r in rows}
    out = [f"fitted unloaded latency {fit['unloaded_cycles']:.0f} cycles"]
    chase = by_id.get("l2.latency_cycles")
    if chase and np.isfinite(chase["value"]):
        little = fit["plateau"] * chase["value"]
        out.append(f"plateau x l2.latency_cycles = {little:.0f} lines ({little / fit['knee']:.2f}x the knee)")
    l2 = by_id.get("l2.bandwidth_bytes_per_s")
    if l2 and np.isfinite(l2["value"]) and fit.get("clock_hz"):
        share = l2["value"] / device["sm_count"] / fit["clock_hz"]
        out.append(f"plateau {fit['plateau'] * SECTOR:.3g} B/cycle against the L2's {share:.3g} B/cycle per SM with "
                   "every SM reading (l2.bandwidth_bytes_per_s / SMs / clock; one SM alone may draw more)")
    needed = by_id.get("littles.l2_bytes_in_flight")
    if needed and np.isfinite(needed["value"]):
        per_sm = needed["value"] / device["sm_count"] / LINE
        relation = ("within" if per_sm <= fit["knee_ci"][1] else "above: the occupancy sweep kept more in flight "
                    "per SM than this limit allows, so its requests are not bound by it")
        out.append(f"the occupancy sweep's L2 fit needed {per_sm:.0f} lines per SM in flight, {relation}"
                   + (" (it used L2-only loads)" if load == "plain" else ""))
    return "; ".join(out)


def mshr_rows(measurements: pd.DataFrame, device: dict, rows: list[dict]) -> list[dict]:
    """l1.mshr_per_sm and l2.requests_in_flight_per_sm from the L2-source knees, with the plain loads'
    plateau (l1.miss_lines_per_clk_sm)."""
    found = fits(measurements)
    out = []
    for load, quantity in QUANTITY.items():
        fit = found.get((load, "l2", 1))
        if fit is None:
            continue
        method = ("knee of lines per cycle against distinct lines in flight, one block on one SM (1-sector "
                  "lines from an L2-resident footprint), two-segment LAD fit, bootstrap over launches")
        if not fit["decided"]:
            out.append(derived_row(quantity, np.nan, *fit["knee_ci"], method, PROBE, f"undecided: {fit['why']}"))
            continue
        count, why = verdict(found, load)
        note = (f"{why}; {cross_check(fit, load, device, rows)}; the warps x loads splits of one n agree within "
                f"{fit['split_spread']:.2f}x")
        if count:
            out.append(derived_row(quantity, fit["knee"], *fit["knee_ci"], method, PROBE, note))
        else:  # a rate hides the count: the registers hold at least what the HBM knee kept in flight
            dram = found.get((load, "dram", 1))
            bound = (dram["knee_ci"][0], np.inf) if dram and dram["decided"] else fit["knee_ci"]
            out.append(derived_row(quantity, np.nan, *bound, method, PROBE, f"undecided: {note}"))
        if load == "plain":
            out.append(derived_row("l1.miss_lines_per_clk_sm", fit["plateau"], *fit["plateau_ci"],
                                   "plateau of the same fit", PROBE, "lines of one 32-byte sector each"))
    return out


FAMILY = Family(order=175, probe_modules=("mshr",), rows=mshr_rows, reads_rows=True, quantities={
    "l1.mshr_per_sm": ("1", "distinct-line L1 misses one SM keeps in flight (its miss-status holding registers): "
                            "the knee of miss throughput against misses in flight"),
    "l1.miss_lines_per_clk_sm": ("1/cycle", "L1-miss lines per cycle one SM reaches from the L2 (the knee's "
                                            "plateau)"),
    "l2.requests_in_flight_per_sm": ("1", "distinct-line L2-only (ld.global.cg) requests one SM keeps in "
                                          "flight: the same knee"),
})
