"""``gpuatlas fleet``: every GPU of a Ray cluster measured by the normal runner, one Ray task per GPU.

Ray schedules (gpuatlas writes no scheduler): a placement group of one ``{"GPU": 1}`` bundle per GPU of the
cluster, one task per bundle, so each task holds its own board.  A task measures into a spool folder on its
node (``<spool>/<board uuid>/``), then hands the finished run's files back; the driver keeps them under
``<fleet>/runs/<run_id>/`` and gathers every run into one Parquet dataset partitioned by run
(``<fleet>/dataset/run_id=<id>/``) and the fleet summary and page (analysis.boards).

Resuming is running the same command again: a board with a finished run under ``runs/`` is not measured
again (its task returns at once), and a board whose task was killed continues its run from the spool,
measuring only the configs it had not finished.  Runs made elsewhere (a Slurm job array, see
docs/fleet.md) are gathered by ``gpuatlas fleet --gather``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from analysis.errors import UsageError
from analysis.results import RunDir, atomic_write_bytes, atomic_write_parquet

RUN_FILES = ("run.json", "measurements.parquet", "derived.csv")


def finished(run: RunDir) -> bool:
    """A run whose every probe ended (ok, failed or skipped) and whose derived.csv is written."""
    try:
        meta = run.read_meta()
    except UsageError:
        return False
    return bool(meta.get("ended")) and run.derived_path.is_file()


def finished_boards(fleet: Path) -> dict[str, str]:
    """uuid -> run_id of the finished runs under ``<fleet>/runs``."""
    from analysis.boards import run_dirs

    done = {}
    for path in run_dirs(fleet / "runs"):
        run = RunDir(path)
        if finished(run):
            done[run.read_meta()["device"].get("uuid")] = path.name
    return done


def measure_board(probe_names, profile: str, seed: int, done_uuids, spool: str, device_fn=None,
                  probes_fn=None, isolate: bool = True) -> dict:
    """One Ray task: measure the GPU this task holds (Ray set CUDA_VISIBLE_DEVICES) into the spool, resuming
    this board's unfinished run there if it has one; return the run's files, or that it was done before."""
    from probes import runner
    from probes.registry import select

    if device_fn is None:
        from probes.device import device_properties, require_gpu, software_versions

        require_gpu()
        device, software = device_properties(), software_versions()
    else:
        device, software = device_fn(), {}
    uuid = device.get("uuid")
    if uuid in done_uuids:
        return {"uuid": uuid, "status": "done before"}
    folder = Path(spool) / "".join(c if c.isalnum() or c == "-" else "_" for c in str(uuid))
    folder.mkdir(parents=True, exist_ok=True)
    wanted = probes_fn() if probes_fn else select(probe_names)
    unfinished = [p for p in sorted(folder.iterdir()) if (p / "run.json").is_file() and not finished(RunDir(p))]
    if unfinished:
        # simulated probes (probes_fn) carry their own versions; real ones are checked against the registry
        run, meta, probes = runner.resume_run(unfinished[-1], device, {p.id: p for p in wanted} if probes_fn else None)
    else:
        run, meta = runner.new_run(folder, device, software, wanted, profile, {}, seed,
                                   ["gpuatlas", "fleet", "--profile", profile])
        probes = wanted
    meta = runner.execute(run, meta, probes, isolate=isolate)
    files = {name: (run.path / name).read_bytes() for name in RUN_FILES if (run.path / name).is_file()}
    return {"uuid": uuid, "status": "measured", "run_id": meta["run_id"], "files": files}


def gpu_count(ray) -> int:
    count = int(ray.cluster_resources().get("GPU", 0))
    if count < 1:
        raise UsageError("the Ray cluster has no GPU resource: start its nodes with their GPUs "
                         "(`ray start --num-gpus N`) or check --address")
    return count


def run_fleet(fleet: Path, probe_names, profile: str, seed: int, spool: Path | None = None,
              address: str | None = None, say=print, **task_options) -> dict:
    """Measure every GPU of the cluster not yet measured into ``fleet``, then gather; returns the summary."""
    try:
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError:
        raise UsageError("gpuatlas fleet needs Ray: pip install -e '.[fleet]'") from None
    if not ray.is_initialized():
        try:
            ray.init(address=address)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise UsageError(f"cannot reach the Ray cluster at {address!r}: {exc}") from None
    fleet.mkdir(parents=True, exist_ok=True)
    spool = spool or fleet / "spool"
    done = finished_boards(fleet)
    n = gpu_count(ray)
    say(f"{n} GPUs in the Ray cluster; {len(done)} boards already measured in {fleet}")
    group = placement_group([{"GPU": 1}] * n)
    ray.get(group.ready())
    task = ray.remote(num_gpus=1, num_cpus=0, max_retries=0)(measure_board)
    refs = [task.options(scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i))
            .remote(probe_names, profile, seed, set(done), str(spool), **task_options) for i in range(n)]
    lost = []
    try:
        for ref in refs:
            try:
                result = ray.get(ref)
            except (ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.TaskCancelledError) as exc:
                lost.append(str(exc).strip().splitlines()[-1])
                say(f"a board's task ended without a run ({lost[-1]}); run the same command again to resume it")
                continue
            if result["status"] == "measured":
                for name, data in result["files"].items():
                    atomic_write_bytes(fleet / "runs" / result["run_id"] / name, data)
                say(f"board {result['uuid']}: run {result['run_id']}")
    finally:
        remove_placement_group(group)
    summary = gather(fleet, say=say)
    summary["lost_tasks"] = lost
    return summary


def gather(fleet: Path, say=print) -> dict:
    """The dataset (one Parquet partition per finished run under ``runs/``, one schema), ``fleet.csv``,
    ``fleet.json`` and the fleet page, from whatever runs the fleet folder holds."""
    from analysis.boards import render_boards, run_dirs, write_summary

    runs = [p for p in run_dirs(fleet / "runs") if finished(RunDir(p))]
    if not runs:
        raise UsageError(f"{fleet / 'runs'} holds no finished run: measure with `gpuatlas fleet --address ...` "
                         "or put the runs of `gpuatlas run` there")
    frames = {p.name: RunDir(p).read_measurements() for p in runs}
    columns = sorted(set().union(*(f.columns for f in frames.values())) - {"run_id"})
    for run_id, frame in frames.items():
        part = frame.drop(columns="run_id").reindex(columns=columns)
        atomic_write_parquet(fleet / "dataset" / f"run_id={run_id}" / "part-0.parquet", part)
    write_summary(fleet, runs, "fleet", extra={"dataset": "dataset/", "partitioning": "hive, run_id"})
    page = render_boards(fleet, "fleet", fleet / "report")
    say(f"fleet: {len(runs)} runs gathered into {fleet / 'dataset'}; summary {fleet / 'fleet.csv'}; page {page}")
    return json.loads((fleet / "fleet.json").read_text())


def read_dataset(fleet: Path) -> pd.DataFrame:
    """Every run's measurements from the partitioned dataset, run_id restored from the partition."""
    return pd.read_parquet(fleet / "dataset", partitioning="hive")


def spool_default() -> Path | None:
    """GPUATLAS_FLEET_SPOOL names the spool on every node (a local disk); default: inside the fleet folder."""
    value = os.environ.get("GPUATLAS_FLEET_SPOOL")
    return Path(value) if value else None
