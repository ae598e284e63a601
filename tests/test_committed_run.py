"""The committed H200 run (reports/h200): the fixture for CPU tests, and its own consistency checks."""
import hashlib
from pathlib import Path

import pandas as pd
import pytest

from gpuatlas.analysis.derive import derive
from gpuatlas.analysis.chase_levels import frontend_agreement
from gpuatlas.analysis.report_figures import drawn_figures
from gpuatlas.analysis.repro import read_spread_table
from gpuatlas.analysis.results import RunDir
from conftest import COMMITTED_RUN
from gpuatlas.probes.registry import all_probes
from tools.derivations import assert_derivation_holds, recorded_derivation


def _distinct(runs: list) -> list:
    """Each run once: reports/h200 is also a run of the board panel (reports/h200-boards), committed in both
    folders as the same files, so deriving it once checks both."""
    seen, distinct = set(), []
    for path in runs:
        key = tuple(hashlib.sha256((path / name).read_bytes()).hexdigest()
                    for name in ("run.json", "measurements.parquet", "derived.csv"))
        if key not in seen:
            seen.add(key)
            distinct.append(path)
    return distinct


#: Every committed run of the H200 (reports/h200 and every run of the reports/h200-* folders).
ALL_RUNS = _distinct([COMMITTED_RUN, *sorted(p for p in COMMITTED_RUN.parent.glob("h200-*/2*")
                                             if (p / "run.json").is_file())])  # a stray folder is no run


def test_committed_runs_were_measured_by_the_probes_as_they_are_now(committed_run):
    registry = all_probes()
    measured = RunDir(COMMITTED_RUN).read_meta()["probes"]
    # a probe the run skipped (one GPU) measured nothing in it: its version says nothing about the run
    stale = {pid: (state["version"], registry[pid].version) for pid, state in measured.items()
             if pid in registry and state["status"] != "skipped" and state["version"] != registry[pid].version}
    assert not stale, f"probes changed since the committed run: re-measure reports/h200 ({stale})"
    single = {pid for pid, p in registry.items() if p.min_gpus == 1}
    assert single <= set(measured), "the committed one-GPU run covers every probe one GPU can measure"
    assert {measured[pid]["status"] for pid in single} == {"ok"}
    assert {measured[pid]["status"] for pid in set(measured) - single} <= {"skipped"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xdist_group("committed_report"))
                                  if p == COMMITTED_RUN else p for p in ALL_RUNS], ids=lambda p: p.name)
def test_derived_csv_is_what_the_analysis_derives_from_the_measurements(path, request):
    """A run of the current schema: derived.csv is exactly today's derivation.  An older run's derived.csv was
    written by an older analysis, which knew fewer quantities and worded its methods otherwise: each of its
    quantities (under today's id) must still be derived, with the same value and CI.

    A run that ``python -m tools.derivations`` derived and held to the analysis under today's fingerprint, from
    the files it holds now, has passed this already (a derivation is a function of the run and the
    fingerprint); any other run, and reports/h200 always (which checks that the derivation repeats), is derived
    here afresh."""
    if path != COMMITTED_RUN and recorded_derivation(path):
        return
    run = RunDir(path)
    fresh = (request.getfixturevalue("committed_report")[1] if path == COMMITTED_RUN  # derived once, shared
             else derive(run.read_meta(), run.read_measurements()))
    assert_derivation_holds(run, fresh)


def test_cupy_and_numba_chases_agree_within_five_percent(committed_run):
    _, measurements = committed_run
    agreement = frontend_agreement(measurements)
    assert len(agreement) == 3, "one footprint each in L1, L2 and HBM"
    assert ((agreement["ratio"] - 1).abs() < 0.05).all(), agreement


def test_the_hierarchy_is_ordered_and_the_clock_is_physical(committed_run):
    meta, _ = committed_run
    d = RunDir(COMMITTED_RUN).read_derived().set_index("quantity")
    spread = set(read_spread_table()["quantity"])
    assert d.loc["l1.latency_cycles", "value"] < d.loc["l2.latency_cycles", "value"] < d.loc["dram.latency_cycles", "value"]
    for q in d.index:
        low, value, high = d.loc[q, ["ci_low", "value", "ci_high"]]
        if pd.isna(value):  # an undecided structure, or a bound: its interval spans what the data allow
            assert low < high and ("undecided" in d.loc[q, "note"] or d.loc[q, "note"].startswith("at least")), q
        elif not pd.isna(low):  # an interval "n/a" (every sample alike) has no ends
            assert low <= value <= high, q
        assert pd.isna(low) or low < high, f"{q}: a zero-width interval"
        if pd.isna(d.loc[q, "repro_low"]):  # nothing to predict from: no CI, and the panel's boards leave it
            assert pd.isna(low) and q not in spread, q  # undecided on some boards (no spread of theirs)
        else:
            assert d.loc[q, "repro_low"] <= (low if not pd.isna(low) else value), q
    clock = d.loc["clock.sm_hz", "value"]
    assert clock <= 1.01 * meta["device"]["sm_clock_max_hz"]
    # ns and cycles are two clocks read in the same kernel: their ratio is the measured clock
    assert d.loc["dram.latency_cycles", "value"] / d.loc["dram.latency_ns", "value"] == pytest.approx(clock, rel=0.01)
    assert d.loc["launch.graph_overhead_s", "value"] < d.loc["launch.overhead_s", "value"]


def test_committed_report_renders_headless_with_the_measured_values(committed_run, committed_report):
    _, measurements = committed_run
    page, derived = committed_report
    text = page.read_text()
    drawn = drawn_figures(measurements)
    assert len(drawn) >= 5 and text.count("data:image/svg+xml;base64,") == len(drawn)
    dram = derived.set_index("quantity").loc["dram.latency_cycles", "value"]
    assert f"{dram:.4g} cycles" in text
    assert "deviates" in text or "holds" in text
    assert (COMMITTED_RUN / "report" / "index.html").exists(), "the rendered report is committed beside the run"


