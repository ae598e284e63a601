"""L1 ways and sets of a hashed set index, from chains at random places, on caches of known geometry simulated
access by access (tests/fakes/geometry.py's SetCache): the onset record's missing positions, the balls-into-bins fit of
the misses per pass, the replacement verdict, the derived rows and the figure."""
import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.geometry import geometry_rows
from gpuatlas.analysis.l1_sets import fit_ways, hashed_geometry, onset_policy, onset_positions, overfill_misses, walks
from gpuatlas.probes.families.geometry import RECORD_BYTES, chain_blocks, sweep_lines
from tests import fakes
from tests.fakes import SetCache, cache_walk, set_index

LINE = fakes.LINE_BYTES
#: Strides enough to show the pattern failing (and the capacity at the line stride); the longest chain and
#: the accesses recorded per walk (at least two passes of the random chain's onset).
STRIDES, N_MAX, RECORDED, SEED = [LINE * 2**k for k in range(0, 8, 2)], 400, 768, 1


def measure(make_cache, strides=STRIDES) -> pd.DataFrame:
    """The probe's search (sweep_lines) on the simulated cache at each stride and once at random places."""
    results = {(s, RECORD_BYTES, "stride"): sweep_lines(cache_walk(make_cache, s, RECORDED), N_MAX)
               for s in strides}
    blocks = chain_blocks("random", N_MAX, np.random.default_rng(SEED))
    results[(LINE, RECORD_BYTES, "random")] = sweep_lines(cache_walk(make_cache, LINE, RECORDED, blocks), N_MAX)
    return pd.DataFrame([{"probe": "geometry.l1", "metric": s.metric, "value": s.value, "repeat": s.repeat,
                          "flag": "", "stride_bytes": stride, "smem_bytes": smem, "placement": placement}
                         for (stride, smem, placement), samples in results.items() for s in samples])


def rows_of(measurements) -> dict:
    return {r["quantity"]: r for r in geometry_rows(measurements)}


@pytest.fixture(scope="module")
def hashed4():
    """64 sets x 4 ways, XOR-hashed index, LRU."""
    return measure(lambda: SetCache(64, 4, hashed=True))


@pytest.fixture(scope="module")
def hashed8():
    """32 sets x 8 ways, XOR-hashed index, LRU: the same capacity, twice the ways."""
    return measure(lambda: SetCache(32, 8, hashed=True))


@pytest.fixture(scope="module")
def hashed_random():
    """64 sets x 4 ways, XOR-hashed index, random replacement."""
    return measure(lambda: SetCache(64, 4, hashed=True, policy="random", seed=3))


@pytest.fixture(scope="module")
def plain():
    """16 sets x 4 ways, modulo index, LRU, at strides past its set span."""
    return measure(lambda: SetCache(16, 4), [LINE * 2**k for k in range(8)])


def onset_record(measurements):
    """(record, lines of the walk it records, hit cycles) of the chain at random places."""
    frame = measurements[measurements["placement"] == "random"]
    record = frame[frame["metric"] == "access"].sort_values("repeat")["value"].to_numpy()
    table = walks(frame)
    lines = int(table.loc[table["missing"], "lines"].min())
    return record, lines, float(frame.loc[frame["metric"] == "hit_cycles", "value"].iat[0])


# -- the model ----------------------------------------------------------------------------------------------

def test_balls_into_bins_matches_lines_thrown_at_random():
    """The closed form against lines thrown into sets at random, counting the lines of overfilled sets;
    negative control: twice the ways over half the sets predicts far fewer misses than were counted."""
    rng = np.random.default_rng(0)
    sets, ways = 64, 4
    for lines in (60, 120, 300):
        counted = np.mean([np.sum(np.bincount(s, minlength=sets)[s] > ways)
                           for s in (rng.integers(sets, size=lines) for _ in range(3000))])
        assert overfill_misses([lines], ways, sets)[0] == pytest.approx(counted, rel=0.03, abs=0.1)
        if lines < sets * ways:
            assert overfill_misses([lines], 2 * ways, sets / 2)[0] < 0.5 * counted


def test_one_set_misses_every_line_once_the_chain_is_longer_than_it():
    assert list(overfill_misses([8, 9, 20], 8, 1)) == [0, 9, 20]


def test_the_hashed_index_spreads_every_power_of_two_stride():
    """Negative control for the pattern: plain modulo indexing puts a stride of the sets' span in one set, the
    hashed index spreads it over every set."""
    blocks = np.arange(64) * 64
    assert len(np.unique(set_index(blocks, 64))) == 1
    assert len(np.unique(set_index(blocks, 64, hashed=True))) == 64


# -- each step on the simulated caches ------------------------------------------------------------------------

def test_the_onset_misses_exactly_the_lines_of_its_overfilled_set(hashed4):
    """The positions that miss on every pass are the lines of the one set the shortest missing chain gives
    ways + 1 lines, that set computed from the cache's own index."""
    record, lines, hit = onset_record(hashed4)
    blocks = chain_blocks("random", N_MAX, np.random.default_rng(SEED))[:lines]
    index = set_index(blocks, 64, hashed=True)
    counts = np.bincount(index, minlength=64)
    assert counts.max() == 5 and np.sum(counts == 5) == 1
    positions = onset_positions(record, lines, hit)
    assert list(positions["every"]) == list(np.flatnonzero(index == np.argmax(counts)))
    assert list(positions["some"]) == list(positions["every"])


