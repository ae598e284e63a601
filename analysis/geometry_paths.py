"""The data paths beside the plain load: the read-only (ld.global.nc) path's latency, capacity and bandwidth
against the plain path's (geometry.readonly); the caches' write policies (geometry.write_policy); the
instruction caches (geometry.icache).

A random cyclic chase over N lines through an LRU-like cache of C lines hits every step while N <= C and misses
nearly every step past it, so each path's chase over 1/4..4x the unified array is a staircase whose first knee
is that path's first-level capacity.  A chain whose steps alternate between the paths keeps half its lines in
each: behind one array it leaves that array at the plain path's knee (a ratio of 1); behind two arrays, each as
large as the plain path's, at twice it (a ratio of 2).  The verdict splits the two at their geometric mean.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.plateaus import fit_staircase
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, ratio_ci, select
from gpuatlas.analysis.units import fmt_bytes

READONLY_PROBE = "geometry.readonly"
#: The mixed chain's knee over the plain one's: 1 for one array behind both paths, 2 for two arrays; the
#: verdict's threshold is their geometric mean.
SHARED_SPLIT = float(np.sqrt(2.0))
LOAD_NAMES = {"nc": "ld.global.nc", "tex": "tex1Dfetch"}
#: Fewest footprints a knee sweep needs for a staircase fit of two levels.
KNEE_POINTS = 6


def path_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """Every data-path row present in ``measurements``."""
    return readonly_rows(measurements, device) + write_rows(measurements) + icache_rows(measurements)


def _chase(measurements: pd.DataFrame, path: str) -> pd.DataFrame:
    return select(measurements, READONLY_PROBE, "latency", measure="chase", load=path)


def knee_fit(frame: pd.DataFrame, top: float):
    """The staircase fit of one path's chase over the knee sweep (footprints up to ``top``), or None."""
    frame = frame[frame["footprint_bytes"] <= top]
    if frame["footprint_bytes"].nunique() < KNEE_POINTS:
        return None
    fit = fit_staircase(frame["footprint_bytes"].to_numpy(), frame["value"].to_numpy(), max_plateaus=2)
    return fit if fit.knees_bytes else None


