"""A run's log holds gpuatlas's own lines: Numba's performance warning (a grid of fewer than 128 blocks,
which a latency probe launches on purpose) is switched off in every probe process."""
import dataclasses

import pytest

import fakes
from numba_launch import one_block_launch
from gpuatlas.machinery import runner

pytest.importorskip("numba.cuda")


def run_one_block_probe(tmp_path, isolate: bool) -> dict:
    probe = next(p for p in fakes.simulated_probes() if p.id == "clock.sm")
    probe = dataclasses.replace(probe, func=one_block_launch)
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, [probe], "quick", {}, 0, ["test"])
    return runner.execute(run, meta, [probe], isolate=isolate, timeout_s=120)["probes"]["clock.sm"]


def test_a_probe_process_launches_one_block_without_a_numba_warning(tmp_path):
    state = run_one_block_probe(tmp_path, isolate=True)
    assert state["status"] == "ok", state["error"]


def test_numba_does_warn_outside_a_probe_process(tmp_path, monkeypatch):
    """The negative control: the same probe in this process, where the switch is off, fails on the warning."""
    from numba.cuda.core import config

    monkeypatch.setattr(config, "DISABLE_PERFORMANCE_WARNINGS", 0)
    state = run_one_block_probe(tmp_path, isolate=False)
    assert state["status"] == "failed" and "Numba warned" in state["error"] and "under-utilization" in state["error"]
