"""How the report writes a measured value: counts as integers, sizes in binary units, µs with its own letter,
and an interval as "n/a" where the run has none (no CI, or one that collapsed onto the value)."""
from __future__ import annotations

import math

from gpuatlas.analysis.units import fmt_value as _fmt_value

#: Units of counts and ratios, which print without a unit.
COUNT_UNITS = ("1", "")


def fmt_value(value, unit: str) -> str:
    """A value with its unit for the page: a whole count as an integer, a large count in plain digits (not
    1.492e+04), microseconds written with µ."""
    if (unit in COUNT_UNITS and value is not None and math.isfinite(value)
            and (value == round(value) or abs(value) >= 1000)):
        return f"{value:.0f}"
    return _fmt_value(value, unit).replace(" us", " µs")


def has_interval(low, high) -> bool:
    """Whether [low, high] is an interval worth printing: both ends finite and apart."""
    return all(v is not None and math.isfinite(v) for v in (low, high)) and low != high


def fmt_interval(low, high, unit: str) -> str:
    """[low, high] in the value's unit, or "n/a"."""
    return f"[{fmt_value(low, unit)}, {fmt_value(high, unit)}]" if has_interval(low, high) else "n/a"


def fmt_measured(value, low, high, unit: str) -> str:
    """The value and its 95% CI, "272.7 cycles [272.6, 272.7]" (an end in the value's unit written bare), or
    "23 cycles [n/a]"."""
    shown = fmt_value(value, unit)
    if not has_interval(low, high):
        return f"{shown} [n/a]"
    suffix = shown.split(" ", 1)[1] if " " in shown else ""
    ends = [fmt_value(v, unit) for v in (low, high)]
    ends = [e[:-len(suffix) - 1] if suffix and e.endswith(" " + suffix) else e for e in ends]
    return f"{shown} [{ends[0]}, {ends[1]}]"
