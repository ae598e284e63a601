"""The outlier screen's rules on synthetic boards with ground truth from first principles: healthy boards are
normal draws around each quantity's centre with the committed panel's relative spread (analysis/board-spread.csv),
a faithful slow board has every quantity of its mechanism group scaled by one factor.  The screen reads a long
frame of derived rows: no runs, no gather."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from gpuatlas.analysis.boards import GROUP_PREFIX, LONG_COLUMNS, group_of, panel_z, screen
from gpuatlas.analysis.repro import read_spread_table

MODEL = "NVIDIA H200"


def _panel() -> pd.DataFrame:
    table = read_spread_table()
    table = table[(table["model"] == MODEL) & (table["spread"] > 0)]
    assert len(table), "the committed spread table has the model's panel"
    return table.set_index("quantity")


def _boards(n: int, seed: int, slow: dict[int, tuple[str, float]] | None = None, gpu: str = MODEL) -> pd.DataFrame:
    """The long frame of ``n`` boards: each quantity of the panel drawn normal around the panel's median with
    its relative spread, independently; board i in ``slow`` has every quantity of group g scaled by (1 - f)."""
    panel = _panel()
    rng = np.random.default_rng(seed)
    values = panel["median"].to_numpy() * (1 + panel["spread"].to_numpy() * rng.standard_normal((n, len(panel))))
    groups = panel.index.map(group_of).to_numpy()
    for board, (group, fraction) in (slow or {}).items():
        values[board, groups == group] *= 1 - fraction
    labels = [f"b{i:04d}" for i in range(n)]
    long = pd.DataFrame({"board": np.repeat(labels, len(panel)), "quantity": np.tile(panel.index, n),
                         "value": values.ravel(), "unit": "1"})
    long["run_id"], long["uuid"], long["gpu"] = long["board"], "GPU-" + long["board"], gpu
    for column in ("ci_low", "ci_high", "repro_low", "repro_high"):
        long[column] = np.nan
    return long.loc[:, list(LONG_COLUMNS)]


def _flagged(compared: pd.DataFrame) -> set[tuple[str, str]]:
    rows = compared[compared["outlier"].astype(bool)]
    return set(zip(rows["board"], rows["quantity"]))


@pytest.fixture(scope="module")
def thousand():
    """1,000 healthy boards, and the same boards with board 17 5% slow in HBM and board 60 in tensor rate."""
    healthy = screen(_boards(1000, seed=11))
    slow = screen(_boards(1000, seed=11, slow={17: ("hbm", 0.05), 60: ("tensor", 0.05)}))
    return healthy, slow


def test_a_thousand_healthy_boards_raise_no_alarm(thousand):
    """Drawn from the panel's spread, a healthy fleet's expected false alarms are 0.01 per screen: none here,
    by quantity or by group; the fleet is judged by its own boards."""
    healthy, _ = thousand
    assert set(healthy["rule"]) == {"fleet"}
    assert _flagged(healthy) == set()
    groups = healthy[healthy["quantity"].str.startswith(GROUP_PREFIX)]
    assert set(groups["quantity"]) == {GROUP_PREFIX + "hbm", GROUP_PREFIX + "tensor"} and len(groups) == 2000
    assert (groups["z"] > -groups["threshold"]).all()


def test_a_faithful_slow_board_is_found_by_its_group_at_five_percent(thousand):
    """5% below in every quantity of its mechanism: each slow board is flagged in its group, and no other
    board is flagged in anything (a 5% slow HBM read alone sits inside 1,000 boards' noise of 300 quantities:
    the group is what finds it)."""
    _, slow = thousand
    flagged = _flagged(slow)
    assert ("b0017", GROUP_PREFIX + "hbm") in flagged and ("b0060", GROUP_PREFIX + "tensor") in flagged
    assert {board for board, _ in flagged} == {"b0017", "b0060"}
    assert all(q.startswith(GROUP_PREFIX) or group_of(q) == {"b0017": "hbm", "b0060": "tensor"}[b]
               for b, q in flagged), "a slow board's flagged quantities are its mechanism's"
    hbm = slow[(slow["board"] == "b0017") & (slow["quantity"] == GROUP_PREFIX + "hbm")]
    assert hbm["deviation"].iat[0] == pytest.approx(-0.05, abs=0.01), "the group's mean deviation: the slowdown"


def test_a_node_of_four_is_judged_against_the_panel():
    """Four boards are too few for their own verdict: the committed panel's spread judges them.  A board 8% slow
    in HBM is flagged in the hbm group (and in those HBM quantities whose boards spread least), nowhere else;
    the same node with that board healthy is not; a model with no panel gets no verdict."""
    slow = screen(_boards(4, seed=5, slow={2: ("hbm", 0.08)}))
    assert set(slow["rule"]) == {"panel"}
    flagged = _flagged(slow)
    assert ("b0002", GROUP_PREFIX + "hbm") in flagged
    assert all(board == "b0002" and (q == GROUP_PREFIX + "hbm" or group_of(q) == "hbm") for board, q in flagged)
    healthy = screen(_boards(4, seed=5))
    assert set(healthy["rule"]) == {"panel"} and _flagged(healthy) == set()
    unknown = screen(_boards(4, seed=5, slow={2: ("hbm", 0.08)}, gpu="A GPU with no panel"))
    assert set(unknown["rule"]) == {"none"} and unknown["threshold"].isna().all() and _flagged(unknown) == set()


def test_the_panel_z_is_students_t_with_the_panels_degrees_of_freedom():
    """Monte Carlo from first principles: panels of four normal boards (their median and relative standard
    deviation as the table holds them, six digits), and a new healthy board each: its panel z passes
    t(3)'s 1% and 0.1% points no more often than that; the mean z of a group whose quantities move together
    is the same t, and of independent ones passes less often (the group rule is conservative)."""
    rng = np.random.default_rng(2)
    trials, boards, members = 200_000, 4, 8
    centre = 100.0

    def z_of(draws, new):
        median = np.array([float(f"{m:.6g}") for m in np.median(draws, axis=1).ravel()]).reshape(new.shape)
        spread = draws.std(axis=1, ddof=1) / np.abs(median)
        return panel_z(new, median, spread, boards)

    together = centre * (1 + 0.01 * rng.standard_normal((trials, boards, 1)))
    z_one = z_of(together, centre * (1 + 0.01 * rng.standard_normal((trials, 1))))[:, 0]
    apart = centre * (1 + 0.01 * rng.standard_normal((trials, boards, members)))
    z_mean = z_of(apart, centre * (1 + 0.01 * rng.standard_normal((trials, members)))).mean(axis=1)
    for alpha in (0.01, 0.001):
        cut = stats.t.isf(alpha, boards - 1)
        allowed = alpha + 4 * np.sqrt(alpha / trials)
        assert (z_one < -cut).mean() <= allowed and (z_one > cut).mean() <= allowed
        assert (z_mean < -cut).mean() <= alpha / 4
