"""The L1 geometry chapter on caches of known geometry: the kernel's instructions, the probe's search, set
construction (plain and hashed set index), the replacement verdict and the derived rows."""
import re

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.geometry import geometry_rows
from gpuatlas.analysis.l1_sets import classify_policy, lines_held, set_geometry, walks
from gpuatlas.probes.families.geometry import (RECORD_BYTES, carveout_allocations, chain_blocks, geometry_configs,
                                               onset, set_strides, sweep_lines)
from tests import fakes
from tests.fakes import SetCache, cache_walk

LINE = fakes.LINE_BYTES


def frame(results: dict) -> pd.DataFrame:
    """Measurements rows from {(stride, smem, placement): samples}."""
    return pd.DataFrame([{"probe": "geometry.l1", "metric": s.metric, "value": s.value, "repeat": s.repeat,
                          "flag": s.flag, "stride_bytes": stride, "smem_bytes": smem, "placement": placement}
                         for (stride, smem, placement), samples in results.items() for s in samples])


def measure(make_cache, strides, n_max=160, recorded=256, smem=RECORD_BYTES) -> pd.DataFrame:
    """The probe's search on a simulated cache at each stride, and once with lines at random places."""
    results = {(s, smem, "stride"): sweep_lines(cache_walk(make_cache, s, recorded), n_max) for s in strides}
    blocks = chain_blocks("random", n_max, np.random.default_rng(1))
    results[(LINE, smem, "random")] = sweep_lines(cache_walk(make_cache, LINE, recorded, blocks), n_max)
    return frame(results)


STRIDES = [LINE * 2**k for k in range(9)]


def held_by_stride(measurements):
    """({stride: lines held}, lines held at random places)."""
    held = lines_held(walks(measurements))
    return ({s: n for (s, _, place), n in held.items() if place == "stride"},
            next(n for (_, _, place), n in held.items() if place == "random"))


# -- the kernel -------------------------------------------------------------------------------------------

