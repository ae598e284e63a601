"""Judging the claims against a run: each claim's interval -- where another board of the model lands
(derived.csv's ``repro_low``/``repro_high``) when the run has it, else the 95% CI, carried through a
recomputation's formula -- set against the band the lecture's precision word allows (``model.band``).  A claim
holds when its whole interval lies inside the band, deviates when the whole interval lies outside it, and is
undecided otherwise, shown with both ends."""
from __future__ import annotations

import math

import pandas as pd

from gpuatlas.analysis.claims.catalogue import all_claims
from gpuatlas.analysis.claims.mechanisms import in_words
from gpuatlas.analysis.claims.model import PRECISION, Claim, band, reference, tolerance
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.units import fmt_value

VERDICTS = ("holds", "deviates", "undecided", "cannot be tested", "not measured")
#: derived.csv's columns for the interval another board of the model lands in (NaN where not known).
REPRO = ("repro_low", "repro_high")
#: Relative slack at the band's edges: a float's rounding, not a tolerance.
EDGE = 1e-9


def intervals(derived: pd.DataFrame) -> tuple[dict, dict]:
    """quantity -> (value, low, high), and quantity -> which interval that is ("repro" or "CI"; absent for a
    point): the repro interval where both its ends are finite, else the CI where finite, else the value."""
    values, source = {}, {}
    repro = all(c in derived for c in REPRO)
    for row in derived.itertuples(index=False):
        value = float(row.value)
        if not math.isfinite(value):  # no figure: the claims it feeds are not measured
            continue
        ends = [(float(getattr(row, a)), float(getattr(row, b)), kind)
                for a, b, kind in ((*REPRO, "repro"), ("ci_low", "ci_high", "CI"))
                if (kind == "CI" or repro) and all(math.isfinite(float(getattr(row, c))) for c in (a, b))]
        low, high, kind = ends[0] if ends else (value, value, "")
        values[row.quantity] = (value, min(low, value), max(high, value))
        if kind and low != high:
            source[row.quantity] = kind
    return values, source


def _inputs(claim: Claim) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*getattr(claim.measure, "inputs", ()), *claim.inputs)))


def _unit_of(name: str) -> str:
    return QUANTITIES.get(name.split(":")[-1], ("",))[0] if "." in name else ""


def _shown(name: str, d: dict, device: dict) -> str:
    """One input of a recomputation, as "name = value" (or "name: not in this run")."""
    if name.startswith("ref:"):
        ref, q = name[4:].split(":")
        value = reference(ref).get(q)
    else:
        value = d[name][0] if name in d else device.get(name)
    return f"{name} = {fmt_value(float(value), _unit_of(name))}" if value is not None else f"{name}: not in this run"


def _fmt(value: float, claim: Claim) -> str:
    """A value as the lecture writes it: sizes in decimal KB/MB/GB unless the claim reads KB as KiB."""
    if claim.unit != "B" or claim.units.startswith("KB as KiB") or not math.isfinite(value):
        return fmt_value(value, claim.unit)
    for prefix, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}"
    return f"{value:.4g} B"


def tolerance_text(claim: Claim) -> str:
    """The band the lecture's precision word allows, in words, with the word."""
    low, high = band(claim)
    word = claim.precision + (f" {claim.digits}" if claim.digits else "")
    if claim.precision == "a few":
        text = f"{_fmt(low, claim)} to {_fmt(high, claim)}"
    elif math.isinf(high):
        text = f"from {_fmt(low, claim)} up"
    else:
        tol = tolerance(claim)
        text = "exact" if tol == 0 else f"+-{tol:.0%}" if tol >= 0.01 else f"+-{tol:.2%}"
    return text if claim.precision == "exact" and not math.isinf(high) else f"{text} ({word})"


def decide(claim: Claim, low: float, high: float) -> str:
    """holds: the whole interval inside the band; deviates: wholly outside it; else undecided."""
    lo, hi = band(claim)
    lo, hi = lo - EDGE * abs(lo), hi + EDGE * abs(hi)
    if lo <= low and high <= hi:
        return "holds"
    return "deviates" if high < lo or low > hi else "undecided"


def group(section: str) -> str:
    """The lecture section a claim belongs to (its first §7.N; the exercises together)."""
    parts = [p.strip() for p in section.split(";")]
    return next((p for p in parts if p.startswith("§7.")), "Exercises" if parts[0].startswith("Exercise")
                else parts[0])


def _order(name: str) -> tuple:
    return (1, int(name[3:])) if name.startswith("§7.") else (0 if name == "Numbers worth memorizing" else 2, 0)


