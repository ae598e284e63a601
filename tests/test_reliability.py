"""Fault isolation and nothing-lost: probes in a replaceable worker process, and runs killed with SIGKILL at random."""
import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

import fakes
import sim_worker
from gpuatlas.analysis.results import RunDir
from gpuatlas.machinery import runner
from gpuatlas.machinery import workers

HERE = Path(__file__).parent


def with_funcs(**funcs):
    return [dataclasses.replace(p, func=funcs.get(p.id.replace(".", "_"), fakes.FAKES[p.id]))
            for p in fakes.simulated_probes()]


def new_run(tmp_path, probes):
    return runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])


def test_a_crashing_a_failing_and_a_hanging_probe_are_each_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    """In run order: a crash, a hang, a probe that works, a failure, a probe that works.  The hang is given 3 s
    before its worker is killed, the others a minute, so that no slow machine times out a probe that works."""
    chosen = ("clock.sm", "launch.overhead", "chase.latency", "chase.smem", "chase.tlb")
    probes = [p for p in with_funcs(clock_sm=fakes.crash, launch_overhead=fakes.hang, chase_smem=fakes.fail)
              if p.id in chosen]
    assert [p.id for p in probes] == list(chosen)
    measure = workers.Worker.measure
    monkeypatch.setattr(workers.Worker, "measure", lambda self, probe, todo, timeout_s, report, **kw: measure(
        self, probe, todo, 3.0 if probe.id == "launch.overhead" else timeout_s, report, **kw))
    run, meta = new_run(tmp_path, probes)
    meta = runner.execute(run, meta, probes, isolate=True, timeout_s=60)
    states = meta["probes"]
    assert states["clock.sm"]["status"] == "failed" and "died" in states["clock.sm"]["error"]
    assert states["launch.overhead"]["status"] == "failed" and "timed out" in states["launch.overhead"]["error"]
    assert states["chase.smem"]["status"] == "failed" and "illegal memory access" in states["chase.smem"]["error"]
    assert states["chase.latency"]["status"] == "ok" and states["chase.tlb"]["status"] == "ok"
    derived = run.read_derived().set_index("quantity")
    assert "l1.latency_cycles" in derived.index and "clock.sm_hz" not in derived.index


def three_probes(monkeypatch, tmp_path, chosen=("clock.sm", "launch.overhead", "chase.smem"), **funcs):
    """``chosen`` (default clock.sm, launch.overhead and chase.smem) with ``funcs``, each process logged, and the
    workers counted."""
    monkeypatch.setenv("GPUATLAS_TEST_PID_LOG", str(tmp_path / "pids"))
    starts = []
    real_start = workers.Worker.start
    monkeypatch.setattr(workers.Worker, "start", lambda self: (starts.append(1), real_start(self)))
    probes = [p for p in with_funcs(**funcs) if p.id in chosen]
    assert [p.id for p in probes] == list(chosen)
    return probes, starts


def logged_pids(tmp_path) -> dict:
    pids = {}
    for line in (tmp_path / "pids").read_text().splitlines():
        probe_id, pid = line.split()
        pids.setdefault(probe_id, set()).add(int(pid))
    return pids


def test_one_worker_measures_probe_after_probe(tmp_path, monkeypatch):
    probes, starts = three_probes(monkeypatch, tmp_path, clock_sm=sim_worker.clock,
                                  launch_overhead=sim_worker.launch, chase_smem=sim_worker.smem)
    run, meta = new_run(tmp_path, probes)
    meta = runner.execute(run, meta, probes, isolate=True, timeout_s=60)
    assert {s["status"] for s in meta["probes"].values()} == {"ok"}
    assert len(starts) == 1, "one worker process for the whole run"
    pids = logged_pids(tmp_path)
    assert set(pids) == {"clock.sm", "launch.overhead", "chase.smem"}
    (pid,) = set.union(*pids.values())
    assert pid != os.getpid(), "measured in the worker, not in the runner"


def test_a_fault_in_the_middle_probe_costs_one_replacement_worker(tmp_path, monkeypatch):
    probes, starts = three_probes(monkeypatch, tmp_path, clock_sm=sim_worker.clock, launch_overhead=fakes.crash,
                                  chase_smem=sim_worker.smem)
    run, meta = new_run(tmp_path, probes)
    meta = runner.execute(run, meta, probes, isolate=True, timeout_s=60)
    states = meta["probes"]
    assert states["clock.sm"]["status"] == "ok" and states["chase.smem"]["status"] == "ok"
    assert states["launch.overhead"]["status"] == "failed" and "died" in states["launch.overhead"]["error"]
    assert run.read_meta()["probes"]["launch.overhead"]["status"] == "failed"
    assert len(starts) == 2, "the first worker, and one replacement after the fault"
    pids = logged_pids(tmp_path)
    assert pids["clock.sm"] != pids["chase.smem"], "the probe after the fault runs in the replacement"
    assert set(run.read_measurements()["probe"]) == {"clock.sm", "chase.smem"}