def record_loop(kernel_name: str, filename: str) -> list[str]:
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    code = sass(compile_cubin(filename)[0])[kernel_name]
    lines = [re.sub(r"\s+", " ", l.split(";")[0]).strip() for l in code.splitlines()
             if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    clocks = [i for i, l in enumerate(lines) if "SR_CLOCKLO" in l]
    return lines[clocks[0]:clocks[-1] + 1]


def assert_timed_loads(region: list[str], op: str) -> None:
    """Each load is ``op`` (LDG.E.64: L1-caching; LDG.E.64.STRONG.GPU: L2-only), its address the previous
    load's value, and between two loads an STS of the loaded register and then a clock read (one interval per
    access)."""
    loads = [(i, m.groups()) for i, l in enumerate(region)
             if (m := re.search(r"(LDG\.E\.64[A-Z0-9.]*) (R\d+), desc\[\w+\]\[(R\d+)\.64\]", l))]
    assert len(loads) >= 32
    assert {load for _, (load, _, _) in loads} == {op}
    for (i, (_, dest, _)), (j, (_, _, addr)) in zip(loads, loads[1:]):
        assert addr == dest
        between = region[i + 1:j]
        sts = [k for k, l in enumerate(between) if re.search(rf"STS \[R\d+\], {dest}$", l)]
        clock = [k for k, l in enumerate(between) if "SR_CLOCKLO" in l]
        assert sts and clock and sts[0] < clock[0], between


def test_the_record_kernel_times_each_l1_caching_load():
    assert_timed_loads(record_loop("l1_record", "geometry.cu"), "LDG.E.64")


def test_the_l2_only_record_kernel_is_not_an_l1_probe():
    """Negative control: chase.cu's L2-only recorder has the same shape but STRONG (L1-bypassing) loads."""
    with pytest.raises(AssertionError):
        assert_timed_loads(record_loop("chase_cg_record", "chase.cu"), "LDG.E.64")


# -- the probe's search -----------------------------------------------------------------------------------

def test_onset_bisection_finds_the_first_missing_length():
    calls = []

    def misses(n):
        calls.append(n)
        return n > 37

    assert onset(misses, 1, 4000) == 38
    assert len(calls) <= 14
    assert onset(lambda n: False, 1, 4000) is None


def test_the_search_never_walks_more_lines_than_it_has():
    """The curve past the onset stops at the longest chain the buffer holds."""
    asked = []

    def walk(lines):
        asked.append(lines)
        return np.full(64, 300.0 if lines > 40 else 30.0)

    sweep_lines(walk, 60)
    assert max(asked) == 60 and 41 in asked and 40 in asked


def test_sweeps_come_from_the_device():
    small = dict(fakes.DEVICE)
    big = {**small, "smem_per_sm_bytes": 2 * small["smem_per_sm_bytes"],
           "smem_per_block_optin_bytes": 2 * small["smem_per_block_optin_bytes"]}
    assert len(set_strides(big)) == len(set_strides(small)) + 1
    assert set_strides(small)[-1] >= 4 * small["smem_per_sm_bytes"] > set_strides(small)[-2]
    assert max(carveout_allocations(big)) == 2 * max(carveout_allocations(small))
    assert len(geometry_configs(small, quick=True)) < len(geometry_configs(small))


# -- set construction -------------------------------------------------------------------------------------

@pytest.mark.parametrize("sets, ways", [(8, 4), (2, 12), (1, 16)])
def test_ways_and_sets_of_a_plain_cache(sets, ways):
    geo = set_geometry(*held_by_stride(measure(lambda: SetCache(sets, ways), STRIDES)))
    assert geo["periodic"], geo
    assert (geo["ways"], geo["sets"], geo["capacity_bytes"]) == (ways, sets, sets * ways * LINE)


def test_a_hashed_set_index_is_reported_not_measured():
    """Negative control: the same cache with its set index XOR-hashed holds capacity-many lines at every
    stride; the pattern test rejects it instead of reporting its 4 ways."""
    held, random_held = held_by_stride(measure(lambda: SetCache(8, 4, hashed=True), STRIDES))
    assert set(held.values()) == {32}, "every power-of-two stride spreads over all 8 sets"
    geo = set_geometry(held, random_held)
    assert not geo["periodic"] and "random" in geo["departures"]
    assert set_geometry(held)["periodic"], "without the random chain it would pass as fully associative"


def test_a_sweep_that_stops_before_the_span_is_not_periodic():
    """Negative control: strides that never reach the set span show no flat tail to read the ways from."""
    assert not set_geometry(*held_by_stride(measure(lambda: SetCache(16, 4), STRIDES[:4])))["periodic"]


# -- replacement ------------------------------------------------------------------------------------------

def policy_of(policy, ways=8):
    m = measure(lambda: SetCache(4, ways, policy=policy, seed=3), STRIDES[3:], n_max=64, recorded=512)
    return classify_policy(walks(m), ways)


@pytest.mark.parametrize("policy, verdict", [("lru", "lru"), ("fifo", "lru"), ("plru", "lru"),
                                             ("random", "random")])
def test_replacement_verdict(policy, verdict):
    assert policy_of(policy)["verdict"] == verdict


def test_a_curve_no_model_explains_gets_no_verdict():
    """Negative control: a set that misses half of every walk past its ways is neither family."""
    curve = pd.DataFrame({"lines": np.arange(9, 17), "fraction": 0.5, "accesses": 512})
    assert classify_policy(curve, 8)["verdict"] is None


# -- derived rows -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def simulated():
    class Ctx:
        device = fakes.DEVICE

    return frame({(c["stride_bytes"], c["smem_bytes"], c["placement"]): fakes._geometry_l1(Ctx, **c)
                  for c in geometry_configs(fakes.DEVICE)})


def test_rows_recover_the_simulated_l1(simulated):
    """The simulated L1's set index is hashed: the stride pattern is rejected, and the chain at random places
    gives its ways and sets."""
    rows = {r["quantity"]: r for r in geometry_rows(simulated)}
    lines = fakes.l1_bytes_beside(RECORD_BYTES) // LINE
    assert rows["l1.set_pattern_departures"]["value"] > 0
    assert rows["l1.ways"]["value"] == fakes.L1_WAYS
    assert rows["l1.sets"]["value"] == lines // fakes.L1_WAYS
    assert rows["l1.ways"]["value"] * rows["l1.sets"]["value"] * LINE == fakes.l1_bytes_beside(RECORD_BYTES)
    assert rows["l1.replacement_miss_fraction"]["value"] == 1.0
    assert "LRU-like" in rows["l1.replacement_miss_fraction"]["note"]
    most = max(carveout_allocations(fakes.DEVICE))
    assert rows["l1.capacity_bytes_at_carveout"]["value"] == fakes.l1_bytes_beside(most)
    assert rows["l1.unified_bytes"]["value"] <= fakes.UNIFIED_BYTES < rows["l1.unified_bytes"]["value"] + \
        fakes.CARVE_STEP + 1024


def test_flagged_samples_give_no_rows(simulated):
    """Negative control: throttled walks are left out, so nothing is derived from them."""
    assert geometry_rows(simulated.assign(flag="throttled")) == []
    assert geometry_rows(simulated.assign(probe="chase.latency")) == []


def test_the_carveout_trades_l1_for_shared(simulated):
    """The simulated L1 loses what the shared carve takes (up to one carve-out step of rounding); negative
    control: an L1 that kept its size beside any allocation trades nothing and fails the lecture's claim."""
    from gpuatlas.analysis.claims import judge

    allocations = carveout_allocations(fakes.DEVICE)
    step = fakes.CARVE_STEP / (max(allocations) - min(allocations))
    rows = {r["quantity"]: r for r in geometry_rows(simulated)}
    assert abs(rows["l1.shared_trade_ratio"]["value"] - 1) <= step
    smallest = simulated[(simulated["stride_bytes"] == LINE) & (simulated["smem_bytes"] == allocations[0])
                         & (simulated["placement"] == "stride")]
    others = simulated[(simulated["stride_bytes"] != LINE) | (simulated["smem_bytes"] == allocations[0])]
    fixed = pd.concat([others] + [smallest.assign(smem_bytes=smem) for smem in allocations[1:]])
    kept = {r["quantity"]: r for r in geometry_rows(fixed)}
    assert kept["l1.shared_trade_ratio"]["value"] == 0
    verdicts = {}
    for derived in (rows, kept):
        table = pd.DataFrame(list(derived.values()))
        judged = judge(table, fakes.DEVICE)
        verdicts[len(verdicts)] = judged.loc[judged["claim"].str.startswith("shared memory is the same"),
                                             "verdict"].item()
    assert verdicts == {0: "holds", 1: "deviates"}


def test_figures_draw_the_simulated_l1(simulated):
    import matplotlib.pyplot as plt

    from gpuatlas.analysis import geometry_figures

    derived = pd.DataFrame(geometry_rows(simulated))
    ax = geometry_figures.l1_sets(simulated, derived)
    assert len(ax.get_lines()) == 2  # measured, random placement; no stride pattern for a hashed index
    spread = ax.figure.axes[2]
    assert sum(p.get_height() for p in spread.patches) == (simulated["metric"] == "access").sum()
    assert geometry_figures.l1_carveout(simulated, derived) is not None
    plt.close("all")
    empty = simulated.iloc[:0]
    assert geometry_figures.l1_sets(empty, derived) is None
    assert geometry_figures.l1_carveout(empty, derived) is None


# -- the L2 partition map ---------------------------------------------------------------------------------

def partition_frame(stride, values, lines):
    rows = [{"probe": "geometry.l2_partition", "metric": "access", "value": v, "repeat": i, "flag": "",
             "stride_bytes": stride} for i, v in enumerate(values)]
    rows.append({"probe": "geometry.l2_partition", "metric": "walk_lines", "value": lines, "repeat": 0, "flag": "",
                 "stride_bytes": stride})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("interleave", [256, 2048, 16384])
def test_partition_interleave_of_a_hashed_map(interleave):
    from gpuatlas.analysis.l2_partitions import partition_rows

    values = fakes.partition_walks(LINE, 4096, 3, interleave)
    rows = {r["quantity"]: r for r in partition_rows(partition_frame(LINE, values, 4096))}
    assert rows["l2.partition_interleave_bytes"]["value"] == interleave
    assert abs(rows["l2.far_home_fraction"]["value"] - 0.5) < 0.1
    assert rows["l2.partition_interleave_bytes"]["note"].startswith("100%")


def test_one_home_gives_no_interleave():
    """Negative control: a walk whose lines one partition homes shows one miss cluster and no interleave."""
    from gpuatlas.analysis.l2_partitions import interleave_lines, partition_rows

    values = fakes.partition_walks(LINE, 4096, 3, interleave=None)
    assert partition_rows(partition_frame(LINE, values, 4096)) == []
    assert interleave_lines(np.zeros(64, dtype=bool)) is None
    assert interleave_lines(np.arange(64) % 2 == 1) == 1


def test_the_simulated_probe_recovers_its_interleave():
    from gpuatlas.analysis.l2_partitions import partition_rows

    class Ctx:
        device = fakes.DEVICE

    m = pd.concat([frame_of(fakes._l2_partition(Ctx, s), s) for s in (LINE, 32 * LINE)])
    rows = {r["quantity"]: r for r in partition_rows(m)}
    assert rows["l2.partition_interleave_bytes"]["value"] == fakes.PARTITION_INTERLEAVE


def frame_of(samples, stride):
    return pd.DataFrame([{"probe": "geometry.l2_partition", "metric": s.metric, "value": s.value,
                          "repeat": s.repeat, "flag": s.flag, "stride_bytes": stride} for s in samples])


def test_partition_figure():
    import matplotlib.pyplot as plt

    from gpuatlas.analysis import geometry_figures
    from gpuatlas.analysis.l2_partitions import partition_rows

    values = fakes.partition_walks(LINE, 4096, 3)
    m = partition_frame(LINE, values, 4096)
    ax = geometry_figures.l2_partition(m, pd.DataFrame(partition_rows(m)))
    assert len(ax.get_lines()[0].get_xdata()) == 4096 and "4 KiB blocks" in ax.get_title()
    plt.close("all")
    assert geometry_figures.l2_partition(m.iloc[:0], pd.DataFrame()) is None


# -- the partition map from every SM ----------------------------------------------------------------------

def test_the_per_sm_recorder_times_each_l2_only_load_on_the_chosen_sm():
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    assert_timed_loads(record_loop("l2_record_on_sm", "geometry.cu"), "LDG.E.64.STRONG.GPU")
    code = sass(compile_cubin("geometry.cu")[0])
    assert "SR_VIRTUALSMID" in code["l2_record_on_sm"] and "SR_VIRTUALSMID" in code["sm_ids"]  # %smid
    assert "SR_VIRTUALSMID" not in code["l1_record"]
    with pytest.raises(AssertionError):  # negative control: the L1 recorder's loads are not L2-only
        assert_timed_loads(record_loop("l1_record", "geometry.cu"), "LDG.E.64.STRONG.GPU")


def sm_map_frame(values, ids, lines):
    rows = [{"probe": "geometry.l2_sm_map", "metric": "access", "value": v, "repeat": i, "flag": ""}
            for i, v in enumerate(values)]
    rows += [{"probe": "geometry.l2_sm_map", "metric": "smid", "value": sm, "repeat": r, "flag": ""}
             for r, sm in enumerate(ids)]
    rows.append({"probe": "geometry.l2_sm_map", "metric": "walk_lines", "value": lines, "repeat": 0, "flag": ""})
    return pd.DataFrame(rows)


def test_two_sides_of_complementary_maps_are_found():
    from gpuatlas.analysis.l2_partitions import sm_map_rows

    ids = list(range(0, 40, 2))
    sides = [int(i >= 16) for i in ids]  # 8 SMs on side 0, 12 on side 1
    rows = {r["quantity"]: r for r in sm_map_rows(sm_map_frame(fakes.sm_map_walks(256, ids, sides), ids, 256))}
    assert rows["l2.sm_sides"]["value"] == 2
    assert rows["l2.sm_side_fraction"]["value"] == pytest.approx(8 / 20)
    assert rows["l2.sm_map_consistency"]["value"] > 0.97
    assert "complements on 100%" in rows["l2.sm_sides"]["note"]


def test_the_sides_majority_map_gives_the_interleave_one_noisy_sm_misses():
    """Every SM of a side voting on each line recovers the simulated 4 KiB interleave even when each SM misreads
    a tenth of its lines; one SM's walk with that noise splits the blocks down to single lines, and the
    partition row's note then names the voted interleave beside it."""
    from gpuatlas.analysis.l2_partitions import consensus_interleave_bytes, partition_rows

    rng = np.random.default_rng(3)
    ids = list(range(40))
    clean = fakes.sm_map_walks(256, ids, [i % 2 for i in ids], seed=3).reshape(len(ids), -1)
    flip = rng.random(clean.shape) < 0.1
    noisy = np.where(flip, fakes.NEAR_MISS + fakes.FAR_MISS + 2 * fakes.RECORD_COST - clean, clean)
    m = sm_map_frame(noisy.ravel(), ids, 256)
    assert consensus_interleave_bytes(m) == fakes.PARTITION_INTERLEAVE
    one = noisy[::2][:3].ravel()  # three walks of one side's SMs, as one SM's three walks
    m = pd.concat([m, partition_frame(LINE, one, 256)], ignore_index=True)
    rows = {r["quantity"]: r for r in partition_rows(m)}
    assert rows["l2.partition_interleave_bytes"]["value"] < fakes.PARTITION_INTERLEAVE
    assert "voted per side, alternate in aligned 4 KiB blocks" in rows["l2.partition_interleave_bytes"]["note"]
    assert consensus_interleave_bytes(m[m["probe"] != "geometry.l2_sm_map"]) is None


def test_maps_with_no_sides_are_not_called_two():
    """Negative control: SMs whose near lines are drawn at random share no map, so no two SMs form a side and
    the structure is undecided, not two sides (nor one side per SM)."""
    from gpuatlas.analysis.l2_partitions import sm_map_rows

    rng = np.random.default_rng(1)
    ids, lines = list(range(20)), 256
    far = rng.random((len(ids), lines)) < 0.5
    values = np.round(np.where(far, fakes.FAR_MISS, fakes.NEAR_MISS) + rng.normal(0, 6, far.shape)).ravel()
    rows = {r["quantity"]: r for r in sm_map_rows(sm_map_frame(values, ids, lines))}
    assert np.isnan(rows["l2.sm_sides"]["value"]) and rows["l2.sm_sides"]["note"].startswith("undecided")


def _swapped(walks: np.ndarray) -> np.ndarray:
    """Each miss read at the other partition's latency."""
    return fakes.NEAR_MISS + fakes.FAR_MISS + 2 * fakes.RECORD_COST - walks


def _misread(walks: np.ndarray, sm: int, share: float, seed: int = 5) -> np.ndarray:
    """``walks`` (one row per SM) with ``share`` of SM ``sm``'s lines read at the other partition's latency, as
    an SM whose own near misses fall in two clusters splits them at its miss valley."""
    rng = np.random.default_rng(seed)
    out = walks.copy()
    flip = rng.permutation(out.shape[1])[:int(share * out.shape[1])]
    out[sm, flip] = _swapped(out[sm, flip])
    return out


@pytest.mark.parametrize("sm", [0, 7], ids=["first SM", "an SM within its side"])
def test_one_misread_sm_is_left_out_not_called_a_side(sm):
    """Two sides of 16 SMs, one SM reading 30% of its lines at the wrong partition (a board in the panel had
    such an SM): still two sides, that SM named and left out, the fraction over the 31 SMs on a side; a
    misread first SM (the greedy grouping's first seed) does not split its side either."""
    import matplotlib.pyplot as plt

    from gpuatlas.analysis import geometry_figures
    from gpuatlas.analysis.l2_partitions import sm_map_rows

    ids, lines = list(range(0, 64, 2)), 256
    side = [i % 4 < 2 for i in ids]
    walks = fakes.sm_map_walks(lines, ids, side, seed=2).reshape(len(ids), -1)
    frame = sm_map_frame(_misread(walks, sm, 0.3).ravel(), ids, lines)
    rows = {r["quantity"]: r for r in sm_map_rows(frame)}
    assert rows["l2.sm_sides"]["value"] == 2
    assert geometry_figures.l2_sm_map(frame).get_title().endswith("2 sides (1 SM on no side, the top rows)")
    plt.close("all")
    note = rows["l2.sm_sides"]["note"]
    assert f"SM {ids[sm]} matches no side" in note and ("sides of 15, 16 SMs" in note or "sides of 16, 15 SMs" in note)
    first = 1 if sm == 0 else 0  # the first SM on a side
    share = sum(side[k] == side[first] for k in range(len(ids)) if k != sm) / 31
    assert rows["l2.sm_side_fraction"]["value"] == pytest.approx(share)
    assert rows["l2.sm_map_consistency"]["value"] > 0.97


def test_a_side_grouped_around_a_misread_first_sm_is_not_split():
    """The first SM misreads 22% of its lines and every SM 6%: some SMs of its side agree with it on 75% of the
    lines and some do not, so grouping around it splits its side in two groups; their majority maps agree, so
    they are one side, and every other SM lands on its own side."""
    from gpuatlas.analysis.l2_partitions import SAME_SIDE, sm_maps, sm_sides

    ids, lines = list(range(0, 64, 2)), 256
    truth = np.array([i % 4 < 2 for i in ids])
    walks = fakes.sm_map_walks(lines, ids, truth, seed=2).reshape(len(ids), -1)
    rng = np.random.default_rng(2)
    noisy = np.where(rng.random(walks.shape) < 0.06, _swapped(walks), walks)
    noisy[0] = _misread(walks, 0, 0.22, seed=1)[0]
    far = sm_maps(sm_map_frame(noisy.ravel(), ids, lines))[2]
    apart = [k for k in np.flatnonzero(truth == truth[0])[1:] if np.mean(far[0] == far[k]) < SAME_SIDE]
    assert 2 <= len(apart) < np.sum(truth == truth[0]) - 2  # the grouping around SM 0 splits its side
    labels = sm_sides(far)
    assert labels.max() == 1
    on_side = labels[1:] >= 0
    assert on_side.all() and np.all((labels[1:] == labels[1]) == (truth[1:] == truth[1]))


def test_a_third_side_of_two_sms_is_a_side():
    """Negative control for the rule above: two SMs (a TPC) sharing a map unlike either side's are a third side,
    not two misread SMs."""
    from gpuatlas.analysis.l2_partitions import sm_map_rows

    ids, lines = list(range(32)), 256
    walks = fakes.sm_map_walks(lines, ids, [i % 2 for i in ids], seed=4).reshape(len(ids), -1)
    third = (np.arange(lines) // 8) % 2 == 1  # homes alternating every 8 lines: half agree with either side
    walks[30:] = np.where(third, fakes.FAR_MISS, fakes.NEAR_MISS) + fakes.RECORD_COST
    rows = {r["quantity"]: r for r in sm_map_rows(sm_map_frame(walks.ravel(), ids, lines))}
    assert rows["l2.sm_sides"]["value"] == 3
    assert "matches no side" not in rows["l2.sm_sides"]["note"]


def test_the_simulated_probe_and_its_figure():
    import matplotlib.pyplot as plt

    from gpuatlas.analysis import geometry_figures
    from gpuatlas.analysis.l2_partitions import sm_map_rows

    class Ctx:
        device = fakes.DEVICE

    samples = fakes._l2_sm_map(Ctx, 1)
    m = pd.DataFrame([{"probe": "geometry.l2_sm_map", "metric": s.metric, "value": s.value, "repeat": s.repeat,
                       "flag": s.flag} for s in samples])
    rows = {r["quantity"]: r for r in sm_map_rows(m)}
    assert rows["l2.sm_sides"]["value"] == 2
    assert rows["l2.sm_side_fraction"]["value"] == pytest.approx(0.5, abs=0.05)
    ax = geometry_figures.l2_sm_map(m)
    assert ax.images[0].get_array().shape == (fakes.DEVICE["sm_count"], 256) and "2 sides" in ax.get_title()
    plt.close("all")
    assert geometry_figures.l2_sm_map(m.iloc[:0]) is None


# -- the constant caches ----------------------------------------------------------------------------------

def const_frame(levels=None):
    from gpuatlas.probes.families.geometry import const_footprints

    class Ctx:
        device = fakes.DEVICE

    rows = []
    for f in const_footprints(fakes.DEVICE):
        samples = fakes._const(Ctx, f) if levels is None else fakes._samples(levels(f), f)
        rows += [{"probe": "geometry.const", "metric": s.metric, "value": s.value, "repeat": s.repeat, "flag": "",
                  "footprint_bytes": f} for s in samples]
    return pd.DataFrame(rows)


def test_constant_cache_levels_of_the_simulated_gpu():
    from gpuatlas.analysis.geometry import const_rows

    rows = {r["quantity"]: r for r in const_rows(const_frame())}
    (c1, l1), (c15, l15) = fakes.CONST_LEVELS
    assert rows["const.l1.latency_cycles"]["value"] == pytest.approx(l1, rel=0.01)
    assert rows["const.l15.latency_cycles"]["value"] == pytest.approx(l15, rel=0.01)
    assert rows["const.l1.capacity_bytes"]["value"] == pytest.approx(c1, rel=0.2)
    assert rows["const.l15.capacity_bytes"]["value"] == pytest.approx(c15, rel=0.2)


def test_constant_figure():
    import matplotlib.pyplot as plt

    from gpuatlas.analysis import geometry_figures
    from gpuatlas.analysis.geometry import const_rows

    m = const_frame()
    ax = geometry_figures.const_staircase(m, pd.DataFrame(const_rows(m)))
    assert len(ax.lines) == 1 + 2 + 2  # the medians, two levels, two capacities
    plt.close("all")
    assert geometry_figures.const_staircase(m.iloc[:0], pd.DataFrame()) is None


def test_a_level_that_holds_the_whole_space_has_no_capacity():
    """Negative control: with one step only, no second capacity is claimed, and one flat level gives none."""
    from gpuatlas.analysis.geometry import const_rows

    (c1, l1), (_, l15) = fakes.CONST_LEVELS
    rows = {r["quantity"]: r for r in const_rows(const_frame(lambda f: l1 if f <= c1 else l15))}
    assert "const.l15.capacity_bytes" not in rows and "no further step" in rows["const.l15.latency_cycles"]["note"]
    assert const_rows(const_frame(lambda f: l1)) == []


def test_the_constant_chase_is_a_dependent_ldc_chain():
    """Each LDC's address register is the previous LDC's destination (no index arithmetic between them);
    negative control: the L1 record kernel has no such chain."""
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    code = sass(compile_cubin("geometry.cu")[0])

    def chain(name):
        region = [l for l in code[name].splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", l)]
        clocks = [i for i, l in enumerate(region) if "SR_CLOCKLO" in l]
        ldc = re.compile(r"LDC (R\d+), c\[0x3\]\[(R\d+)\]")
        return [m.groups() for l in region[clocks[0]:clocks[-1]] if (m := ldc.search(l))]

    loads = chain("const_chase")
    assert len(loads) >= 32
    assert all(addr == dest for (dest, _), (_, addr) in zip(loads, loads[1:]))
    assert chain("l1_record") == []


# -- on a GPU ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_ctx():
    from gpuatlas.machinery.device import device_properties
    from gpuatlas.probes.kit.harness import Budget, Context

    return Context(device=device_properties(), budget=Budget())


@pytest.mark.gpu
def test_gpu_l1_walks_hold_a_plausible_capacity_and_no_stride_holds_more(gpu_ctx):
    """The 128-B chain's lines held fit the unified array's bound, and the widest power-of-two stride holds no
    more: a cache holds at most its lines at any stride.  (Where the set index is hashed, as the H200's 482 sets
    are, a power-of-two stride does not fall into one set, so it need not hold fewer.)"""
    from gpuatlas.probes.families.geometry import geometry_l1, set_strides

    device = gpu_ctx.device
    strides = (LINE, set_strides(device)[-1])
    m = frame({(s, RECORD_BYTES, "stride"): geometry_l1(gpu_ctx, s, RECORD_BYTES, "stride") for s in strides})
    held = {s: n for (s, _, _), n in lines_held(walks(m)).items()}
    assert device["smem_per_sm_bytes"] / 16 < held[LINE] * LINE <= 2 * device["smem_per_sm_bytes"]
    assert held[strides[1]] <= held[LINE]


@pytest.mark.gpu
def test_gpu_partition_walk_and_constant_chase_pass_their_checks(gpu_ctx):
    from gpuatlas.probes.families.geometry import const_footprints, geometry_const
    from gpuatlas.probes.families.geometry.l2_partition import geometry_l2_partition

    accesses = [s.value for s in geometry_l2_partition(gpu_ctx, LINE) if s.metric == "access"]
    assert len(accesses) >= 4096 and min(accesses) > 0
    small, large = (np.median([s.value for s in geometry_const(gpu_ctx, f) if s.metric == "latency"])
                    for f in (const_footprints(gpu_ctx.device)[0], const_footprints(gpu_ctx.device)[-1]))
    assert 0 < small <= large


@pytest.mark.gpu
def test_gpu_persistence_runs_read_every_word(gpu_ctx):
    """Both hints pass the checksum of every word read, and the set-aside is given back."""
    import cupy

    from gpuatlas.probes.families.geometry import PERSISTING_LIMIT, geometry_l2_persist

    before = cupy.cuda.runtime.deviceGetLimit(PERSISTING_LIMIT)
    for hint in ("normal", "evict_last"):
        assert [s.value for s in geometry_l2_persist(gpu_ctx, hint) if s.metric == "seconds"]
    assert cupy.cuda.runtime.deviceGetLimit(PERSISTING_LIMIT) == before


# -- L2 persistence ---------------------------------------------------------------------------------------

def persist_frame(hints=("normal", "evict_last"), fake=None):
    class Ctx:
        device = fakes.DEVICE

    return pd.DataFrame([{"probe": "geometry.l2_persist", "metric": s.metric, "value": s.value,
                          "repeat": s.repeat, "flag": s.flag, "hint": hint}
                         for hint in hints for s in (fake or fakes._l2_persist)(Ctx, hint)])


def test_persisting_speedup_of_the_simulated_l2():
    from gpuatlas.analysis.geometry import persist_rows
    from gpuatlas.probes.families.geometry import persist_hot_bytes

    (row,) = persist_rows(persist_frame())
    hot, stream = persist_hot_bytes(fakes.DEVICE), fakes.DEVICE["l2_bytes"]
    truth = (hot / fakes.HBM_READ + stream / fakes.HBM_READ) / (hot / fakes.L2_READ + stream / fakes.HBM_READ)
    assert row["value"] == pytest.approx(truth, rel=0.01)
    assert row["ci_low"] <= row["value"] <= row["ci_high"]


def test_no_speedup_without_both_hints():
    """Negative control: one hint alone gives no row; a policy that changes nothing gives a speed-up of 1."""
    from gpuatlas.analysis.geometry import persist_rows

    assert persist_rows(persist_frame(hints=("normal",))) == []
    (row,) = persist_rows(persist_frame(fake=lambda ctx, hint: fakes._l2_persist(ctx, "normal")))
    assert row["value"] == pytest.approx(1.0, abs=0.01)


def test_the_persist_kernels_differ_only_in_the_hot_loads_policy():
    """The three kernels compile to the same code but for one constant, the L2 policy in the descriptor of the
    hot set's 16-byte loads (LDG.E.128 desc[URn]); the stream's loads use the default descriptor."""
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    code = sass(compile_cubin("geometry.cu")[0])

    def body(name):
        return [re.sub(r"\s+", " ", l.split(";")[0].split("*/", 1)[1]).strip() for l in code[name].splitlines()
                if re.search(r"/\*[0-9a-f]{4}\*/", l)]

    normal = body("persist_normal")
    for other in ("persist_evict_last", "persist_evict_first"):
        diff = [(a, b) for a, b in zip(normal, body(other)) if a != b]
        assert len(diff) == 1 and len(body(other)) == len(normal), diff
        (a, b), = diff
        target = re.match(r"UMOV (UR\d+), 0x[0-9a-f]+$", a).group(1)
        low = f"UR{int(target[2:]) - 1}"
        assert any(re.search(rf"LDG\.E\.128 R\d+, desc\[{low}\]", l) for l in normal), (target, low)
    assert len([(a, b) for a, b in zip(normal, body("l1_record")) if a != b]) > 1  # negative control


def test_every_derived_id_is_declared_by_its_probe_and_in_the_vocabulary():
    """The rows the simulated chapter derives are exactly what the geometry probes declare, all of them in
    the vocabulary (a new id without its entry would fail here)."""
    from gpuatlas.analysis.geometry import geometry_rows
    from gpuatlas.analysis.quantities import QUANTITIES
    from gpuatlas.probes.registry import all_probes

    declared = {q for pid, p in all_probes().items() if pid.startswith("geometry.") for q in p.quantities}
    assert declared <= set(QUANTITIES)

    class Ctx:
        device = fakes.DEVICE

    frames = [frame({(c["stride_bytes"], c["smem_bytes"], c["placement"]): fakes._geometry_l1(Ctx, **c)
                     for c in geometry_configs(fakes.DEVICE)}),
              partition_frame(LINE, fakes.partition_walks(LINE, 4096, 3), 4096), const_frame(), persist_frame()]
    derived = {r["quantity"] for r in geometry_rows(pd.concat(frames, ignore_index=True))}
    assert derived <= declared and len(derived) >= 12
