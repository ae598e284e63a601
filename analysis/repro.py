"""Intervals that predict the next board: each derived quantity's ``repro_low``/``repro_high``.

A run's CI says how well this run pinned its own value.  Another board of the same model reads the quantity
with its own placement of chains, addresses and SMs, its own HBM stacks and power limit, so its value moves by
more.  The panel (full runs of one model on several boards, ``reports/<model>-boards``) measures that: for each
quantity, the board-to-board standard deviation ``s`` of the per-board values (a board's value: the median of
its runs).  Two boards' values differ by a draw of sqrt(2) x the board spread, so the interval another board
lands in with 95% probability, around this run's value, has the half-width

    t(0.975, n - 1) x sqrt(2) x s      (n boards; Student's t for an ``s`` estimated from n values)

combined in quadrature with this run's CI on each side.  A model with no panel borrows the relative spreads of
the panels there are, and the method says so.  A quantity no panel measured keeps its CI as the interval.

A CI of zero width (every sample read the same value, or a structure every resample decided alike) is not an
interval: it is written as empty ("n/a").
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd

#: The committed table of board-to-board spreads, one row per (model, quantity): built from the panels by
#: ``python -m tools.board_spread`` and shipped with the package.
SPREAD_TABLE = Path(__file__).resolve().parent / "board-spread.csv"
SPREAD_COLUMNS = ("model", "quantity", "boards", "median", "spread", "panel")
#: A board's value beside the panel's: the prediction's coverage.
COVERAGE = 0.95


def panel_spread(derived_by_board: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """(quantity, boards, median, spread) over the boards of one model: a board's value is the median of its
    runs (``derived_by_board``: board -> its runs' derived rows stacked); ``spread`` is the sample standard
    deviation of the boards' values over |median|, for quantities at least two boards measured."""
    values = pd.concat({board: frame.groupby("quantity")["value"].median()
                        for board, frame in derived_by_board.items()}, axis=1)
    boards = values.notna().sum(axis=1)
    values = values[boards >= 2]
    median = values.median(axis=1)
    deviation = values.std(axis=1, ddof=1)
    spread = (deviation / median.abs()).where(deviation > 0, 0.0)  # boards that agree agree at zero too
    out = pd.DataFrame({"quantity": values.index, "boards": boards[values.index].astype(int),
                        "median": median, "spread": spread.replace([np.inf], np.nan)})
    return out.dropna(subset=["spread"]).reset_index(drop=True)


@functools.lru_cache(maxsize=None)
def prediction_factor(boards: int) -> float:
    """t(0.975, n - 1) x sqrt(2): the half-width, in board standard deviations, of the interval a second
    board lands in around a first one's value."""
    from scipy.special import stdtrit  # t's quantile, without importing all of scipy.stats

    return float(stdtrit(boards - 1, 0.5 + COVERAGE / 2) * math.sqrt(2))


def read_spread_table(path: Path = SPREAD_TABLE) -> pd.DataFrame:
    if not Path(path).is_file():
        return pd.DataFrame(columns=list(SPREAD_COLUMNS))
    return pd.read_csv(path)


def spreads_for(model: str, table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(quantity -> boards, spread) for ``model``, and where it came from: the model's own panel, else the
    largest relative spread any panel measured for the quantity (a borrowed estimate, said so)."""
    own = table[table["model"] == model]
    if len(own):
        panel = own["panel"].iloc[0]
        return own.set_index("quantity")[["boards", "spread"]], (
            f"{int(own['boards'].max())} boards of this model ({panel})")
    if table.empty:
        return pd.DataFrame(columns=["boards", "spread"]), ""
    borrowed = table.sort_values("spread").groupby("quantity").last()[["boards", "spread", "model"]]
    models = ", ".join(sorted(set(borrowed["model"])))
    return borrowed[["boards", "spread"]], f"no panel of this model: the spread of the {models} panel, borrowed"


def attach(derived: pd.DataFrame, model: str, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """``derived`` with zero-width CIs emptied and ``repro_low``/``repro_high`` filled (see the module): this
    run's CI widened on each side by the board term, in quadrature; where no panel gives the quantity a spread
    (or the value is no number), the CI itself."""
    derived = derived.copy()
    zero = derived["ci_low"].notna() & (derived["ci_low"] == derived["ci_high"])
    derived.loc[zero, ["ci_low", "ci_high"]] = np.nan
    spreads, source = spreads_for(model, read_spread_table() if table is None else table)
    spreads = spreads[~spreads.index.duplicated()]
    value, ci_low, ci_high = (derived[c].to_numpy(float) for c in ("value", "ci_low", "ci_high"))
    boards = derived["quantity"].map(spreads["boards"]).to_numpy(float)
    spread = derived["quantity"].map(spreads["spread"]).to_numpy(float)
    known = np.isfinite(spread) & np.isfinite(boards) & np.isfinite(value)
    factor = np.array([prediction_factor(int(b)) if ok else np.nan for b, ok in zip(boards, known)])
    board = factor * spread * np.abs(value)
    below = np.where(np.isfinite(ci_low), value - ci_low, 0.0)
    above = np.where(np.isfinite(ci_high), ci_high - value, 0.0)
    low = value - np.hypot(below, board)
    low = np.where((value >= 0) & ~(ci_low < 0), np.maximum(low, 0.0), low)  # a quantity that cannot be negative
    derived["repro_low"] = np.where(known, low, ci_low)
    derived["repro_high"] = np.where(known, value + np.hypot(above, board), ci_high)
    derived.attrs["repro_source"] = source
    return derived


def pair_coverage(runs_by_board: dict[str, pd.DataFrame], model: str, leave_out: bool = True) -> pd.DataFrame:
    """Every (quantity, board A, board B != A) of a panel: is B's value inside A's repro interval?  With
    ``leave_out`` the spread A's interval uses is the panel's without board B (B is then a board the
    prediction never saw); without it, the whole panel's.  ``runs_by_board``: board -> one run's derived
    rows (schema 3: value and CI)."""
    rows = []
    boards = sorted(runs_by_board)
    whole = panel_spread(runs_by_board).assign(model=model, panel="panel")
    for b in boards:
        others = {k: v for k, v in runs_by_board.items() if k != b}
        table = (panel_spread(others).assign(model=model, panel="panel without B") if leave_out else whole)
        b_values = runs_by_board[b].set_index("quantity")["value"]
        for a in others:
            interval = attach(runs_by_board[a][["quantity", "value", "unit", "ci_low", "ci_high", "method",
                                                "probe", "note"]], model, table).set_index("quantity")
            common = interval.index.intersection(b_values.index)
            for q in common:
                lo, hi, v = interval.at[q, "repro_low"], interval.at[q, "repro_high"], interval.at[q, "value"]
                bv = b_values[q]
                if not (np.isfinite(v) and np.isfinite(bv)):
                    continue
                inside = bool(np.isfinite(lo) and np.isfinite(hi) and lo <= bv <= hi) or (
                    not (np.isfinite(lo) and np.isfinite(hi)) and bv == v)
                half = (hi - lo) / 2 / abs(v) if np.isfinite(lo) and np.isfinite(hi) and v else np.nan
                rows.append({"quantity": q, "a": a, "b": b, "inside": inside, "half_width": half})
    return pd.DataFrame(rows, columns=["quantity", "a", "b", "inside", "half_width"])


#: What moves a quantity between runs, as measured (docs/measurements.md; the seeds of one board in
#: reports/h200-placement, the boards in reports/h200-boards): id pattern -> cause.
CAUSES = (
    ("atomic.global.add_*_latency", "the address's home L2 partition (near and far are separate quantities) "
                                    "and, within a partition, which slice: sampled over random addresses"),
    ("sync.fence_gpu", "the store's home L2 partition (near and far are separate quantities): sampled over "
                       "random addresses"),
    ("sync.fence_sys", "the store's home L2 partition: sampled over random addresses"),
    ("tlb.l1.", "the pages the chain lands on: it moves between seeds on one board"),
    ("l1.set_pattern", "the pages the chain lands on: it moves between seeds on one board"),
    ("tlb.l2.", "the board: steady over seeds on one board, different between boards"),
    ("l2.latency", "the board, or the SM the one-block chase runs on (not sampled): steady over seeds on one "
                   "board, different between boards"),
    ("sync.cluster_barrier", "the board (which SMs a cluster lands on): steady over seeds on one board"),
    ("icache.", "the board: steady over seeds on one board"),
    ("launch.", "the host: launches are paced by the CPU and driver"),
    ("dram.*_bandwidth", "the board's HBM: what a fleet screen looks for"),
    ("tc.", "the board's power limit and clocks under load"),
)


def cause(quantity: str) -> str:
    """The first of CAUSES whose pattern fits (an id prefix, shell-style: ``*`` matches any run of characters)."""
    from fnmatch import fnmatchcase

    return next((why for pattern, why in CAUSES if fnmatchcase(quantity, pattern + "*")),
                "not isolated: the boards differ by more than one run's CI")


def beyond_ci(derived: pd.DataFrame) -> pd.DataFrame:
    """The quantities whose repro interval is wider than their CI by more than half again (the board spread
    dominates what one run pins down), widest relative to the value first, each with its cause."""
    d = derived.reset_index(drop=True).dropna(subset=["value", "repro_low", "repro_high"])
    ci = (d["ci_high"] - d["ci_low"]).fillna(0.0).to_numpy()
    repro_width = (d["repro_high"] - d["repro_low"]).to_numpy()
    wide = d[repro_width > 1.5 * ci].copy()
    wide["repro_half"] = (wide["repro_high"] - wide["repro_low"]) / 2 / wide["value"].abs()
    wide = wide.sort_values("repro_half", ascending=False)
    wide["cause"] = [cause(str(q)) for q in wide["quantity"]]
    return wide[["quantity", "value", "unit", "ci_low", "ci_high", "repro_low", "repro_high", "cause"]]
