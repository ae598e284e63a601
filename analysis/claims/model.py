"""A lecture claim, the one precision table its tolerance comes from, and the measures that answer it: a
measured quantity, a driver property, or the lecture's formula recomputed from them, each as
(value, low, high) with the interval carried through the formula.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import pandas as pd

#: A measured value with its interval: (value, low, high).
Measured = tuple[float, float, float]


@dataclass(frozen=True)
class Rule:
    tolerance: float | None  # relative half-width of the band; None: set by the claim's figure (see band)
    reason: str
    one_sided: bool = False  # the band has no upper edge


#: The lecture's precision words, each with the one tolerance every claim that uses it gets, and why.
PRECISION = {
    "exact": Rule(0.0, "a count, a size or a ratio the lecture states as exact: only that figure holds"),
    "its digits": Rule(None, "the lecture's own arithmetic, given to its printed digits: half a unit of the last "
                             "digit"),
    "plain": Rule(0.10, "a figure stated without a qualifier: a datasheet figure or a measured rate, rounded; "
                        "10% covers the rounding and a measurement's spread"),
    "~": Rule(0.20, "the lecture's \"~\": an approximate figure, about 20%"),
    "≈": Rule(0.20, "the lecture's \"≈\": an approximate figure, about 20% (the same as \"~\")"),
    "about": Rule(0.20, "the lecture's \"about\": an approximate figure, about 20% (the same as \"~\")"),
    "roughly": Rule(0.20, "the lecture's \"roughly\": an approximate figure, about 20% (the same as \"~\")"),
    "a few": Rule(None, "the lecture's \"a few\" of a unit: 2 to 5 of it"),
    "more than": Rule(0.0, "the lecture's \"more than\" a figure: from it up", one_sided=True),
}
#: "a few" of a unit: this many of it.
A_FEW = (2, 5)


@dataclass(frozen=True)
class Claim:
    section: str
    text: str
    value: float
    unit: str
    measure: Callable[[dict, dict], Measured | None]  # (derived by quantity, device) -> measured
    tests: str  # what the measured side is, in words
    mechanism: str | Callable[[dict, dict], str] = ""  # why the hardware differs (or a function of the
    # measured quantities and the device that says it), shown when the claim deviates
    id: str = ""  # stable claim id (lecture.<section>.<what>)
    kind: str = "measured"  # measured | recomputed | property | reference
    quote: tuple[str, ...] = ()  # the lecture's exact words (each a substring of the lecture text)
    units: str = ""  # the unit convention the lecture's number is read in
    precision: str = "plain"  # the lecture's own precision word: a key of PRECISION, which sets the band
    digits: str = ""  # "its digits": the figure as the lecture prints it (its last digit sets the band)
    counts: float = 1.0  # "a few": the unit it counts (a few hundred: 100)
    or_more: bool = False  # the lecture's "+" or "achievable": the band has no upper edge
    untestable: str = ""  # why this hardware cannot test the number (then the row says so)
    unlike: str | Callable[[dict, dict], str] = ""  # why the measured side is not like for like (or a function
    # that says so, empty when it is)
    inputs: tuple[str, ...] = ()  # the measured quantities or driver properties a recomputation uses
    figure: str = ""  # the report figure (its file stem) that shows a deviation


def tolerance(claim: Claim) -> float | None:
    """The relative half-width PRECISION gives the claim's word; "its digits": half a unit of the last printed
    digit over the printed figure; "a few": None (a range, not a width)."""
    rule = PRECISION[claim.precision]
    if rule.tolerance is not None:
        return rule.tolerance
    if claim.precision == "its digits":
        decimals = len(claim.digits.partition(".")[2])
        return 0.5 * 10 ** -decimals / float(claim.digits.replace(",", ""))
    return None


def band(claim: Claim) -> tuple[float, float]:
    """The values the lecture's words allow: the figure +- its tolerance, "a few" units as A_FEW of them, and
    no upper edge for a one-sided word or an "or more"."""
    if claim.precision == "a few":
        low, high = A_FEW[0] * claim.counts, A_FEW[1] * claim.counts
    else:
        tol = tolerance(claim)
        low, high = sorted((claim.value * (1 - tol), claim.value * (1 + tol)))
    if claim.or_more or PRECISION[claim.precision].one_sided:
        high = math.inf
    return low, high


# -- measures ------------------------------------------------------------------------------------------------

def interval(fn: Callable[[dict], float], values: dict[str, Measured]) -> Measured:
    """``fn`` at the inputs' values, and its range over every corner of their intervals: exact for the
    lecture's formulas, each monotone in every input (products, quotients and powers of positive numbers),
    where evaluating all inputs at their low ends, then at their high ends, lets a quotient's errors cancel."""
    centre = {n: v[0] for n, v in values.items()}
    varying = [n for n, v in values.items() if v[1] != v[2]]
    ends = [fn({**centre, **dict(zip(varying, corner))})
            for corner in itertools.product(*((values[n][1], values[n][2]) for n in varying))]
    value = fn(centre)
    return value, min(ends, default=value), max(ends, default=value)


def quantity(name: str) -> Callable:
    def measure(d: dict, device: dict) -> Measured | None:
        return d.get(name)

    measure.inputs = (name,)
    return measure


def device_property(key: str, scale: float = 1.0) -> Callable:
    def measure(d: dict, device: dict) -> Measured | None:
        value = device.get(key)
        return None if value is None else (value * scale,) * 3

    measure.inputs = (key,)
    return measure


