"""The results contract, the runner and resume, on the simulated backend (tests/fakes/)."""
import json
import re
import shutil

import pandas as pd
import pytest

from gpuatlas.analysis import stats
from gpuatlas.analysis.derive import derive
from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.render import FigureJob, render
from gpuatlas.analysis.results import DERIVED_COLUMNS, MEASUREMENT_COLUMNS, SCHEMA_VERSION, RunDir, load_run
from conftest import SCHEMA1_RUN
from fakes import DEVICE, DRAM_FETCH_BYTES, LEVELS, PAGE_BYTES, SECTOR_BYTES, TLB_MISS, TLB_REACH, simulated_probes
from gpuatlas.machinery import runner


def make_run(tmp_path, probes=None):
    probes = probes or simulated_probes()
    run, meta = runner.new_run(tmp_path, DEVICE, {"python": "3"}, probes, "quick", {}, 0, ["gpuatlas", "run"])
    return run, meta, probes


def copy_of(run: RunDir, tmp_path) -> RunDir:
    """A copy of the shared simulated run, to damage."""
    return RunDir(shutil.copytree(run.path, tmp_path / run.path.name))


def test_a_run_writes_the_contract(simulated_quick_run):
    run, probes = simulated_quick_run  # measured by runner.execute, in its worker process
    meta = run.read_meta()
    single = {p.id for p in probes if p.min_gpus == 1}
    assert {s["status"] for pid, s in meta["probes"].items() if pid in single} == {"ok"}
    assert {s["status"] for pid, s in meta["probes"].items() if pid not in single} == {"skipped"}, "one GPU"
    meta2, measurements = load_run(run.path)
    assert meta2["schema_version"] == SCHEMA_VERSION and meta2["ended"]
    assert set(MEASUREMENT_COLUMNS) <= set(measurements.columns)
    assert {"footprint_bytes", "flavour", "mode", "busy_sms"} <= set(measurements.columns), "a column per parameter"
    derived = run.read_derived()
    assert list(derived.columns) == list(DERIVED_COLUMNS)
    values = derived.set_index("quantity")["value"]
    assert values["l1.latency_cycles"] == pytest.approx(LEVELS["l1"], rel=0.01)
    assert values["l2.latency_cycles"] == pytest.approx(LEVELS["l2"], rel=0.01)
    assert values["dram.latency_cycles"] == pytest.approx(LEVELS["dram"], rel=0.01)
    assert values["dram.latency_ns"] == pytest.approx(LEVELS["dram"] / 1.98e9, rel=0.01)
    assert values["smem.latency_cycles"] == pytest.approx(LEVELS["smem"], rel=0.01)
    assert values["l1.fill_bytes"] == SECTOR_BYTES and values["l2.dram_fetch_bytes"] == DRAM_FETCH_BYTES
    assert values["l1.sector_bytes"] == SECTOR_BYTES and "mem.sector_bytes" not in values
    assert values["tlb.l1.reach_bytes"] == pytest.approx(TLB_REACH, rel=0.2)
    assert values["tlb.l1.miss_cycles"] == pytest.approx(TLB_MISS, rel=0.05)


def test_full_translation_sweeps_find_the_page_and_both_hbm_latencies(tmp_path):
    """chase.tlb at several block sizes gives the page; chase.miss past the TLB's reach gives the latency with
    translation misses beside the plain miss latency."""
    probes = [p for p in simulated_probes() if p.id in ("chase.tlb", "chase.miss", "chase.every_sm")]
    run, meta = runner.new_run(tmp_path, DEVICE, {"python": "3"}, probes, "full", {}, 0, ["gpuatlas", "run"])
    runner.execute(run, meta, probes, isolate=False)
    values = run.read_derived().set_index("quantity")["value"]
    assert values["tlb.page_bytes"] == PAGE_BYTES
    assert values["tlb.l1.reach_bytes"] == pytest.approx(TLB_REACH, rel=0.2)
    assert values["dram.latency_cycles"] == pytest.approx(LEVELS["dram"], rel=0.01)
    assert values["dram.latency_tlb_miss_cycles"] == pytest.approx(LEVELS["dram"] + TLB_MISS, rel=0.01)
    assert values["l2.capacity_chase_bytes"] == pytest.approx(DEVICE["l2_bytes"], rel=0.1)
    # the simulated L2 holds a line read from both partitions in both: the all-readers knee is half
    assert values["l2.capacity_chase_all_readers_bytes"] == pytest.approx(DEVICE["l2_bytes"] / 2, rel=0.1)


