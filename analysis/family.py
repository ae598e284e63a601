"""A family's analysis-side declaration, and the families found under analysis/.

A module under analysis/ that makes derived rows declares its family once, at module level::

    FAMILY = Family(order=10, rows=clock_rows, quantities={"clock.sm_hz": ("Hz", "...")})

``quantities`` is its part of the vocabulary (id -> (unit, meaning)); ``analysis.quantities.QUANTITIES`` is
every family's, in ``order``.  derive calls ``rows(measurements, device)`` of every family in ``order``; a
family whose rows read the others' (the roofline reads the tensor peak and the HBM bandwidth) sets
``reads_rows`` and runs after them all as ``rows(measurements, device, rows)``.  No central list names the
families: a module is found by its ``FAMILY = Family(`` line.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

_DECLARES = re.compile(r"^FAMILY = Family\(", re.MULTILINE)


@dataclass(frozen=True)
class Family:
    """What a family derives (``quantities``), how (``rows``), and where its rows go (``order``)."""

    order: int  # where its rows go in derived.csv and its ids in the vocabulary
    rows: Callable  # (measurements, device) -> rows, or (measurements, device, rows) with reads_rows
    quantities: dict  # id -> (unit, meaning): everything its rows may emit
    reads_rows: bool = False


@functools.lru_cache(maxsize=None)
def families() -> dict[str, Family]:
    """module name -> its Family, for every module under analysis/ that declares one, in ``order``."""
    import analysis

    found = {}
    for info in pkgutil.iter_modules(analysis.__path__):
        path = Path(info.module_finder.path) / f"{info.name}.py"
        if info.ispkg or not path.is_file() or not _DECLARES.search(path.read_text()):
            continue
        name = f"analysis.{info.name}"
        family = getattr(importlib.import_module(name), "FAMILY", None)
        if not isinstance(family, Family):
            raise ValueError(f"{name} has a FAMILY line but no module-level FAMILY = Family(...)")
        found[name] = family
    orders = [f.order for f in found.values()]
    if len(set(orders)) != len(orders):
        clash = sorted(n for n, f in found.items() if orders.count(f.order) > 1)
        raise ValueError(f"families {clash} declare the same order: give each its own")
    return dict(sorted(found.items(), key=lambda item: item[1].order))


@functools.lru_cache(maxsize=None)
def vocabulary() -> dict[str, tuple[str, str]]:
    """Every family's quantities, in family order."""
    return merged(families())


def merged(found: dict[str, Family]) -> dict[str, tuple[str, str]]:
    """The quantities of ``found`` (module name -> Family) in its order; an id two families declare is an error."""
    vocabulary: dict[str, tuple[str, str]] = {}
    owner: dict[str, str] = {}
    for name, family in found.items():
        for quantity, (unit, meaning) in family.quantities.items():
            if quantity in owner:
                raise ValueError(f"quantity {quantity!r} is declared by both {owner[quantity]} and {name}")
            owner[quantity] = name
            vocabulary[quantity] = (unit, meaning)
    return vocabulary
