"""Address translation from the block-stride chase (chase.tlb): each TLB level's reach and miss penalty, and
the page.

The chase keeps one element per 2 MiB block, its few lines resident in the L2, so its latency rises only as
the pages it touches outgrow a TLB.  A TLB whose pages land in hashed sets of W ways (LRU, walked cyclically)
misses on every page of a set that holds more than W of the chain's pages: the share of pages missing is
P(at least W of the other N - 1 pages share a page's set), Binomial(N - 1, W / E) for E entries.  Few ways give
a ramp that starts well below the reach, one set (fully associative) a step at it.  The latency is fitted as
``base + penalty x that share`` (one level, or two added), W from TLB_WAYS and E on a fine log grid, weighted
least squares on each footprint's mean over the chain's placements (every sample lays the chain at new random
places, so a few elements' luck with L2 slices averages out).  The reach is E x the page (E x the block where
the block is larger); the penalty is the latency a miss adds.  The page itself is where the reach stops
staying put as the block grows (``page_size``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.l1_sets import overfill_misses
from gpuatlas.analysis.quantities import derived_row, structure_row
from gpuatlas.analysis.stats import select
from gpuatlas.analysis.units import fmt_bytes

TLB_PROBE, PAGE_STRIDE = "chase.tlb", 2 << 20
#: Ways per set the fit tries; None is one set (fully associative: a step at the reach).
TLB_WAYS = (1, 2, 4, 8, 16, 32, None)
#: Candidate reaches (entries) per octave, from 2 elements to 4x the sweep's largest.
REACH_STEPS_PER_OCTAVE = 16
#: A level is reported when its penalty is at least this many standard errors (scaled by the fit's own
#: residual scatter): the search over reaches and ways picks the best of many candidates, so a few sigma
#: would find levels in noise.
LEVEL_SIGMAS = 5.0
#: Two levels' reaches at least this factor apart (closer, one ramp is a better account).
LEVEL_SEPARATION = 2.0
#: Footprints a block size needs before it is fitted, and bootstrap resamples for the CIs.
MIN_FOOTPRINTS, BOOTSTRAP = 8, 100
#: Largest RMS error (octaves) of log2(reach) under the best page for the page to be named: a model further
#: off than that (e.g. a reach that falls at some block sizes, which no page predicts) does not explain them.
MAX_PAGE_FIT_OCTAVES = 0.2
#: Footprints a level needs below its half point and past it (fewer, and one footprint's luck makes a level;
#: past it, the sweep's end may leave a last level only two).
BELOW_FOOTPRINTS, PAST_FOOTPRINTS = 3, 2
#: Floor on a footprint's standard error, relative to its mean (a sweep of identical samples is still fitted).
SE_FLOOR = 1e-4


def miss_share(elements, entries: float, ways: int | None) -> np.ndarray:
    """Share of a cyclic chain's ``elements`` pages that miss a TLB of ``entries`` in sets of ``ways`` (hashed,
    LRU); ``ways`` None: fully associative, every page misses once the chain has more than ``entries``."""
    n = np.maximum(np.asarray(elements, dtype=np.int64), 1)
    if ways is None:
        return (n > entries).astype(float)
    return overfill_misses(n, ways, entries / ways) / n


def _solve(columns: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Weighted least squares of ``y`` on each candidate's design (``columns``: candidates x params x points):
    coefficients, chi-square and the coefficients' covariance, batched over candidates (a ridge of 1e-9 of the
    matrix's scale, so a design whose share column matches another's gives no error, only a useless fit)."""
    normal = (columns * w) @ columns.transpose(0, 2, 1)
    ridge = 1e-9 * np.trace(normal, axis1=1, axis2=2)[:, None, None] * np.eye(normal.shape[1])
    inverse = np.linalg.inv(normal + ridge)
    coef = np.einsum("cpq,cq->cp", inverse, columns @ (w * y))
    resid = y - np.einsum("cpn,cp->cn", columns, coef, optimize=True)
    return coef, (w * resid ** 2).sum(axis=1), inverse


