"""Placement and board spread: near and far modes, undecided structures, and intervals that predict another
board (gpuatlas.analysis.repro), on synthetic data whose truth is set here."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t

from gpuatlas.analysis import repro
from gpuatlas.analysis.quantities import home_partition_rows, structure_row
from gpuatlas.analysis.stats import mean_ci, near_far

#: A one-thread latency at an address homed in the SM's partition: its slices at two distances (cycles), and
#: across the chip (a crossing of the interconnect), with a few cycles of scatter per slice.
NEAR_LEVELS, FAR_LEVELS, SCATTER = (268.0, 300.0), (470.0, 495.0), 4.0


def placements(rng, count: int, far_share: float = 0.5, near_high_share: float = 0.5) -> np.ndarray:
    """Latencies of ``count`` random addresses: each homed far with ``far_share``, at one of its partition's
    slice distances, plus scatter."""
    far = rng.random(count) < far_share
    high = rng.random(count) < near_high_share
    levels = np.where(far, np.where(high, FAR_LEVELS[1], FAR_LEVELS[0]), np.where(high, NEAR_LEVELS[1],
                                                                                  NEAR_LEVELS[0]))
    return levels + rng.normal(0, SCATTER, count)


def test_near_and_far_modes_are_found_among_random_addresses():
    values = placements(np.random.default_rng(1), 48)
    near, far = near_far(values)
    assert near.max() < 350 < far.min()
    assert near.size + far.size == 48


def test_one_partition_is_one_mode_even_with_two_slice_distances():
    """The near mode's two slice distances (32 cycles apart) are not a far partition."""
    for seed in range(5):
        assert near_far(placements(np.random.default_rng(20 + seed), 48, far_share=0.0)) is None


def test_a_unimodal_scatter_is_not_split():
    values = np.random.default_rng(3).normal(400, 6, 48)
    assert near_far(values) is None


def test_few_placements_on_a_side_are_not_a_mode():
    values = np.r_[np.random.default_rng(4).normal(280, 3, 46), [480.0, 481.0]]
    assert near_far(values) is None  # two outliers are not a partition


def test_the_modes_mean_is_steady_where_the_median_jumps_between_slice_levels():
    """Boards whose addresses fall in the near slices in other shares: the median of the near mode jumps by
    the slices' distance, the mean moves by a fraction of it (the issue's placement scatter)."""
    means, medians = [], []
    for seed, share in enumerate((0.3, 0.45, 0.55, 0.7)):
        near = placements(np.random.default_rng(10 + seed), 20, far_share=0.0, near_high_share=share)
        means.append(mean_ci(near)[0])
        medians.append(np.median(near))
    gap = NEAR_LEVELS[1] - NEAR_LEVELS[0]
    assert max(medians) - min(medians) > 0.6 * gap
    assert max(means) - min(means) < 0.5 * gap


def test_home_partition_rows_name_both_modes_and_only_one_without_a_far_partition():
    both = home_partition_rows("atomic.global.add_i32_latency", pd.DataFrame({"value": placements(
        np.random.default_rng(5), 48)}), "m", "exec.atomics")
    assert [r["quantity"] for r in both] == ["atomic.global.add_i32_latency_near_cycles",
                                             "atomic.global.add_i32_latency_far_cycles"]
    near, far = (r["value"] for r in both)
    assert NEAR_LEVELS[0] < near < NEAR_LEVELS[1] and FAR_LEVELS[0] < far < FAR_LEVELS[1]
    one = home_partition_rows("atomic.global.add_i32_latency", pd.DataFrame({"value": placements(
        np.random.default_rng(6), 48, far_share=0.0)}), "m", "exec.atomics")
    assert [r["quantity"] for r in one] == ["atomic.global.add_i32_latency_near_cycles"]
    assert "one mode" in one[0]["note"]


def test_a_structure_is_undecided_when_its_interval_spans_two_candidates():
    decided = structure_row("coalescing.block_bytes", 128, (128.0, 128.0), "m", "bw.stride")
    assert decided["value"] == 128
    undecided = structure_row("coalescing.block_bytes", 128, (64.0, 128.0), "m", "bw.stride", "n")
    assert math.isnan(undecided["value"]) and (undecided["ci_low"], undecided["ci_high"]) == (64.0, 128.0)
    assert undecided["note"].startswith("undecided: between 64 B and 128 B")


# -- repro intervals ----------------------------------------------------------------------------------------

def _derived(values: dict, ci: float = 0.001) -> pd.DataFrame:
    return pd.DataFrame([{"quantity": q, "value": v, "unit": "1", "ci_low": v * (1 - ci), "ci_high": v * (1 + ci),
                          "method": "m", "probe": "p", "note": ""} for q, v in values.items()])


def test_the_prediction_factor_is_students_t_for_a_difference_of_two_boards():
    assert repro.prediction_factor(4) == pytest.approx(t.ppf(0.975, 3) * math.sqrt(2))
    assert repro.prediction_factor(3) > repro.prediction_factor(10) > 1.96 * math.sqrt(2)


