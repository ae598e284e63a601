"""Staircase fit of pointer-chase latency: synthetic sweeps with known answers, then published curves."""
from pathlib import Path

import numpy as np
import pytest

from gpuatlas.analysis.plateaus import fit_staircase

KiB, MiB = 1024, 1024**2
PER_OCTAVE = 8
LEVELS = [33.0, 270.0, 480.0, 650.0]
KNEES = [200 * KiB, 28 * MiB, 58 * MiB]
REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"


def footprints(lo=KiB, hi=256 * MiB, per_octave=PER_OCTAVE):
    return lo * 2.0 ** (np.arange(int(round(np.log2(hi / lo) * per_octave)) + 1) / per_octave)


def staircase(fp, levels=LEVELS, knees=KNEES):
    """Exact step: a footprint up to a capacity is served at that level."""
    return np.asarray(levels)[np.searchsorted(knees, fp)]


def samples(fp, curve, seed, noise=0.01, per_footprint=7):
    rng = np.random.default_rng(seed)
    footprint = np.repeat(fp, per_footprint)
    return footprint, np.repeat(curve, per_footprint) * (1 + noise * rng.standard_normal(footprint.size))


def assert_recovers(fit, levels, knees, knee_tolerance_octaves=1 / PER_OCTAVE):
    found = [p.latency for p in fit.plateaus]
    assert len(found) == len(levels), found
    np.testing.assert_allclose(found, levels, rtol=0.02)
    assert len(fit.knees_bytes) == len(knees)
    assert np.all(np.abs(np.log2(np.asarray(fit.knees_bytes) / knees)) <= knee_tolerance_octaves), \
        [k / KiB for k in fit.knees_bytes]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_four_level_staircase(seed):
    fp = footprints()
    assert_recovers(fit_staircase(*samples(fp, staircase(fp), seed)), LEVELS, KNEES)


# A throttled round: every sample of 5 consecutive footprints 1.3x slow, inside a level with more than
# min_points clean footprints on either side (next to a knee it would look exactly like a short level).
# Outliers: 12 random samples 3x slow, plus 2 of the 7 samples of the footprint just below each knee
# (a per-footprint mean there would move the knee).
THROTTLED = {"l1": 8, "l2": 2048, "l2, 4 footprints before its knee": 13777, "dram": 100 * 1024}  # first KiB


@pytest.mark.parametrize("first_kib", THROTTLED.values(), ids=THROTTLED.keys())
def test_outliers_and_throttled_round_do_not_move_the_fit(first_kib):
    fp = footprints()
    footprint, latency = samples(fp, staircase(fp), seed=3)
    rng = np.random.default_rng(4)
    outliers = rng.choice(fp.size, 12, replace=False) * 7 + rng.integers(0, 7, 12)
    below_knees = (np.searchsorted(fp, KNEES) - 1) * 7
    latency[np.concatenate([outliers, below_knees, below_knees + 1])] *= 3
    first = np.searchsorted(fp, first_kib * KiB)
    latency[np.isin(footprint, fp[first:first + 5])] *= 1.3
    assert_recovers(fit_staircase(footprint, latency), LEVELS, KNEES)


def ramped(fp, levels, knees, width=0.5):
    """Levels joined by ramps linear in log2(footprint), `width` octaves wide and centred on each knee; and
    where each ramp crosses the geometric mean of its two levels."""
    x, levels, centres = np.log2(fp), np.asarray(levels), np.log2(knees)
    curve = np.full(fp.size, levels[0])
    for low, high, centre in zip(levels[:-1], levels[1:], centres):
        rise = np.clip((x - centre) / width + 0.5, 0, 1)
        curve = np.where(x > centre - width / 2, low + (high - low) * rise, curve)
    mean = np.sqrt(levels[:-1] * levels[1:])
    return curve, 2 ** (centres + width * ((mean - levels[:-1]) / (levels[1:] - levels[:-1]) - 0.5))


