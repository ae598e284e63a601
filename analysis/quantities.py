"""The vocabulary of derived quantities: stable dotted ids, their units and what they mean.

derived.csv rows use these ids and nothing else.  Each family declares its own ids beside the rows that
derive them (``FAMILY = Family(...)`` in its module, see ``gpuatlas.analysis.family``); ``QUANTITIES`` is all of them,
in family order, assembled on first use.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from gpuatlas.analysis.family import vocabulary
from gpuatlas.analysis.stats import mean_ci, near_far
from gpuatlas.analysis.units import fmt_value


class _Vocabulary(Mapping):
    """id -> (unit, meaning), read from every family's declaration when first used (a family module imports
    ``derived_row`` from here, so the declarations cannot be gathered while this module loads)."""

    @staticmethod
    def _all() -> dict[str, tuple[str, str]]:
        return vocabulary()

    def __getitem__(self, quantity: str) -> tuple[str, str]:
        return self._all()[quantity]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


QUANTITIES: Mapping[str, tuple[str, str]] = _Vocabulary()


def derived_row(quantity: str, value, low, high, method: str, probe: str, note: str = "") -> dict:
    """One derived.csv row; the unit comes from the vocabulary, so a quantity outside it is an error."""
    return {"quantity": quantity, "value": float(value), "unit": QUANTITIES[quantity][0], "ci_low": float(low),
            "ci_high": float(high), "method": method, "probe": probe, "note": note}


def home_partition_rows(quantity: str, samples, method: str, probe: str) -> list[dict]:
    """A one-thread latency measured at many addresses (one per sample, ``samples`` its rows with ``value``):
    ``<quantity>_near_cycles`` and ``<quantity>_far_cycles``, the means of the placements homed in the SM's
    near L2 partition and across the chip, where the placements fall in two modes; else only the near row,
    over every placement.  ``quantity`` is the id without its ``_cycles`` unit.  A mode's value is the mean of
    its placements: the slices of one partition lie at a few distances from the SM, and a median would jump
    between those levels as their shares among the addresses move."""
    values = np.asarray(samples["value"], dtype=float)
    split = near_far(values)
    if split is None:
        return [derived_row(f"{quantity}_near_cycles", *mean_ci(values), method, probe,
                            f"{values.size} addresses; one mode: every address homed alike (no far partition "
                            "seen)")]
    near, far = split
    note = (f"{values.size} addresses: {near.size} near ({near.min():.1f}..{near.max():.1f} cycles), {far.size} "
            f"far ({far.min():.1f}..{far.max():.1f})")
    return [derived_row(f"{quantity}_near_cycles", *mean_ci(near), method + "; the near mode", probe, note),
            derived_row(f"{quantity}_far_cycles", *mean_ci(far), method + "; the far mode", probe, note)]


def structure_row(quantity: str, best, ci: tuple, method: str, probe: str, note: str = "", why: str = "") -> dict:
    """A discrete structure (a block size, a count) chosen among candidates by a bootstrap: its value where
    the CI holds one candidate; where it spans two, no value, "undecided" with both in the note and the CI
    (``why``: the reason, where it is not the bootstrap's)."""
    low, high = ci
    if low == high:
        return derived_row(quantity, best, low, high, method, probe, note)
    unit = QUANTITIES[quantity][0]
    why = why or f"the best, {fmt_value(best, unit)}, in fewer than 95% of resamples"
    undecided = f"undecided: between {fmt_value(low, unit)} and {fmt_value(high, unit)} ({why})"
    return derived_row(quantity, float("nan"), low, high, method, probe, f"{undecided}; {note}" if note else undecided)
