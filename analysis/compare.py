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

from analysis.derive import derived_for
from analysis.errors import UsageError
from analysis.quantities import QUANTITIES
from analysis.references import is_reference, load_reference
from analysis.results import RunDir

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
    """A label and the derived quantities of a run directory (``analysis.derive.derived_for``, the source
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


# -- formatting ---------------------------------------------------------------------------------------
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


def format_ratio(ratio: float) -> str:
    return _sig(ratio) if math.isfinite(ratio) else "-"


#: The provenance markers of the references' caveats (tools/reference_build.py), and what each says.
MARKERS = {"[R]": "(in a caveat): the figure was read directly in the cited primary file or page",
           "[R2]": "(in a caveat): read in a secondary compilation that cites the primary table, the primary "
                   "itself not opened",
           "[I]": "(in a caveat): inferred or computed from read values, with the arithmetic given"}


class Footnotes:
    """Numbered notes, each text once: caveats, sources and the reasons a ratio is not given."""

    def __init__(self):
        self.texts: dict[str, int] = {}

    def mark(self, *texts) -> str:
        numbers = [self.texts.setdefault(t, len(self.texts) + 1) for t in texts if isinstance(t, str) and t]
        return "".join(f"[{n}]" for n in numbers)

    def lines(self) -> list[str]:
        """The notes, then what each provenance marker they print means."""
        lines = [f"[{n}] {text}" for text, n in self.texts.items()]
        shown = [m for m in MARKERS if any(m in text for text in self.texts)]
        return lines + ([f"{m} {MARKERS[m]}" for m in shown] if shown else [])


def _published(caveat) -> bool:
    """Whether a row is a reference's (references carry a caveat on every row; runs none)."""
    return isinstance(caveat, str) and bool(caveat)


def _row_notes(row) -> tuple:
    """A reference row's caveat and source, as footnote texts (a run's source is in the legend)."""
    return (f"caveat: {row.caveat}", f"source: {row.source}") if _published(row.caveat) else ()


def annotated(long: pd.DataFrame, baseline: str | None = None, pairwise: bool = False
              ) -> tuple[pd.DataFrame, list[tuple[str, str]], Footnotes]:
    """The long form with display columns: ``shown`` (value, CI and footnote marks), per ratio pair a
    ``ratio`` cell ("1.23", "n/c[4]" or "-"), and the footnotes they cite.  Returns the wide display table
    (quantity x cells, with ``level``), the ratio pairs as (numerator, denominator), and the notes."""
    notes = Footnotes()
    labels = gpus(long)
    companions = long.attrs.get("companions", set())
    table = pd.DataFrame(index=pd.Index([q for q in dict.fromkeys(long["quantity"]) if q not in companions],
                                        name="quantity"))
    table["level"] = [level(q) for q in table.index]
    for label in labels:
        table[label] = ""
    for row in long.itertuples(index=False):
        if row.quantity in companions:
            continue
        marks = notes.mark(*_row_notes(row))
        table.at[row.quantity, row.gpu] = " ".join(filter(None, (format_value(row.value, row.unit, row.ci_low,
                                                                              row.ci_high), marks)))
    pairs_frame = ratios(long, baseline, pairwise)
    pairs = list(dict.fromkeys(zip(pairs_frame["numerator"], pairs_frame["denominator"])))
    for num, den in pairs:
        table[(num, den)] = "-"
    for r in pairs_frame.itertuples(index=False):
        table.at[r.quantity, (r.numerator, r.denominator)] = ((format_ratio(r.ratio) if r.comparable else "n/c")
                                                              + notes.mark(r.why))
    return table, pairs, notes


def sources_of(long: pd.DataFrame) -> pd.DataFrame:
    """One row per compared GPU: its label and where its figures come from (a run, or a reference)."""
    first = long.drop_duplicates("gpu")
    published = "published figures (each row's source is footnoted)"
    return pd.DataFrame({"gpu": first["gpu"], "origin": [published if _published(c) else s
                                                         for s, c in zip(first["source"], first["caveat"])]})


def letters(labels: list[str]) -> dict[str, str]:
    """Short column names A, B, C, ... for the compared GPUs."""
    return {label: chr(ord("A") + i) if i < 26 else f"G{i}" for i, label in enumerate(labels)}


