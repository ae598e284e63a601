"""Many boards of one kind compared: each quantity's distribution over the boards, and the boards that stand
out of it by more than a quantity moves between two runs of one board.

The run-to-run spread of a quantity is (max - min) / |median| over repeated runs of one board, the largest
over the boards measured repeatedly (``REPEAT_RUNS``: consecutive full runs on two H200 boards).  A board
is an outlier in a quantity when |value - median over boards| / |median| exceeds that spread: a difference
no repeat of one board produced.  A quantity no board was measured twice in has no spread and flags nothing.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.errors import UsageError
from analysis.results import RunDir, atomic_write_text
from analysis.units import fmt_value

REPO = Path(__file__).resolve().parents[1]
#: Folders of repeated runs on one board each, whose derived.csv files give the run-to-run spread.
REPEAT_RUNS = (REPO / "reports" / "h200-repeat",)
BOARD_COLUMNS = ("board", "run_id", "uuid", "gpu", "quantity", "value", "unit", "median", "deviation",
                 "spread", "outlier")


def run_dirs(folder: Path) -> list[Path]:
    """Run directories (with a run.json) directly under ``folder``."""
    return sorted(p for p in Path(folder).iterdir() if (p / "run.json").is_file()) if Path(folder).is_dir() else []


def run_to_run_spread(folders=REPEAT_RUNS) -> pd.Series:
    """quantity -> largest (max - min) / |median| over the repeated runs of any one board in ``folders``."""
    per_board: dict[str, list[pd.Series]] = {}
    for folder in folders:
        for path in run_dirs(folder):
            run = RunDir(path)
            uuid = run.read_meta()["device"].get("uuid") or path.name
            per_board.setdefault(uuid, []).append(run.read_derived().set_index("quantity")["value"])
    spreads = []
    for runs in per_board.values():
        if len(runs) < 2:
            continue
        values = pd.concat(runs, axis=1)
        values = values[values.notna().sum(axis=1) >= 2]
        spreads.append((values.max(axis=1) - values.min(axis=1)) / values.median(axis=1).abs())
    if not spreads:
        return pd.Series(dtype=float, name="spread")
    return pd.concat(spreads, axis=1).max(axis=1).replace([np.inf], np.nan).dropna().rename("spread")


def board_label(meta: dict) -> str:
    """A board's short name: its UUID's first eight characters after ``GPU-``, else its run id."""
    uuid = meta["device"].get("uuid") or ""
    return uuid.removeprefix("GPU-")[:8] or meta["run_id"]


def load_boards(paths: list[Path]) -> tuple[list[dict], pd.DataFrame]:
    """(metas, long frame of board, run_id, uuid, gpu, quantity, value, unit) of finished runs."""
    metas, frames = [], []
    for path in paths:
        run = RunDir(Path(path))
        meta = run.read_meta()
        if not run.derived_path.is_file():
            continue
        derived = run.read_derived()
        metas.append(meta)
        frames.append(derived[["quantity", "value", "unit"]].assign(
            board=board_label(meta), run_id=meta["run_id"], uuid=meta["device"].get("uuid"), gpu=meta["gpu"]))
    if not frames:
        return metas, pd.DataFrame(columns=list(BOARD_COLUMNS[:7]))
    return metas, pd.concat(frames, ignore_index=True)


def compare_boards(long: pd.DataFrame, spread: pd.Series) -> pd.DataFrame:
    """Each board's value against the median over boards of its GPU model: the relative deviation, the
    quantity's run-to-run spread and whether the board is an outlier (deviation beyond the spread)."""
    if long.empty:
        return pd.DataFrame(columns=list(BOARD_COLUMNS))
    out = long.copy()
    out["median"] = out.groupby(["gpu", "quantity"])["value"].transform("median")
    out["deviation"] = (out["value"] - out["median"]) / out["median"].abs()
    out["spread"] = out["quantity"].map(spread)
    counts = out.groupby(["gpu", "quantity"])["uuid"].transform("nunique")
    out["outlier"] = (counts >= 2) & out["spread"].notna() & (out["deviation"].abs() > out["spread"])
    return out.loc[:, list(BOARD_COLUMNS)].sort_values(["quantity", "board"], ignore_index=True)