def _reason(claim: Claim, verdict: str, measured: tuple, kinds: set, d: dict, device: dict) -> str:
    value, low, high = measured
    ratio = value / claim.value
    which = "another board's repro interval" if "repro" in kinds else "the 95% CI" if kinds else "the value"
    if verdict == "holds":
        return ("matches" if PRECISION[claim.precision].tolerance == 0 and low == high else
                f"within the lecture's precision ({tolerance_text(claim)})"
                + (f": {which} lies wholly inside it" if low != high else ""))
    try:
        mechanism = claim.mechanism(d, device) if callable(claim.mechanism) else claim.mechanism
    except KeyError:  # the run lacks a figure the sentence sets beside the lecture's: say less
        mechanism = ""
    if verdict == "deviates":
        return f"{ratio:.2f}x the lecture's figure" + (f": {mechanism}" if mechanism else "")
    return (f"undecided: {which} runs from {_fmt(low, claim)} to {_fmt(high, claim)} ({low / claim.value:.3g}x to "
            f"{high / claim.value:.3g}x the lecture's figure), across an edge of its band "
            f"({tolerance_text(claim)})")


def judge(derived: pd.DataFrame, device: dict) -> pd.DataFrame:
    """One row per claim, grouped by section: the lecture's words and value, the unit convention and tolerance,
    what tests it (with a recomputation's inputs), the measured value with its interval, ratio, verdict and its
    reason, and the figure that shows a deviation."""
    d, source = intervals(derived)
    rows = []
    for claim in all_claims():
        row = {"section": group(claim.section), "id": claim.id, "kind": claim.kind, "claim": claim.text,
               "quote": " | ".join(q.replace("\t", " / ") for q in claim.quote),
               "lecture": _fmt(claim.value, claim), "units": claim.units,
               "tolerance": tolerance_text(claim), "tested by": in_words(claim.tests, device),
               "inputs": "; ".join(_shown(n, d, device) for n in _inputs(claim))
               if claim.kind in ("recomputed", "reference") else "", "figure": ""}
        measured = claim.measure(d, device)
        if claim.untestable:
            arithmetic = "" if measured is None else (
                f"; the lecture's arithmetic gives {_fmt(measured[0], claim)}")
            rows.append({**row, "measured": "-" if measured is None else _fmt(measured[0], claim),
                         "ratio": "-", "verdict": "cannot be tested",
                         "reason": in_words(f"cannot be tested here: {claim.untestable}{arithmetic}", device)})
            continue
        if measured is None:
            missing = [n for n in _inputs(claim) if n not in d and device.get(n) is None]
            reason = (f"not measured in this run: needs {', '.join(missing)}" if missing else
                      f"not in this run: {in_words(claim.tests, device)}")
            rows.append({**row, "measured": "-", "ratio": "-", "verdict": "not measured", "reason": reason})
            continue
        value, low, high = measured
        ratio = value / claim.value
        ci = "" if low == high == value else f" [{_fmt(low, claim)}, {_fmt(high, claim)}]"
        row = {**row, "measured": _fmt(value, claim) + ci, "ratio": f"{ratio:.3g}"}
        unlike = claim.unlike(d, device) if callable(claim.unlike) else claim.unlike
        if unlike:
            rows.append({**row, "verdict": "cannot be tested",
                         "reason": in_words(f"not like for like ({ratio:.2f}x the lecture's figure): {unlike}",
                                            device)})
            continue
        verdict = decide(claim, low, high)
        kinds = {source[n] for n in _inputs(claim) if n in source}
        rows.append({**row, "verdict": verdict,
                     "reason": in_words(_reason(claim, verdict, measured, kinds, d, device), device),
                     "figure": "" if verdict == "holds" else _where_shown(claim)})
    table = pd.DataFrame(rows)
    return table.iloc[sorted(range(len(table)), key=lambda i: _order(table["section"].iat[i]))].reset_index(drop=True)


def _where_shown(claim: Claim) -> str:
    """Where the report shows a deviation: its figure's file, else the table that holds its inputs."""
    if claim.figure:
        return f"{claim.figure}.svg"
    if claim.kind == "property":
        return "Device, clocks and software (the driver's properties)"
    if claim.kind == "reference":
        return "the ref: datasets (gpuatlas compare)"
    return "the lecture's own arithmetic (no hardware input)"


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per section (in the lecture's order), how many claims hold, deviate, are undecided, cannot be tested or
    were not measured in this run; a last row totals them."""
    counts = [(name, *(int((part["verdict"] == v).sum()) for v in VERDICTS))
              for name, part in table.groupby("section", sort=False)]
    counts.append(("all", *(int((table["verdict"] == v).sum()) for v in VERDICTS)))
    return pd.DataFrame(counts, columns=["section", *VERDICTS])