def test_attach_widens_the_ci_by_the_board_spread_in_quadrature_and_empties_zero_width_cis():
    table = pd.DataFrame([{"model": "GPU X", "quantity": "a", "boards": 4, "median": 100.0, "spread": 0.01,
                           "panel": "p"}])
    derived = _derived({"a": 100.0, "b": 50.0})
    derived.loc[1, ["ci_low", "ci_high"]] = 50.0  # every sample alike
    out = repro.attach(derived, "GPU X", table).set_index("quantity")
    board = repro.prediction_factor(4) * 0.01 * 100.0
    assert out.at["a", "repro_high"] - 100.0 == pytest.approx(math.hypot(0.1, board))
    assert out.at["a", "repro_low"] == pytest.approx(100.0 - math.hypot(0.1, board))
    assert np.isnan(out.at["b", "ci_low"]) and np.isnan(out.at["b", "repro_low"])  # n/a, not [50, 50]


def test_a_model_without_a_panel_borrows_the_largest_spread_and_says_so():
    table = pd.DataFrame([{"model": m, "quantity": "a", "boards": 4, "median": 1.0, "spread": s, "panel": "p"}
                          for m, s in (("GPU X", 0.01), ("GPU Y", 0.03))])
    spreads, source = repro.spreads_for("GPU Z", table)
    assert spreads.at["a", "spread"] == 0.03 and "borrowed" in source
    own, source = repro.spreads_for("GPU X", table)
    assert own.at["a", "spread"] == 0.01 and "borrowed" not in source


def _panel(rng, boards: int, spreads: dict) -> dict[str, pd.DataFrame]:
    """Boards whose quantities scatter normally by ``spreads`` (relative SD) around 100."""
    return {f"b{i}": _derived({q: 100.0 * (1 + rng.normal(0, s)) for q, s in spreads.items()})
            for i in range(boards)}


def test_left_out_boards_land_in_the_predicted_interval_about_95_percent_of_the_time():
    """Many synthetic panels of four boards: a board the spread never saw lands inside another's interval
    in about 95% of the cases (more: Student's t from three boards is conservative for a pair)."""
    rng = np.random.default_rng(7)
    spreads = {f"q{i}": s for i, s in enumerate((0.002, 0.01, 0.03, 0.05, 0.1))}
    inside = [repro.pair_coverage(_panel(rng, 4, spreads), "GPU X")["inside"].mean() for _ in range(40)]
    assert 0.93 <= np.mean(inside) <= 0.995


def test_an_interval_from_the_ci_alone_does_not_predict_the_next_board():
    """Negative control: without the panel's spread (an empty table) the intervals are the CIs, and boards
    that scatter by more than their CI fall outside them."""
    rng = np.random.default_rng(8)
    panel = _panel(rng, 4, {"q": 0.03})
    assert repro.pair_coverage(panel, "GPU X")["inside"].mean() > 0.8
    narrow = repro.attach(panel["b0"], "GPU X", repro.read_spread_table(repro.SPREAD_TABLE.with_name("none.csv")))
    others = [panel[b].at[0, "value"] for b in ("b1", "b2", "b3")]
    assert not all(narrow.at[0, "repro_low"] <= v <= narrow.at[0, "repro_high"] for v in others)


def test_the_panel_spread_is_the_boards_sd_over_the_median_and_a_board_is_the_median_of_its_runs():
    frames = {"b0": pd.concat([_derived({"q": 99.0}), _derived({"q": 101.0})]),  # two runs: median 100
              "b1": _derived({"q": 104.0}), "b2": _derived({"q": 96.0})}
    out = repro.panel_spread(frames).set_index("quantity")
    assert out.at["q", "median"] == 100.0 and out.at["q", "boards"] == 3
    assert out.at["q", "spread"] == pytest.approx(np.std([100.0, 104.0, 96.0], ddof=1) / 100.0)


def test_boards_that_agree_at_zero_have_no_spread_and_a_zero_width_repro_interval():
    """A decided "no" (a flag at 0 on every board) is as reproducible as a decided "yes"; a zero that moves
    between boards has no relative spread to give."""
    frames = {b: _derived({"flag": 0.0, "moving": v}) for b, v in (("b0", 0.0), ("b1", 1.0), ("b2", -1.0))}
    out = repro.panel_spread(frames).set_index("quantity")
    assert out.at["flag", "spread"] == 0.0 and "moving" not in out.index
    table = out.reset_index().assign(model="GPU X", panel="p")
    flag = repro.attach(frames["b0"], "GPU X", table).set_index("quantity").loc["flag"]
    assert flag["repro_low"] == flag["repro_high"] == 0.0


def test_a_non_negative_quantitys_interval_stops_at_zero_and_a_signed_ones_does_not():
    table = pd.DataFrame([{"model": "GPU X", "quantity": q, "boards": 3, "median": 1.0, "spread": 0.5, "panel": "p"}
                          for q in ("count", "slope")])
    derived = _derived({"count": 2.0, "slope": 0.1})
    derived.loc[1, "ci_low"] = -0.05  # a quantity whose own interval goes below zero may be negative
    out = repro.attach(derived, "GPU X", table).set_index("quantity")
    assert out.at["count", "repro_low"] == 0.0
    assert out.at["slope", "repro_low"] < 0


def test_each_placement_bound_quantity_names_what_moves_it():
    assert "home L2 partition" in repro.cause("atomic.global.add_f64_latency_far_cycles")
    assert "home L2 partition" not in repro.cause("atomic.global.add_i32_ops_per_s_warp")  # a throughput
    assert "pages" in repro.cause("tlb.l1.reach_bytes")
    assert repro.cause("no.such_quantity").startswith("not isolated")
