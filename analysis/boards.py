"""Many boards compared: each quantity's distribution over the boards of one GPU model, and the boards that
stand out of it (the node and fleet summaries).  The screen reads each run's run.json and derived.csv only.

Per GPU model (run.json's device name) and quantity, each board gives one value: the median of its runs.  The
model's centre is the median over its boards, its spread σ = 1.4826 MAD (the normal σ a MAD estimates).  A
board is an outlier in a quantity when

1. its model has at least MIN_BOARDS boards with the quantity (fewer give no verdict);
2. its robust z = (value - median) / σ exceeds the threshold in size; and
3. its deviation exceeds what the quantity's own intervals allow: the board's CI excludes the model's median,
   and the board lies outside the model median's repro interval (the interval another board of the model is
   expected to land in: each run's ``repro_low``/``repro_high`` relative to its value, the median of those
   over the boards, placed around the model's median).  A run without an interval leaves its test out.

The threshold holds the false alarms of a whole summary to FALSE_ALARMS: a healthy board (spread normally)
passes it with probability FALSE_ALARMS / (n Q) in each quantity, n the model's boards and Q its screened
quantities.  Over n boards the MAD is itself uncertain (its efficiency at the normal is 37%), so the robust z
is taken as Student's t with 0.37 n degrees of freedom (a Monte Carlo of normal boards puts its tail a little
inside that t's).  For 1,000 boards and 300 quantities the threshold is about 5.6: a 5% slow board is found in a
quantity whose boards spread by σ below 0.9%.  For a node of eight boards it is about 85: a handful of boards
cannot tell a few percent from their own spread.  ``tools/fleet_bench.py`` checks a 1,000-board fleet.

σ is never taken below 1.2533 times the mean absolute deviation from the median (the normal σ that estimates;
Iglewicz and Hoaglin's stand-in where the MAD is zero).  Where more than half the boards agree exactly (counts,
structural quantities, values a probe quantizes) the MAD is zero, and where a minority of boards sits in a
second mode the MAD sees only the majority: the mean deviation then keeps those boards from being flagged.  It
also bounds a single board's |z| by n / 1.2533, so a summary of n boards can flag a board only where that
exceeds the threshold: from about 11 boards for one quantity and 19 for 300.  A node of eight boards gives no
verdict; its page shows each quantity's boards.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
from scipy import stats

from analysis.errors import UsageError
from analysis.results import RENAMED_QUANTITIES, RunDir, atomic_write_bytes, atomic_write_text
from analysis.units import fmt_value

#: Expected false alarms of a whole summary (every board and quantity of a model) when every board is healthy.
FALSE_ALARMS = 0.01
#: The robust z's degrees of freedom per board (the MAD's efficiency at the normal).
MAD_EFFICIENCY = 0.37
#: Boards of one model a quantity needs before any board of it is screened.
MIN_BOARDS = 3
#: The normal σ per MAD, and per mean absolute deviation.
SIGMA_PER_MAD, SIGMA_PER_MEAN_AD = 1.4826, 1.2533
INTERVALS = ("ci_low", "ci_high", "repro_low", "repro_high")
LONG_COLUMNS = ("board", "run_id", "uuid", "gpu", "quantity", "value", "unit", *INTERVALS)
BOARD_COLUMNS = ("board", "uuid", "gpu", "run_id", "runs", "quantity", "value", "unit", "ci_low", "ci_high",
                 "median", "sigma", "deviation", "z", "threshold", "boards", "outlier")


def z_threshold(boards, quantities) -> np.ndarray:
    """The |robust z| a healthy board of a model with ``boards`` boards and ``quantities`` screened quantities
    passes with probability FALSE_ALARMS / (boards x quantities): Student's t with MAD_EFFICIENCY x boards
    degrees of freedom."""
    boards, quantities = np.asarray(boards, float), np.maximum(np.asarray(quantities, float), 1)
    return stats.t.isf(FALSE_ALARMS / (2 * boards * quantities), MAD_EFFICIENCY * boards)


def run_dirs(folder: Path) -> list[Path]:
    """Run directories (with a run.json) directly under ``folder``."""
    return sorted(p for p in Path(folder).iterdir() if (p / "run.json").is_file()) if Path(folder).is_dir() else []


def board_label(meta: dict) -> str:
    """A board's short name: its UUID's first eight characters after ``GPU-``, else its run id."""
    uuid = meta["device"].get("uuid") or ""
    return uuid.removeprefix("GPU-")[:8] or meta["run_id"]


def load_boards(paths: list[Path]) -> tuple[list[dict], pd.DataFrame]:
    """(metas, long frame of LONG_COLUMNS) of the runs with a derived.csv; intervals a run lacks are NaN, and
    a quantity a later schema renamed is read under its new id (as RunDir.read_derived reads it)."""
    metas, tables = [], []
    for path in paths:
        run = RunDir(Path(path))
        meta = run.read_meta()
        if not run.derived_path.is_file():
            continue
        metas.append(meta)
        tables.append(_derived_table(run))
    if not tables:
        return metas, pd.DataFrame(columns=list(LONG_COLUMNS))
    long = pa.concat_tables(tables).to_pandas()
    sizes = [t.num_rows for t in tables]
    for column, values in (("board", [board_label(m) for m in metas]), ("run_id", [m["run_id"] for m in metas]),
                           ("uuid", [m["device"].get("uuid") or m["run_id"] for m in metas]),
                           ("gpu", [m["gpu"] for m in metas])):
        long[column] = np.repeat(np.array(values, dtype=object), sizes)
    schema = np.repeat([m["schema_version"] for m in metas], sizes)
    for version in sorted(RENAMED_QUANTITIES):
        older = schema < version
        if older.any():
            long.loc[older, "quantity"] = long.loc[older, "quantity"].replace(RENAMED_QUANTITIES[version])
    return metas, long.loc[:, list(LONG_COLUMNS)]


def _derived_table(run: RunDir) -> pa.Table:
    """A run's derived.csv as quantity, value, unit and the interval bounds (NaN where it has none), read by
    pyarrow (a thousand runs in a second); a file pyarrow cannot read goes to the run's own reader, whose
    message says what is wrong."""
    types = {"quantity": pa.string(), "unit": pa.string(), "value": pa.float64(),
             **{c: pa.float64() for c in INTERVALS}}
    try:
        table = pacsv.read_csv(run.derived_path, convert_options=pacsv.ConvertOptions(
            column_types=types, include_columns=list(types), include_missing_columns=True))
        if table["quantity"].null_count == 0:
            return table
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    frame = run.read_derived().reindex(columns=list(types))
    frame[["value", *INTERVALS]] = frame[["value", *INTERVALS]].apply(pd.to_numeric, errors="coerce")
    return pa.Table.from_pandas(frame, schema=pa.schema(list(types.items())), preserve_index=False)


def board_values(long: pd.DataFrame) -> pd.DataFrame:
    """One row per board and quantity: the median of the board's runs (value and interval bounds), its latest
    run and how many runs it has."""
    long = long[np.isfinite(pd.to_numeric(long["value"], errors="coerce"))]
    g = long.groupby(["gpu", "uuid", "quantity"], sort=False)
    out = g[["value", *INTERVALS]].median()
    out["board"], out["run_id"], out["unit"] = g["board"].first(), g["run_id"].max(), g["unit"].first()
    out["runs"] = g.size()
    return out.reset_index()


def screen(long: pd.DataFrame) -> pd.DataFrame:
    """Each board's value against its model's boards (BOARD_COLUMNS): median, σ, relative deviation, robust
    z, how many boards, and whether the board is an outlier (the module docstring's rule)."""
    if long.empty:
        return pd.DataFrame(columns=list(BOARD_COLUMNS))
    out = board_values(long)
    g = out.groupby(["gpu", "quantity"], sort=False)
    out["boards"] = g["value"].transform("size")
    out["median"] = g["value"].transform("median")
    dev = out["value"] - out["median"]
    out["_abs"] = dev.abs()
    g = out.groupby(["gpu", "quantity"], sort=False)["_abs"]
    sigma = np.maximum(SIGMA_PER_MAD * g.transform("median"), SIGMA_PER_MEAN_AD * g.transform("mean"))
    out["sigma"] = sigma
    with np.errstate(divide="ignore", invalid="ignore"):
        out["z"] = np.where(dev == 0, 0.0, dev / sigma)  # a nonzero dev has a nonzero mean deviation
        out["deviation"] = dev / out["median"].abs()
    outside_ci = ~((out["ci_low"] <= out["median"]) & (out["median"] <= out["ci_high"]))
    with np.errstate(divide="ignore", invalid="ignore"):
        below = (out["value"] - out["repro_low"]) / out["value"].abs()
        above = (out["repro_high"] - out["value"]) / out["value"].abs()
    low = out["median"] - below.groupby([out["gpu"], out["quantity"]]).transform("median") * out["median"].abs()
    high = out["median"] + above.groupby([out["gpu"], out["quantity"]]).transform("median") * out["median"].abs()
    outside_repro = ~((low <= out["value"]) & (out["value"] <= high))
    screened = out["boards"] >= MIN_BOARDS
    quantities = out[screened].groupby("gpu")["quantity"].nunique()
    out["threshold"] = np.where(screened, z_threshold(out["boards"], out["gpu"].map(quantities).fillna(1)), np.nan)
    out["outlier"] = screened & (out["z"].abs() > out["threshold"]) & outside_ci & outside_repro
    return out.loc[:, list(BOARD_COLUMNS)].sort_values(["gpu", "quantity", "board"], ignore_index=True)


def distribution(compared: pd.DataFrame) -> pd.DataFrame:
    """Per GPU model and quantity: boards, median, σ, min, quartiles, max, how many boards are outliers and
    which (their labels)."""
    if compared.empty:
        return pd.DataFrame()
    g = compared.groupby(["gpu", "quantity"])
    table = g["value"].agg(boards="size", median="median", min="min",
                           q25=lambda v: v.quantile(0.25), q75=lambda v: v.quantile(0.75), max="max")
    table["unit"], table["sigma"] = g["unit"].first(), g["sigma"].first()
    flagged = compared[compared["outlier"].astype(bool)]
    table["outliers"] = flagged.groupby(["gpu", "quantity"]).size().reindex(table.index).fillna(0).astype(int)
    table["outlier_boards"] = flagged.groupby(["gpu", "quantity"])["board"].agg(" ".join).reindex(table.index)
    return table.reset_index()


def write_summary(folder: Path, paths: list[Path], kind: str, extra: dict | None = None) -> pd.DataFrame:
    """``<kind>.csv`` (one row per board and quantity: the screen) and ``<kind>.json`` (the boards, the rule,
    the outliers) in ``folder``; returns the CSV's frame."""
    metas, long = load_boards(paths)
    compared = screen(long)
    csv = io.BytesIO()  # pyarrow's writer: a thousand boards' rows in a tenth of pandas' time
    pacsv.write_csv(pa.Table.from_pandas(compared, preserve_index=False), csv)
    atomic_write_bytes(folder / f"{kind}.csv", csv.getvalue())
    outliers = compared[compared["outlier"].astype(bool)]
    summary = {"kind": kind,
               "boards": [{"board": board_label(m), "run_id": m["run_id"], "gpu": m["gpu"],
                           "uuid": m["device"].get("uuid"), "pci_bus_id": m["device"].get("pci_bus_id")}
                          for m in metas],
               "screen": {"false_alarms": FALSE_ALARMS, "min_boards": MIN_BOARDS, "reads": "derived.csv",
                          "rule": "analysis/boards.py",
                          "thresholds": {gpu: round(float(t), 2) for gpu, t in
                                         compared.groupby("gpu")["threshold"].min().dropna().items()}},
               "outliers": json.loads(outliers[["board", "uuid", "run_id", "quantity", "value", "unit", "median",
                                                "deviation", "z"]].to_json(orient="records")),
               **(extra or {})}
    atomic_write_text(folder / f"{kind}.json", json.dumps(summary, indent=2) + "\n")
    return compared


def read_summary(folder: Path, kind: str) -> tuple[dict, pd.DataFrame]:
    path = Path(folder) / f"{kind}.json"
    if not path.is_file():
        raise UsageError(f"{folder} has no {kind}.json: make it with `gpuatlas "
                         f"{'run --gpus' if kind == 'node' else 'fleet'}`")
    return json.loads(path.read_text()), pd.read_csv(Path(folder) / f"{kind}.csv")


def pct(v) -> str:
    return "" if pd.isna(v) else f"{v:+.2%}"


def z_text(v) -> str:
    return "" if pd.isna(v) else ("inf" if np.isinf(v) else f"{v:+.1f}")


def rule_line(summary: dict) -> str:
    rule = summary.get("screen", {})
    held = ", ".join(f"{t:g} for {gpu}" for gpu, t in rule.get("thresholds", {}).items()) or "none screened"
    return (f"outlier: |robust z| against the median and MAD of its model's boards (at least "
            f"{rule.get('min_boards', MIN_BOARDS)}) beyond the threshold that keeps a healthy summary's false alarms "
            f"to {rule.get('false_alarms', FALSE_ALARMS)} ({held}), and beyond the board's CI and the model's repro "
            "interval")


def boards_sections(summary: dict, compared: pd.DataFrame) -> list:
    """The node page's sections: boards, outliers, distributions."""
    boards = pd.DataFrame(summary["boards"])
    out = [("Boards", boards if len(boards) else ["no finished board run"])]
    outliers = compared[compared["outlier"].astype(bool)] if len(compared) else compared
    if len(outliers):
        shown = pd.DataFrame({"board": outliers["board"], "quantity": outliers["quantity"],
                              "value": [fmt_value(v, u) for v, u in zip(outliers["value"], outliers["unit"])],
                              "median of boards": [fmt_value(v, u)
                                                   for v, u in zip(outliers["median"], outliers["unit"])],
                              "deviation": [pct(v) for v in outliers["deviation"]],
                              "robust z": [z_text(v) for v in outliers["z"]]})
        out.append(("Outliers: " + rule_line(summary), shown))
    else:
        out.append(("Outliers", ["none: " + rule_line(summary) + "; no board is one (a model with fewer than "
                                 f"{summary.get('screen', {}).get('min_boards', MIN_BOARDS)} boards is not screened)"]))
    table = distribution(compared)
    if len(table):
        shown = pd.DataFrame({"gpu": table["gpu"], "quantity": table["quantity"], "boards": table["boards"],
                              **{c: [fmt_value(v, u) for v, u in zip(table[c], table["unit"])]
                                 for c in ("median", "min", "q25", "q75", "max")},
                              "σ / median": ["" if pd.isna(s) or not m else f"{s / abs(m):.2%}"
                                             for s, m in zip(table["sigma"], table["median"])],
                              "outliers": table["outlier_boards"].fillna("")})
        out.append(("Each quantity over the boards (σ: 1.4826 MAD)", shown))
    return out


def render_boards(folder: Path, kind: str, out_dir: Path) -> Path:
    """The node or fleet page of ``folder`` (from its summary files, and a node's links run) into ``out_dir``."""
    summary, compared = read_summary(folder, kind)
    if kind == "fleet":
        from analysis.fleet_page import render_fleet_page

        return render_fleet_page(folder, summary, compared, out_dir)
    from analysis.links import link_sections
    from analysis.page import write_page

    title = f"gpuatlas: {kind} of {len(summary['boards'])} boards ({Path(folder).name})"
    links = [link_sections(RunDir(Path(folder) / "links" / summary["links_run"]))] if summary.get("links_run") else []
    return write_page(title, boards_sections(summary, compared) + [s for part in links for s in part], out_dir)