#: Quantities the committed H200 runs and the published H200 figures (ref:h200) both give.
SHARED_WITH_REF_H200 = ("dram.read_bandwidth_bytes_per_s", "dram.copy_bandwidth_bytes_per_s",
                        "dram.write_bandwidth_bytes_per_s", "l2.bandwidth_bytes_per_s",
                        "l1.bandwidth_bytes_per_clk_sm", "clock.sm_hz")


def test_the_committed_h200_runs_and_ref_h200_measure_the_same_quantities_consistently(committed_derive_shared):
    """Same GPU, other suites: every shared quantity agrees within a factor of 1.5 either way. Kernels,
    load widths and clocks differ (BabelStream's Dot reduces, gpu-strides uses one SM), so no tighter bound
    is physics; a factor of 1.5 still catches a wrong unit, the wrong level (this GPU's L2 reads ~2.5x
    faster than its HBM) or a per-SM figure read as a whole-GPU one."""
    from gpuatlas.analysis.compare import compare

    table = compare([COMMITTED_RUN, "ref:h200"])
    ref = next(c for c in table.columns if "[ref:h200" in c and not c.startswith("ratio"))
    measured = table[[c for c in table.columns if c not in ("unit", ref) and not c.startswith("ratio")]]
    first = measured.bfill(axis=1).iloc[:, 0]  # each quantity from the first run that has it
    both = first.notna() & table[ref].notna()
    assert set(SHARED_WITH_REF_H200) <= set(table.index[both])
    ratio = first[list(SHARED_WITH_REF_H200)] / table.loc[list(SHARED_WITH_REF_H200), ref]
    assert ((ratio > 1 / 1.5) & (ratio < 1.5)).all(), ratio


def test_the_analysis_fingerprint_moves_with_the_analysis_files_and_nothing_else(tmp_path):
    import shutil

    from gpuatlas.analysis import derive as derive_module
    from gpuatlas.analysis.derive import fingerprint

    copy = tmp_path / "analysis"
    shutil.copytree(Path(derive_module.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert fingerprint(copy) == fingerprint(), "the files' contents, wherever they are"
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "stats.cpython-311.pyc").write_bytes(b"compiled")
    (copy / "notes.txt").write_text("neither code nor a table")
    assert fingerprint(copy) == fingerprint()
    for edited in (copy / "stats.py", copy / "board-spread.csv"):
        original = edited.read_bytes()
        edited.write_bytes(original + b"\n")
        assert fingerprint(copy) != fingerprint(), edited.name
        edited.write_bytes(original)
    assert fingerprint(copy) == fingerprint()


def test_a_recorded_derivation_stands_only_for_the_files_and_the_analysis_it_was_made_from(tmp_path, monkeypatch):
    import json
    import shutil

    import tools.derivations as derivations

    monkeypatch.setattr(derivations, "REPO", tmp_path)
    monkeypatch.setattr(derivations, "DERIVATIONS", tmp_path / "reports" / "derivations.json")
    run = tmp_path / "reports" / "panel" / COMMITTED_RUN.name
    run.mkdir(parents=True)
    for name in ("run.json", "measurements.parquet", "derived.csv"):
        shutil.copy(COMMITTED_RUN / name, run / name)
    assert not recorded_derivation(run), "nothing recorded yet"

    def record(fingerprint: str) -> None:
        runs = {"panel/" + run.name: derivations.run_digest(run)}
        derivations.DERIVATIONS.write_text(json.dumps({"fingerprint": fingerprint, "runs": runs}))

    from gpuatlas.analysis.derive import fingerprint

    record(fingerprint())
    assert recorded_derivation(run)
    derived = (run / "derived.csv").read_bytes()
    (run / "derived.csv").write_bytes(derived.replace(b"cycles", b"cycle", 1))
    assert not recorded_derivation(run), "a derived.csv edited after its derivation"
    (run / "derived.csv").write_bytes(derived)
    assert recorded_derivation(run)
    record("0" * 64)
    assert not recorded_derivation(run), "an analysis other than today's"


def test_an_older_runs_derivation_holds_on_its_own_quantities_and_fails_on_a_moved_value(tmp_path):
    """The check an older run is held to, on its own derived.csv as today's derivation would give it: more
    quantities, a refitted one moved and a zero-width CI written as n/a all hold; a moved value does not."""
    import shutil

    from gpuatlas.analysis.results import SCHEMA_VERSION
    from tools.derivations import REFITTED

    older = next(p for p in ALL_RUNS if RunDir(p).read_meta()["schema_version"] < SCHEMA_VERSION)
    run = RunDir(tmp_path / older.name)
    run.path.mkdir()
    for name in ("run.json", "derived.csv"):
        shutil.copy(older / name, run.path / name)
    committed = run.read_derived()
    fresh = pd.concat([committed, committed.iloc[:1].assign(quantity="a.quantity_added_since")], ignore_index=True)
    refitted = fresh["quantity"].isin(REFITTED)
    assert refitted.any() and (fresh["ci_low"] == fresh["ci_high"]).any()
    fresh.loc[refitted, "value"] *= 2
    fresh.loc[fresh["ci_low"] == fresh["ci_high"], ["ci_low", "ci_high"]] = float("nan")
    assert_derivation_holds(run, fresh)
    moved = fresh.copy()
    moved.loc[~refitted & moved["value"].notna(), "value"] *= 1.001
    with pytest.raises(AssertionError):
        assert_derivation_holds(run, moved)
