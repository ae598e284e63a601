"""How a run's rows reach the disk cheaply: a config's part is an Arrow table written by pyarrow (no pandas
frame per config), a finished probe's parts are also one file, and measurements.parquet is merged once, at the
end.  What is read back is what the pandas route wrote and merged before."""
import sys

import numpy as np
import pandas as pd
import pytest

import fakes
from gpuatlas.analysis import results
from gpuatlas.analysis.results import RunDir, config_filename
from gpuatlas.machinery import runner
from gpuatlas.machinery import workers
from gpuatlas.probes.kit import telemetry
from gpuatlas.probes.kit.harness import Budget, Context

META = {"run_id": "r", "gpu": "g"}


def pandas_part(probe_id, params, samples, origin) -> pd.DataFrame:
    """A part as the runner made it before: a row dict per sample, one DataFrame, written by pandas."""
    rows = [{"run_id": META["run_id"], "gpu": META["gpu"], "probe": probe_id, "config": runner.config_key(params),
             **params, "metric": s.metric, "value": float(s.value), "unit": s.unit, "repeat": s.repeat,
             "sm_clock_hz": s.sm_clock_hz, "timer": s.timer, "flag": s.flag,
             **{k: v for k, v in results.TELEMETRY_EMPTY.items() if k != "elapsed_s"},
             "elapsed_s": s.created - origin} for s in samples]
    return pd.DataFrame(rows).astype({"clock_event_reasons": "int64"})


def test_every_probes_parts_read_back_as_the_pandas_written_ones(tmp_path):
    """Every simulated probe's first full-profile configs: same columns, order, dtypes and values."""
    ctx = Context(device=fakes.DEVICE, budget=Budget.for_profile("full"), seed=0)
    run, made = RunDir(tmp_path), {}
    for probe in fakes.simulated_probes():
        for params in probe.configs(fakes.DEVICE, "full")[:3]:
            samples = made[probe.id, runner.config_key(params)] = probe.func(ctx, **params)
            origin = min(s.created for s in samples)
            run.write_part(probe.id, params, workers.samples_table(META, probe.id, params, samples, None, origin))
            reference = tmp_path / "reference.parquet"
            pandas_part(probe.id, params, samples, origin).to_parquet(reference, index=False)
            pd.testing.assert_frame_equal(pd.read_parquet(run.part_path(probe.id, params)),
                                          pd.read_parquet(reference), obj=f"{probe.id} {params}")
    params = next(p for p in fakes.simulated_probes() if p.id == "chase.latency").configs(fakes.DEVICE, "full")[0]
    samples = made["chase.latency", runner.config_key(params)]
    pandas_part("chase.latency", dict(params, flavour="other"), samples, min(s.created for s in samples)).to_parquet(reference, index=False)
    with pytest.raises(AssertionError):  # the negative control: another config's rows are told apart
        pd.testing.assert_frame_equal(pd.read_parquet(run.part_path("chase.latency", params)),
                                      pd.read_parquet(reference))


def parts_merged_the_old_way(run: RunDir, order: list[str]) -> pd.DataFrame:
    """Every part, probe by probe in run order and by file name within a probe, concatenated by pandas."""
    frames = [pd.read_parquet(part) for probe in order for part in sorted((run.parts / probe).glob("*.parquet"))]
    merged = pd.concat(frames, ignore_index=True).drop_duplicates(["probe", "config", "metric", "repeat"])
    return results._whole_parameters(merged.reset_index(drop=True))


def sim_run(tmp_path, chosen, profile="quick"):
    probes = [p for p in fakes.simulated_probes() if p.id in chosen]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, profile, {}, 0, ["test"])
    return run, meta, probes