@pytest.mark.parametrize("fixture, ways, other", [("hashed4", 4, 8), ("hashed8", 8, 4)])
def test_the_sweep_fits_the_ways(request, fixture, ways, other):
    """Negative control: the 8-way cache (the same capacity) does not fit best at 4 ways, nor the 4-way at 8."""
    table = walks(request.getfixturevalue(fixture))
    fit = fit_ways(table[table["placement"] == "random"], 256)
    assert fit["best"] == ways
    assert fit["misfits"][other] > fit["misfits"][ways]


def test_the_onset_policy_tells_lru_from_random(hashed4, hashed_random):
    assert onset_policy(onset_positions(*onset_record(hashed4)), 4)["verdict"] == "lru"
    random = onset_policy(onset_positions(*onset_record(hashed_random)), 4)
    assert random["verdict"] == "random" and random["fraction"] < 0.8


# -- the derived rows ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fixture, ways, sets", [("hashed4", 4, 64), ("hashed8", 8, 32)])
def test_rows_of_a_hashed_cache(request, fixture, ways, sets):
    rows = rows_of(request.getfixturevalue(fixture))
    assert rows["l1.set_pattern_departures"]["value"] > 0
    assert (rows["l1.ways"]["value"], rows["l1.sets"]["value"]) == (ways, sets)
    assert rows["l1.ways"]["value"] * rows["l1.sets"]["value"] * LINE == 256 * LINE
    assert f"best {ways} ways" in rows["l1.ways"]["note"] and "runner-up" in rows["l1.ways"]["note"]
    assert rows["l1.replacement_miss_fraction"]["value"] == 1.0
    assert "LRU-like" in rows["l1.replacement_miss_fraction"]["note"]


def test_a_plain_cache_keeps_the_stride_pattern(plain):
    """A modulo index: ways and sets from the strides, with no departures row."""
    rows = rows_of(plain)
    assert "l1.set_pattern_departures" not in rows
    assert (rows["l1.ways"]["value"], rows["l1.sets"]["value"]) == (4, 16)
    assert "flat from the set span" in rows["l1.ways"]["note"]


def test_random_replacement_is_not_called_lru_like(hashed_random):
    """Random replacement misses a varying few of the overfilled set's lines each pass, so no position misses
    on every pass: the methods disagree, and no row gives ways or an LRU-like verdict."""
    rows = rows_of(hashed_random)
    assert not {"l1.ways", "l1.sets", "l1.replacement_miss_fraction"} & set(rows)
    assert "disagree" in rows["l1.set_pattern_departures"]["note"]
    assert not any("LRU-like" in r["note"] for r in rows.values())


def test_disagreeing_methods_emit_no_ways(hashed4):
    """The onset record with a sixth position slow on every pass (six lines in one set: 5 ways) against a
    sweep that fits 4: no ways, sets or verdict, and the departures note says why."""
    record, lines, hit = onset_record(hashed4)
    every = onset_positions(record, lines, hit)["every"]
    extra = next(p for p in range(lines) if p not in every)
    slow = hashed4["metric"].eq("access") & hashed4["placement"].eq("random") & \
        (hashed4["repeat"] % lines == extra)
    tampered = hashed4.assign(value=hashed4["value"].mask(slow, 10 * hit))
    assert hashed_geometry(tampered, walks(tampered), RECORD_BYTES, LINE, 256)["onset_ways"] == 5
    rows = rows_of(tampered)
    assert not {"l1.ways", "l1.sets", "l1.replacement_miss_fraction"} & set(rows)
    assert "5 ways" in rows["l1.set_pattern_departures"]["note"]
    assert "disagree" in rows["l1.set_pattern_departures"]["note"]
    assert rows_of(hashed4)["l1.ways"]["value"] == 4, "negative control: untampered, the methods agree"


def test_a_capacity_of_no_whole_number_of_sets_emits_no_ways(hashed4):
    """The same walks with one line fewer held at the line stride (255 lines: no whole number of 4-way sets):
    the methods still agree on 4 ways, but no ways or sets are reported."""
    at_line = hashed4["placement"].eq("stride") & hashed4["stride_bytes"].eq(LINE)
    shorter = hashed4.copy()
    shorter.loc[at_line & shorter["metric"].eq("lines") & shorter["value"].eq(256), "value"] = 255
    shorter.loc[at_line & shorter["metric"].eq("lines") & shorter["value"].eq(257), "value"] = 256
    rows = rows_of(shorter)
    assert "l1.ways" not in rows and "no whole number" in rows["l1.set_pattern_departures"]["note"]


# -- the figure ---------------------------------------------------------------------------------------------

def test_the_random_places_figure(hashed4):
    import matplotlib.pyplot as plt

    from gpuatlas.analysis import geometry_figures

    ax = geometry_figures.l1_random_sets(hashed4)
    lines = ax.get_lines()
    assert len(lines) == 6  # 2, 4, 8, 16 ways, fully associative, measured
    measured = lines[-1]
    assert len(measured.get_xdata()) == (walks(hashed4)["placement"] == "random").sum()
    assert ax.get_legend() is not None and ax.get_legend().get_bbox_to_anchor().x0 > ax.bbox.x1 - 1
    plt.close("all")
    assert geometry_figures.l1_random_sets(hashed4[hashed4["placement"] == "stride"]) is None


def test_the_stride_figure_draws_the_pattern_only_for_a_plain_index(plain, hashed4):
    import matplotlib.pyplot as plt

    from gpuatlas.analysis import geometry_figures

    for measurements, drawn in ((plain, 3), (hashed4, 2)):
        derived = pd.DataFrame(geometry_rows(measurements))
        assert len(geometry_figures.l1_sets(measurements, derived).get_lines()) == drawn
    plt.close("all")
