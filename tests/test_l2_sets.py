"""geometry.l2_sets: the half-hit footprint, the balls-into-bins fit of the ways and sets, the duplication note,
the kernel's timed loop and the round trip through derive, against a simulated two-partition hashed L2
(tests/fakes/l2_sets.py) whose capacity, ways and sets are known."""
import re

import numpy as np
import pandas as pd
import pytest

import fakes
import inspect
from gpuatlas.analysis.l2_sets import balls_in_bins, even_fill_capacity, half_crossing, l2_set_rows
from gpuatlas.probes.families.l2_sets import HIST_BINS, LINE_BYTES, LENGTHS, SPAN, chain_lengths, hit_split

PARTITION = fakes.DEVICE["l2_bytes"] // 2


def measured(ways=fakes.L2_SET_WAYS, configs=(("one", "stride"), ("one", "random"), ("every", "stride")),
             partition_map=True) -> pd.DataFrame:
    rows = [{"probe": "geometry.l2_sets", "walkers": w, "placement": p, "metric": s.metric, "value": s.value,
             "repeat": s.repeat, "flag": s.flag} for w, p in configs for s in fakes._l2_sets(None, w, p, ways=ways)]
    if partition_map:
        rows += [{"probe": "geometry.l2_partition", "stride_bytes": 128, "metric": s.metric, "value": s.value,
                  "repeat": s.repeat, "flag": ""} for s in fakes._l2_partition(None, 128)]
    return pd.DataFrame(rows)


def derived(m: pd.DataFrame) -> dict:
    return {r["quantity"]: r for r in l2_set_rows(m, fakes.DEVICE)}


#: Adjacent chain lengths of one/stride differ by this factor: an interpolated crossing is within it.
GRID_STEP = (SPAN[("one", "stride")][1] / SPAN[("one", "stride")][0]) ** (1 / (LENGTHS - 1))


def test_the_half_crossing_is_interpolated_in_log_footprint():
    assert half_crossing(np.array([1.0, 4.0]), np.array([1.0, 0.0])) == pytest.approx(2.0)
    assert half_crossing(np.array([4.0, 1.0, 16.0]), np.array([0.5, 1.0, 0.0])) == pytest.approx(4.0)
    assert half_crossing(np.array([1.0, 2.0, 4.0]), np.array([1.0, 0.9, 0.6])) is None  # negative: no crossing


def test_the_even_fill_correction_recovers_the_capacity_from_the_half_hit_footprint():
    """Contiguous lines over S sets of W ways, every set holding floor or ceil of N / S, a set over W missing
    all its lines: the half-hit footprint sits 1/(2W + 1) above the capacity, and the correction removes it."""
    sets, ways = 1000, 16
    lines = np.arange(sets * ways - 500, sets * (ways + 1) + 1)
    over = np.clip(lines - sets * ways, 0, sets)  # sets holding W + 1 lines
    hits = 1 - over * (ways + 1) / lines
    half = half_crossing(lines.astype(float), hits)
    assert even_fill_capacity(half, ways) == pytest.approx(sets * ways, rel=1e-3)
    # negative control: the uncorrected half-hit footprint is not the capacity
    assert half / (sets * ways) - 1 == pytest.approx(1 / (2 * ways + 1), rel=1e-2)


def test_one_partition_is_where_one_sms_contiguous_chain_stops_hitting():
    rows = derived(measured(configs=(("one", "stride"),)))
    value = rows["l2.partition_bytes"]["value"]
    assert abs(np.log(value / PARTITION)) < np.log(GRID_STEP), (value, PARTITION)
    assert "l2.ways" not in rows and "l2.capacity_every_sm_bytes" not in rows


def test_the_ways_and_sets_of_the_hashed_cache_are_recovered():
    rows = derived(measured())
    ways = rows["l2.ways"]
    assert ways["ci_low"] <= fakes.L2_SET_WAYS <= ways["ci_high"]
    sets = PARTITION / (fakes.L2_SET_WAYS * LINE_BYTES)
    assert rows["l2.sets"]["ci_low"] * 0.97 <= sets <= rows["l2.sets"]["ci_high"] * 1.03
    # each end of the intervals is a fit of its own: the most ways with the fewest sets hold the partition
    for w, s in ((ways["ci_low"], rows["l2.sets"]["ci_high"]), (ways["ci_high"], rows["l2.sets"]["ci_low"])):
        assert w * s * LINE_BYTES == pytest.approx(PARTITION, rel=0.06)


