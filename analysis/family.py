"""A family's analysis-side declaration, and the families found under analysis/.

A module under analysis/ that makes derived rows declares its family once, at module level::

    FAMILY = Family(order=10, probe_modules=("clock",), rows=clock_rows,
                    quantities={"clock.sm_hz": ("Hz", "...")})

``order`` is the project's one ordering: it places the family's rows in derived.csv and its ids in the
vocabulary (``gpuatlas.analysis.quantities.QUANTITIES`` is every family's, in ``order``), and a run measures the probe
modules of ``probe_modules`` (modules of ``gpuatlas.probes.families``, named without the package) in the same order,
family by family, each family's modules as it lists them (``gpuatlas.probes.registry.probe_modules``).  derive calls
``rows(measurements, device)`` of every family in ``order``; a family whose rows read the others' (the
roofline reads the tensor peak and the HBM bandwidth) sets ``reads_rows`` and runs after them all as
``rows(measurements, device, rows)``.  A family's rows may read the samples of its own probes and of earlier
families'; one that reads a later family's probe modules names them in ``reads_later``, so that a run
derives it only once those have measured (gpuatlas/machinery/early_derive.py; tests/test_derive_early.py
finds an undeclared one).

Beside ``FAMILY`` a family's modules declare what the report shows of it: ``FIGURES`` (its figures,
``gpuatlas.analysis.report_figures.FigureSpec``), ``CLAIMS`` (lecture claims its quantities judge,
``gpuatlas.analysis.claims.model.Claim``) and ``LEVELS`` (its rows of the memory hierarchy table,
``gpuatlas.analysis.hierarchy.Level``).  No central list names any of them: a module is found by its line
``FAMILY = Family(``, ``FIGURES = (``, ``CLAIMS = (`` or ``LEVELS = (`` (``declared``).
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

#: The line that marks a module declaring each kind of thing (see ``declared``).
_DECLARES = {"FAMILY": r"^FAMILY = Family\(", "FIGURES": r"^FIGURES = \(", "CLAIMS": r"^CLAIMS = \(",
             "LEVELS": r"^LEVELS = \("}


@dataclass(frozen=True)
class Family:
    """What a family derives (``quantities``), how (``rows``), what it measures (``probe_modules``), and where
    its rows and its runs go (``order``)."""

    order: float  # where its rows go in derived.csv, its ids in the vocabulary and its probe modules in a run
    rows: Callable  # (measurements, device) -> rows, or (measurements, device, rows) with reads_rows
    quantities: dict  # id -> (unit, meaning): everything its rows may emit
    reads_rows: bool = False
    probe_modules: tuple = ()  # the modules of gpuatlas.probes.families a run measures for it, in that order
    reads_later: tuple = ()  # later families' probe modules whose samples its rows read too


def declared(what: str) -> dict[str, object]:
    """module name -> its module-level ``what`` (FAMILY, FIGURES, CLAIMS or LEVELS), for every module directly
    under analysis/ with its line (see ``_DECLARES``), imported; in the modules' name order."""
    import gpuatlas.analysis

    marker = re.compile(_DECLARES[what], re.MULTILINE)
    found = {}
    for info in sorted(pkgutil.iter_modules(gpuatlas.analysis.__path__), key=lambda info: info.name):
        path = Path(info.module_finder.path) / f"{info.name}.py"
        if info.ispkg or not path.is_file() or not marker.search(path.read_text()):
            continue
        name = f"gpuatlas.analysis.{info.name}"
        module = importlib.import_module(name)
        if what not in vars(module):
            raise ValueError(f"{name} has a {what} line but no module-level {what}")
        found[name] = getattr(module, what)
    return found


@functools.lru_cache(maxsize=None)
def families() -> dict[str, Family]:
    """module name -> its Family, for every module under analysis/ that declares one, in ``order``."""
    found = declared("FAMILY")
    wrong = sorted(name for name, family in found.items() if not isinstance(family, Family))
    if wrong:
        raise ValueError(f"{wrong} declare a FAMILY that is not a Family(...)")
    orders = [f.order for f in found.values()]
    if len(set(orders)) != len(orders):
        clash = sorted(n for n, f in found.items() if orders.count(f.order) > 1)
        raise ValueError(f"families {clash} declare the same order: give each its own")
    late = min((f.order for f in found.values() if f.reads_rows), default=float("inf"))
    early = sorted(n for n, f in found.items() if not f.reads_rows and f.order > late)
    if early:
        raise ValueError(f"families {early} order after a family that reads rows, but derive makes theirs first: "
                         f"order them below {late}")
    return dict(sorted(found.items(), key=lambda item: item[1].order))


def independent() -> tuple[Family, ...]:
    """The families whose rows read no other family's rows, in ``order``: each derives on its own."""
    return tuple(family for family in families().values() if not family.reads_rows)


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