def distribution(compared: pd.DataFrame) -> pd.DataFrame:
    """Per GPU model and quantity: boards, median, min, quartiles, max, spread, outlier boards."""
    if compared.empty:
        return pd.DataFrame()
    g = compared.groupby(["gpu", "quantity"])
    table = g["value"].agg(boards="size", median="median", min="min",
                           q25=lambda v: v.quantile(0.25), q75=lambda v: v.quantile(0.75), max="max")
    table["unit"] = g["unit"].first()
    table["spread"] = g["spread"].first()
    table["outliers"] = g.apply(lambda f: " ".join(f.loc[f["outlier"], "board"]), include_groups=False)
    return table.reset_index()


def write_summary(folder: Path, paths: list[Path], kind: str, spread: pd.Series | None = None,
                  extra: dict | None = None) -> pd.DataFrame:
    """``<kind>.csv`` (one row per board and quantity) and ``<kind>.json`` (boards, outliers, the spread's
    sources) in ``folder``; returns the CSV's frame."""
    spread = run_to_run_spread() if spread is None else spread
    metas, long = load_boards(paths)
    compared = compare_boards(long, spread)
    atomic_write_text(folder / f"{kind}.csv", compared.to_csv(index=False))
    outliers = compared[compared["outlier"]]
    summary = {"kind": kind, "boards": [{"board": board_label(m), "run_id": m["run_id"], "gpu": m["gpu"],
                                         "uuid": m["device"].get("uuid"), "pci_bus_id": m["device"].get("pci_bus_id")}
                                        for m in metas],
               "spread_from": [str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p) for p in REPEAT_RUNS],
               "outliers": json.loads(outliers[["board", "quantity", "value", "median", "deviation", "spread"]]
                                      .to_json(orient="records")),
               **(extra or {})}
    atomic_write_text(folder / f"{kind}.json", json.dumps(summary, indent=2) + "\n")
    return compared


def read_summary(folder: Path, kind: str) -> tuple[dict, pd.DataFrame]:
    path = Path(folder) / f"{kind}.json"
    if not path.is_file():
        raise UsageError(f"{folder} has no {kind}.json: make it with `gpuatlas "
                         f"{'run --gpus' if kind == 'node' else 'fleet'}`")
    return json.loads(path.read_text()), pd.read_csv(Path(folder) / f"{kind}.csv")


def _pct(v) -> str:
    return "" if pd.isna(v) else f"{v:+.2%}"


def boards_sections(summary: dict, compared: pd.DataFrame) -> list:
    """The node or fleet page's sections: boards, outliers, distributions."""
    boards = pd.DataFrame(summary["boards"])
    out = [("Boards", boards if len(boards) else ["no finished board run"])]
    outliers = compared[compared["outlier"].astype(bool)] if len(compared) else compared
    if len(outliers):
        shown = pd.DataFrame({"board": outliers["board"], "quantity": outliers["quantity"],
                              "value": [fmt_value(v, u) for v, u in zip(outliers["value"], outliers["unit"])],
                              "median of boards": [fmt_value(v, u)
                                                   for v, u in zip(outliers["median"], outliers["unit"])],
                              "deviation": [_pct(v) for v in outliers["deviation"]],
                              "run-to-run spread": [f"{v:.2%}" for v in outliers["spread"]]})
        out.append(("Outliers: deviation from the median of the boards beyond the run-to-run spread", shown))
    else:
        out.append(("Outliers", ["none: every board is within each quantity's run-to-run spread of the median "
                                 "(or the quantity has no measured spread)"]))
    table = distribution(compared)
    if len(table):
        shown = pd.DataFrame({"gpu": table["gpu"], "quantity": table["quantity"], "boards": table["boards"],
                              **{c: [fmt_value(v, u) for v, u in zip(table[c], table["unit"])]
                                 for c in ("median", "min", "q25", "q75", "max")},
                              "spread": ["" if pd.isna(v) else f"{v:.2%}" for v in table["spread"]],
                              "outliers": table["outliers"]})
        out.append(("Each quantity over the boards (spread: run-to-run, from " + ", ".join(summary["spread_from"])
                    + ")", shown))
    return out


def render_boards(folder: Path, kind: str, out_dir: Path) -> Path:
    """The node or fleet page of ``folder`` (from its summary files, and a node's links run) into ``out_dir``."""
    from analysis.links import link_sections
    from analysis.render import _write_page

    summary, compared = read_summary(folder, kind)
    title = f"gpuatlas: {kind} of {len(summary['boards'])} boards ({Path(folder).name})"
    links = [link_sections(RunDir(Path(folder) / "links" / summary["links_run"]))] if summary.get("links_run") else []
    return _write_page(title, boards_sections(summary, compared) + [s for part in links for s in part], out_dir)