def test_a_failing_probe_is_recorded_and_the_run_goes_on(tmp_path):
    import dataclasses

    def broken(ctx, **params):
        raise RuntimeError("illegal address")

    # the probe before the failing one, the failing one, and the next ones: the run goes on past it
    probes = [dataclasses.replace(p, func=broken) if p.id == "launch.overhead" else p for p in simulated_probes()
              if p.id in ("clock.sm", "launch.overhead", "chase.access", "chase.latency")]
    assert [p.id for p in probes][1] == "launch.overhead", "a probe before it and probes after it"
    run, meta, _ = make_run(tmp_path, probes)
    meta = runner.execute(run, meta, probes, isolate=False)
    assert meta["probes"]["launch.overhead"]["status"] == "failed"
    assert "illegal address" in meta["probes"]["launch.overhead"]["error"]
    assert meta["probes"]["chase.latency"]["status"] == "ok"
    assert json.loads((run.path / "run.json").read_text())["probes"]["launch.overhead"]["status"] == "failed"


def test_resume_measures_only_what_is_missing(tmp_path):
    import dataclasses

    calls, interrupted = [], []
    # probes finished before the interrupted one, and one after it
    chosen = [p for p in simulated_probes() if p.id in ("clock.sm", "launch.overhead", "chase.latency", "chase.line")]
    order = [p.id for p in chosen]
    assert order.index("chase.latency") == 2
    first_chase_call = 1 + sum(len(p.configs(DEVICE, "quick")) for p in chosen
                               if order.index(p.id) < order.index("chase.latency"))
    real = {p.id: p.func for p in chosen}

    def interrupt_after_first(probe_id):
        def func(ctx, **params):
            calls.append((probe_id, tuple(sorted(params.items()))))
            if probe_id == "chase.latency" and len(calls) > first_chase_call and not interrupted:
                interrupted.append(True)  # Ctrl-C while the second chase config is measured
                raise KeyboardInterrupt
            return real[probe_id](ctx, **params)
        return func

    probes = [dataclasses.replace(p, func=interrupt_after_first(p.id)) for p in chosen]
    run, meta, _ = make_run(tmp_path, probes)
    with pytest.raises(runner.RunInterrupted):
        runner.execute(run, meta, probes, isolate=False)
    meta = run.read_meta()
    assert meta["probes"]["chase.latency"]["status"] == "interrupted"
    assert run.done_configs("chase.latency") and len(run.done_configs("chase.latency")) == 1
    calls.clear()
    meta = runner.execute(run, meta, probes, isolate=False)
    measured = [c for c in calls if c[0] == "chase.latency"]
    assert len(measured) == 2, "the finished config is not measured again"
    assert {c[0] for c in calls} == {"chase.latency", "chase.line"}, "finished probes are not measured again"
    frame = run.read_measurements()
    per_config = frame[frame["probe"] == "chase.latency"].groupby("config")["repeat"].count()
    assert len(per_config) == 3 and (per_config == per_config.iloc[0]).all(), "no duplicate or missing configs"