def test_ramps_between_levels_are_not_levels():
    """Ramps half an octave (4 footprints) wide: still four plateaus, each knee at the ramp's crossing."""
    fp = footprints()
    curve, crossings = ramped(fp, LEVELS, KNEES)
    # Every footprint of a linear ramp is on it, so interpolation finds the crossing to noise level.
    fit = fit_staircase(*samples(fp, curve, seed=5))
    assert_recovers(fit, LEVELS, crossings, knee_tolerance_octaves=0.04)


def test_max_plateaus_counts_levels_not_ramps():
    """Five levels and four ramps with max_plateaus=5: the ramps must not use up the levels' budget."""
    fp = footprints(hi=2048 * MiB)
    levels, knees = LEVELS + [750.0], KNEES + [256 * MiB]
    curve, crossings = ramped(fp, levels, knees)
    fit = fit_staircase(*samples(fp, curve, seed=14), max_plateaus=5)
    assert_recovers(fit, levels, crossings, knee_tolerance_octaves=0.04)


def test_two_levels():
    fp = footprints()
    assert_recovers(fit_staircase(*samples(fp, staircase(fp, [40.0, 300.0], [1 * MiB]), seed=6)),
                    [40.0, 300.0], [1 * MiB])


def test_flat_curve_is_one_plateau():
    fp = footprints()
    fit = fit_staircase(*samples(fp, np.full(fp.size, 100.0), seed=7))
    assert_recovers(fit, [100.0], [])
    assert fit.plateaus[0].lo_bytes == fp[0] and fit.plateaus[0].hi_bytes == fp[-1]
    assert fit.plateaus[0].n_points == fp.size


@pytest.mark.parametrize("step, levels", [(1.02, 1), (1.12, 2)])
def test_small_steps_merge_and_real_ones_stay(step, levels):
    fp = footprints()
    fit = fit_staircase(*samples(fp, staircase(fp, [100.0, 100.0 * step], [1 * MiB]), seed=8))
    assert len(fit.plateaus) == levels


@pytest.mark.parametrize("where", ["middle", "end"])
def test_bump_shorter_than_min_points_is_not_a_level(where):
    fp = footprints()
    curve = np.full(fp.size, 100.0)
    bump = slice(70, 72) if where == "middle" else slice(fp.size - 2, fp.size)
    curve[bump] *= 1.5
    fit = fit_staircase(*samples(fp, curve, seed=9), min_points=3)
    assert [round(p.latency) for p in fit.plateaus] == [100]


def test_confidence_intervals_and_ranges_are_consistent():
    fp = footprints()
    fit = fit_staircase(*samples(fp, staircase(fp), seed=10))
    for p in fit.plateaus:
        assert p.ci_low < p.ci_high and p.ci_low <= p.latency <= p.ci_high
        assert p.ci_high - p.ci_low < 0.01 * p.latency  # ~50+ footprints x 7 samples at 1% noise
        assert p.lo_bytes <= p.hi_bytes and p.n_points >= 3
    for low, high, knee, (ci_low, ci_high) in zip(fit.plateaus, fit.plateaus[1:], fit.knees_bytes,
                                                   fit.knee_ci):
        assert low.hi_bytes < high.lo_bytes
        assert low.hi_bytes / 2 ** (1 / PER_OCTAVE) <= ci_low <= knee <= ci_high and ci_low < ci_high
        assert ci_high <= high.lo_bytes * 2 ** (1 / PER_OCTAVE)
    assert np.isfinite(fit.bic)


def test_sample_order_does_not_matter():
    fp = footprints()
    footprint, latency = samples(fp, staircase(fp), seed=11)
    order = np.random.default_rng(12).permutation(footprint.size)
    a, b = fit_staircase(footprint, latency), fit_staircase(footprint[order], latency[order])
    assert [p.latency for p in a.plateaus] == [p.latency for p in b.plateaus]
    assert a.knees_bytes == b.knees_bytes


