"""Energy per tensor-core FLOP from NVML's power readings over a back-to-back wgmma run, checked on synthetic
traces whose energy per FLOP is known, and on the committed run."""
from pathlib import Path

import numpy as np
import pytest

from gpuatlas.analysis.energy import energy_per_flop, energy_rows, updates

COMMITTED = Path(__file__).resolve().parents[1] / "reports" / "h200"


def synthetic(power_w=690.0, rate=8e14, idle_w=120.0, seconds=1.5, poll=0.01, refresh=0.1, hold=0.1, seed=0):
    """A back-to-back run: stretches of 50 ms at ``rate`` (1% noise), and a power reading every ``poll`` s that
    NVML refreshes every ``refresh`` s: the value read before the launches, ``idle_w``, held for ``hold`` s,
    later ones ``power_w`` with 1% noise.  Energy per FLOP of the steady part: power_w / rate."""
    rng = np.random.default_rng(seed)
    ends = np.arange(0.05, seconds + 1e-9, 0.05)
    rates = rate * (1 + 0.01 * rng.standard_normal(ends.size))
    t = np.arange(poll / 2, seconds, poll)
    refreshes = np.maximum(0, np.floor((t - hold) / refresh).astype(int) + 1)
    levels = power_w * (1 + 0.01 * rng.standard_normal(refreshes.max() + 1))
    levels[0] = idle_w
    return ends, rates, t, levels[refreshes]


def test_updates_number_the_runs_of_one_reading():
    assert updates(np.array([5.0, 5, 7, 7, 7, 5])).tolist() == [0, 0, 1, 1, 1, 2]


@pytest.mark.parametrize("power_w, rate", [(690.0, 8e14), (400.0, 1.6e15), (300.0, 5e13)])
def test_a_known_energy_per_flop_is_recovered(power_w, rate):
    fit = energy_per_flop(*synthetic(power_w, rate))
    truth = power_w / rate
    assert fit["j_per_flop"] == pytest.approx(truth, rel=0.01)
    assert fit["ci"][0] < fit["j_per_flop"] < fit["ci"][1] and fit["ci"][1] - fit["ci"][0] < 0.05 * truth
    assert fit["updates"] < fit["readings"]  # readings come in runs of one NVML value


def test_the_interval_covers_the_truth_about_as_often_as_it_says():
    truth = 690.0 / 8e14
    fits = [energy_per_flop(*synthetic(seed=seed), resamples=300) for seed in range(40)]
    covered = np.mean([f["ci"][0] <= truth <= f["ci"][1] for f in fits])
    assert covered >= 0.8
    # negative control: they are not so wide as to cover anything: a truth 3% off is seldom inside
    assert np.mean([f["ci"][0] <= 1.03 * truth <= f["ci"][1] for f in fits]) < 0.2


def test_the_reading_held_from_before_the_launches_stays_out():
    ends, rates, t, power = synthetic(idle_w=100.0, hold=0.7)  # held past the steady part's start
    fit = energy_per_flop(ends, rates, t, power)
    assert fit["j_per_flop"] == pytest.approx(690.0 / 8e14, rel=0.01)
    # negative control: the window's readings with the held value in miss by far
    window = (t > ends[ends < ends.max() / 3].max()) & (t <= ends.max())
    assert power[window].mean() / np.mean(rates) < 0.9 * 690.0 / 8e14


def test_a_run_too_short_or_too_few_nvml_values_gives_nothing():
    assert energy_per_flop(*synthetic(seconds=0.3)) is None  # a quick profile's run
    assert energy_per_flop(*synthetic(refresh=0.5)) is None  # two or three NVML values in the window
    assert energy_per_flop(*synthetic()) is not None


def test_the_harmonic_mean_rate_is_total_flop_over_total_time():
    ends = np.array([0.5, 1.0, 1.5, 2.0])
    rates = np.array([1e14, 1e14, 2e14, 4e14])  # equal FLOP per stretch: 1 / mean(1 / rate)
    _, _, t, power = synthetic(seconds=2.0)
    fit = energy_per_flop(ends, rates, t, power, steady_from=0.0)
    assert fit["rate"] == pytest.approx(4 / (2 / 1e14 + 1 / 2e14 + 1 / 4e14))
    assert fit["j_per_flop"] == pytest.approx(fit["power_w"] * np.mean(1 / rates))


def test_no_readings_in_the_window_gives_nothing():
    ends, rates, t, power = synthetic()
    assert energy_per_flop(ends, rates, t + 10.0, power) is None


def test_the_committed_run_gives_energy_per_flop_for_each_tensor_dtype_with_its_evidence():
    from gpuatlas.analysis.results import load_run

    meta, measurements = load_run(COMMITTED)
    rows = {r["quantity"]: r for r in energy_rows(measurements, meta["device"])}
    assert set(rows) == {f"energy.{d}.pj_per_flop" for d in ("bf16", "fp16", "tf32", "fp8")}
    for row in rows.values():
        assert row["ci_low"] <= row["value"] <= row["ci_high"] and row["unit"] == "pJ/FLOP"
        for evidence in ("board power", "NVML SM clock", "in-kernel clock", "idle not subtracted", "power cap"):
            assert evidence in row["note"], (row["quantity"], evidence)
    # fp8 does twice the work per clock of bf16 at about the same board power: about half the energy per FLOP
    assert rows["energy.fp8.pj_per_flop"]["value"] < 0.7 * rows["energy.bf16.pj_per_flop"]["value"]
    # negative control: without the NVML trace there is no energy figure
    no_trace = measurements[~measurements["metric"].astype(str).str.startswith("trace_")]
    assert energy_rows(no_trace, meta["device"]) == []


def test_energy_is_a_declared_quantity():
    from gpuatlas.analysis.quantities import QUANTITIES

    from gpuatlas.analysis.energy import FAMILY

    assert set(FAMILY.quantities) == {f"energy.{d}.pj_per_flop" for d in ("bf16", "fp16", "tf32", "fp8")}
    assert set(FAMILY.quantities) <= {q for q in QUANTITIES if q.startswith("energy.")}