def test_reading_bad_run_directories_fails_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="not a directory"):
        RunDir(tmp_path / "missing").read_meta()
    with pytest.raises(UsageError, match="no run.json"):
        RunDir(tmp_path).read_meta()
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        RunDir(tmp_path).read_meta()
    (tmp_path / "run.json").write_text(json.dumps({"schema": "other"}))
    with pytest.raises(UsageError, match="not written by gpuatlas"):
        RunDir(tmp_path).read_meta()
    (tmp_path / "run.json").write_text(json.dumps({"schema": "gpuatlas.run", "schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(UsageError, match="upgrade gpuatlas"):
        RunDir(tmp_path).read_meta()
    with pytest.raises(UsageError, match="upgrade gpuatlas"):  # a path given as a string, as in a notebook
        RunDir(str(tmp_path)).read_meta()


def test_truncated_or_foreign_parquet_is_refused(simulated_quick_run, tmp_path):
    run = copy_of(simulated_quick_run[0], tmp_path)
    data = run.measurements_path.read_bytes()
    run.measurements_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(UsageError, match="not a readable parquet"):
        run.read_measurements()
    pd.DataFrame({"a": [1]}).to_parquet(run.measurements_path)
    with pytest.raises(UsageError, match="lacks columns"):
        run.read_measurements()


def test_report_renders_a_simulated_run(simulated_quick_run, tmp_path):
    run, _ = simulated_quick_run
    meta, measurements = load_run(run.path)
    derived = derive(meta, measurements)
    pd.testing.assert_frame_equal(derive(meta, measurements, parallel=True), derived)  # forked workers, same rows
    lines = []
    # the report's figure workers derive the families (same rows again), then draw from them, as the CLI's do
    job = FigureJob(meta, measurements, lines.append)
    try:
        assert id(measurements) in stats._SPLITS  # split once, before the workers fork
        if job.pool is not None:
            pd.testing.assert_frame_equal(derive(meta, measurements, families=job.family_rows), derived)
    except BaseException:
        if job.pool is not None:  # waits for the figures being drawn: no worker outlives the test
            job.pool.shutdown(cancel_futures=True)
        job.close()
        raise
    page = render(meta, measurements, derived, tmp_path / "report", figures=job)
    assert id(measurements) not in stats._SPLITS  # the job's split of the frame ends with it: no stale parts later
    html = page.read_text()
    assert "data:image/svg+xml;base64," in html and "Memory hierarchy, reconstructed" in html
    markdown = (tmp_path / "report" / "index.md").read_text()
    assert "33.0" in markdown and "![TLB staircase" in markdown and "](latency-staircase.svg)" in markdown
    svg = (tmp_path / "report" / "latency-staircase.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and len(svg) > 10_000
    assert not list((tmp_path / "report").glob("*.png")), "figures are written as SVG only"
    drawn = html.count("<figcaption>")
    assert drawn == html.count("data:image/svg+xml;base64,") == markdown.count("*Figure ") == len(lines) >= 5
    shown = re.findall(r"^!\[[^]]*\]\(([a-z0-9-]+\.svg)\)$", markdown, re.MULTILINE)
    assert sorted(shown) == sorted(p.name for p in (tmp_path / "report").glob("*.svg")) and len(shown) == drawn
    assert '<nav class="toc">' in html and 'href="#latency-staircase"' in html and "TLB staircase" in html


@pytest.mark.parametrize("probe_id", sorted(fakes_ids := [p.id for p in simulated_probes()]))
def test_derive_and_render_work_on_a_run_of_any_single_probe(tmp_path, probe_id):
    probes = [p for p in simulated_probes() if p.id == probe_id]
    device = dict(DEVICE, gpu_count=probes[0].min_gpus)  # a link probe measures on a node of the GPUs it needs
    profile = "quick" if probes[0].configs(device, "quick") else "full"  # a probe of sustained windows is full-only
    run, meta = runner.new_run(tmp_path, device, {"python": "3"}, probes, profile, {}, 0, ["gpuatlas", "run"])
    meta = runner.execute(run, meta, probes, isolate=False)
    measurements = run.read_measurements()
    render(meta, measurements, derive(meta, measurements), tmp_path / "report")
    assert (tmp_path / "report" / "index.html").exists()


def test_a_derived_csv_with_text_in_its_numbers_is_refused(simulated_quick_run, tmp_path):
    run = copy_of(simulated_quick_run[0], tmp_path)
    text = run.derived_path.read_text().splitlines()
    run.derived_path.write_text("\n".join(text[:2] + [text[2].replace(text[2].split(",")[1], "abc", 1)]) + "\n")
    with pytest.raises(UsageError, match="not numbers"):
        run.read_derived()


def test_a_probe_whose_backend_packages_are_missing_is_skipped_with_the_install_line(tmp_path, monkeypatch):
    import dataclasses

    from fakes import DEVICE, simulated_probes
    from gpuatlas.machinery import runner

    monkeypatch.setitem(runner.BACKEND_PACKAGES, "triton", ("torch", "no_such_package_gpuatlas"))
    probes = [dataclasses.replace(p, backend="triton") if p.id.startswith(("matmul.", "fusion.")) else p
              for p in simulated_probes() if p.id.startswith(("matmul.", "fusion.", "clock."))]
    run, meta = runner.new_run(tmp_path, DEVICE, {"python": "3"}, probes, "quick", {}, 0, ["gpuatlas", "run"])
    meta = runner.execute(run, meta, probes, isolate=False)
    for pid, state in meta["probes"].items():
        if pid.startswith(("matmul.", "fusion.")):
            assert state["status"] == "skipped", state
            assert "no_such_package_gpuatlas" in state["error"] and "pip install" in state["error"]
        else:
            assert state["status"] == "ok"


def _schema1_rows():
    """The schema-1 fixture run's derived.csv as written, and its run.json."""
    return pd.read_csv(SCHEMA1_RUN / "derived.csv"), json.loads((SCHEMA1_RUN / "run.json").read_text())


def test_a_schema_1_run_shows_its_fill_blocks_under_their_names_never_as_a_line():
    raw, meta = _schema1_rows()
    assert meta["schema_version"] == 1 and {"l1.line_bytes", "mem.sector_bytes"} <= set(raw["quantity"])
    read = RunDir(SCHEMA1_RUN).read_derived().set_index("quantity")
    assert "l1.line_bytes" not in read.index and "mem.sector_bytes" not in read.index
    old = raw.set_index("quantity")
    for was, now in (("l1.line_bytes", "l1.fill_bytes"), ("mem.sector_bytes", "l2.dram_fetch_bytes")):
        assert read.loc[now, ["value", "ci_low", "ci_high", "method", "note"]].equals(
            old.loc[was, ["value", "ci_low", "ci_high", "method", "note"]])
    assert len(read) == len(raw)


def test_a_run_of_the_current_schema_keeps_its_ids(tmp_path):
    """Negative control: the renames are keyed on the schema version, so a schema-2 run's l1.line_bytes (the line
    by capacity) stays l1.line_bytes."""
    raw, meta = _schema1_rows()
    (tmp_path / "derived.csv").write_text(raw.to_csv(index=False))
    (tmp_path / "run.json").write_text(json.dumps({**meta, "schema_version": SCHEMA_VERSION}))
    read = RunDir(tmp_path).read_derived()
    assert list(read["quantity"]) == list(raw["quantity"])