def readonly_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """The nc chase's L1 latency, knee and the capacity verdicts; its L2 and HBM latency; the read bandwidths."""
    if "measure" not in measurements or not (measurements["probe"] == READONLY_PROBE).any():
        return []
    top = 4 * device["smem_per_sm_bytes"]
    fits = {path: knee_fit(_chase(measurements, path), top) for path in ("plain", "nc", "mixed", "tex")}
    rows = []
    nc, plain, mixed, tex = fits["nc"], fits["plain"], fits["mixed"], fits["tex"]
    if nc is not None:
        note = f"plain ld.global: {plain.plateaus[0].latency:.1f} cycles" if plain is not None else ""
        rows += _first_level_rows(nc, "nc", "", note)
    if nc is not None and plain is not None:
        rows.append(derived_row("readonly.capacity_ratio", *_knee_ratio(nc, plain), "first knee of the nc chase over "
                                "the plain chase's", READONLY_PROBE, f"nc {fmt_bytes(nc.knees_bytes[0])}, plain "
                                                                     f"{fmt_bytes(plain.knees_bytes[0])}"))
    if mixed is not None and plain is not None:
        ratio, low, high = _knee_ratio(mixed, plain)
        evidence = (f"a chain alternating plain and nc loads leaves its first level at "
                    f"{fmt_bytes(mixed.knees_bytes[0])}, the plain chain at {fmt_bytes(plain.knees_bytes[0])}: "
                    f"ratio {ratio:.2f} (1: one array behind both paths; 2: two arrays)")
        shared = ratio < SHARED_SPLIT
        rows += [derived_row("readonly.shared_capacity_ratio", ratio, low, high, "first knee of the alternating "
                             "chase over the plain chase's", READONLY_PROBE, evidence),
                 derived_row("readonly.l1_shared", float(shared), float(high < SHARED_SPLIT),
                             float(low < SHARED_SPLIT), f"1 if the knee ratio is below {SHARED_SPLIT:.3f} (the "
                             "geometric mean of 1 and 2)", READONLY_PROBE,
                             ("the read-only path shares the L1's capacity: " if shared else
                              "the read-only path has capacity of its own: ") + evidence)]
    if tex is not None:
        note = f"ld.global.nc: {nc.plateaus[0].latency:.1f} cycles" if nc is not None else ""
        rows += _first_level_rows(tex, "tex", "tex_", note,
                                  f"; nc knee {fmt_bytes(nc.knees_bytes[0])}" if nc is not None else "")
    for quantity, at, path in (("readonly.l2_latency_cycles", device["l2_bytes"] // 8, "nc"),
                               ("readonly.dram_latency_cycles", 4 * device["l2_bytes"], "nc"),
                               ("readonly.tex_l2_latency_cycles", device["l2_bytes"] // 8, "tex")):
        rows += _level_row(measurements, quantity, at, path)
    rows += _bandwidth_rows(measurements, device)
    return rows


def _first_level_rows(fit, path: str, prefix: str, note: str, knee_note: str = "") -> list[dict]:
    """One path's first plateau (its first-level latency) and first knee (that level's capacity)."""
    method = (f"staircase fit of a random dependent chase over 1/4..4x shared memory per SM through "
              f"{LOAD_NAMES[path]}")
    first = fit.plateaus[0]
    return [derived_row(f"readonly.{prefix}latency_cycles", first.latency, first.ci_low, first.ci_high,
                        method + " (plateau: bootstrap 95% CI)", READONLY_PROBE, note),
            derived_row(f"readonly.{prefix}capacity_bytes", fit.knees_bytes[0], *fit.knee_ci[0],
                        method + ": the knee where latency crosses the geometric mean of its first two levels",
                        READONLY_PROBE, f"{first.latency:.1f} -> {fit.plateaus[1].latency:.1f} cycles" + knee_note)]


def _knee_ratio(fit, base) -> tuple[float, float, float]:
    """``fit``'s first knee over ``base``'s, with bounds from the knees' CIs (low over high, high over low)."""
    return (fit.knees_bytes[0] / base.knees_bytes[0], fit.knee_ci[0][0] / base.knee_ci[0][1],
            fit.knee_ci[0][1] / base.knee_ci[0][0])


def _level_row(measurements: pd.DataFrame, quantity: str, footprint: int, path: str) -> list[dict]:
    """The median chase latency of ``path`` at the sweep's footprint nearest ``footprint`` (within a factor
    of 2), the plain chase's at the same footprint in the note."""
    chase = _chase(measurements, path)
    if chase.empty:
        return []
    nearest = min(chase["footprint_bytes"].unique(), key=lambda f: abs(np.log2(f / footprint)))
    if abs(np.log2(nearest / footprint)) > 1:
        return []
    value = chase.loc[chase["footprint_bytes"] == nearest, "value"]
    plain = _chase(measurements, "plain")
    plain = plain.loc[plain["footprint_bytes"] == nearest, "value"]
    note = f"plain ld.global: {np.median(plain):.1f} cycles" if len(plain) else ""
    return [derived_row(quantity, *median_ci(value), f"median of the {LOAD_NAMES[path]} chase at "
                        f"{fmt_bytes(nearest)} (bootstrap 95% CI)", READONLY_PROBE, note)]


def _bandwidth_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """Per-SM bytes per clock of the nc read at the L1 footprint, and nc over plain at each footprint."""
    read = select(measurements, READONLY_PROBE, "bytes_per_clk_sm", measure="read")
    if read.empty:
        return []
    rows = []
    for level, footprints in (("l1", read["footprint_bytes"][read["footprint_bytes"] < device["smem_per_sm_bytes"]]),
                              ("l2", read["footprint_bytes"][read["footprint_bytes"] >= device["smem_per_sm_bytes"]])):
        if footprints.empty:
            continue
        at = read[read["footprint_bytes"] == footprints.min()]
        nc, plain = at.loc[at["load"] == "nc", "value"], at.loc[at["load"] == "plain", "value"]
        where = (f"{fmt_bytes(footprints.min())} per block, re-read" if level == "l1"
                 else f"one {fmt_bytes(footprints.min())} region every block reads once")
        if level == "l1" and len(nc):
            rows.append(derived_row("readonly.l1_bandwidth_bytes_per_clk_sm", *median_ci(nc),
                                    f"every SM reading with ld.global.nc.v4, {where} (bootstrap 95% CI)",
                                    READONLY_PROBE,
                                    f"plain ld.global.v4: {np.median(plain):.1f} B/clk/SM" if len(plain) else ""))
        if len(nc) and len(plain):
            rows.append(derived_row(f"readonly.{level}_bandwidth_ratio", *ratio_ci(nc, plain),
                                    f"bytes per clock per SM, ld.global.nc.v4 over ld.global.v4, {where}",
                                    READONLY_PROBE, f"nc {np.median(nc):.1f}, plain {np.median(plain):.1f} B/clk/SM"))
    return rows


# -- write policies ----------------------------------------------------------------------------------------

WRITE_PROBE = "geometry.write_policy"
#: 4-byte words per 32-byte sector: a store of one word every ``stride`` words writes min(stride, this) times
#: its bytes in sectors.
SECTOR_WORDS = 8
#: Sector rate of partial writes over full ones: 1 for byte-masked writes, 1/2 for a read and a write per
#: sector; the verdict splits them at their geometric mean.
RMW_SPLIT = float(np.sqrt(0.5))


def write_rows(measurements: pd.DataFrame) -> list[dict]:
    if "access" not in measurements or not (measurements["probe"] == WRITE_PROBE).any():
        return []
    return _store_rows(measurements) + _allocate_rows(measurements) + _partial_rows(measurements)


def _store_rows(measurements: pd.DataFrame) -> list[dict]:
    """l1.store_reload_cycles and the verdict: the stored walk's latency against the geometric mean of the
    load-only (L1 hit) and the L2-only (L2 hit) walks'."""
    walks = {a: select(measurements, WRITE_PROBE, "latency", measure="store_reload", access=a)["value"]
             for a in ("load", "store", "cg")}
    if any(v.empty for v in walks.values()):
        return []
    (store, low, high), hit, l2 = median_ci(walks["store"]), np.median(walks["load"]), np.median(walks["cg"])
    split = float(np.sqrt(hit * l2))
    keeps = store < split
    evidence = (f"stored walk {store:.1f} cycles per step, load-only walk (L1 hits) {hit:.1f}, L2-only walk (L2 "
                f"hits) {l2:.1f}; split at their geometric mean {split:.1f}")
    method = ("random dependent chase inside the L1, each loaded word stored back into its line (median, bootstrap "
              "95% CI)")
    return [derived_row("l1.store_reload_cycles", store, low, high, method, WRITE_PROBE, evidence),
            derived_row("l1.keeps_stored_lines", float(keeps), float(high < split), float(low < split),
                        "1 if the stored walk steps nearer the L1 hit than the L2 hit (geometric mean)", WRITE_PROBE,
                        ("the L1 keeps lines a store wrote into (write-back, or write-through updating the line): "
                         if keeps else "a store leaves the L1 without the line (write-through, evicting or not "
                                       "updating it): ") + evidence)]


def _allocate_rows(measurements: pd.DataFrame) -> list[dict]:
    fraction = select(measurements, WRITE_PROBE, "written_hit_fraction", measure="write_allocate")["value"]
    if fraction.empty:
        return []
    value, low, high = median_ci(fraction)
    phases = {p: np.median(select(measurements, WRITE_PROBE, p, measure="write_allocate")["value"])
              for p in ("first_read_cycles", "second_read_cycles", "cold_read_cycles")}
    written = select(measurements, WRITE_PROBE, "written_bytes", measure="write_allocate")["value"]
    evidence = (f"per block, first read of the written lines {phases['first_read_cycles']:.0f} cycles, second read "
                f"{phases['second_read_cycles']:.0f}, cold read {phases['cold_read_cycles']:.0f}"
                + (f"; {fmt_bytes(written.iat[0])} written in all" if len(written) else ""))
    method = ("each block writes its slice (plain 16-byte stores), reads it L2-only twice, then reads an untouched "
              "slice (the L2 flushed before each launch): (cold - first) / (cold - second), median over launches")
    allocates = value > 0.5
    return [derived_row("l2.written_hit_fraction", value, low, high, method, WRITE_PROBE, evidence),
            derived_row("l2.write_allocates", float(allocates), float(low > 0.5), float(high > 0.5),
                        "1 if the written lines' hit fraction is above 1/2", WRITE_PROBE,
                        ("the L2 allocates the lines a kernel writes: " if allocates
                         else "the writes went past the L2: ") + evidence)]


def _partial_rows(measurements: pd.DataFrame) -> list[dict]:
    """Sector rates of one word per sector and of whole sectors, their ratio and the read-modify-write verdict."""
    full = select(measurements, WRITE_PROBE, "bandwidth", measure="partial_write", access="full")["value"]
    word = select(measurements, WRITE_PROBE, "bandwidth", measure="partial_write", access="word_per_sector")["value"]
    stride = select(measurements, WRITE_PROBE, "stride_words", measure="partial_write", access="word_per_sector")
    if full.empty or word.empty or stride.empty:
        return []
    sectors = word * min(float(stride["value"].median()), SECTOR_WORDS)  # each word stands for its sector
    ratio, low, high = ratio_ci(sectors, full)
    rmw = ratio < RMW_SPLIT
    evidence = (f"one word per sector: {np.median(word) / 1e9:.0f} GB/s useful, {np.median(sectors) / 1e9:.0f} GB/s "
                f"of sectors; whole sectors: {np.median(full) / 1e9:.0f} GB/s; ratio {ratio:.2f} (1: byte-masked "
                f"writes; 1/2: each sector read and written)")
    method = "4-byte stores over a span far past the L2, event-timed (median, bootstrap 95% CI)"
    return [derived_row("dram.partial_write_useful_bytes_per_s", *median_ci(word), method + ", one word per 32-byte "
                        "sector, useful bytes", WRITE_PROBE, evidence),
            derived_row("dram.partial_write_sector_bytes_per_s", *median_ci(sectors), method + ", one word per 32-byte "
                        "sector, sectors x 32 B", WRITE_PROBE, evidence),
            derived_row("dram.partial_write_sector_ratio", ratio, low, high, "sector bytes per second of one word per "
                        "sector over whole-sector stores'", WRITE_PROBE, evidence),
            derived_row("dram.partial_write_rmw", float(rmw), float(high < RMW_SPLIT), float(low < RMW_SPLIT),
                        f"1 if the sector ratio is below {RMW_SPLIT:.3f} (the geometric mean of 1/2 and 1)",
                        WRITE_PROBE, ("a partial-sector write costs the HBM a read-modify-write: " if rmw
                                      else "the HBM writes partial sectors at the full-sector rate: ") + evidence)]


# -- the instruction caches --------------------------------------------------------------------------------

ICACHE_PROBE = "geometry.icache"


def icache_rows(measurements: pd.DataFrame) -> list[dict]:
    """The staircase of cycles per instruction over the loop's code size: the first plateau's rate, each knee
    a level's capacity, each later plateau's excess over the first that level's miss cost per instruction."""
    if "code_bytes" not in measurements:
        return []
    frame = select(measurements, ICACHE_PROBE, "cycles_per_instruction")
    if frame["code_bytes"].nunique() < KNEE_POINTS:
        return []
    fit = fit_staircase(frame["code_bytes"].to_numpy(), frame["value"].to_numpy(), max_plateaus=4)
    method = "staircase fit of one warp's cycles per instruction over the loop's straight-line FFMA code size"
    first = fit.plateaus[0]
    note = "plateaus: " + ", ".join(f"{p.latency:.2f} from {fmt_bytes(p.lo_bytes)} to {fmt_bytes(p.hi_bytes)}"
                                    for p in fit.plateaus)
    rows = [derived_row("icache.l0.cycles_per_instruction", first.latency, first.ci_low, first.ci_high,
                        method + " (first plateau, bootstrap 95% CI)", ICACHE_PROBE, note)]
    for level, k in (("l0", 0), ("l1", 1)):
        if k + 1 >= len(fit.plateaus):
            break
        after = fit.plateaus[k + 1]
        rows += [derived_row(f"icache.{level}.capacity_bytes", fit.knees_bytes[k], *fit.knee_ci[k],
                             method + ": the knee where it crosses the geometric mean of the levels beside it",
                             ICACHE_PROBE, note),
                 derived_row(f"icache.{level}.miss_cycles_per_instruction", after.latency - first.latency,
                             after.ci_low - first.ci_high, after.ci_high - first.ci_low,
                             method + ": the plateau past the knee over the first plateau", ICACHE_PROBE, note)]
    return rows


FAMILY = Family(order=160, probe_modules=("readonly", "write_policy", "icache"), rows=path_rows, quantities={
    "readonly.latency_cycles": ("cycles", "load-to-use latency of a dependent ld.global.nc (the read-only path "
                                          "__ldg takes) over a chain the first-level cache holds"),
    "readonly.l2_latency_cycles": ("cycles", "the same ld.global.nc chase at a footprint of L2/8: an L2 hit"),
    "readonly.dram_latency_cycles": ("cycles", "the same ld.global.nc chase at 4x the L2: an HBM miss"),
    "readonly.capacity_bytes": ("B", "footprint where the ld.global.nc chase leaves its first-level cache (the "
                                     "staircase's first knee)"),
    "readonly.capacity_ratio": ("1", "the ld.global.nc chase's first knee over the plain ld.global chase's"),
    "readonly.shared_capacity_ratio": ("1", "first knee of a chase alternating plain and nc loads over the plain "
                                            "chase's: 1 when one array sits behind both paths, 2 for two separate "
                                            "arrays of the plain path's size"),
    "readonly.l1_shared": ("1", "1 when the read-only path shares the L1's capacity (shared_capacity_ratio nearer "
                                "1 than 2, geometrically), else 0"),
    "readonly.l1_bandwidth_bytes_per_clk_sm": ("B/cycle", "bytes per clock per SM of every SM re-reading an "
                                                          "L1-resident region with ld.global.nc.v4"),
    "readonly.l1_bandwidth_ratio": ("1", "ld.global.nc.v4 over ld.global.v4 read bandwidth, L1-resident regions"),
    "readonly.l2_bandwidth_ratio": ("1", "ld.global.nc.v4 over ld.global.v4 read bandwidth, an L2-resident region "
                                         "read by every SM"),
    "readonly.tex_latency_cycles": ("cycles", "load-to-use latency of a dependent tex1Dfetch (TLD through a texture "
                                              "object) over a chain of texel indices the first-level cache holds"),
    "readonly.tex_capacity_bytes": ("B", "footprint where the texture chase leaves its first-level cache (the "
                                         "staircase's first knee)"),
    "readonly.tex_l2_latency_cycles": ("cycles", "the texture chase at a footprint of L2/8: an L2 hit"),
    "l1.store_reload_cycles": ("cycles", "cycles per step of an L1-resident chase that stores each loaded word back "
                                         "into its line: the cost of loading a line the thread last wrote"),
    "l1.keeps_stored_lines": ("1", "1 when a line the thread stored into still hits the L1 (store_reload_cycles "
                                   "nearer the L1 hit than the L2 hit, geometrically), 0 when the store left the "
                                   "L1 without it (write-through, evicting or not updating)"),
    "l2.written_hit_fraction": ("1", "how far the first L2-only read of lines just written goes from HBM-miss cost "
                                     "(0) to L2-hit cost (1): (cold - first) / (cold - second read) cycles"),
    "l2.write_allocates": ("1", "1 when the L2 keeps the lines a kernel writes (written_hit_fraction above 1/2)"),
    "dram.partial_write_sector_bytes_per_s": ("B/s", "32-byte sectors per second (times 32 B) that 4-byte stores "
                                                     "of one word per sector write to HBM"),
    "dram.partial_write_useful_bytes_per_s": ("B/s", "useful bytes per second of 4-byte stores, one word per "
                                                     "32-byte sector, over HBM"),
    "dram.partial_write_sector_ratio": ("1", "sectors per second of one-word-per-sector stores over those of "
                                             "stores that fill whole sectors: 1 for byte-masked writes, about 1/2 "
                                             "when each sector is read and written back"),
    "dram.partial_write_rmw": ("1", "1 when a partial-sector write costs a read-modify-write at the HBM "
                                    "(partial_write_sector_ratio below 1/sqrt(2)), else 0"),
    "icache.l0.cycles_per_instruction": ("cycles", "cycles per instruction of one warp looping over independent FFMAs "
                                                   "that fit the first instruction-cache level (its issue rate)"),
    "icache.l0.capacity_bytes": ("B", "loop size where one warp's cycles per instruction first step up: the first "
                                      "instruction-cache level's capacity"),
    "icache.l0.miss_cycles_per_instruction": ("cycles", "cycles per instruction added once the loop outgrows the "
                                                        "first instruction-cache level (fetched from the next)"),
    "icache.l1.capacity_bytes": ("B", "loop size of the second step: the second instruction-cache level's capacity"),
    "icache.l1.miss_cycles_per_instruction": ("cycles", "cycles per instruction added once the loop outgrows the "
                                                        "second level too (fetched from beyond it)"),
})