def csv_table(long: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """The long form plus the ratio to the baseline (``ratio``, NaN where not comparable, with ``ratio_note``)
    and ``footnotes``: the numbers the terminal and HTML views give this row's caveat, source and ratio."""
    _, _, notes = annotated(long, baseline)
    base = resolve_baseline(long, baseline)
    pairs = ratios(long, base).set_index(["numerator", "quantity"])
    out = long.copy()
    out["baseline"] = base
    out["ratio"] = [pairs.at[(g, q), "ratio"] if (g, q) in pairs.index else (1.0 if g == base else math.nan)
                    for g, q in zip(long["gpu"], long["quantity"])]
    out["ratio_note"] = [pairs.at[(g, q), "why"] if (g, q) in pairs.index else ""
                         for g, q in zip(long["gpu"], long["quantity"])]
    out["footnotes"] = [notes.mark(*_row_notes(r), rn) for r, rn in zip(long.itertuples(index=False),
                                                                        out["ratio_note"])]
    return out


def display(long: pd.DataFrame, baseline: str | None = None, pairwise: bool = False
            ) -> tuple[pd.DataFrame, list[str], list[str]]:
    """For an HTML or Markdown page: the table (level, quantity, one column per GPU letter, ratio columns),
    the legend lines (letter = GPU, where from) and the numbered footnotes."""
    table, pairs, notes = annotated(long, baseline, pairwise)
    names = letters(gpus(long))
    shown = table.rename(columns={**names, **{p: f"{names[p[0]]}/{names[p[1]]}" for p in pairs}}).reset_index()
    shown = shown[["level", "quantity", *[c for c in shown.columns if c not in ("level", "quantity")]]]
    legend = [f"{names[r.gpu]} = {r.gpu}: {r.origin}" for r in sources_of(long).itertuples(index=False)]
    return shown, legend, notes.lines()


# -- terminal ---------------------------------------------------------------------------------------
def _wrap_tokens(tokens: list[str], width: int, indent: str) -> list[str]:
    """Greedy line filling that never splits a token (a number with its unit stays whole)."""
    lines, line = [], ""
    for token in tokens:
        if line and len(line) + 1 + len(token) > width:
            lines.append(line)
            line = indent + token
        else:
            line = f"{line} {token}" if line else token
    return lines + [line] if line else lines


def _cell_tokens(cell: str) -> list[str]:
    """A cell's unbreakable parts: the value with its unit, its CI, its footnote marks."""
    return [part.strip() for part in re.findall(r"\([^)]*\)|(?:\[\d+\])+|[^(\[]+", cell) if part.strip()]


def _stacked(quantity: str, row: pd.Series, labels: list[str], names: dict, ratio_names: dict, width: int,
             indent: int) -> list[str]:
    """One quantity, one GPU per line from column ``indent`` (the quantity beside the first where it fits,
    else above), each GPU's ratios at the end of its line, aligned where they fit."""
    cells = {label: [names[label], *_cell_tokens(row[label])] for label in labels if row[label]}
    room = width - indent
    span = max(len(" ".join(tokens)) for tokens in cells.values())
    lines = []
    for label, tokens in cells.items():
        text = " ".join(tokens)
        ratios_here = [f"{name}={row[pair]}" for pair, name in ratio_names.items()
                       if pair[0] == label and row[pair] != "-"]
        extra = "  ".join(ratios_here)
        if not extra:
            lines += _wrap_tokens(tokens, room, "    ")
        elif span + 2 + len(extra) <= room:
            lines.append(text.ljust(span) + "  " + extra)
        else:
            lines += _wrap_tokens(tokens + ratios_here, room, "    ")
    pad = " " * indent
    if len(quantity) + 2 <= indent:
        return [quantity.ljust(indent) + lines[0], *(pad + line for line in lines[1:])]
    return [quantity, *(pad + line for line in lines)]


def _key(ratio_names: dict) -> str:
    """The text view's key to its cells, printed under the legend."""
    ratio = next(iter(ratio_names.values()), "")
    num, _, den = ratio.partition("/")
    return ("(lo..hi): 95% CI, (n/a): none; " + (f"{ratio}=r: {num}'s value over {den}'s; " if ratio else "")
            + "n/c: not comparable; [n]: a note below")


#: Columns the stacked view keeps for one GPU's line (its value, CI, marks and ratio): the quantity column takes
#: the rest, and a quantity longer than that goes on a line of its own.
VALUE_COLUMNS = len("C 36.1 cycles (36.1..36.2) [10][4]  C/A=1.13")


def render_text(long: pd.DataFrame, width: int = 80, baseline: str | None = None, pairwise: bool = False,
                left_out: str = "") -> str:
    """The comparison as plain text fitting ``width`` columns: grouped by level, a row per quantity when the
    columns fit, else each quantity stacked one GPU per line with its ratios; footnotes numbered at the end.
    ``left_out`` (a line saying what the view leaves out) follows the legend.  No value, CI bound or unit is
    ever cut."""
    table, pairs, notes = annotated(long, baseline, pairwise)
    labels = gpus(long)
    names = letters(labels)
    width = max(width, 40)
    out = []
    for r in sources_of(long).itertuples(index=False):
        out += _wrap_tokens(f"{names[r.gpu]} = {r.gpu}: {r.origin}".split(" "), width, "    ")
    ratio_names = {p: f"{names[p[0]]}/{names[p[1]]}" for p in pairs}
    for line in (_key(ratio_names), left_out):
        out += _wrap_tokens(line.split(" "), width, "    ") if line else []
    columns = [*labels, *pairs]
    heads = {**names, **ratio_names}
    widths = {c: max([len(heads[c]), *(len(v) for v in table[c])]) for c in columns}
    qwidth = max(len("quantity"), *(len(q) for q in table.index))
    wide = qwidth + sum(w + 2 for w in widths.values()) <= width
    indent = min(qwidth + 2, width - VALUE_COLUMNS) if width - VALUE_COLUMNS >= 12 else 2
    for lvl, group in table.groupby("level", sort=False):
        out += ["", f"== {lvl} =="]
        if wide:
            out.append("quantity".ljust(qwidth) + "".join("  " + heads[c].rjust(widths[c]) for c in columns))
            for quantity, row in group.iterrows():
                out.append(quantity.ljust(qwidth) + "".join("  " + row[c].rjust(widths[c]) for c in columns))
            continue
        for quantity, row in group.iterrows():
            out += _stacked(quantity, row, labels, names, ratio_names, width, indent)
    lines = notes.lines()
    if lines:
        out += ["", "notes:"]
        for line in lines:
            out += _wrap_tokens(line.split(" "), width, "    ")
    return "\n".join(out) + "\n"


# -- figure ---------------------------------------------------------------------------------------------
#: Ratios an axis may be labelled at: every one in view while they fit, else the powers of two alone.
RATIO_TICKS = (1 / 16, 1 / 8, 1 / 4, 1 / 3, 1 / 2, 3 / 4, 1, 3 / 2, 2, 3, 4, 8, 16)


def ratio_figure(long: pd.DataFrame, baseline: str | None = None):
    """A figure of every comparable ratio to the baseline, one row per quantity, grouped by level (log axis:
    2x and 1/2x are the same distance from 1); each GPU's point a little apart from the others' on its row,
    with the ratio's interval where both sides have CIs ([low / base high, high / base low])."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from analysis.figures import color_palette

    base = resolve_baseline(long, baseline)
    frame = ratios(long, base)
    frame = frame[frame["comparable"]]
    if frame.empty:
        raise UsageError(f"no quantity can be compared with {base}: nothing to plot")
    names = letters(gpus(long))
    by = long.set_index(["gpu", "quantity"])
    rows = list(dict.fromkeys(f"{lvl}: {q}" for lvl, q in zip(frame["level"], frame["quantity"])))
    numerators = list(dict.fromkeys(frame["numerator"]))
    fig, ax = plt.subplots(figsize=(8.5, 1.4 + 0.3 * len(rows)))
    for k, (gpu, colour) in enumerate(zip(numerators, color_palette("deep", len(numerators)))):
        part = frame[frame["numerator"] == gpu]
        y = [rows.index(f"{lvl}: {q}") + (k - (len(numerators) - 1) / 2) * 0.22
             for lvl, q in zip(part["level"], part["quantity"])]
        low, high = [], []
        for q, ratio in zip(part["quantity"], part["ratio"]):
            n, d = by.loc[(gpu, q)], by.loc[(base, q)]
            both = all(pd.notna(v) for v in (n["ci_low"], n["ci_high"], d["ci_low"], d["ci_high"]))
            lo, hi = (n["ci_low"] / d["ci_high"], n["ci_high"] / d["ci_low"]) if both else (ratio, ratio)
            low.append(max(ratio - lo, 0.0))
            high.append(max(hi - ratio, 0.0))
        ax.errorbar(part["ratio"], y, xerr=[low, high], fmt="o", ms=5, color=colour, capsize=2, lw=0.8,
                    label=f"{names[gpu]} = {gpu}")
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    ticks = [t for t in RATIO_TICKS if lo <= t <= hi]
    if len(ticks) > 9:
        ticks = [t for t in ticks if math.log2(t) == round(math.log2(t))]
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:.2g}x"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.axvline(1.0, color="0.4", lw=1)
    levels = [r.split(":")[0] for r in rows]
    for i in range(1, len(rows)):
        if levels[i] != levels[i - 1]:
            ax.axhline(i - 0.5, color="0.85", lw=1)
    ax.set_xlabel(f"ratio to {names[base]} = {base} (log scale; 95% CI bars where both have one)")
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.6 / (1.4 + 0.3 * len(rows)) - 0.02), frameon=False,
              fontsize="small")
    fig.tight_layout()
    return fig


def plot(long: pd.DataFrame, path: Path, baseline: str | None = None) -> Path:
    """Save ``ratio_figure`` to ``path`` (its suffix picks the format)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    if not path.parent.is_dir():
        raise UsageError(f"--plot {path}: folder {path.parent} does not exist")
    fig = ratio_figure(long, baseline)
    try:
        fig.savefig(path, dpi=200, bbox_inches="tight")
    except ValueError as exc:
        raise UsageError(f"--plot {path}: {exc}") from None
    finally:
        plt.close(fig)
    return path


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
