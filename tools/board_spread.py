"""Build the board-to-board spread table from the committed panels, and check that it predicts.

    python -m tools.board_spread [PANEL_DIR ...]     (default: every reports/*-boards folder)

Writes ``analysis/board-spread.csv`` (``gpuatlas.analysis.repro``): per GPU model and quantity, how many
boards measured it, their median and their relative standard deviation.  Then prints how well the intervals
predict: over every quantity present in every run of a panel and every ordered pair of boards (A, B), the
share of cases where B's value lies inside A's repro interval, and the median relative half-width of those
intervals; once with the spread of the boards other than B (B unseen: the honest figure), once with the whole
panel's.  Last, it re-derives every committed run of the current schema in place (their repro columns read the
table; an older run keeps the rows its analysis wrote) and records the derivations in ``reports/derivations.json``:
the analysis fingerprint they were made under and a digest of each run's files, so that the tests re-derive a run
only once either moves.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pandas as pd

from gpuatlas.analysis.derive import derive, fingerprint
from gpuatlas.analysis.repro import SPREAD_COLUMNS, SPREAD_TABLE, pair_coverage, panel_spread
from gpuatlas.analysis.results import SCHEMA_VERSION, RunDir

REPO = Path(__file__).resolve().parents[1]
#: The committed runs' derivations: ``{"fingerprint": ..., "runs": {run path under reports/: digest}}``.
DERIVATIONS = REPO / "reports" / "derivations.json"


def run_digest(path: Path) -> str:
    """sha256 over a run's three contract files: what its derivation was made from and what it wrote."""
    digest = hashlib.sha256()
    for name in ("run.json", "measurements.parquet", "derived.csv"):
        digest.update(hashlib.sha256((path / name).read_bytes()).digest())
    return digest.hexdigest()


def recorded_derivation(path: Path) -> bool:
    """Whether the run's derived.csv was written by ``rederive_committed`` under today's analysis fingerprint,
    from the files the run holds now."""
    if not DERIVATIONS.is_file():
        return False
    recorded = json.loads(DERIVATIONS.read_text())
    key = path.resolve().relative_to(REPO / "reports").as_posix()
    return (recorded["fingerprint"] == fingerprint() and key in recorded["runs"]
            and recorded["runs"][key] == run_digest(path))


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


def rederive_committed() -> list[Path]:
    """Rewrite derived.csv of every run under reports/ of the current schema and record the derivations in
    DERIVATIONS; the runs rewritten."""
    runs = [RunDir(p.parent) for p in sorted((REPO / "reports").rglob("run.json"))]
    current = [r for r in runs if r.read_meta()["schema_version"] == SCHEMA_VERSION]
    for run in current:
        run.write_derived(derive(run.read_meta(), run.read_measurements()))
    digests = {r.path.relative_to(REPO / "reports").as_posix(): run_digest(r.path) for r in current}
    DERIVATIONS.write_text(json.dumps({"fingerprint": fingerprint(), "runs": digests}, indent=1) + "\n")
    return [r.path for r in current]


def main(argv: list[str]) -> int:
    folders = [Path(a).resolve() for a in argv] or sorted((REPO / "reports").glob("*-boards"))
    table, panels = build(folders)
    SPREAD_TABLE.write_text(table.to_csv(index=False, float_format="%.10g"))
    print(f"wrote {SPREAD_TABLE.relative_to(REPO)}: {len(table)} rows")
    for model, rows in panels:
        print(summary(model, rows))
    print(f"re-derived {len(rederive_committed())} committed runs of schema {SCHEMA_VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
