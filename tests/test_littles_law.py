"""Little's-law fit: known latency and peak recovered from synthetic bandwidth-vs-concurrency curves."""
import numpy as np
import pytest

from analysis.littles_law import fit_littles_law, model


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
