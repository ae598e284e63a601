"""Build the board-to-board spread table from the committed panels, and check that it predicts.

    python -m tools.board_spread [PANEL_DIR ...]     (default: every reports/*-boards folder)

Writes ``analysis/board-spread.csv`` (``gpuatlas.analysis.repro``): per GPU model and quantity, how many
boards measured it, their median and their relative standard deviation.  Then prints how well the intervals
predict: over every quantity present in every run of a panel and every ordered pair of boards (A, B), the
share of cases where B's value lies inside A's repro interval, and the median relative half-width of those
intervals; once with the spread of the boards other than B (B unseen: the honest figure), once with the whole
panel's.  Last, it re-derives every committed run of the current schema in place (their repro columns read the
table; an older run keeps the rows its analysis wrote) and records the derivations (``tools/derivations.py``).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from gpuatlas.analysis.derive import derive
from gpuatlas.analysis.repro import SPREAD_COLUMNS, SPREAD_TABLE, pair_coverage, panel_spread
from gpuatlas.analysis.results import RunDir
from tools import derivations

REPO = Path(__file__).resolve().parents[1]


def panel_runs(folder: Path) -> dict[str, list[RunDir]]:
    """board UUID -> its runs in ``folder``."""
    boards: dict[str, list[RunDir]] = {}
    for path in sorted(p for p in folder.iterdir() if (p / "run.json").is_file()):
        run = RunDir(path)
        boards.setdefault(run.read_meta()["device"]["uuid"], []).append(run)
    return boards


def derived_by_board(boards: dict[str, list[RunDir]]) -> dict[str, pd.DataFrame]:
    """board -> its runs' derived rows (derived afresh from the measurements), stacked."""
    return {board: pd.concat([derive(r.read_meta(), r.read_measurements()) for r in runs])
            for board, runs in boards.items()}


def build(folders: list[Path]) -> tuple[pd.DataFrame, list[tuple[str, dict[str, pd.DataFrame]]]]:
    tables, panels = [], []
    for folder in folders:
        boards = panel_runs(folder)
        if len(boards) < 2:
            continue
        model = next(iter(boards.values()))[0].read_meta()["device"]["name"]
        rows = derived_by_board(boards)
        tables.append(panel_spread(rows).assign(model=model, panel=str(folder.relative_to(REPO))))
        panels.append((model, rows))
    table = pd.concat(tables) if tables else pd.DataFrame(columns=list(SPREAD_COLUMNS))
    return table[list(SPREAD_COLUMNS)], panels


def summary(model: str, rows: dict[str, pd.DataFrame]) -> str:
    """The prediction's coverage and width over the quantities every board of the panel has."""
    common = set.intersection(*(set(f.dropna(subset=["value"])["quantity"]) for f in rows.values()))
    first = {board: frame.drop_duplicates("quantity") for board, frame in rows.items()}
    lines = [f"{model}: {len(rows)} boards, {len(common)} quantities in every run"]
    for leave_out in (True, False):
        cases = pair_coverage(first, model, leave_out=leave_out)
        cases = cases[cases["quantity"].isin(common)]
        what = "B left out of the spread" if leave_out else "the whole panel's spread"
        lines.append(f"  {what}: B inside A's interval in {cases['inside'].mean():.1%} of {len(cases)} cases; "
                     f"median relative half-width {cases['half_width'].median():.2%}")
        worst = cases[~cases["inside"]].groupby("quantity").size().sort_values(ascending=False)
        if len(worst):
            lines.append("    outside most often: " + ", ".join(f"{q} ({n})" for q, n in worst.head(8).items()))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    folders = [Path(a).resolve() for a in argv] or sorted((REPO / "reports").glob("*-boards"))
    table, panels = build(folders)
    SPREAD_TABLE.write_text(table.to_csv(index=False, float_format="%.10g"))
    print(f"wrote {SPREAD_TABLE.relative_to(REPO)}: {len(table)} rows")
    for model, rows in panels:
        print(summary(model, rows))
    return derivations.main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
