"""gpuatlas: reconstruct a GPU's hardware from measurements (the command line lives in gpuatlas.cli).

The Python API, for pandas: ``load`` one run or reference, ``compare`` several, ``committed_run`` for the
committed H200 run's folder.  Each returns data in SI units (bytes, seconds, Hz, B/s, FLOP/s) or cycles.
"""
from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

#: A source checkout run without an install (``python -m gpuatlas`` in a clone): probes/ and analysis/ sit beside
#: this package, and are its subpackages gpuatlas.probes and gpuatlas.analysis, as an install maps them (an
#: install puts them inside this package's folder).
_CHECKOUT = Path(__file__).resolve().parents[1]
if not (Path(__file__).parent / "probes").is_dir() and (_CHECKOUT / "probes" / "registry.py").is_file():
    __path__.append(str(_CHECKOUT))

#: Where the committed H200 run sits: the repository's ``reports/h200``, beside this package in a source tree.
COMMITTED_RUN = Path(__file__).resolve().parents[1] / "reports" / "h200"


def committed_run() -> Path:
    """The committed H200 run's folder, found beside this package whatever the working directory.

    It ships with the source tree, not in the wheel: after a plain ``pip install .`` it is not there, and this
    raises ``FileNotFoundError`` saying so (install with ``pip install -e .`` from a clone instead)."""
    if not (COMMITTED_RUN / "run.json").is_file():
        raise FileNotFoundError(f"the committed run is not at {COMMITTED_RUN}: it ships with the gpuatlas "
                                "source tree (reports/h200), not with an installed wheel; install from a clone "
                                "with `pip install -e .`, or give a run directory")
    return COMMITTED_RUN


def load(source: str | Path):
    """One run's derived quantities (measured, with 95% CIs) or a published reference's (``ref:NAME``), as a
    tidy frame: one row per quantity, the columns of ``compare``."""
    from gpuatlas.analysis.compare import source_rows

    return source_rows(str(source), _derived([str(source)]))


def compare(sources: list[str | Path], common: bool = True):
    """Runs and references side by side, as a tidy frame: one row per (source, quantity) with ``id`` (the run
    id or ``ref:NAME``), ``gpu``, ``quantity``, ``level``, ``value``, ``ci_low``, ``ci_high``, ``unit``,
    ``method``, ``kind``, ``source`` and ``caveat``.  ``common`` (the default, as on the command line) keeps
    the quantities every source has; ``common=False`` keeps them all."""
    from gpuatlas.analysis.compare import comparison

    sources = [str(s) for s in sources]
    return comparison(sources, common=common, loaded=_derived(sources))


#: (source, its files' sizes and times) -> (label, derived rows): a run is derived once per process while its
#: files stay as they are (deriving the committed run takes seconds).
_DERIVED: dict = {}


def _derived(sources: list[str]) -> dict:
    """Each source's label and derived rows, from the cache where its files have not changed since."""
    from gpuatlas.analysis.compare import load_derived

    loaded = {}
    for source in sources:
        folder = Path(source)
        files = [folder / "run.json", folder / "measurements.parquet", folder / "parts"]
        key = (str(folder.absolute()), *((f.stat().st_mtime_ns, f.stat().st_size) if f.exists() else None
                                         for f in files))
        if key not in _DERIVED:
            _DERIVED[key] = load_derived(source)
        label, derived = _DERIVED[key]
        loaded[source] = label, derived.copy()
    return loaded