def product(*names: str, divide_by: Callable[[dict, dict], float] = lambda d, dev: 1.0) -> Callable:
    """A figure recomputed from measured quantities: their product over a device-derived divisor."""
    def measure(d: dict, device: dict) -> Measured | None:
        if any(n not in d for n in names):
            return None
        k = divide_by(d, device)
        return interval(lambda v: math.prod(v[n] for n in names) / k, {n: d[n] for n in names})

    measure.inputs = names
    return measure


def per_sm_load(d: dict, device: dict) -> float:
    return 128.0 * device["sm_count"]


def first_of(*measures: Callable) -> Callable:
    """The first measure this run can answer: a direct measurement before a recomputation from others."""
    def measure(d: dict, device: dict) -> Measured | None:
        return next((m for m in (f(d, device) for f in measures) if m is not None), None)

    measure.inputs = tuple(dict.fromkeys(n for f in measures for n in getattr(f, "inputs", ())))
    return measure


def ratio(numerator: str, denominator: str) -> Callable:
    """A figure recomputed as the ratio of two measured quantities."""
    def measure(d: dict, device: dict) -> Measured | None:
        if numerator not in d or denominator not in d:
            return None
        return interval(lambda v: v[numerator] / v[denominator],
                        {numerator: d[numerator], denominator: d[denominator]})

    measure.inputs = (numerator, denominator)
    return measure


#: How the lecture writes sizes: a per-SM "256 KB" is 256 KiB, an L2 "50 MB" 50 MiB (the datasheet's binary
#: sizes), but its sums count KB and MB as 10^3 and 10^6 B (132 x 256 KB = 33.8 MB).  A driver size in bytes
#: becomes the lecture's by reading its binary count with decimal units.
KB_UNITS = "KB = 10^3 B, MB = 10^6 B; a driver size in KiB (MiB) is read as that many KB (MB), as the lecture "\
           "reads the datasheet's"


def lecture_bytes(key: str, binary: int, per_sm: bool = False) -> Callable:
    """A driver size (``key``, in bytes) in the lecture's units: its count of ``binary`` units read as that many
    decimal ones; with ``per_sm``, times the SM count (the lecture's chip totals)."""
    def measure(d: dict, device: dict) -> Measured | None:
        if key not in device or (per_sm and "sm_count" not in device):
            return None
        value = device[key] * (4 if key == "regs_per_sm" else 1) / binary * 1000 ** round(math.log(binary, 1024))
        value *= device["sm_count"] if per_sm else 1
        return (value,) * 3

    measure.inputs = (key, "sm_count") if per_sm else (key,)
    return measure


def on_chip_bytes(device: dict) -> float | None:
    """Registers + shared memory of every SM, plus the L2: the lecture's "on-chip total", in its units (KiB per SM
    and MiB of L2 counted as 10^3 and 10^6 B, as its 33.8 + 30.1 + 50 = 114 MB does)."""
    keys = ("sm_count", "regs_per_sm", "smem_per_sm_bytes", "l2_bytes")
    if any(k not in device for k in keys):
        return None
    per_sm = (4 * device["regs_per_sm"] + device["smem_per_sm_bytes"]) / 1024 * 1000
    return device["sm_count"] * per_sm + device["l2_bytes"] / (1 << 20) * 1e6


def on_chip(scale_into: float | None = None) -> Callable:
    """The on-chip total from driver properties; with ``scale_into``, how many times it fits into that many
    bytes (the lecture's 13.5 GB of 7B-model weights)."""
    def measure(d: dict, device: dict) -> Measured | None:
        total = on_chip_bytes(device)
        if total is None:
            return None
        value = total if scale_into is None else scale_into / total
        return (value,) * 3

    measure.inputs = ("sm_count", "regs_per_sm", "smem_per_sm_bytes", "l2_bytes")
    return measure


BW, PEAK, CLOCK = "dram.read_bandwidth_bytes_per_s", "tc.bf16.peak_flops", "clock.sm_hz"
N4096 = 4096 ** 3  # the lecture's 4096^3 matmul: M·N·K


def calc(fn: Callable[[dict], float], *inputs: str) -> Callable:
    """A figure recomputed by the lecture's own formula ``fn`` from measured quantities and driver properties
    (``inputs``, each a derived-quantity id or a device key); its interval over the corners of the inputs'
    (``interval``).  No inputs: the lecture's arithmetic on its own numbers."""
    def measure(d: dict, device: dict) -> Measured | None:
        vals = {}
        for n in inputs:  # a derived quantity's id is dotted (l2.latency_cycles); a device key is not
            if "." in n and n in d:
                vals[n] = d[n]
            elif "." not in n and device.get(n) is not None:
                vals[n] = (float(device[n]),) * 3
            else:
                return None
        return interval(fn, vals)

    measure.inputs = inputs
    return measure


def ratio_of(num: str, den: str) -> Callable:
    return calc(lambda v: v[num] / v[den], num, den)


def reference(name: str) -> dict:
    from gpuatlas.analysis.references import REFERENCE_DIR

    frame = pd.read_csv(REFERENCE_DIR / f"{name}.csv")
    return dict(zip(frame["quantity"], frame["value"]))


def from_reference(fn: Callable[[dict], float], *inputs: str) -> Callable:
    """A figure recomputed from ``ref:`` data: each input is "<reference>:<quantity>"."""
    def measure(d: dict, device: dict) -> Measured | None:
        vals = {}
        for n in inputs:
            name, q = n.split(":")
            table = reference(name)
            if q not in table:
                return None
            vals[n] = float(table[q])
        value = fn(vals)
        return value, value, value

    measure.inputs = tuple(f"ref:{n}" for n in inputs)
    return measure


def none(d: dict, device: dict) -> None:
    return None
