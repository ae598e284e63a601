"""analysis/capacity.py: a cache's capacity from an all-SM bandwidth sweep, on synthetic curves with known
answers."""
import numpy as np
import pytest

from gpuatlas.analysis.capacity import bandwidth_model, fit_capacity

MiB = 1 << 20


def sweep(capacity, cache=9e12, miss=4.5e12, top=240 * MiB, repeats=5, noise=0.01, seed=0, curve=None):
    rng = np.random.default_rng(seed)
    sizes = np.unique(np.geomspace(4 * MiB, top, 40).astype(int))
    clean = (curve or (lambda f: bandwidth_model(f, capacity, cache, miss)))(sizes)
    footprint = np.repeat(sizes, repeats)
    return footprint, np.repeat(clean, repeats) * (1 + noise * rng.standard_normal(footprint.size))


@pytest.mark.parametrize("capacity, cache, miss", [(60 * MiB, 9e12, 4.5e12), (40 * MiB, 5.4e12, 1.7e12),
                                                   (24 * MiB, 3e12, 2e12)])
def test_recovers_a_known_capacity_and_both_bandwidths(capacity, cache, miss):
    footprint, bandwidth = sweep(capacity, cache, miss)
    fit = fit_capacity(footprint, bandwidth)
    assert fit.capacity_bytes == pytest.approx(capacity, rel=0.05)
    assert fit.ci[0] <= fit.capacity_bytes <= fit.ci[1]
    assert fit.ci[0] <= capacity <= fit.ci[1] or fit.capacity_bytes == pytest.approx(capacity, rel=0.02)
    assert fit.cache_bytes_per_s == pytest.approx(cache, rel=0.03)
    assert fit.miss_bytes_per_s == pytest.approx(miss, rel=0.05)


def test_a_throttled_repeat_does_not_move_the_capacity():
    footprint, bandwidth = sweep(60 * MiB)
    bandwidth[7] *= 0.4  # one repeat at a throttled clock
    assert fit_capacity(footprint, bandwidth).capacity_bytes == pytest.approx(60 * MiB, rel=0.05)


def test_an_lru_cliff_is_found_near_the_cliff():
    """An LRU cache keeps nothing once the footprint exceeds it: a cliff, not the model's curve.  The fit
    still puts C near the cliff, and its CI widens to show the misfit."""
    cliff = lambda f: np.where(f <= 50 * MiB, 9e12, 4.5e12)  # noqa: E731
    fit = fit_capacity(*sweep(None, curve=cliff))
    assert 0.7 * 50 * MiB < fit.capacity_bytes < 1.3 * 50 * MiB
    noisy_fit = fit_capacity(*sweep(50 * MiB))
    assert fit.ci[1] - fit.ci[0] > noisy_fit.ci[1] - noisy_fit.ci[0]


def test_a_sweep_that_never_leaves_the_cache_has_no_capacity():
    footprint, bandwidth = sweep(1 << 40)
    assert fit_capacity(footprint, bandwidth) is None
    footprint, bandwidth = sweep(60 * MiB, top=64 * MiB)  # stops just past it: no clear drop
    assert fit_capacity(footprint, bandwidth) is None


def test_footprints_below_the_floor_are_left_out():
    footprint, bandwidth = sweep(60 * MiB)
    small = footprint < 8 * MiB
    bandwidth[small] *= 1.5  # a faster level serves the smallest footprints
    assert fit_capacity(footprint, bandwidth, min_footprint_bytes=8 * MiB).capacity_bytes == pytest.approx(
        60 * MiB, rel=0.05)


@pytest.mark.parametrize("curve", [None, lambda f: np.where(f <= 50 * MiB, 9e12, 4.5e12)],
                         ids=["model", "lru-cliff"])
