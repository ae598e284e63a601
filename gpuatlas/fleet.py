"""``gpuatlas fleet``: every GPU of a Ray cluster measured by the normal runner, one Ray task per GPU.

Ray schedules (gpuatlas writes no scheduler): a placement group of one ``{"GPU": 1}`` bundle per GPU of the
cluster, one task per bundle, so each task holds its own board.  A task measures into a spool folder on its
node (``<spool>/<board uuid>/``), then hands the finished run's files back; the driver keeps them under
``<fleet>/runs/<run_id>/`` and gathers every run into one Parquet dataset partitioned by run
(``<fleet>/dataset/run_id=<id>/``, streamed: see ``gather``) and the fleet summary and page (gpuatlas.analysis.boards).

Resuming is running the same command again: a board with a finished run under ``runs/`` is not measured
again (its task returns at once), and a board whose task was killed continues its run from the spool,
measuring only the configs it had not finished.  Runs made elsewhere (a Slurm job array, see
docs/fleet.md) are gathered by ``gpuatlas fleet --gather``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.results import RunDir, atomic_write_bytes, atomic_write_text

RUN_FILES = ("run.json", "measurements.parquet", "derived.csv")
#: Rows per row group of a dataset partition: a reader filtering by probe skips the groups of other probes.
PARTITION_ROW_GROUP = 16384


def finished(run: RunDir) -> bool:
    """A run whose every probe ended (ok, failed or skipped) and whose derived.csv is written."""
    try:
        meta = run.read_meta()
    except UsageError:
        return False
    return bool(meta.get("ended")) and run.derived_path.is_file()


def finished_boards(fleet: Path) -> dict[str, str]:
    """uuid -> run_id of the finished runs under ``<fleet>/runs``."""
    from gpuatlas.analysis.boards import run_dirs

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
    from gpuatlas.machinery import runner
    from gpuatlas.probes.registry import select

    if device_fn is None:
        from gpuatlas.machinery.device import device_properties, require_gpu, software_versions

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
    ``fleet.json`` and the fleet page, from whatever runs the fleet folder holds.

    Streaming: the schema is the union of the runs' Parquet footers; each partition is written batch by batch
    from its run's file, one run at a time, so memory is bounded by the largest run whatever the fleet's size.
    A partition whose run's files and the dataset schema hash as when it was written (``gathered.json``) is
    not written again (files whose size and modification time are as recorded are not read to hash them); a
    partition whose run is gone is removed.  The summary and the page read derived.csv."""
    from gpuatlas.analysis.boards import run_dirs, write_summary
    from gpuatlas.analysis.fleet_page import render_fleet_page

    runs = [p for p in run_dirs(fleet / "runs") if finished(RunDir(p))]
    if not runs:
        raise UsageError(f"{fleet / 'runs'} holds no finished run: measure with `gpuatlas fleet --address ...` "
                         "or put the runs of `gpuatlas run` there")
    files = {p.name: run_files(RunDir(p)) for p in runs}
    schema = dataset_schema(files.values())
    schema_hash = hashlib.sha256(schema.to_string().encode()).hexdigest()[:16]
    index_path = fleet / "gathered.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    dataset, written = fleet / "dataset", 0
    for run_id, paths in files.items():
        if not paths:  # a run whose every probe was skipped: nothing to partition
            continue
        held = index.get(run_id, {})
        stat = [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in paths]
        # the files as they were when hashed (size and time, as git's index): their hash is known
        digest = held["files"] if held.get("stat") == stat else content_hash(paths)
        key = {"files": digest, "stat": stat, "schema": schema_hash}
        part = dataset / f"run_id={run_id}" / "part-0.parquet"
        if {**held, "stat": stat} == key and part.is_file():
            index[run_id] = key
            continue
        write_partition(RunDir(fleet / "runs" / run_id), paths, part, schema)
        index[run_id], written = key, written + 1
        if written % 50 == 0:  # a gather killed midway keeps what it wrote
            atomic_write_text(index_path, json.dumps(index, indent=1) + "\n")
    for gone in sorted(set(index) - set(files)):
        shutil.rmtree(dataset / f"run_id={gone}", ignore_errors=True)
        del index[gone]
    atomic_write_text(index_path, json.dumps(index, indent=1) + "\n")
    compared = write_summary(fleet, runs, "fleet", extra={"dataset": "dataset/", "partitioning": "hive, run_id"})
    summary = json.loads((fleet / "fleet.json").read_text())
    page = render_fleet_page(fleet, summary, compared, fleet / "report")
    say(f"fleet: {len(runs)} runs ({written} partitions written, {len(runs) - written} unchanged) in "
        f"{dataset}; summary {fleet / 'fleet.csv'}; page {page}")
    return {**summary, "partitions_written": written}


def run_files(run: RunDir) -> list[Path]:
    """A run's measurement files: measurements.parquet, and any part its merge has not taken in yet."""
    parts = sorted(run.parts.rglob("*.parquet")) if run.parts.is_dir() else []
    return ([run.measurements_path] if run.measurements_path.is_file() else []) + parts


def content_hash(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def dataset_schema(runs) -> pa.Schema:
    """The union of the runs' measurement schemas, read from the Parquet footers, run_id left to the partition
    path; fields by name, a type two runs disagree on promoted (an integer column a float in another run)."""
    schemas = [pq.read_schema(path).remove_metadata() for paths in runs for path in paths]
    try:
        unified = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise UsageError(f"the runs' measurement columns do not merge into one schema ({exc}): gather runs of "
                         "one gpuatlas version apart") from None
    return pa.schema(sorted((f for f in unified if f.name != "run_id"), key=lambda f: f.name))


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    columns = [batch.column(f.name).cast(f.type) if f.name in batch.schema.names else pa.nulls(len(batch), f.type)
               for f in schema]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def write_partition(run: RunDir, paths: list[Path], part: Path, schema: pa.Schema) -> None:
    """One run's rows into ``part`` under ``schema``, whole or not at all; a merged run streams batch by batch
    (row groups of PARTITION_ROW_GROUP rows, whose statistics let a reader skip the probes it filters out)."""
    if paths == [run.measurements_path]:
        batches = pq.ParquetFile(paths[0]).iter_batches(batch_size=PARTITION_ROW_GROUP)
    else:  # parts not merged: the run's reader joins them (one run in memory)
        batches = pa.Table.from_pandas(run.read_measurements(), preserve_index=False).to_batches(PARTITION_ROW_GROUP)
    part.parent.mkdir(parents=True, exist_ok=True)
    tmp = part.parent / f".{part.name}.{os.getpid()}.tmp"
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            for batch in batches:
                writer.write_batch(_conform(batch, schema), row_group_size=PARTITION_ROW_GROUP)
        os.replace(tmp, part)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_dataset(fleet: Path, columns=None, filters=None) -> pd.DataFrame:
    """The runs' measurements from the partitioned dataset (run_id restored from the partition), only
    ``columns`` and the rows ``filters`` keep (pyarrow's filters: partitions and row groups skipped unread)."""
    return pd.read_parquet(fleet / "dataset", partitioning="hive", columns=columns, filters=filters)


def spool_default() -> Path | None:
    """GPUATLAS_FLEET_SPOOL names the spool on every node (a local disk); default: inside the fleet folder."""
    value = os.environ.get("GPUATLAS_FLEET_SPOOL")
    return Path(value) if value else None
