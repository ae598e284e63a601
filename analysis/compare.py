"""Compare GPUs: derived quantities of measured runs and published references, long-form, grouped by level.

A comparison is one row per (gpu, quantity) with its CI, unit, method, the kind of figure it is (a
measurement, a datasheet figure, a reported size or clock), and, for references, the row's source and caveat.
A ratio is only a statement about hardware when both figures are the same kind: a datasheet L2 size over a
fitted L2 capacity, or a reported clock over a measured one, compares two definitions, not two GPUs.  Such a
pair gets no number ("n/c") but a footnote saying why.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from gpuatlas.analysis.derive import derived_for
from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.references import is_reference, load_reference
from gpuatlas.analysis.results import RunDir

COLUMNS = ("id", "gpu", "quantity", "level", "value", "ci_low", "ci_high", "unit", "method", "kind", "source", "caveat")

#: Level of a quantity id, from its prefix (the part before the first dot); the order is the report's.
LEVELS = {
    "clock": "clock", "launch": "launch",
    "smem": "shared memory", "dsmem": "shared memory",
    "l1": "L1", "tlb": "TLB", "l2": "L2", "mem": "L2", "dram": "HBM", "coalescing": "HBM",
    "littles": "latency hiding", "occupancy": "latency hiding",
    "tma": "async copy", "cp_async": "async copy", "ldg_smem": "async copy",
    "fp32": "compute", "fp64": "compute", "fp16": "compute", "int32": "compute", "dpx": "compute",
    "tc": "tensor", "matmul": "kernels", "roofline": "kernels", "fusion": "kernels",
}
_LEVEL_ORDER = list(dict.fromkeys(LEVELS.values()))

#: What a figure is, read from its method and its caveat (first match wins); anything else is a measurement.
_KINDS = (
    ("datasheet figure", re.compile(r"datasheet|cudadeviceprop", re.I), re.compile(r"not a measurement", re.I)),
    ("reported size", None, re.compile(r"size probe|not a fitted|not a latency knee", re.I)),
    ("reported clock", None, re.compile(r"not a measured", re.I)),
)


def level(quantity: str) -> str:
    """The hierarchy level a quantity id belongs to (its prefix's level, or the prefix itself if unknown)."""
    prefix = quantity.split(".", 1)[0]
    return LEVELS.get(prefix, prefix)


def kind(method: str, caveat) -> str:
    """What a figure is: a measurement, a datasheet figure, or a size or clock a tool reported."""
    caveat = caveat if isinstance(caveat, str) else ""
    return next((name for name, in_method, in_caveat in _KINDS
                 if (in_method and in_method.search(method)) or in_caveat.search(caveat)), "measurement")


def _sort_key(quantity: str):
    lvl = level(quantity)
    order = list(QUANTITIES)
    return (_LEVEL_ORDER.index(lvl) if lvl in _LEVEL_ORDER else len(_LEVEL_ORDER), lvl,
            order.index(quantity) if quantity in order else len(order), quantity)


def load_derived(source: str | Path) -> tuple[str, pd.DataFrame]:
    """A label and the derived quantities of a run directory (``gpuatlas.analysis.derive.derived_for``, the source
    ``report`` uses), or of a reference such as ``ref:h100-sxm`` (with ``source`` per row)."""
    if is_reference(source):
        return load_reference(source)
    meta, _, derived = derived_for(RunDir(Path(source)))
    return run_label(meta, source, derived)


def run_label(meta: dict, source, derived: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """A run's label in a comparison and its derived rows with their ``source`` and ``id`` (the run id)."""
    derived = derived.assign(source=f"measured by gpuatlas ({source})", id=meta["run_id"])
    return f"{meta['gpu']} [{meta['run_id']}]", derived


def _rows(source, loaded: dict | None) -> tuple[str, pd.DataFrame]:
    """One source's label and its rows of the long form (levels and kinds not yet added)."""
    label, derived = (loaded or {}).get(source) or load_derived(source)
    published = "source" in derived and is_reference(source)
    short = derived["id"].iat[0] if "id" in derived and len(derived) else str(source)
    return label, pd.DataFrame({
        "id": short, "gpu": label, "quantity": derived["quantity"], "value": derived["value"],
        "ci_low": derived["ci_low"], "ci_high": derived["ci_high"], "unit": derived["unit"],
        "method": derived["method"], "source": derived["source"],
        "caveat": derived["note"] if published else None})


def _long_form(long: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Rows with a value, their level and kind, sorted by level, quantity and the sources' order."""
    long = long[long["value"].notna()]
    long.insert(3, "level", long["quantity"].map(level))
    long["kind"] = [kind(m, c) for m, c in zip(long["method"], long["caveat"])]
    order = {label: i for i, label in enumerate(labels)}
    long = long.assign(_q=long["quantity"].map(_sort_key), _g=long["gpu"].map(order))
    return long.sort_values(["_q", "_g"]).drop(columns=["_q", "_g"])[list(COLUMNS)].reset_index(drop=True)


def source_rows(source: str, loaded: dict | None = None) -> pd.DataFrame:
    """The long form of one run or reference: its quantities with a value, columns ``COLUMNS`` (``loaded`` as
    for ``comparison``)."""
    label, rows = _rows(source, loaded)
    return _long_form(rows, [label])


def comparison(sources: list[str | Path], common: bool = False, loaded: dict | None = None) -> pd.DataFrame:
    """Long-form comparison: one row per (gpu, quantity), columns ``COLUMNS``, grouped by level.

    ``id`` is the run id or ``ref:NAME``; ``gpu`` the source's label (the GPU and its run id, or the
    reference); ``caveat`` is a reference row's note (empty for runs).  ``common`` keeps only the quantities
    every source has (``common_only``).  ``loaded`` maps a source to its ``(label, derived)`` where the caller
    has derived it already."""
    if len(sources) < 2:
        raise UsageError("compare needs two or more runs or ref:NAME (one was given); "
                         "for one run use `gpuatlas report`")
    frames, labels = [], {}
    for source in sources:
        label, rows = _rows(source, loaded)
        if label in labels:
            raise UsageError(f"{source} is the same run as {labels[label]}: give each run once")
        labels[label] = source
        frames.append(rows)
    long = _long_form(pd.concat(frames, ignore_index=True), list(labels))
    return common_only(long, len(labels)) if common else long


def common_only(long: pd.DataFrame, sources: int | None = None) -> pd.DataFrame:
    """The rows of the quantities every one of the ``sources`` compared GPUs has (default: those in ``long``),
    and the like-for-like quantity a shown one's ratio takes in its place (MATCHING)."""
    counts = long.groupby("quantity")["gpu"].nunique()
    every = set(counts.index[counts == (sources or long["gpu"].nunique())])
    companions = {match for quantity, (match, _) in MATCHING.items() if quantity in every} - every
    shown = long[long["quantity"].isin(every | companions)].reset_index(drop=True)
    shown.attrs["companions"] = companions  # kept for the ratios, not shown as rows of their own
    return shown


def left_out(long: pd.DataFrame, shown: pd.DataFrame) -> str:
    """A line counting the quantities of ``long`` that ``shown`` leaves out, with how many each GPU has."""
    hidden = long[~long["quantity"].isin(set(shown["quantity"]))]
    if hidden.empty:
        return ""
    names = letters(gpus(long))
    per = hidden.groupby("gpu")["quantity"].nunique()
    each = ", ".join(f"{names[g]} has {per[g]}" for g in gpus(long) if g in per.index)
    count = hidden["quantity"].nunique()
    return (f"{count} more {'quantity' if count == 1 else 'quantities'}, on some sides only ({each}): "
            "--all shows them")


def gpus(long: pd.DataFrame) -> list[str]:
    """The compared sources' labels, in the order given."""
    return list(dict.fromkeys(long["gpu"]))


def resolve_baseline(long: pd.DataFrame, name: str | None) -> str:
    """The label ``name`` picks: a label, or a unique part of one (run id, ``ref:h100-sxm``, GPU name)."""
    labels = gpus(long)
    if name is None:
        return labels[0]
    hits = [label for label in labels if name == label] or [label for label in labels if name in label]
    if len(hits) != 1:
        raise UsageError(f"--baseline {name!r} matches {len(hits)} of the compared GPUs ({'; '.join(labels)}): "
                         "give a run id or ref:NAME that names one")
    return hits[0]


#: A quantity whose references publish another method than gpuatlas's under its name -> (the run's quantity
#: measured by the references' method, how the two methods differ).
MATCHING = {"smem.latency_cycles": (
    "smem.index_latency_cycles",
    "published shared-memory chases compute each index from the last load (j = chain[j]); gpuatlas's "
    "smem.latency_cycles loads each address straight from the last load (pure LDS, no index arithmetic), its "
    "smem.index_latency_cycles (chase.smem_index) chases as the published ones do")}


def _like_for_like(by: pd.DataFrame, quantity: str, num: str, den: str) -> tuple[float, float, str, bool]:
    """(numerator, denominator, why, comparable) of a run against a reference where the reference's method
    is not the run's under that name (MATCHING): the run's matching quantity in its place, or no ratio."""
    n, d = by.loc[(num, quantity)], by.loc[(den, quantity)]
    published = (_published(n["caveat"]), _published(d["caveat"]))
    if quantity not in MATCHING or published.count(True) != 1:
        return n["value"], d["value"], "", True
    match, differ = MATCHING[quantity]
    run = num if not published[0] else den
    if (run, match) not in by.index:
        return n["value"], d["value"], f"not comparable: {differ}; this run did not measure {match}", False
    value = by.loc[(run, match), "value"]
    why = (f"like for like: the ratio takes {run}'s {match} "
           f"({format_value(value, by.loc[(run, match), 'unit'])}) for its {quantity}, because {differ}")
    return ((value, d["value"]) if run == num else (n["value"], value)) + (why, True)


def ratios(long: pd.DataFrame, baseline: str | None = None, pairwise: bool = False) -> pd.DataFrame:
    """Ratios ``numerator / denominator`` per quantity: each GPU over the baseline (default the first), or with
    ``pairwise`` every later GPU over every earlier one.  Columns: quantity, level, numerator, denominator,
    ratio, comparable, why; a pair of different kinds has ratio NaN, comparable False and the reason."""
    labels = gpus(long)
    if pairwise:
        pairs = [(b, a) for i, a in enumerate(labels) for b in labels[i + 1:]]
    else:
        base = resolve_baseline(long, baseline)
        pairs = [(b, base) for b in labels if b != base]
    by = long.set_index(["gpu", "quantity"])
    rows = []
    for quantity in dict.fromkeys(long["quantity"]):
        for num, den in pairs:
            if (num, quantity) not in by.index or (den, quantity) not in by.index:
                continue
            n, d = by.loc[(num, quantity)], by.loc[(den, quantity)]
            same = n["kind"] == d["kind"]
            top, bottom, why, like = _like_for_like(by, quantity, num, den)
            same = same and like
            rows.append({"quantity": quantity, "level": level(quantity), "numerator": num, "denominator": den,
                         "ratio": top / bottom if same else math.nan, "comparable": same,
                         "why": why if why or same else f"not comparable: {n['kind']} against {d['kind']}"})
    return pd.DataFrame(rows, columns=["quantity", "level", "numerator", "denominator", "ratio", "comparable", "why"])


# -- values and GPU names as the tables show them ------------------------------------------------------
_SI = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
_BINARY = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_TIME = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def _scale(value: float, unit: str) -> tuple[float, str]:
    """Divisor and unit label that put ``value`` in a readable range (SI prefixes, binary for bytes)."""
    magnitude = abs(value)
    if unit == "B":
        return next(((s, u) for u, s in _BINARY if magnitude >= s), (1.0, "B"))
    if unit == "s":
        return next(((s, u) for u, s in _TIME if magnitude >= s), (1e-9, "ns"))
    if unit.endswith("/s") or unit == "Hz":
        return next(((s, p + unit) for p, s in _SI if magnitude >= s), (1.0, unit))
    return 1.0, "" if unit in ("1", "") else unit


def _sig(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, trailing zeros kept (60.0, 4.79), never in e-notation."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    return f"{x:.{max(decimals, 0)}f}"


def _number(x: float) -> str:
    """An integer as one (32, 128), any other number to three significant digits (60.1, 4.79)."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else _sig(x)


def format_value(value: float, unit: str, low: float | None = None, high: float | None = None) -> str:
    """``4.79 TB/s (4.75..4.81)``: the value with SI-prefixed unit and, where a CI is asked for, the CI in the
    same unit, or ``(n/a)`` where the figure has none (no bounds, or bounds equal to each other)."""
    if value is None or not math.isfinite(value):
        return "-"
    scale, label = _scale(value, unit)
    text = _number(value / scale) + (f" {label}" if label else "")
    if low is None and high is None:
        return text
    if low is not None and high is not None and math.isfinite(low) and math.isfinite(high) and high > low:
        return text + f" ({_number(low / scale)}..{_number(high / scale)})"
    return text + " (n/a)"


def _published(caveat) -> bool:
    """Whether a row is a reference's (references carry a caveat on every row; runs none)."""
    return isinstance(caveat, str) and bool(caveat)


def letters(labels: list[str]) -> dict[str, str]:
    """Short column names A, B, C, ... for the compared GPUs."""
    return {label: chr(ord("A") + i) if i < 26 else f"G{i}" for i, label in enumerate(labels)}


def compare(sources: list[str | Path]) -> pd.DataFrame:
    """Wide table: quantity x GPU values, a ``unit`` column and, for each source after the first, a
    ``ratio: B / A`` column (NaN where the two are different kinds of figure)."""
    long = comparison(sources)
    labels = gpus(long)
    table = long.pivot(index="quantity", columns="gpu", values="value")[labels]
    table = table.loc[list(dict.fromkeys(long["quantity"]))]
    table.columns.name = None
    pairs = ratios(long).pivot(index="quantity", columns="numerator", values="ratio")
    for label in labels[1:]:
        table[f"ratio: {label} / {labels[0]}"] = pairs[label] if label in pairs else math.nan
    table.insert(0, "unit", long.drop_duplicates("quantity").set_index("quantity")["unit"])
    return table
