"""Staircase fit of pointer-chase latency against footprint: the memory levels and their capacities.

Method, on x = log2(footprint) and the median latency of each footprint (medians make single samples
3x off harmless):

1. Segmentation: for every k up to ``2 * max_plateaus - 1`` (room for one ramp between each pair of
   levels), dynamic programming finds the exact least-squares split of log(median latency) into k constant
   segments of at least ``min_points`` footprints each. Log-latency makes a step's weight its ratio, so
   the 30-cycle L1 counts as much as the 600-cycle DRAM level.
2. Merging: a segment's level is the median of the samples in its interior (the footprint next to a
   neighbouring segment is left out when enough remain: knees are ramps). Adjacent segments whose levels
   differ by less than ``MIN_STEP`` are one level. Latency cannot fall as the footprint grows, so a step
   down is a bump (a throttled round) or a dip (a wobble), not a level: it is merged away too.
3. Plateaus: a merged segment is a plateau when at least ``min_points`` of its footprint medians lie
   within ``MIN_STEP`` of its level; the others are ramps between levels and are not reported.
4. Choice of k: the smallest BIC, n·log(RSS/n) + (2k − 1)·log(n) (k levels, k − 1 breaks), among the
   exact segmentations whose merged form has at most ``max_plateaus`` plateaus.
5. Knee (capacity) between adjacent plateaus: the footprint where the footprint medians, from the last
   interior footprint of the lower plateau on, first reach the geometric mean of the two levels,
   interpolated linearly in log2(footprint). CIs are percentile bootstraps: plateau levels over the
   interior samples, knees over the samples within each footprint with both levels held fixed (one
   sample per footprint gives a zero-width knee CI).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuatlas.analysis.units import fmt_bytes

MIN_STEP = 0.05
"""Smallest relative change between adjacent levels that makes them two levels: a real level change on
GPUs is over 10%, noise and clock wobble within a level a few percent."""

_RSS_FLOOR = 1e-8
"""Floor of RSS/n (a relative resolution of 1e-4), so that noiseless input has a finite BIC."""

_CONFIDENCE = 0.95


@dataclass
class Plateau:
    """One memory level: median latency with bootstrap CI, and the footprint range (bytes) of its segment."""

    latency: float
    ci_low: float
    ci_high: float
    lo_bytes: float
    hi_bytes: float
    n_points: int  # footprints in the segment


@dataclass
class StaircaseFit:
    """Plateaus in footprint order, the knee between each adjacent pair (bytes) with its CI, and the BIC of
    the chosen exact segmentation (before merging; ramps between plateaus are segments too)."""

    plateaus: list[Plateau]
    knees_bytes: list[float]
    knee_ci: list[tuple[float, float]]
    bic: float


@dataclass
class _Sweep:
    footprint: np.ndarray  # distinct footprints (bytes), ascending
    x: np.ndarray  # log2(footprint)
    median: np.ndarray  # median latency per footprint
    values: np.ndarray  # every sample, grouped by footprint in the order of x
    starts: np.ndarray  # samples of footprint i are values[starts[i]:starts[i + 1]]

    def samples(self, first: int, stop: int) -> np.ndarray:
        return self.values[self.starts[first]:self.starts[stop]]


def _sweep(footprint_bytes, latency) -> _Sweep:
    footprint = np.asarray(footprint_bytes, dtype=float).ravel()
    latency = np.asarray(latency, dtype=float).ravel()
    if footprint.shape != latency.shape:
        raise ValueError("footprint_bytes and latency must have the same length")
    keep = np.isfinite(footprint) & np.isfinite(latency) & (footprint > 0) & (latency > 0)
    if not keep.any():
        raise ValueError("no finite, positive (footprint, latency) samples")
    footprint, latency = footprint[keep], latency[keep]
    order = np.lexsort((latency, footprint))
    footprint, latency = footprint[order], latency[order]
    distinct, starts = np.unique(footprint, return_index=True)
    starts = np.append(starts, latency.size)
    median = np.array([np.median(latency[a:b]) for a, b in zip(starts[:-1], starts[1:])])
    return _Sweep(distinct, np.log2(distinct), median, latency, starts)


def _segmentations(y: np.ndarray, max_segments: int, min_points: int) -> list[list[int]]:
    """Exact least-squares k-segmentations of y for k = 1..max_segments, as boundary lists [0, ..., n]."""
    n = y.size
    s1, s2 = np.concatenate(([0.0], np.cumsum(y))), np.concatenate(([0.0], np.cumsum(y * y)))
    start, stop = np.arange(n + 1)[:, None], np.arange(n + 1)[None, :]
    length = stop - start
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = s2[stop] - s2[start] - (s1[stop] - s1[start]) ** 2 / length
    cost[length < min_points] = np.inf
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back, result = [], []
    for _ in range(max_segments):
        total = best[:, None] + cost
        arg = np.argmin(total, axis=0)
        best = total[arg, np.arange(n + 1)]
        back.append(arg)
        if not np.isfinite(best[n]):
            break
        bounds = [n]
        for links in reversed(back):
            bounds.append(int(links[bounds[-1]]))
        result.append(bounds[::-1])
    return result


def _interior(bounds: list[int], segment: int, min_points: int) -> tuple[int, int]:
    """Footprint index range [first, stop) of a segment without the footprint beside each neighbour."""
    first, stop = bounds[segment], bounds[segment + 1]
    trim_first, trim_stop = int(segment > 0), int(segment < len(bounds) - 2)
    if stop - first - trim_first - trim_stop >= min_points:
        return first + trim_first, stop - trim_stop
    return first, stop


def _levels(sweep: _Sweep, bounds: list[int], min_points: int) -> np.ndarray:
    return np.array([np.median(sweep.samples(*_interior(bounds, s, min_points)))
                     for s in range(len(bounds) - 1)])


def _merged(sweep: _Sweep, bounds: list[int], min_points: int, min_step: float) -> list[int]:
    """Merge segments until every step goes up by at least MIN_STEP.

    The pair with the smallest step under MIN_STEP (either way) is one level and is merged first. A larger
    step down is a bump on its left when the bump's two neighbours agree, a dip on its right when the dip's
    two neighbours agree (the odd segment is merged with both, so a throttled round inside a level
    disappears into it), and otherwise the two segments are pooled.
    """
    bounds = list(bounds)
    same = np.log1p(min_step)
    while len(bounds) > 2:
        level = np.log(_levels(sweep, bounds, min_points))
        steps = np.diff(level)
        j = int(np.argmin(np.abs(steps)))
        if abs(steps[j]) < same:
            del bounds[j + 1]
            continue
        j = int(np.argmin(steps))
        if steps[j] > 0:
            break
        if j > 0 and abs(level[j - 1] - level[j + 1]) < same:
            del bounds[j:j + 2]
        elif j + 2 < level.size and abs(level[j] - level[j + 2]) < same:
            del bounds[j + 1:j + 3]
        else:
            del bounds[j + 1]
    return bounds


def _flat(sweep: _Sweep, bounds: list[int], levels: np.ndarray, min_points: int, min_step: float) -> np.ndarray:
    """Whether each segment is a plateau: min_points or more footprint medians within min_step of its
    level."""
    close = np.abs(np.log(sweep.median) - np.log(np.repeat(levels, np.diff(bounds)))) < np.log1p(min_step)
    return np.add.reduceat(close, bounds[:-1]) >= min_points


def _bic(y: np.ndarray, bounds: list[int]) -> float:
    rss = sum(float(np.sum((y[a:b] - y[a:b].mean()) ** 2)) for a, b in zip(bounds[:-1], bounds[1:]))
    n, segments = y.size, len(bounds) - 1
    return n * np.log(max(rss / n, _RSS_FLOOR)) + (2 * segments - 1) * np.log(n)


def _crossing(x: np.ndarray, medians: np.ndarray, target: float) -> np.ndarray:
    """log2 footprint where each row of medians (over the footprints x) first reaches target, interpolated
    linearly between footprints; at x[0] if the first already does, at x[-1] if none does."""
    medians = np.atleast_2d(medians)
    reached = medians[:, 1:] >= target
    i = np.where(reached.any(axis=1), np.argmax(reached, axis=1), x.size - 2)
    below = np.take_along_axis(medians, i[:, None], axis=1)[:, 0]
    above = np.take_along_axis(medians, i[:, None] + 1, axis=1)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = np.where(below >= target, 0.0, np.clip((target - below) / (above - below), 0.0, 1.0))
    return x[i] + fraction * (x[i + 1] - x[i])


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    tail = (1 - _CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def noise_step(footprint_bytes, latency, sigmas: float = 5.0, floor: float = 0.002) -> float:
    """The smallest relative step that stands out of this sweep's own noise: ``sigmas`` times the scatter of
    neighbouring footprints' median log-latencies (the median absolute difference of successive medians,
    scaled to a standard deviation, so steps themselves barely move it), and at least ``floor``.  For a
    staircase whose levels differ by a few cycles (a TLB miss on top of an L2 hit), not the 5% of MIN_STEP."""
    sweep = _sweep(footprint_bytes, latency)
    if sweep.median.size < 3:
        return MIN_STEP
    sigma = 1.4826 * float(np.median(np.abs(np.diff(np.log(sweep.median))))) / np.sqrt(2)
    return float(max(floor, np.expm1(sigmas * sigma)))


def fit_staircase(footprint_bytes, latency, max_plateaus: int = 6, min_points: int = 3,
                  resamples: int = 200, seed: int = 0, min_step: float = MIN_STEP) -> StaircaseFit:
    """Fit a staircase to pointer-chase samples (several per footprint allowed); see the module docstring.

    ``min_points`` is the fewest footprints a segment may have, so a bump over fewer footprints cannot become
    a level; ``resamples`` (>= 1) sets the bootstrap size, ``seed`` makes the CIs reproducible; ``min_step``
    is the smallest relative change that makes two levels (MIN_STEP, or ``noise_step`` of the sweep).
    """
    if max_plateaus < 1 or min_points < 1 or resamples < 1:
        raise ValueError("max_plateaus, min_points and resamples must be at least 1")
    if not 0 < min_step < 1:
        raise ValueError("min_step must be a fraction between 0 and 1")
    sweep = _sweep(footprint_bytes, latency)
    min_points = min(min_points, sweep.x.size)
    y = np.log(sweep.median)

    candidates = []
    for bounds in _segmentations(y, 2 * max_plateaus - 1, min_points):
        merged = _merged(sweep, bounds, min_points, min_step)
        levels = _levels(sweep, merged, min_points)
        flat = _flat(sweep, merged, levels, min_points, min_step)
        if flat.sum() <= max_plateaus:
            candidates.append((_bic(y, bounds), merged, levels, flat))
    bic, bounds, levels, flat = min(candidates, key=lambda candidate: candidate[0])

    rng = np.random.default_rng(seed)
    plateaus, interiors = [], []
    for s in np.flatnonzero(flat):
        first, stop = _interior(bounds, s, min_points)
        pool = sweep.samples(first, stop)
        boot = np.median(pool[rng.integers(0, pool.size, (resamples, pool.size))], axis=1)
        plateaus.append(Plateau(float(levels[s]), *_percentiles(boot), float(sweep.footprint[bounds[s]]),
                                float(sweep.footprint[bounds[s + 1] - 1]), bounds[s + 1] - bounds[s]))
        interiors.append((first, stop))

    knees, knee_ci = [], []
    for p in range(len(plateaus) - 1):
        target = float(np.sqrt(plateaus[p].latency * plateaus[p + 1].latency))
        window = range(interiors[p][1] - 1, interiors[p + 1][0] + 1)
        x = sweep.x[window.start:window.stop]
        knees.append(float(2 ** _crossing(x, sweep.median[window.start:window.stop], target)[0]))
        boot = np.column_stack([
            np.median(group[rng.integers(0, group.size, (resamples, group.size))], axis=1)
            for group in (sweep.samples(i, i + 1) for i in window)])
        lo, hi = _percentiles(_crossing(x, boot, target))
        knee_ci.append((2.0 ** lo, 2.0 ** hi))
    return StaircaseFit(plateaus, knees, knee_ci, float(bic))


def plateau_text(fit: StaircaseFit) -> str:
    """Each plateau's level and the footprints it spans, as a derived row's note gives them."""
    return "; ".join(f"{p.latency:.1f} cycles over {fmt_bytes(p.lo_bytes)}..{fmt_bytes(p.hi_bytes)}"
                     for p in fit.plateaus)