def test_neighbouring_associativities_that_fit_alike_are_undecided_not_picked():
    """W and the next W of the grid fit a hashed cache's hit curve about equally (the curve's shape moves
    little between 16 and 20 ways): the row names both, and no value, on every such cache."""
    for true_ways in (8, 16, 24):
        rows = derived(measured(ways=true_ways))
        ways, sets = rows["l2.ways"], rows["l2.sets"]
        assert ways["ci_low"] <= true_ways <= ways["ci_high"] and ways["ci_low"] < ways["ci_high"]
        assert np.isnan(ways["value"]) and ways["note"].startswith("undecided: between ")
        assert np.isnan(sets["value"]) and sets["note"].startswith("undecided: between ")


def test_an_eight_way_cache_does_not_read_sixteen():
    rows = derived(measured(ways=8))
    assert rows["l2.ways"]["ci_low"] <= 8 <= rows["l2.ways"]["ci_high"] < 16


def _replace_random(m: pd.DataFrame, hit) -> pd.DataFrame:
    """``m`` with the random-placement curve's hit fractions replaced by ``hit(lines)``."""
    m = m.copy()
    random = m[(m["placement"] == "random") & (m["metric"] == "lines")].set_index("repeat")["value"]
    at = (m["placement"] == "random") & (m["metric"] == "hit_fraction")
    m.loc[at, "value"] = [hit(random[r]) for r in m.loc[at, "repeat"]]
    return m


def test_a_curve_no_ways_explain_emits_no_ways():
    m = measured()
    lines = m.loc[(m["placement"] == "random") & (m["metric"] == "lines"), "value"]
    lo, hi = np.log(lines.min()), np.log(lines.max())
    ramp = _replace_random(m, lambda n: 1 - (np.log(n) - lo) / (hi - lo))  # hits fall linearly in log N
    assert "l2.ways" not in derived(ramp) and "l2.sets" not in derived(ramp)
    step = _replace_random(m, lambda n: float(n * LINE_BYTES <= PARTITION))  # as if fully associative
    assert "l2.ways" not in derived(step)
    assert "l2.ways" in derived(m)  # control: the same run with its own curve does emit


def test_a_ways_fit_whose_capacity_disagrees_with_the_partition_emits_nothing():
    m = measured()
    sets = PARTITION / (fakes.L2_SET_WAYS * LINE_BYTES)
    shrunk = _replace_random(m, lambda n: float(balls_in_bins(n, fakes.L2_SET_WAYS, 0.8 * sets * fakes.L2_SET_WAYS)))
    assert "l2.ways" not in derived(shrunk)
    same = _replace_random(m, lambda n: float(balls_in_bins(n, fakes.L2_SET_WAYS, sets * fakes.L2_SET_WAYS)))
    assert derived(same)["l2.ways"]["value"] == fakes.L2_SET_WAYS


def test_every_sm_capacity_is_noted_against_the_duplication_account():
    rows = derived(measured())
    row = rows["l2.capacity_every_sm_bytes"]
    far = np.mean(fakes.far_homed(np.arange(4096) * 128))
    predicted = 2 * rows["l2.partition_bytes"]["value"] / (1 + far)
    assert row["value"] == pytest.approx(predicted, rel=0.08)
    assert row["value"] < 0.8 * fakes.DEVICE["l2_bytes"]  # duplication: well short of the driver's L2
    numbers = re.findall(r"1 \+ l2.far_home_fraction\) = 2 x [\d.]+ MiB / ([\d.]+) = ([\d.]+) MiB", row["note"])
    assert numbers and float(numbers[0][0]) == pytest.approx(1 + far, abs=0.01)
    assert float(numbers[0][1]) == pytest.approx(predicted / 2**20, rel=0.01)
    assert "of the driver's L2" in row["note"]
    alone = derived(measured(partition_map=False))["l2.capacity_every_sm_bytes"]
    assert "far_home_fraction" not in alone["note"]  # negative control: no partition map, no account


def test_hits_are_split_at_the_valley_after_the_hit_cluster():
    short = np.zeros(HIST_BINS)
    short[20:24] = [10, 500, 300, 100]
    pooled = short * 10
    pooled[26:28] = 3
    pooled[30:45] = 400
    assert hit_split(pooled, short) == 24  # first empty bin after the hits
    pooled[24:30] = [80, 70, 60, 70, 80, 90]  # negative control: the valley moves with the pooled counts
    assert hit_split(pooled, short) == 26


def test_the_lengths_bracket_the_capacity_on_every_recorded_device():
    import json
    from pathlib import Path

    devices = json.loads((Path(__file__).parent / "fixtures/devices.json").read_text())
    for name, device in {**{k: v for k, v in devices.items() if not k.startswith("_")}, "sim": fakes.DEVICE}.items():
        for (walkers, placement) in SPAN:
            lengths = chain_lengths(device, walkers, placement)
            count = 1 if walkers == "one" else device["sm_count"]
            assert len(lengths) >= LENGTHS - 1 and all(n % count == 0 for n in lengths), name
            assert lengths[0] * LINE_BYTES < device["l2_bytes"] / 2 <= lengths[-1] * LINE_BYTES, name


