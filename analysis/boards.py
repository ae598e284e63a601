"""Many boards compared: each quantity's distribution over the boards of one GPU model, and the boards that
stand out of it (the node and fleet summaries).  The screen reads each run's run.json and derived.csv only.

Per GPU model (run.json's device name) and quantity, each board gives one value: the median of its runs.  One
rule judges a model (``judging_rule``; the summary names it per model):

- ``fleet``: the model's own boards, where they are enough for a verdict (a board's |z| can pass the
  threshold: from 11 boards for one quantity, 19 for 300).  The centre is the median over the boards, the
  spread σ = 1.4826 MAD (the normal σ a MAD estimates), z = (value - median) / σ.  Over n boards the MAD is
  itself uncertain (its efficiency at the normal is 37%), so z is taken as Student's t with 0.37 n degrees
  of freedom (a Monte Carlo of normal boards puts its tail a little inside that t's).
- ``panel``: fewer boards, and the model has a panel in analysis/board-spread.csv (analysis/repro.py: per
  quantity the panel's boards n_p, their median m and relative standard deviation s).  A healthy board's
  z = (value - m) / (s |m| sqrt(1 + π / (2 n_p))) is Student's t with n_p - 1 degrees of freedom: the board's
  own draw and the panel median's (π / 2n is a median's large-sample variance, more than a small panel's
  median has, so the rule errs towards fewer alarms), over an s estimated from n_p values; the table's
  rounding of m (half a unit of its last digit, PANEL_DIGITS) is added to m's uncertainty.  A quantity the
  panel's boards read alike (s = 0) is not judged: its spread is unknown, not zero.
- ``none``: too few boards and no panel: each quantity's boards are shown, and no board is judged.

A board is an outlier in a quantity when its |z| exceeds the threshold and its deviation exceeds what the
quantity's own intervals allow: the board's CI excludes the centre, and the board lies outside the centre's
repro interval (each run's ``repro_low``/``repro_high`` relative to its value, the median of those over the
boards, placed around the centre; a run without an interval leaves its test out).  The threshold holds the
false alarms of a healthy summary to FALSE_ALARMS: each of the n boards passes it with probability
FALSE_ALARMS / (n Q) in each of the model's Q judged quantities (both tails).  For 1,000 boards and 300
quantities it is about 5.6; for a node of four boards against a panel of nine, t with 8 degrees of freedom
puts it near 10: a spread known from nine boards cannot tell a few percent in one quantity from itself.

A board is slow in a mechanism (GROUPS) when the mean of its z over the group's judged quantities is low:

- ``fleet``: that mean, for every board of the model, is screened as a quantity of its own (median, MAD,
  t with 0.37 n degrees of freedom).  Its spread is measured over the boards, so however the group's
  quantities co-vary the threshold holds.
- ``panel``: the mean itself is the group's z, taken as t with the smallest n_p - 1 of its quantities.
  That is exact when the group's quantities move together (every z the same) and conservative when they
  do not (a mean of t's spreads less than one t).

The group test is one-sided (the mechanism slower than the model) and holds the false alarms of a healthy
summary to FALSE_ALARMS of its own: a board passes with probability FALSE_ALARMS / (n G) in each of the
model's G groups.  A faithful slow board is low in every quantity of its mechanism, so its mean z grows
with the group's most precise members where one quantity's z would sit in the noise of 300.

σ (``fleet``) is never taken below 1.2533 times the mean absolute deviation from the median (the normal σ
that estimates; Iglewicz and Hoaglin's stand-in where the MAD is zero).  Where more than half the boards agree
exactly (counts, structural quantities, values a probe quantizes) the MAD is zero, and where a minority of
boards sits in a second mode the MAD sees only the majority: the mean deviation then keeps those boards from
being flagged.  It also bounds a single board's |z| by n / 1.2533, which is why a few boards need the panel.
``tools/fleet_bench.py`` checks a 1,000-board fleet.
"""
from __future__ import annotations

import functools
import io
import json
import math
from fnmatch import fnmatchcase
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
from scipy.special import stdtrit

from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.repro import read_spread_table
from gpuatlas.analysis.results import RENAMED_QUANTITIES, RunDir, atomic_write_bytes, atomic_write_text

