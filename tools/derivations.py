"""The committed runs' derivations: re-derive every committed run, hold each to today's analysis, and record it.

    python -m tools.derivations        (tools/board_spread.py runs it too, after rebuilding the spread table)

A run of the current schema gets its derived.csv rewritten.  An older run keeps the derived.csv its own analysis
wrote, and is held to what that analysis promised: each of its quantities (under today's id) is derived still,
with the same value and CI.  ``reports/derivations.json`` then records the analysis fingerprint
(``gpuatlas.analysis.derive.fingerprint``) and a digest of each run's files.  A derivation is a function of the
run and the fingerprint, so the tests take a recorded run as checked while neither has moved, and derive any other
afresh (tests/test_committed_run.py).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pandas as pd

from gpuatlas.analysis.derive import derive, fingerprint
from gpuatlas.analysis.results import SCHEMA_VERSION, RunDir

REPO = Path(__file__).resolve().parents[1]
#: ``{"fingerprint": ..., "runs": {run folder under reports/: digest}}``.
DERIVATIONS = REPO / "reports" / "derivations.json"

#: Quantities whose fit was replaced on purpose after the older schema's runs (the TLB levels: a staircase of
#: one placement per footprint before, a set-associative ramp over placements now): an older run keeps its old
#: fit's value, which the new fit does not reproduce from the same samples.
REFITTED = {"tlb.l1.reach_bytes", "tlb.l1.miss_cycles", "tlb.l2.reach_bytes", "tlb.l2.miss_cycles",
            "tlb.reach_lower_bound_bytes", "tlb.page_bytes",
            # schema 3: a block model that does not explain the HBM sweep decides no coalescing block, and
            # neighbouring associativities that fit alike decide no L2 ways (nor its sets)
            "coalescing.block_bytes", "l2.ways", "l2.sets",
            # a wave size that wins only part of a bootstrap over the program counts is undecided now
            "waves.programs_per_wave"}


def committed_runs() -> list[RunDir]:
    """Every run under reports/ with samples (a node's GPUs and a phased run's parts included; a node's run of
    the probes its one GPU skipped holds none)."""
    runs = [RunDir(p.parent) for p in sorted((REPO / "reports").rglob("run.json"))]
    return [run for run in runs if run.measurements_path.exists()]


def run_digest(path: Path) -> str:
    """sha256 over a run's three contract files: what its derivation was made from and what it wrote."""
    digest = hashlib.sha256()
    for name in ("run.json", "measurements.parquet", "derived.csv"):
        digest.update(hashlib.sha256((path / name).read_bytes()).digest())
    return digest.hexdigest()


def recorded_derivation(path: Path) -> bool:
    """Whether the run was derived and held to today's analysis (``record``) under today's fingerprint, from the
    files it holds now."""
    if not DERIVATIONS.is_file():
        return False
    recorded = json.loads(DERIVATIONS.read_text())
    key = path.resolve().relative_to(REPO / "reports").as_posix()
    return (recorded["fingerprint"] == fingerprint() and key in recorded["runs"]
            and recorded["runs"][key] == run_digest(path))


def assert_derivation_holds(run: RunDir, fresh: pd.DataFrame) -> None:
    """AssertionError unless the run's derived.csv is ``fresh`` (today's derivation of it): the whole table for a
    run of the current schema; for an older run, each of its quantities but the REFITTED, value and CI."""
    committed, fresh = (frame.assign(note=frame["note"].astype(object).fillna(""))
                         for frame in (run.read_derived(), fresh))
    if run.read_meta()["schema_version"] < SCHEMA_VERSION:
        numbers = ["value", "ci_low", "ci_high"]
        assert set(committed["quantity"]) <= set(fresh["quantity"]) | REFITTED
        committed = committed[~committed["quantity"].isin(REFITTED)].set_index("quantity")[numbers]
        zero = committed["ci_low"] == committed["ci_high"]  # schema 3 writes a zero-width CI as n/a
        committed.loc[zero, ["ci_low", "ci_high"]] = float("nan")
        fresh = fresh.set_index("quantity").loc[committed.index, numbers]
    pd.testing.assert_frame_equal(committed.reset_index(drop=True), fresh.reset_index(drop=True),
                                  check_dtype=False, rtol=1e-9)


def record() -> list[Path]:
    """Rewrite derived.csv of every committed run of the current schema, hold every older one to today's
    derivation, and record them all in DERIVATIONS; the runs rewritten."""
    digests, rewritten = {}, []
    for run in committed_runs():
        fresh = derive(run.read_meta(), run.read_measurements())
        if run.read_meta()["schema_version"] == SCHEMA_VERSION:
            run.write_derived(fresh)
            rewritten.append(run.path)
        assert_derivation_holds(run, fresh)
        digests[run.path.relative_to(REPO / "reports").as_posix()] = run_digest(run.path)
    DERIVATIONS.write_text(json.dumps({"fingerprint": fingerprint(), "runs": digests}, indent=1) + "\n")
    return rewritten


def main() -> int:
    rewritten = record()
    print(f"re-derived {len(rewritten)} committed runs of schema {SCHEMA_VERSION}, held the older ones to today's "
          f"analysis, and recorded them in {DERIVATIONS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
