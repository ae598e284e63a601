"""Formatting of SI values for reports (values are stored in base units; only reports format them)."""
from __future__ import annotations

import math


def fmt_bytes(n: float) -> str:
    if n is None or not math.isfinite(n):
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) or value >= 100 else f"{value:.3g} {unit}"
    return f"{n:.0f} B"


def fmt_value(value: float, unit: str) -> str:
    """A value with its unit, scaled for reading (s -> us/ns, Hz -> GHz, B -> KiB/MiB)."""
    if value is None or not math.isfinite(value):
        return "-"
    if unit == "B":
        return fmt_bytes(value)
    if unit == "s":
        for suffix, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {suffix}"
        return f"{value / 1e-9:.3g} ns"
    if unit in ("Hz", "B/s", "FLOP/s", "op/s"):
        for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(value) >= scale:
                return f"{value / scale:.4g} {prefix}{unit}"
    if unit == "1/cycle":  # a rate per SM per clock (DPX operations)
        return f"{value:.4g} operations per cycle per SM"
    return f"{value:.4g}" if unit in ("1", "") else f"{value:.4g} {unit}"


def fmt_tick(value: float, _position=None) -> str:
    """A log axis's tick in plain digits (32, 0.5 as 1/2): no mathtext, which costs a parse per label."""
    return f"{value:g}" if value >= 1 or value <= 0 else f"1/{1 / value:g}"


def plain_log_axis(axis) -> None:
    """A matplotlib log axis labelled in plain digits (``fmt_tick``) at its major ticks, none at its minor."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(fmt_tick))
    axis.set_minor_formatter(NullFormatter())