def test_the_merged_file_is_the_parts_merged_as_before(tmp_path):
    """Probes whose configs differ in their parameter columns (bw.dram's explicit list), in run order."""
    run, meta, probes = sim_run(tmp_path, ("clock.sm", "chase.latency", "bw.dram", "launch.overhead"))
    runner.execute(run, meta, probes, isolate=False)
    assert not list(run.parts.glob("*.parquet")), "the per-probe files are merged, then removed"
    expected = parts_merged_the_old_way(run, list(meta["probes"]))
    pd.testing.assert_frame_equal(run.read_measurements(), expected)
    with pytest.raises(AssertionError):  # the negative control: the order of the probes is seen
        pd.testing.assert_frame_equal(run.read_measurements(), parts_merged_the_old_way(run, sorted(meta["probes"])))


def count_reads(monkeypatch) -> list:
    reads = []
    real = results._read_parquet
    monkeypatch.setattr(results, "_read_parquet", lambda path, *a, **k: (reads.append(path), real(path, *a, **k))[1])
    return reads


def test_a_finished_probe_is_read_from_its_one_file_not_a_file_per_config(tmp_path, monkeypatch):
    run, meta, probes = sim_run(tmp_path, ("chase.latency",))
    (probe,) = probes
    ctx = Context(device=fakes.DEVICE, budget=Budget.for_profile("quick"), seed=0)
    configs = probe.configs(fakes.DEVICE, "quick")
    workers.measure_configs(run, meta, probe.id, probe.func, configs, ctx, lambda params: None)
    reads = count_reads(monkeypatch)
    rows, done = run.read_probe(probe.id), run.done_configs(probe.id)
    assert reads == [run.probe_path(probe.id)] * 2
    assert done == {runner.config_key(c) for c in configs} == set(rows["config"])
    pd.testing.assert_frame_equal(run.read_measurements(), parts_merged_the_old_way(run, [probe.id]))
    reads.clear()
    run.probe_path(probe.id).unlink()  # the negative control: without it, every part is read
    assert run.done_configs(probe.id) == done and len(reads) == len(configs) > 1


def test_a_run_killed_mid_probe_or_mid_merge_reads_every_config_once(tmp_path):
    """Killed in a probe: its parts, no probe file.  Killed in the merge, after measurements.parquet was
    written and before the probe files were removed: both hold the same configs, read once."""
    run, meta, probes = sim_run(tmp_path, ("clock.sm", "chase.latency"))
    ctx = Context(device=fakes.DEVICE, budget=Budget.for_profile("quick"), seed=0)
    clock, chase = probes
    workers.measure_configs(run, meta, clock.id, clock.func, clock.configs(fakes.DEVICE, "quick"), ctx, print)
    first = chase.configs(fakes.DEVICE, "quick")[:1]
    for params in first:  # a part written, the probe not finished
        samples = chase.func(ctx, **params)
        run.write_part(chase.id, params, workers.samples_table(meta, chase.id, params, samples))
    frame = run.read_measurements(order=list(meta["probes"]))
    assert frame.groupby("probe")["config"].nunique().to_dict() == {"clock.sm": len(clock.configs(fakes.DEVICE, "quick")),
                                                                    "chase.latency": 1}
    results.atomic_write_parquet(run.measurements_path, frame)  # the merge's write; the kill lands next
    again = run.read_measurements(order=list(meta["probes"]))
    pd.testing.assert_frame_equal(again, frame)
    assert run.done_configs(chase.id) == {runner.config_key(c) for c in first}
    resumed = chase.configs(fakes.DEVICE, "quick")[1:]
    workers.measure_configs(run, meta, chase.id, chase.func, resumed, ctx, print)
    merged = run.merge_parts(order=list(meta["probes"]))
    assert not merged.duplicated(["probe", "config", "metric", "repeat"]).any()
    assert set(merged.loc[merged["probe"] == chase.id, "config"]) == {runner.config_key(c) for c in first + resumed}