def test_fit_of_a_dense_sweep_is_one_dynamic_programme(monkeypatch):
    """A dense sweep (301 footprints) costs one O(k n^2) segmentation and one candidate per segment count,
    never a search over boundary combinations: counted, not timed, so a busy machine cannot fail it."""
    import gpuatlas.analysis.plateaus as plateaus

    calls = {"segmentations": 0, "candidates": 0}
    segmentations, merged = plateaus._segmentations, plateaus._merged

    def count(name, func):
        def counted(*args, **kwargs):
            calls[name] += 1
            return func(*args, **kwargs)
        return counted

    monkeypatch.setattr(plateaus, "_segmentations", count("segmentations", segmentations))
    monkeypatch.setattr(plateaus, "_merged", count("candidates", merged))
    fp = footprints(per_octave=300 / 18)
    footprint, latency = samples(fp, staircase(fp), seed=13)
    assert fp.size == 301
    fit = fit_staircase(footprint, latency, max_plateaus=6)
    assert len(fit.plateaus) == 4
    assert calls == {"segmentations": 1, "candidates": 2 * 6 - 1}


# Published single-warp random pointer chases (one sample per footprint; see shared/reference/README.md).
# Physics asserted, per GPU: unified L1/SMEM per SM (the L1 data capacity cannot exceed it) and L2 size;
# the L2 is two partitions, so a chase first sees the near half (~half the L2), then a far-L2 plateau,
# then DRAM once the chain outgrows the whole L2. A random chase's ramp puts the geometric-mean crossing
# somewhat past each capacity. Footprints are read as KiB (kB vs KiB is 2.4%, far inside every bound).
CURVES = {
    "gpu-benches/gpu-latency__a100_80.txt": (192, 40),
    "gpu-benches/gpu-latency__a100_40.txt": (192, 40),
    "gpu-benches/gpu-latency__h100_pcie.txt": (256, 50),
    "hopper-benchmark/random_latency__a100_pcie.txt": (192, 40),
    "hopper-benchmark/random_latency__h800_pcie.txt": (256, 50),
}


def load_chase(name):
    """Rows `iters clock_MHz footprint_kB total_ms cycles_per_access` after a `clock: ...` line."""
    table = np.loadtxt(REFERENCE / name, skiprows=1, ndmin=2)
    return table[:, 2] * KiB, table[:, 4]


@pytest.mark.skipif(not REFERENCE.is_dir(), reason=f"published reference curves not found at {REFERENCE}")
@pytest.mark.parametrize("name", sorted(CURVES))
def test_published_curves(name):
    l1_kib, l2_mib = CURVES[name]
    footprint, cycles = load_chase(name)
    fit = fit_staircase(footprint, cycles)
    levels = [p.latency for p in fit.plateaus]
    assert len(levels) >= 4, levels
    l1, near, far, dram = fit.plateaus[0], fit.plateaus[1], fit.plateaus[2], fit.plateaus[-1]

    assert 25 <= l1.latency <= 45
    np.testing.assert_allclose(l1.latency, np.median(cycles[footprint <= 64 * KiB]), rtol=0.02)
    assert 64 * KiB <= fit.knees_bytes[0] <= l1_kib * KiB

    assert 190 <= near.latency <= 300
    inside_near = (footprint >= 1 * MiB) & (footprint <= 8 * MiB)
    np.testing.assert_allclose(near.latency, np.median(cycles[inside_near]), rtol=0.02)
    assert 0.35 * l2_mib * MiB <= fit.knees_bytes[1] <= 0.75 * l2_mib * MiB

    # Far L2: clear on H100 PCIe (~475) and H800 (~490); on the A100s too (~405-427), though the
    # gpu-benches A100 files have only 3 flat footprints there (32-39 MB) between two ramps.
    assert 1.3 * near.latency < far.latency < dram.latency / 1.1
    assert 0.8 * l2_mib * MiB <= fit.knees_bytes[2] <= 1.6 * l2_mib * MiB

    # DRAM runs to the largest chain. Its latency wobbles with the footprint (A100 PCIe 518-566 past
    # 45 MB; H800 ~600 at 53-117 MB, ~650 beyond), so H800 may get a second DRAM plateau: every plateau
    # past far L2 must be DRAM-like, and the last one near the latency of the largest chain.
    assert dram.hi_bytes == footprint.max()
    assert all(p.latency > max(400, 1.1 * far.latency) for p in fit.plateaus[3:])
    np.testing.assert_allclose(dram.latency, cycles[np.argmax(footprint)], rtol=0.10)