def test_the_jit_backends_measure_in_a_second_worker_that_imported_them_first(tmp_path, monkeypatch):
    """With cores to spare, a Numba probe measures in its own worker, which imported the probe's packages and
    module before the probe came; the CuPy probes before and after it share the other worker.  A fault there
    replaces that worker only."""
    monkeypatch.setattr(workers, "BACKEND_IMPORTS", {**workers.BACKEND_IMPORTS, "numba": ("json.tool",)})
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 16)
    chosen = ("clock.sm", "chase.latency_numba", "smem.banks")
    probes, starts = three_probes(monkeypatch, tmp_path, clock_sm=sim_worker.clock,
                                  chase_latency_numba=sim_worker.numba_chase, smem_banks=sim_worker.banks,
                                  chosen=chosen)
    probes = [dataclasses.replace(p, backend="numba") if p.id == "chase.latency_numba" else p for p in probes]
    lane, prefetch = workers.lanes(probes, {p.id: [{}] for p in probes}, 16)
    assert lane == {"clock.sm": "main", "chase.latency_numba": "jit", "smem.banks": "main"}
    assert prefetch["jit"] == ("json.tool", "sim_worker") and prefetch["main"] == ()
    assert set(workers.lanes(probes, {}, 2)[0].values()) == {"main"}, "one worker on few cores"
    run, meta = new_run(tmp_path, probes)
    meta = runner.execute(run, meta, probes, isolate=True, timeout_s=60, compile_ahead=False)
    assert {s["status"] for s in meta["probes"].values()} == {"ok"}
    assert len(starts) == 2
    pids = logged_pids(tmp_path)
    assert pids["clock.sm"] == pids["smem.banks"] != pids["chase.latency_numba"]
    seen = (tmp_path / "pids.modules").read_text().splitlines()
    assert seen and set(seen) == {"json.tool sim_worker"}, "the backend's package came before the probe"


def expected_configs(probes) -> dict:
    return {p.id: {runner.config_key(c) for c in p.configs(fakes.DEVICE, "quick")} for p in probes}


def check_readable(run: RunDir) -> None:
    run.read_meta()
    for part in [run.measurements_path, *run.parts.glob("*/*.parquet")]:
        if part.exists():
            pd.read_parquet(part)


def test_runs_killed_at_random_lose_nothing_and_resume_completes(tmp_path):
    """Probes of every kind of run.json state (measured, one skipped on one GPU), so that a run lasts a few
    seconds: each kill lands at a random moment after the child's imports, among the parts, the merges and the
    derive, and a run that finishes first is started over."""
    chosen = ("clock.sm", "launch.overhead", "chase.latency", "chase.line", "chase.tlb", "bw.dram",
              "link.p2p_latency")
    probes = [p for p in with_funcs() if p.id in chosen]
    assert len(probes) == len(chosen) and {p.min_gpus for p in probes} == {1, 2}
    run, meta = new_run(tmp_path, probes)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE)]))
    rng = random.Random(7)
    kills = 0
    while kills < 15:
        child = subprocess.Popen([sys.executable, str(HERE / "sim_resume.py"), str(run.path)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = child.stdout.readline()  # blocks until the child has imported and starts resuming
        if ready != "resuming\n":
            child.wait()
            raise AssertionError(f"the child did not start: {child.stderr.read()[-2000:]}")
        time.sleep(rng.uniform(0.0, 1.0))
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            kills += 1
        child.wait()
        check_readable(run)  # after every kill: only complete files where readers look
        if child.returncode == 0:  # finished before the kill: start over so every kill lands mid-run
            for path in [run.measurements_path, run.derived_path, *run.parts.glob("*/*.parquet")]:
                path.unlink(missing_ok=True)
    done = subprocess.run([sys.executable, str(HERE / "sim_resume.py"), str(run.path)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not list(run.path.rglob("*.tmp")), "no half-written file is left behind"
    frame = run.read_measurements()
    for probe_id, configs in expected_configs(probes).items():
        rows = frame[frame["probe"] == probe_id]
        assert set(rows["config"]) == configs, f"{probe_id}: missing or foreign configs"
        assert not rows.duplicated(["config", "metric", "repeat"]).any(), f"{probe_id}: duplicated samples"
    states = run.read_meta()["probes"]
    assert {states[p.id]["status"] for p in probes if p.min_gpus == 1} == {"ok"}
    assert {states[p.id]["status"] for p in probes if p.min_gpus > 1} == {"skipped"}, "one simulated GPU"
