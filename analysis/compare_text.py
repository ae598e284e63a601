"""How a comparison is shown: each value with SI (binary for bytes) prefixes and its CI, each ratio, numbered
footnotes for caveats, sources and ratios not given; the side-by-side table (display, csv_table) and its
terminal layout (render_text)."""
from __future__ import annotations

import math
import re

import pandas as pd

from gpuatlas.analysis.compare import _published, _sig, format_value, gpus, letters, level, ratios, resolve_baseline


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