class _Sweep:
    """One block size's sweep: each footprint's samples, and every candidate (ways, entries)'s miss share at its
    element counts, computed once (the bootstrap refits reuse them)."""

    def __init__(self, frame: pd.DataFrame, stride_bytes: int, ways: tuple = TLB_WAYS):
        self.stride = stride_bytes
        # sorted, so that the fit and its bootstrap do not depend on the order the samples were read in
        self.groups = [np.sort(g.to_numpy(dtype=float)) for _, g in frame.groupby("footprint_bytes")["value"]]
        self.footprints = np.array(sorted(frame["footprint_bytes"].unique()), dtype=float)
        elements = (self.footprints // stride_bytes).astype(np.int64)
        octaves = np.log2(4 * elements.max() / 2)
        grid = 2 * 2 ** (np.arange(int(octaves * REACH_STEPS_PER_OCTAVE) + 1) / REACH_STEPS_PER_OCTAVE)
        candidates = [(w, e) for w in ways for e in grid if w is None or e >= w]
        share = np.array([miss_share(elements, e, w) for w, e in candidates])
        below = (share < 0.5).sum(axis=1)
        useful = (below >= BELOW_FOOTPRINTS) & (len(elements) - below >= PAST_FOOTPRINTS)
        # candidates the sweep cannot tell apart (same ways, same shares at every footprint) are one, at the
        # geometric middle of their entries: a step between two footprints puts the reach between them
        groups: dict = {}
        for (way, entries), row, keep in zip(candidates, share, useful):
            if keep:
                groups.setdefault((way, row.tobytes()), (row, []))[1].append(entries)
        self.candidates = [(way, float(np.exp(np.mean(np.log(e))))) for (way, _), (_, e) in groups.items()]
        self.entries = np.array([e for _, e in self.candidates])
        self.share = np.array([row for row, _ in groups.values()]).reshape(len(groups), len(elements))

    def fit(self, groups=None, max_levels: int = 2) -> dict:
        """Levels added one at a time, each the candidate that most lowers the chi-square with the others'
        shares held; a level is kept while its penalty clears LEVEL_SIGMAS.  ``{"levels": [...], "base", "dof",
        "chi2"}``, each level's ``reach_bytes``, ``penalty``, ``penalty_se``, ``ways``, smallest reach first."""
        groups = self.groups if groups is None else groups
        y = np.array([g.mean() for g in groups])
        se = np.array([g.std(ddof=1) / np.sqrt(g.size) if g.size > 1 else 0.0 for g in groups])
        w = 1 / np.maximum(se, SE_FLOOR * np.abs(y)) ** 2
        chosen: list[int] = []
        result = {"levels": [], "base": float(np.average(y, weights=w)), "dof": len(y) - 1, "chi2": float("nan")}
        for _ in range(max_levels):
            allowed = np.ones(len(self.candidates), dtype=bool)
            for i in chosen:
                allowed &= np.abs(np.log(self.entries / self.entries[i])) >= np.log(LEVEL_SEPARATION)
            idx = np.flatnonzero(allowed)
            dof = len(y) - len(chosen) - 3
            if idx.size == 0 or dof < 1:
                break
            fixed = np.broadcast_to(self.share[chosen], (idx.size, len(chosen), len(y)))
            columns = np.concatenate([np.ones((idx.size, 1, len(y))), fixed, self.share[idx][:, None, :]], axis=1)
            coef, chi2, cov = _solve(columns, y, w)
            best = int(np.argmin(chi2))
            se_coef = np.sqrt(np.maximum(np.diagonal(cov[best]), 0) * max(1.0, chi2[best] / dof))
            if coef[best, -1] < LEVEL_SIGMAS * se_coef[-1]:
                break
            chosen.append(int(idx[best]))
            result = {"levels": [{"reach_bytes": self.entries[i] * self.stride, "ways": self.candidates[i][0],
                                  "penalty": float(p), "penalty_se": float(s)}
                                 for i, p, s in zip(chosen, coef[best, 1:], se_coef[1:])],
                      "base": float(coef[best, 0]), "dof": dof, "chi2": float(chi2[best])}
        result["levels"].sort(key=lambda level: level["reach_bytes"])
        result["top_bytes"] = float(self.footprints.max())
        return result

    def bootstrap(self, found: dict, seed: int = 0) -> list[dict]:
        """Each level's reach and penalty refitted (the same number of levels) to the footprints' samples
        resampled with replacement: ``[{"reach": (low, high), "penalty": (low, high)}]``, 95% intervals."""
        levels = found["levels"]
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(BOOTSTRAP if levels else 0):
            again = self.fit([rng.choice(g, g.size) for g in self.groups], max_levels=len(levels))
            if len(again["levels"]) == len(levels):
                draws.append([(lv["reach_bytes"], lv["penalty"]) for lv in again["levels"]])
        return [{"reach": _interval([d[k][0] for d in draws], level["reach_bytes"]),
                 "penalty": _interval([d[k][1] for d in draws], level["penalty"])} for k, level in enumerate(levels)]


def _interval(values, point: float) -> tuple[float, float]:
    if not values:
        return point, point
    low, high = np.percentile(values, [2.5, 97.5])
    return float(min(low, point)), float(max(high, point))


def _ways_text(ways: int | None) -> str:
    return "fully associative" if ways is None else f"{ways}-way sets"


def _half_point(level: dict, stride_bytes: int) -> float:
    """Footprint where the level's miss share first reaches one half."""
    elements = np.unique(np.geomspace(2, 64 * level["reach_bytes"] / stride_bytes, 2000).astype(np.int64))
    share = miss_share(elements, level["reach_bytes"] / stride_bytes, level["ways"])
    return float(elements[np.argmax(share >= 0.5)] * stride_bytes)


def tlb_rows(frame: pd.DataFrame, streams: pd.DataFrame | None = None) -> list[dict]:
    """Reach and miss penalty of each TLB level the 2 MiB-block chase shows, a lower bound where a level is not
    seen, and the page from the other block sizes (``tlb.page_bytes``); with ``streams`` (bw.dram_footprint's
    bandwidth samples), the streaming read inside and past the first reach in its note."""
    if frame.empty:
        return []
    main = frame[frame["stride_bytes"] == PAGE_STRIDE] if "stride_bytes" in frame else frame
    if main["footprint_bytes"].nunique() < MIN_FOOTPRINTS:
        return []
    sweep_fit = _Sweep(main, PAGE_STRIDE)
    found = sweep_fit.fit()
    levels, top = found["levels"], found["top_bytes"]
    placements = main.groupby("footprint_bytes").size()
    sweep = (f"{main['footprint_bytes'].nunique()} footprints to {fmt_bytes(top)}, "
             f"{int(placements.min())}-{int(placements.max())} placements each")
    if not levels:
        return [derived_row("tlb.reach_lower_bound_bytes", top, top, top,
                            f"block-stride chase (one element per 2 MiB block, L2-resident lines): no TLB level's "
                            f"misses at {LEVEL_SIGMAS:.0f} standard errors up to this footprint", TLB_PROBE,
                            f"{sweep}; flat at {found['base']:.1f} cycles")]
    method = ("block-stride chase (one element per 2 MiB block at a random sector, L2-resident lines), mean over "
              "placements per footprint; latency = base + penalty x the share of pages a hashed set-associative "
              f"LRU TLB misses (ways {', '.join(_ways_text(w) for w in TLB_WAYS)}), weighted least squares")
    cis = sweep_fit.bootstrap(found)
    rows = []
    for k, (level, ci) in enumerate(zip(levels, cis), start=1):
        note = (f"{_ways_text(level['ways'])} fit best, {level['reach_bytes'] / PAGE_STRIDE:.0f} entries; half the "
                f"penalty by {fmt_bytes(_half_point(level, PAGE_STRIDE))}; base {found['base']:.1f} cycles; "
                f"chi-square {found['chi2']:.1f} on {found['dof']} degrees of freedom; {sweep}")
        rows.append(derived_row(f"tlb.l{k}.reach_bytes", level["reach_bytes"], *ci["reach"],
                                f"{method}: entries x 2 MiB", TLB_PROBE, note))
        rows.append(derived_row(f"tlb.l{k}.miss_cycles", level["penalty"], *ci["penalty"],
                                f"{method}: the penalty, latency a miss adds (bootstrap 95% CI over placements)",
                                TLB_PROBE, f"{level['penalty'] / level['penalty_se']:.0f} standard errors"))
    if len(levels) == 1:
        rows.append(derived_row("tlb.l2.reach_lower_bound_bytes", top, top, top,
                                "block-stride chase: no second level's misses past the first's, at "
                                f"{LEVEL_SIGMAS:.0f} standard errors, up to this footprint", TLB_PROBE, sweep))
    rows[0]["note"] += _streaming_text(streams, levels[0]["reach_bytes"])
    page, reaches = page_size(frame, levels[0])
    if page is not None:
        rows.append(page)
    elif len(reaches) > 1:
        rows[0]["note"] += "; too few block sizes fitted to settle a page: " + _reach_text(reaches)
    return rows


def _streaming_text(streams: pd.DataFrame | None, reach: float) -> str:
    """HBM read bandwidth of the footprint sweep at its largest footprint inside ``reach`` and its largest past
    it: a stream walks each page's lines in turn, so one translation serves a whole page of loads."""
    if streams is None or streams.empty:
        return ""
    medians = streams.groupby("footprint_bytes")["value"].median()
    inside, past = medians[medians.index <= reach], medians[medians.index > reach]
    if inside.empty or past.empty:
        return ""
    return (f"; streaming reads (bw.dram_footprint) {inside.iloc[-1] / 1e12:.3f} TB/s at {fmt_bytes(inside.index[-1])} "
            f"inside this reach, {past.iloc[-1] / 1e12:.3f} at {fmt_bytes(past.index[-1])} past it "
            f"({past.iloc[-1] / inside.iloc[-1] - 1:+.1%}): a stream uses each translation for a page of loads, "
            "so its misses do not show there")


def _reach_text(reaches: dict) -> str:
    return ", ".join(f"{fmt_bytes(s)} blocks: {fmt_bytes(reaches[s])}" for s in sorted(reaches))


def page_size(frame: pd.DataFrame, first: dict) -> tuple[dict | None, dict]:
    """The span one TLB entry covers (the page): the first level's reach is entries x max(page, block), so it
    stays put for blocks up to the page and grows with the block beyond it.  Each block size's sweep is fitted
    with the first level's ways; each candidate page (a measured block size) is scored by the least-squares
    misfit of log2(reach) to log2(entries) + log2(max(page, block)), entries free.  The best is the page, with
    the candidates within 1.5x its misfit as the CI, when it explains the reaches within MAX_PAGE_FIT_OCTAVES
    and a larger block than one shows the reach moving past it; otherwise undecided between the two best.
    Returns the row (None with fewer than four block sizes fitted) and the reach of each block size."""
    if "stride_bytes" not in frame:
        return None, {}
    reaches = {PAGE_STRIDE: first["reach_bytes"]}
    for stride, part in frame[frame["stride_bytes"] != PAGE_STRIDE].groupby("stride_bytes"):
        if part["footprint_bytes"].nunique() < MIN_FOOTPRINTS:
            continue
        found = _Sweep(part, int(stride), ways=(first["ways"],)).fit(max_levels=1)
        if found["levels"]:
            reaches[int(stride)] = found["levels"][0]["reach_bytes"]
    if len(reaches) < 4:
        return None, reaches
    strides = np.array(sorted(reaches), dtype=float)
    y = np.log2([reaches[s] for s in sorted(reaches)])
    misfit = {}
    for page in strides[:-1]:  # the largest block cannot show that the reach moves past it
        r = y - np.log2(np.maximum(page, strides))
        misfit[page] = float(np.sum((r - r.mean()) ** 2))
    best = min(misfit, key=misfit.get)
    rms = float(np.sqrt(misfit[best] / len(strides)))
    close = [p for p, m in misfit.items() if m <= 1.5 * misfit[best]]
    runners = sorted(misfit, key=misfit.get)[:2]
    why = "the blocks within 1.5x the best misfit"
    if rms > MAX_PAGE_FIT_OCTAVES:
        close = runners
        why = (f"even the best page misses the reaches by {rms:.2f} octaves RMS, over {MAX_PAGE_FIT_OCTAVES}: no "
               "page explains them")
    elif best >= strides[-2]:
        close = runners
        why = "only the largest block shows the reach moving past the best page"
    return structure_row("tlb.page_bytes", best, (min(close), max(close)),
                         "block size at which the first TLB level's reach starts to grow with the block (least-squares "
                         "fit of reach = entries x max(page, block) over the measured block sizes)", TLB_PROBE,
                         f"first level's reach: {_reach_text(reaches)}; best {fmt_bytes(best)} ({rms:.2f} octaves "
                         f"RMS); candidates: {', '.join(fmt_bytes(p) for p in close)}", why=why), reaches


FAMILY = Family(order=35, reads_later=("bandwidth.dram",),
                rows=lambda m, device: tlb_rows(select(m, TLB_PROBE, "latency"),
                                                select(m, "bw.dram_footprint", "bandwidth")),
                quantities={
    "tlb.l1.reach_bytes": ("B", "the first TLB level's entries x page: the footprint its translations cover (a "
                                "level with few ways starts missing below it, as pages crowd its sets)"),
    "tlb.l1.miss_cycles": ("cycles", "latency added when the first TLB level misses"),
    "tlb.l2.reach_bytes": ("B", "the second TLB level's entries x page: the footprint its translations cover"),
    "tlb.l2.miss_cycles": ("cycles", "latency added when the second TLB level misses too"),
    "tlb.reach_lower_bound_bytes": ("B", "largest page-stride footprint measured when no TLB level's misses were "
                                         "seen"),
    "tlb.l2.reach_lower_bound_bytes": ("B", "largest page-stride footprint measured when no second TLB level's "
                                            "misses were seen past the first's"),
    "tlb.page_bytes": ("B", "page (translation granule) size: the largest block whose TLB reach does not move"),
})