def test_a_probe_file_keeps_its_earlier_rows_when_a_resumed_probe_adds_to_it(tmp_path):
    run, meta, (probe,) = sim_run(tmp_path, ("chase.latency",))
    ctx = Context(device=fakes.DEVICE, budget=Budget.for_profile("quick"), seed=0)
    configs = probe.configs(fakes.DEVICE, "quick")
    for todo in (configs[:1], configs[1:]):
        workers.measure_configs(run, meta, probe.id, probe.func, todo, ctx, print)
    for params in configs:
        run.part_path(probe.id, params).unlink()  # only the probe file is left to hold them
    assert set(run.read_probe(probe.id)["config"]) == {runner.config_key(c) for c in configs}
    assert config_filename(configs[0]) != config_filename(configs[1])


@pytest.mark.parametrize("seed", range(5))
def test_telemetry_readings_of_a_window_are_those_strictly_after_its_start_up_to_its_end(seed):
    """Readings are found by bisection (a run holds tens of thousands); the brute-force mask is the answer."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.choice(np.arange(0.0, 5.0, 0.01), 300))  # repeated times too
    rec = telemetry.Recorder(read=lambda: None, poll=False)
    rec.rows = [(t, 100.0 + i, 1.5e9, 0, 50.0) for i, t in enumerate(times)]
    data = np.array(rec.rows)
    for t0, t1 in [(-1.0, 9.0), (times[10], times[40]), (times[40], times[40]), (2.005, 2.5), (9.0, 10.0)] + \
            [tuple(sorted(rng.choice(times, 2))) for _ in range(20)]:
        expected = data[(data[:, 0] > t0) & (data[:, 0] <= t1)]
        np.testing.assert_array_equal(rec.readings(t0, t1), expected.reshape(-1, 5))


@pytest.mark.parametrize("cpus_needed", [1, 1 << 20])
def test_the_end_of_run_derive_spreads_over_the_cores_only_on_a_large_machine_and_derives_the_same(
        tmp_path, monkeypatch, cpus_needed):
    import gpuatlas.analysis.derive

    chosen = ("clock.sm", "chase.latency", "bw.dram", "launch.overhead")
    serial_run, meta, probes = sim_run(tmp_path / "serial", chosen)
    monkeypatch.setattr(runner, "PARALLEL_DERIVE_CPUS", 1 << 20)
    runner.execute(serial_run, meta, probes, isolate=False)
    calls = []
    real = gpuatlas.analysis.derive.derive
    monkeypatch.setattr(gpuatlas.analysis.derive, "derive",
                        lambda *a, **k: (calls.append(k.get("parallel")), real(*a, **k))[1])
    monkeypatch.setattr(runner, "PARALLEL_DERIVE_CPUS", cpus_needed)
    run, meta, probes = sim_run(tmp_path / "other", chosen)
    runner.execute(run, meta, probes, isolate=False)
    assert calls == [cpus_needed == 1]  # the negative control: a large threshold keeps it serial
    pd.testing.assert_frame_equal(run.read_derived(), serial_run.read_derived())


def test_releasing_a_probe_collects_its_cycles_and_freezes_what_survives(monkeypatch):
    """Cyclic garbage made before a release and after it is collected by the release that follows it; what
    survives a release is left out of later collections."""
    import gc
    import weakref

    class Node:
        pass

    def cycle():
        a, b = Node(), Node()
        a.other, b.other = b, a
        return weakref.ref(a)

    monkeypatch.delitem(sys.modules, "cupy", raising=False)  # no GPU here: only the collector's part
    kept = Node()
    gc.disable()  # no automatic collection between the lines below: only the releases collect
    try:
        first = cycle()
        workers._release_memory()
        assert first() is None and gc.get_freeze_count() > 0
        assert not any(obj is kept for obj in gc.get_objects())  # frozen: no collection scans it
        second = cycle()
        assert second() is not None  # the negative control: a cycle lives until a collection
        workers._release_memory()
        assert second() is None
    finally:
        gc.unfreeze()  # this process's heap is pytest's
        gc.enable()