#: Expected false alarms of a whole summary (every board and quantity of a model) when every board is healthy;
#: the group screen holds its own to the same.
FALSE_ALARMS = 0.01
#: The robust z's degrees of freedom per board (the MAD's efficiency at the normal).
MAD_EFFICIENCY = 0.37
#: Boards of one model a quantity needs before its own boards judge it.
MIN_BOARDS = 3
#: The normal σ per MAD, and per mean absolute deviation.
SIGMA_PER_MAD, SIGMA_PER_MEAN_AD = 1.4826, 1.2533
INTERVALS = ("ci_low", "ci_high", "repro_low", "repro_high")
LONG_COLUMNS = ("board", "run_id", "uuid", "gpu", "quantity", "value", "unit", *INTERVALS)
BOARD_COLUMNS = ("board", "uuid", "gpu", "run_id", "runs", "quantity", "value", "unit", "ci_low", "ci_high",
                 "median", "sigma", "deviation", "z", "threshold", "boards", "outlier", "rule")
#: Significant digits of analysis/board-spread.csv's medians (tools/board_spread.py writes "%.10g").
PANEL_DIGITS = 10
#: A group's row in the screen: ``group:<name>``.
GROUP_PREFIX = "group:"
#: Mechanism groups: name -> (the mechanism, the quantity id patterns, shell-style ``*``).  A board slow in the
#: mechanism is slow by one factor in every member, and no member moves without it.
#:
#: - hbm: a board whose HBM is slow (a lower memory clock, a retired stack or channel) streams slower in every
#:   rate bound by HBM: read, write, copy, partial-sector writes, the large-footprint read, HBM read per clock
#:   (the SM clock is fixed), the async copies from HBM (cp.async, TMA, ld.global into shared), Little's-law
#:   peak, the full-occupancy read and the m=1 decode (a GEMV streaming its weights).  Not the latencies
#:   (they move with the chain's placement too) nor the L2 rates.
#: - tensor: a board whose power limit or cooling holds its clock down under tensor load loses that clock's
#:   ratio in every tensor rate per second: each type's peak and sustained wgmma rate, mma.sync, and the
#:   tensor-core GEMMs (cuBLAS, Triton).  Not the rates per clock nor the latencies in cycles (a clock
#:   leaves them), nor the FMA pipes' rates (another power draw).
GROUPS = {
    "hbm": ("HBM streaming bandwidth",
            ("dram.*_bandwidth_*bytes_per_s", "dram.partial_write_*_bytes_per_s", "dram.read_bytes_per_clk_sm",
             "cp_async.bandwidth_bytes_per_s", "ldg_smem.bandwidth_bytes_per_s", "tma.bandwidth_bytes_per_s",
             "littles.peak_bandwidth_bytes_per_s", "occupancy.full_occupancy_dram_bandwidth_bytes_per_s",
             "decode.m1_bandwidth_bytes_per_s")),
    "tensor": ("tensor-core rate at the clock under load",
               ("tc.*.peak_flops", "tc.*.sustained_flops", "tc.*.mma_sync_peak_flops", "matmul.cublas_*_flops",
                "matmul.triton_*_flops")),
}


@functools.lru_cache(maxsize=None)
def group_of(quantity: str) -> str | None:
    """The mechanism group ``quantity`` belongs to (GROUPS), else None."""
    return next((name for name, (_, patterns) in GROUPS.items()
                 if any(fnmatchcase(quantity, p) for p in patterns)), None)


def is_group(quantity) -> bool:
    return str(quantity).startswith(GROUP_PREFIX)


def z_threshold(boards, quantities, dof=None, sides: int = 2) -> np.ndarray:
    """The |z| a healthy board of a model with ``boards`` boards and ``quantities`` judged quantities (or
    groups) passes with probability FALSE_ALARMS / (boards x quantities), on ``sides`` tails: Student's t with
    ``dof`` degrees of freedom (default MAD_EFFICIENCY x boards, the model's own boards)."""
    boards, quantities = np.asarray(boards, float), np.maximum(np.asarray(quantities, float), 1)
    dof = MAD_EFFICIENCY * boards if dof is None else np.asarray(dof, float)
    return -stdtrit(dof, FALSE_ALARMS / (sides * boards * quantities))  # t's upper quantile, by its symmetry


