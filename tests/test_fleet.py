"""gpuatlas fleet on a local Ray cluster of simulated GPUs (resources faked): one task per GPU through the
normal runner, one slow board found, a task killed mid-run resumed without losing or repeating a config,
and runs made elsewhere gathered by the same command."""
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fakes import FLEET_PROBES, SLOW_UUID, fleet_device, fleet_probes

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[fleet]' to test gpuatlas fleet")

from gpuatlas.fleet import finished_boards, read_dataset, run_fleet  # noqa: E402

GPUS = 3
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    calls = tmp_path_factory.mktemp("calls")
    os.environ["GPUATLAS_TEST_FLEET_DIR"] = str(calls)
    ray.init(num_cpus=2, num_gpus=GPUS, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)]),
                                       "GPUATLAS_TEST_FLEET_DIR": str(calls)}})
    yield calls
    ray.shutdown()


def _fleet(folder, **kw):
    return run_fleet(folder, None, "quick", 0, spool=folder / "spool", say=lambda *a: None, device_fn=fleet_device,
                     probes_fn=fleet_probes, isolate=False, **kw)


def _calls(calls_dir, uuid):
    path = calls_dir / f"{uuid}.calls"
    return path.read_text().splitlines() if path.exists() else []


def test_a_fleet_finds_the_slow_board_kills_and_resumes_without_loss(cluster, tmp_path):
    calls_dir = cluster
    (calls_dir / "kill").touch()  # the slow board's task dies (SIGKILL) mid-run, once
    first = _fleet(tmp_path)
    assert len(first["lost_tasks"]) == 1, first
    assert set(finished_boards(tmp_path)) == {f"GPU-sim-{i}" for i in range(GPUS)} - {SLOW_UUID}
    before = {f"GPU-sim-{i}": _calls(calls_dir, f"GPU-sim-{i}") for i in range(GPUS)}
    assert 0 < len(before[SLOW_UUID]) < len(before["GPU-sim-0"]), "killed halfway"

    second = _fleet(tmp_path)
    assert second["lost_tasks"] == []
    after = {uuid: _calls(calls_dir, uuid) for uuid in before}
    for uuid in before:
        if uuid != SLOW_UUID:
            assert after[uuid] == before[uuid], "a finished board is not measured again"
    assert len(after[SLOW_UUID]) == len(after["GPU-sim-0"]), "the killed board measured only what it lacked"
    assert len(set(after[SLOW_UUID])) == len(after[SLOW_UUID]), "no config measured twice"

    dataset = read_dataset(tmp_path)
    assert dataset["run_id"].nunique() == GPUS and set(dataset["probe"]) == set(FLEET_PROBES)
    per_run = dataset.groupby("run_id", observed=True)["config"].nunique()
    assert per_run.nunique() == 1, "every board has every config"
    assert len({tuple(pd.read_parquet(p).columns) for p in (tmp_path / "dataset").glob("*/*.parquet")}) == 1

    summary = json.loads((tmp_path / "fleet.json").read_text())
    flagged = {(o["board"], o["quantity"]) for o in summary["outliers"]}
    assert ("sim-1", "dram.read_bandwidth_bytes_per_s") in flagged
    assert {board for board, _ in flagged} == {"sim-1"}, "only the slow board stands out"
    page = (tmp_path / "report" / "index.md").read_text()
    assert "Outliers" in page and "sim-1" in page


def test_runs_made_elsewhere_are_gathered_by_the_same_command(cluster, tmp_path):
    """A Slurm job array writes plain run directories into runs/; --gather builds the dataset and report."""
    from gpuatlas.cli import main

    source = tmp_path / "first"
    _fleet(source)
    target = tmp_path / "slurm"
    shutil.copytree(source / "runs", target / "runs")
    assert main(["fleet", "--gather", "--out", str(target)]) == 0
    assert read_dataset(target)["run_id"].nunique() == GPUS
    assert main(["fleet", "--gather", "--out", str(tmp_path / "empty")]) == 2, "nothing to gather: exit 2"