def assert_timed_loop(code: str, op: str) -> None:
    """The walk's loop: an ``op`` load whose address is the last load's value (the register it loads into), then
    an STS of that register and the clock read (one interval per access), and a branch back to the load."""
    lines = [re.sub(r"\s+", " ", l.split(";")[0]).strip() for l in code.splitlines()
             if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    at = [i for i, l in enumerate(lines) if re.search(rf"{re.escape(op)} (R\d+), desc\[\w+\]\[\1\.64\]", l)]
    assert len(at) == 1, f"one {op} carrying the chain, found {len(at)}"
    load = lines[at[0]]
    dest = re.search(r"(R\d+), desc", load).group(1)
    assert re.search(rf"STS \[\w+\], {dest}$", lines[at[0] + 1]) and "SR_CLOCKLO" in lines[at[0] + 2]
    address = int(load[2:6], 16)
    back = [l for l in lines[at[0]:] if re.search(r"BRA 0x([0-9a-f]+)$", l)
            and int(l.rsplit("0x", 1)[1], 16) <= address]
    assert back, "no branch back to the load"


def test_the_walk_times_each_l2_only_load_alone():
    """Negative control: geometry.cu's L1 recorder has the same shape with L1-caching loads."""
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    assert_timed_loop(sass(compile_cubin("l2_sets.cu")[0])["l2_sets_walk"], "LDG.E.64.STRONG.GPU")
    with pytest.raises(AssertionError):
        assert_timed_loop(sass(compile_cubin("geometry.cu")[0])["l1_record"], "LDG.E.64.STRONG.GPU")


def test_a_simulated_run_derives_the_l2_rows(tmp_path):
    from tests_support import small_simulated_run

    from gpuatlas.analysis.derive import derived_for
    from gpuatlas.analysis.results import RunDir

    path = small_simulated_run(tmp_path, ("geometry.l2_sets", "geometry.l2_partition", "chase.latency"))
    meta, measurements, table = derived_for(RunDir(path))
    rows = table.set_index("quantity")
    assert rows.loc["l2.partition_bytes", "probe"] == "geometry.l2_sets"  # replaces the chase's knee
    assert (table["quantity"] == "l2.partition_bytes").sum() == 1
    assert "l2.capacity_every_sm_bytes" in rows.index


def test_the_figure_draws_the_four_curves_the_fit_and_the_knees():
    from gpuatlas.analysis import geometry_figures

    m = measured(configs=tuple(fakes_configs()))
    table = pd.DataFrame(l2_set_rows(m, fakes.DEVICE))
    ax = geometry_figures.l2_sets(m, table)
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    fits = [label for label in labels if label.startswith("balls in bins: ")]
    ways = table.set_index("quantity").loc["l2.ways"]
    # undecided ways: both candidates drawn, in two line styles
    drawn = [int(f.removeprefix("balls in bins: ").split()[0]) for f in fits]
    assert len(labels) == 6 and drawn == [ways.ci_low, ways.ci_high]
    assert len({line.get_linestyle() for line in ax.get_lines() if line.get_label() in fits}) == 2
    assert len([t for t in ax.texts if "MiB" in t.get_text()]) == 2
    bare = geometry_figures.l2_sets(m, table[~table["quantity"].isin(["l2.ways", "l2.sets"])])
    assert not any(line.get_label().startswith("balls") for line in bare.get_lines())  # no fit, no curve
    assert geometry_figures.l2_sets(m.iloc[:0], table) is None


def fakes_configs():
    return [(w, p) for w in ("one", "every") for p in ("stride", "random")]


def test_the_fake_measures_the_probes_full_lengths_and_quick_halves_them():
    """The simulated backend's default is the probe's full sweep; quick measures half the lengths."""
    from gpuatlas.probes.families.l2_sets import geometry_l2_sets  # noqa: F401  (registers the probe)
    from gpuatlas.probes.registry import all_probes

    probe = all_probes()["geometry.l2_sets"]
    assert inspect.signature(fakes._l2_sets).parameters["lengths"].default == LENGTHS
    full = {c["lengths"] for c in probe.configs(fakes.DEVICE, "full")}
    quick = {c["lengths"] for c in probe.configs(fakes.DEVICE, "quick")}
    assert full == {LENGTHS} and quick == {LENGTHS // 2}
    assert len(chain_lengths(fakes.DEVICE, "one", "stride", LENGTHS // 2)) < len(chain_lengths(fakes.DEVICE, "one",
                                                                                              "stride"))