def panel_z(value, median, spread, boards) -> np.ndarray:
    """A board's z against a panel of ``boards`` boards with ``median`` and relative standard deviation
    ``spread``: Student's t with boards - 1 degrees of freedom for a healthy board (the module docstring)."""
    value, median = np.asarray(value, float), np.asarray(median, float)
    sd, boards = np.asarray(spread, float) * np.abs(median), np.asarray(boards, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rounding = 0.5 * 10.0 ** (np.floor(np.log10(np.abs(median))) - (PANEL_DIGITS - 1))
        return (value - median) / np.sqrt(sd ** 2 * (1 + math.pi / (2 * boards)) + rounding ** 2)


def judging_rule(boards: int, quantities: int, has_panel: bool) -> str:
    """``fleet`` where a model's own boards can give a verdict (a lone board's largest |z|, n / 1.2533, passes
    their threshold), else ``panel`` where the model has one, else ``none``."""
    if boards / SIGMA_PER_MEAN_AD > z_threshold(boards, max(quantities, 1)):
        return "fleet"
    return "panel" if has_panel else "none"


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


def screen(long: pd.DataFrame, spreads: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each board's value against its model (BOARD_COLUMNS): centre, σ, relative deviation, z, how many boards,
    whether the board is an outlier and which rule judged it (the module docstring), then one row per board
    and mechanism group (``group:<name>``: value the mean z of its members, deviation their mean deviation).
    ``spreads``: the panels' table (default analysis/board-spread.csv)."""
    if long.empty:
        return pd.DataFrame(columns=list(BOARD_COLUMNS))
    out = board_values(long)
    g = out.groupby(["gpu", "quantity"], sort=False)
    out["boards"] = g["value"].transform("size")
    out["median"] = g["value"].transform("median")
    dev = out["value"] - out["median"]
    out["_abs"] = dev.abs()
    g = out.groupby(["gpu", "quantity"], sort=False)["_abs"]
    out["sigma"] = np.maximum(SIGMA_PER_MAD * g.transform("median"), SIGMA_PER_MEAN_AD * g.transform("mean"))
    with np.errstate(divide="ignore", invalid="ignore"):
        out["z"] = np.where(dev == 0, 0.0, dev / out["sigma"])  # a nonzero dev has a nonzero mean deviation
    out["_dof"] = MAD_EFFICIENCY * out["boards"]
    screened = (out["boards"] >= MIN_BOARDS).to_numpy().copy()

    spreads = read_spread_table() if spreads is None else spreads
    own = out[screened].groupby("gpu")["quantity"].nunique()
    rules = {gpu: judging_rule(f["uuid"].nunique(), int(own.get(gpu, 0)), gpu in set(spreads["model"]))
             for gpu, f in out.groupby("gpu")}
    out["rule"] = out["gpu"].map(rules)
    panel = (out["rule"] == "panel").to_numpy()
    if panel.any():
        held = spreads.rename(columns={"model": "gpu", "median": "_m", "spread": "_s", "boards": "_n"})
        held = out[["gpu", "quantity"]].merge(held[["gpu", "quantity", "_m", "_s", "_n"]], how="left")
        judged = (held["_s"] > 0).to_numpy() & np.isfinite(held["_m"].to_numpy())
        centre, sd = held["_m"].to_numpy(), (held["_s"] * held["_m"].abs()).to_numpy()
        z = panel_z(out["value"].to_numpy(), centre, held["_s"].to_numpy(), held["_n"].to_numpy())
        for column, values in (("median", centre), ("sigma", sd), ("z", z), ("_dof", held["_n"].to_numpy() - 1)):
            out[column] = np.where(panel, np.where(judged, values, np.nan), out[column])
        screened = np.where(panel, judged, screened)
    screened = screened & (out["rule"] != "none").to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["deviation"] = (out["value"] - out["median"]) / out["median"].abs()
    outside_ci = ~((out["ci_low"] <= out["median"]) & (out["median"] <= out["ci_high"]))
    with np.errstate(divide="ignore", invalid="ignore"):
        below = (out["value"] - out["repro_low"]) / out["value"].abs()
        above = (out["repro_high"] - out["value"]) / out["value"].abs()
    low = out["median"] - below.groupby([out["gpu"], out["quantity"]]).transform("median") * out["median"].abs()
    high = out["median"] + above.groupby([out["gpu"], out["quantity"]]).transform("median") * out["median"].abs()
    outside_repro = ~((low <= out["value"]) & (out["value"] <= high))
    quantities = out[screened].groupby("gpu")["quantity"].nunique()
    out["threshold"] = np.where(screened, z_threshold(out["boards"], out["gpu"].map(quantities).fillna(1),
                                                      out["_dof"]), np.nan)
    out["outlier"] = screened & (out["z"].abs() > out["threshold"]) & outside_ci & outside_repro
    out = pd.concat([out, group_screen(out)], ignore_index=True) if screened.any() else out
    return out.loc[:, list(BOARD_COLUMNS)].sort_values(["gpu", "quantity", "board"], ignore_index=True)


def group_screen(out: pd.DataFrame) -> pd.DataFrame:
    """One row per board and mechanism group of the judged quantities in ``out`` (the screen's rows, with
    their degrees of freedom ``_dof``): the mean z of the board's members, and its verdict (one-sided: slow)."""
    member = out["quantity"].map(group_of)
    rows = out[member.notna() & out["threshold"].notna() & np.isfinite(out["z"])].assign(_group=member)
    if rows.empty:
        return pd.DataFrame(columns=list(BOARD_COLUMNS))
    g = rows.groupby(["gpu", "uuid", "_group"], sort=False)
    groups = g[["board", "run_id", "runs", "rule"]].first()
    groups["value"], groups["deviation"], groups["_dof"] = g["z"].mean(), g["deviation"].mean(), g["_dof"].min()
    groups = groups.reset_index()
    by = groups.groupby(["gpu", "_group"], sort=False)
    groups["boards"] = by["value"].transform("size")
    own = groups["rule"] == "fleet"
    groups["median"] = np.where(own, by["value"].transform("median"), 0.0)
    spread = (groups["value"] - groups["median"]).abs().groupby([groups["gpu"], groups["_group"]])
    sigma = np.maximum(SIGMA_PER_MAD * spread.transform("median"), SIGMA_PER_MEAN_AD * spread.transform("mean"))
    groups["sigma"] = np.where(own, sigma, 1.0)
    dev = groups["value"] - groups["median"]
    with np.errstate(divide="ignore", invalid="ignore"):
        groups["z"] = np.where(dev == 0, 0.0, dev / groups["sigma"])
    dof = np.where(own, MAD_EFFICIENCY * groups["boards"], groups["_dof"])
    count = groups.groupby("gpu")["_group"].transform("nunique")
    boards = groups.groupby("gpu")["uuid"].transform("nunique")
    groups["threshold"] = z_threshold(boards, count, dof, sides=1)
    groups["outlier"] = groups["z"] < -groups["threshold"]
    groups["quantity"], groups["unit"] = GROUP_PREFIX + groups["_group"], "mean z"
    groups["ci_low"] = groups["ci_high"] = np.nan
    return groups.loc[:, list(BOARD_COLUMNS)]


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


def model_rules(compared: pd.DataFrame, spreads: pd.DataFrame | None = None) -> dict:
    """Per model: the rule that judged it, its boards, the smallest threshold of its quantities and of its
    groups, and (``panel``) which panel."""
    spreads = read_spread_table() if spreads is None else spreads
    models = {}
    for gpu, f in compared.groupby("gpu"):
        groups = f["quantity"].map(is_group)
        rule = f["rule"].iat[0]
        entry = {"rule": rule, "boards": int(f["uuid"].nunique())}
        for key, rows in (("threshold", f[~groups]), ("group_threshold", f[groups])):
            if rows["threshold"].notna().any():
                entry[key] = round(float(rows["threshold"].min()), 2)
        if rule == "panel":
            own = spreads[spreads["model"] == gpu]
            entry["panel"] = f"{own['panel'].iat[0]}: {int(own['boards'].max())} boards, in analysis/board-spread.csv"
        models[gpu] = entry
    return models


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
                          "rule": "analysis/boards.py", "groups": {k: v[0] for k, v in GROUPS.items()},
                          "models": model_rules(compared)},
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
