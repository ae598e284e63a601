"""The vocabulary of derived quantities: stable dotted ids, their units and what they mean.

derived.csv rows use these ids and nothing else.  Each family declares its own ids beside the rows that
derive them (``FAMILY = Family(...)`` in its module, see ``analysis.family``); ``QUANTITIES`` is all of them,
in family order, assembled on first use.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping


class _Vocabulary(Mapping):
    """id -> (unit, meaning), read from every family's declaration when first used (a family module imports
    ``derived_row`` from here, so the declarations cannot be gathered while this module loads)."""

    @staticmethod
    def _all() -> dict[str, tuple[str, str]]:
        from analysis.family import vocabulary

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
