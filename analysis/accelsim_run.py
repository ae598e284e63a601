"""What an Accel-Sim option is built from: a run's derived quantities and device properties (``Run``), and one
option line (``Option``) with where its value comes from; shared by the memory side (gpuatlas.analysis.accelsim) and
the SM's (gpuatlas.analysis.accelsim_sm)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Option:
    """One option line: ``value`` None means not set; ``source`` measured, driver, default or not set."""

    name: str
    value: str | None
    source: str
    why: str

    def line(self) -> str:
        if self.value is None:
            return f"# {self.name}: not set: {self.why}"
        return f"{self.name} {self.value}  # {self.source}: {self.why}"


class Run:
    """A run's derived quantities (by id) and device properties, and how to cite them."""

    def __init__(self, meta: dict, derived: pd.DataFrame):
        self.device = meta["device"]
        self.rows = {r.quantity: r for r in derived.itertuples() if math.isfinite(r.value)}

    def has(self, *quantities: str) -> bool:
        """Every quantity measured with a value (an undecided structure has none)."""
        return all(q in self.rows and math.isfinite(float(self.rows[q].value)) for q in quantities)

    def value(self, quantity: str) -> float:
        return float(self.rows[quantity].value)

    def cite(self, quantity: str) -> str:
        """``id = value unit [low, high]``: what a measured option's comment names."""
        r = self.rows[quantity]
        return f"{quantity} = {r.value:.6g} {r.unit} [{r.ci_low:.6g}, {r.ci_high:.6g}]"

    def cc(self) -> tuple[int, int]:
        major, minor = str(self.device["compute_capability"]).split(".")
        return int(major), int(minor)


def whole(x: float) -> int:
    """The nearest whole number, at least 1 (half up: cycles are counted, not rounded to even)."""
    return max(1, math.floor(x + 0.5))


def missing(name: str, *quantities: str) -> Option:
    return Option(name, None, "not set", f"this run has no {', '.join(quantities)}")


def measured(run: Run, name: str, quantities: tuple, value, how: str) -> Option:
    if not run.has(*quantities):
        return missing(name, *(q for q in quantities if not run.has(q)))
    return Option(name, str(value(*(run.value(q) for q in quantities))), "measured",
                  "; ".join(run.cite(q) for q in quantities) + f"; {how}")