def test_one_sample_per_footprint_the_residuals_carry_the_ci(curve):
    """A published curve has one sample per footprint: a bootstrap over repeats has nothing to resample (every
    resample is the sweep itself), so the profile interval (residuals within an F-test of the best) must
    give the CI its width."""
    footprint, bandwidth = sweep(50 * MiB, repeats=1, curve=curve)
    assert np.unique(footprint).size == footprint.size
    fit = fit_capacity(footprint, bandwidth)
    lo, hi = fit.ci
    assert lo < fit.capacity_bytes < hi
    assert hi - lo > 0.005 * fit.capacity_bytes  # non-degenerate: 1% noise or a misfit leaves a spread
    assert fit_capacity(footprint, bandwidth, resamples=0) == fit  # no bootstrap to add
    if curve is None:
        assert lo <= 50 * MiB <= hi


def test_the_fit_is_global_whatever_a_local_optimiser_would_start_from():
    """The min() kink gives least squares several local minima: on the committed H200 sweep a general
    optimiser's answer moves with its starting point.  The fit must be at least as good (relative residual
    in seconds per byte, what it minimises) as every start's answer, and not depend on the samples' order."""
    from scipy.optimize import curve_fit, least_squares

    from gpuatlas.analysis.results import RunDir
    from gpuatlas.analysis.stats import usable
    from conftest import COMMITTED_RUN

    run = RunDir(COMMITTED_RUN)
    m = usable(run.read_measurements().query("probe == 'bw.l2' and metric == 'bandwidth'"))
    m = m[m["footprint_bytes"] >= run.read_meta()["device"]["l2_bytes"] / 8]
    footprint, bandwidth = m["footprint_bytes"].to_numpy(float), m["value"].to_numpy(float)
    sizes = np.unique(footprint)
    medians = np.array([np.median(bandwidth[footprint == f]) for f in sizes])

    def relative_rss(c, cache, miss):
        return float(np.sum((medians / bandwidth_model(sizes, c, cache, miss) - 1) ** 2))

    fit = fit_capacity(footprint, bandwidth)
    best = relative_rss(fit.capacity_bytes, fit.cache_bytes_per_s, fit.miss_bytes_per_s)
    # an independent oracle: for each C of a dense scan, the two rates by a general optimiser
    oracle = min(least_squares(lambda r, c=c: medians / bandwidth_model(sizes, c, *np.exp(r)) - 1,
                               np.log([medians.max(), medians.min()])).cost * 2
                 for c in np.geomspace(sizes[0], sizes[-1], 400))
    assert best <= oracle * (1 + 1e-3), (best, oracle)
    scale_f, scale_b = np.median(sizes), medians.max()
    local = []  # what the old fit did: one curve_fit from a starting point
    for start in (0.3, 1.0, 3.0):
        params, _ = curve_fit(lambda f, c, b2, bm: bandwidth_model(f, c, b2, bm), sizes / scale_f,
                              medians / scale_b, p0=(start, 1.0, medians.min() / scale_b),
                              bounds=([1e-3] * 3, [1e3, 10.0, 10.0]))
        local.append(relative_rss(params[0] * scale_f, params[1] * scale_b, params[2] * scale_b))
    assert max(local) > oracle * 1.01, "this sweep has local minima: the test needs them to mean anything"
    order = np.random.default_rng(1).permutation(footprint.size)
    assert fit_capacity(footprint[order], bandwidth[order]).capacity_bytes == fit.capacity_bytes


def test_resident_bytes_are_one_constant_where_the_miss_model_holds():
    """Bandwidth made by the model (an L2 of C bytes keeping C / F of a footprint F) reads back C at every
    footprint; a cache that keeps nothing past its size (LRU under a cyclic re-read) reads back 0 bytes, far
    from any C: the drift the note reports."""
    import pandas as pd

    from gpuatlas.analysis.coalescing import resident_bytes

    hit, miss, capacity = 9e12, 4.5e12, 50 * 2**20
    footprints = np.array([64, 96, 128, 192, 256]) * 2**20
    model = pd.Series(1 / ((capacity / footprints) / hit + (1 - capacity / footprints) / miss), index=footprints)
    assert np.allclose(list(resident_bytes(model, hit, miss).values()), capacity)
    lru = pd.Series(miss, index=footprints)
    assert np.allclose(list(resident_bytes(lru, hit, miss).values()), 0.0)
