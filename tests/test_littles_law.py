"""Little's-law fit: known latency and peak recovered from synthetic bandwidth-vs-concurrency curves."""
import numpy as np
import pytest

from gpuatlas.analysis.littles_law import fit_littles_law, model


@pytest.mark.parametrize("latency_s, peak", [(600e-9, 4.5e12), (300e-9, 2.0e12), (1e-6, 9e12)])
def test_fit_recovers_latency_peak_and_knee(latency_s, peak):
    rng = np.random.default_rng(1)
    bytes_per_load = 512.0  # one warp-wide 16-byte load
    concurrency = np.repeat(np.geomspace(100, 100_000, 25), 3)
    bandwidth = model(concurrency, bytes_per_load, latency_s, peak) * rng.lognormal(0, 0.02, concurrency.size)
    fit = fit_littles_law(concurrency, bandwidth, bytes_per_load)
    assert fit["latency_s"] == pytest.approx(latency_s, rel=0.05)
    assert fit["peak_bytes_per_s"] == pytest.approx(peak, rel=0.03)
    assert fit["bytes_in_flight"] == pytest.approx(latency_s * peak, rel=0.06)
    lo, hi = fit["knee_ci"]
    assert lo <= latency_s * peak / bytes_per_load <= hi


def test_the_lectures_worked_block_is_the_models_knee():
    # §7.4: 3,350 GB/s x 500 cycles at 1.8 GHz = 0.93 MB in flight = 7,270 loads of 128 B
    latency_s, peak = 500 / 1.8e9, 3.35e12
    concurrency = np.geomspace(500, 50_000, 40)
    fit = fit_littles_law(concurrency, model(concurrency, 128, latency_s, peak), 128, resamples=50)
    assert fit["bytes_in_flight"] == pytest.approx(0.93e6, rel=0.01)
    assert fit["knee_concurrency"] == pytest.approx(7270, rel=0.01)


def test_too_few_concurrencies_are_refused():
    with pytest.raises(ValueError):
        fit_littles_law([1, 1, 2], [1.0, 1.0, 2.0], 128)


def _least_squares_fit(c, bw, bytes_per_load):
    """The reference: scipy's least_squares(method="lm") on the model's log residuals, as the fit was written."""
    from scipy.optimize import least_squares

    def residuals(p):
        return np.log(model(c, bytes_per_load, np.exp(p[0]), np.exp(p[1]))) - np.log(bw)

    low = np.argmin(c)
    p = least_squares(residuals, [np.log(c[low] * bytes_per_load / bw[low]), np.log(bw.max())], method="lm").x
    return float(np.exp(p[0])), float(np.exp(p[1]))


def _resampled_problems(n: int):
    rng = np.random.default_rng(7)
    concurrency = np.repeat(np.geomspace(132, 132 * 64, 14), 4)
    bandwidth = model(concurrency, 128, 7e-7, 3.3e12) * rng.lognormal(0, 0.04, concurrency.size)
    for i in rng.integers(0, concurrency.size, (n, concurrency.size)):
        yield concurrency[i], bandwidth[i]


def test_the_direct_lmder_fit_gives_least_squares_numbers_bit_for_bit():
    from gpuatlas.analysis.littles_law import _fit, _lmder_is_least_squares

    assert _lmder_is_least_squares()  # the fast path is the one under test here
    for c, bw in _resampled_problems(60):
        assert _fit(c, bw, 128) == _least_squares_fit(c, bw, 128)


def test_the_bit_for_bit_comparison_sees_a_jacobian_one_ulp_away(monkeypatch):
    """Negative control: lmder fed the Jacobian one ulp away from the point gives other numbers, so the test
    above would catch a direct call that does not reproduce least_squares exactly."""
    from gpuatlas.analysis import littles_law

    original = littles_law._forward_jacobian

    def nudged(residuals, p):
        return original(residuals, np.nextafter(p, np.inf))

    monkeypatch.setattr(littles_law, "_forward_jacobian", nudged)
    assert any(littles_law._fit(c, bw, 128) != _least_squares_fit(c, bw, 128) for c, bw in _resampled_problems(20))


def test_where_the_direct_call_differs_least_squares_fits(monkeypatch):
    from gpuatlas.analysis import littles_law

    monkeypatch.setattr(littles_law, "_lmder_is_least_squares", lambda: False)
    monkeypatch.setattr(littles_law, "_lmder_fit", None)  # never called
    for c, bw in _resampled_problems(5):
        assert littles_law._fit(c, bw, 128) == _least_squares_fit(c, bw, 128)


def test_a_scipy_without_this_private_lmder_takes_least_squares(monkeypatch):
    """A scipy whose private lmder cannot be imported (or takes other arguments) fails the check, not the fit."""
    from gpuatlas.analysis import littles_law

    def missing(residuals, start):
        raise ImportError("cannot import name '_lmder' from 'scipy.optimize._minpack'")

    littles_law._lmder_is_least_squares.cache_clear()
    monkeypatch.setattr(littles_law, "_lmder_fit", missing)
    try:
        assert not littles_law._lmder_is_least_squares()
        for c, bw in _resampled_problems(3):
            assert littles_law._fit(c, bw, 128) == _least_squares_fit(c, bw, 128)
    finally:
        littles_law._lmder_is_least_squares.cache_clear()
