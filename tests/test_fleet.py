"""gpuatlas fleet on a local Ray cluster of simulated GPUs (resources faked): one task per GPU through the
normal runner, one slow board's deviation recorded, a task killed mid-run resumed without losing or repeating a config,
and runs made elsewhere gathered by the same command.  Without Ray: the streaming gather (a partition written
once, the schema from the footers), the fleet page, and docs/fleet.md's queries run as written."""
import json
import os
import shutil
from pathlib import Path

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fakes import FLEET_PROBES, SLOW_FACTOR, SLOW_UUID, fleet_device, fleet_probes
from gpuatlas.fleet import finished_boards, gather, read_dataset, run_fleet

GPUS = 3
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[fleet]' to test gpuatlas fleet")
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


def test_a_fleet_records_the_slow_board_kills_and_resumes_without_loss(cluster, tmp_path):
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
    table = pd.read_csv(tmp_path / "fleet.csv")
    hbm = table[(table["quantity"] == "dram.read_bandwidth_bytes_per_s") & (table["uuid"] == SLOW_UUID)]
    assert hbm["deviation"].iat[0] == pytest.approx(SLOW_FACTOR - 1), "the slow board's deviation recorded"
    assert summary["outliers"] == [], "three boards give no verdict (analysis/boards.py)"
    page = (tmp_path / "report" / "index.md").read_text()
    assert "Outliers" in page and "No board stands out" in page


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


# -- without Ray: the gather, the page, the documented queries ---------------------------------------------------

def _boards(fleet, n, start=0):
    """``n`` copies of the committed quick run under ``fleet/runs``, each its own board (tools/fleet_bench.py's
    builder, no board slowed), their derived quantities cut to the HBM and clock ones (a small page), each
    spread by 1%."""
    from tools.fleet_bench import build_fleet

    quantities = pd.read_csv(next((HERE.parent / "reports" / "h200-quick").glob("*/derived.csv")))["quantity"]
    build_fleet(fleet, n, pd.Series(0.01, index=quantities.unique()), seed=3, start=start, slow=0.0)
    for run in sorted((fleet / "runs").iterdir())[start:]:
        derived = pd.read_csv(run / "derived.csv")
        derived[derived["quantity"].str.startswith(("dram.", "clock."))].to_csv(run / "derived.csv", index=False)


def _stat(fleet):
    return {p.parent.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (fleet / "dataset").glob("*/*.parquet")}


def test_a_second_gather_rewrites_nothing(tmp_path):
    """Gathered twice, the second writes no partition; one new run writes one; a changed run rewrites its own;
    a run taken away takes its partition along."""
    fleet = tmp_path / "fleet"
    _boards(fleet, 3)
    assert gather(fleet, say=lambda *a: None)["partitions_written"] == 3
    first = _stat(fleet)
    assert gather(fleet, say=lambda *a: None)["partitions_written"] == 0
    assert _stat(fleet) == first, "no partition rewritten"

    _boards(fleet, 1, start=3)
    assert gather(fleet, say=lambda *a: None)["partitions_written"] == 1
    after = _stat(fleet)
    assert {k: after[k] for k in first} == first and len(after) == 4

    changed = sorted((fleet / "runs").iterdir())[1]
    table = pq.read_table(changed / "measurements.parquet")
    table = table.set_column(table.schema.get_field_index("value"), "value", pc.multiply(table["value"], 2.0))
    pq.write_table(table, changed / "measurements.parquet")
    assert gather(fleet, say=lambda *a: None)["partitions_written"] == 1
    now = _stat(fleet)
    assert [k for k in now if now[k] != after[k]] == [f"run_id={changed.name}"]
    read = read_dataset(fleet, columns=["value"], filters=[("run_id", "==", changed.name)])
    assert np.allclose(np.sort(read["value"].dropna()), np.sort(table["value"].to_numpy(zero_copy_only=False)))

    shutil.rmtree(changed)
    gather(fleet, say=lambda *a: None)
    assert set(read_dataset(fleet, columns=["run_id"])["run_id"]) == {p.name for p in (fleet / "runs").iterdir()}


def test_the_schema_is_the_union_of_the_footers(tmp_path):
    """A run with a column the others lack (a new probe parameter), and one whose integer column another stores
    as float: every partition gets the one schema, the lacking rows empty, and a changed schema rewrites all."""
    fleet = tmp_path / "fleet"
    _boards(fleet, 2)
    gather(fleet, say=lambda *a: None)
    runs = sorted((fleet / "runs").iterdir())
    table = pq.read_table(runs[1] / "measurements.parquet")
    table = table.append_column("new_axis", pa.array(np.arange(len(table)), pa.int64()))
    index = table.schema.get_field_index("repeat")
    table = table.set_column(index, "repeat", table["repeat"].cast(pa.float64()))
    pq.write_table(table, runs[1] / "measurements.parquet")
    assert gather(fleet, say=lambda *a: None)["partitions_written"] == 2, "a new schema: every partition"
    schemas = {str(pq.read_schema(p)) for p in (fleet / "dataset").glob("*/*.parquet")}
    assert len(schemas) == 1
    schema = pq.read_schema(next((fleet / "dataset").glob("*/*.parquet")))
    assert schema.field("new_axis").type == pa.int64() and schema.field("repeat").type == pa.float64()
    data = read_dataset(fleet, columns=["run_id", "new_axis"])
    assert data[data["run_id"] == runs[0].name]["new_axis"].isna().all()
    assert (data[data["run_id"] == runs[1].name]["new_axis"].to_numpy() == np.arange(len(table))).all()


def test_the_fleet_page_shows_the_slow_boards_first_and_links_their_pages(tmp_path):
    """Forty boards, one with half the HBM read bandwidth: it is flagged in that quantity and in the HBM group
    (the mean of its HBM rates' z is far low too); the page's first table names it and links its page; the
    healthy boards are not listed on the page.  (The summary and page only: no dataset.)"""
    from gpuatlas.analysis.board_pages import render_boards
    from gpuatlas.analysis.boards import run_dirs, write_summary

    fleet = tmp_path / "fleet"
    _boards(fleet, 40)
    slow = sorted((fleet / "runs").iterdir())[5]
    derived = pd.read_csv(slow / "derived.csv")
    hbm = derived["quantity"] == "dram.read_bandwidth_bytes_per_s"
    derived.loc[hbm, ["value", "ci_low", "ci_high"]] *= 0.5
    derived.to_csv(slow / "derived.csv", index=False)
    write_summary(fleet, run_dirs(fleet / "runs"), "fleet")
    render_boards(fleet, "fleet", fleet / "report")
    label = json.loads((slow / "run.json").read_text())["device"]["uuid"].removeprefix("GPU-")[:8]
    summary = json.loads((fleet / "fleet.json").read_text())
    assert {(o["board"], o["quantity"]) for o in summary["outliers"]} == {
        (label, "dram.read_bandwidth_bytes_per_s"), (label, "group:hbm")}
    assert summary["screen"]["models"][summary["boards"][0]["gpu"]]["rule"] == "fleet"
    page = (fleet / "report" / "index.html").read_text()
    first_table = page[page.index("<table"):page.index("</table>")]
    assert f'<a href="boards/{label}.html">{label}</a>' in first_table
    assert (fleet / "report" / "boards" / f"{label}.html").is_file()
    others = [b["board"] for b in summary["boards"] if b["board"] != label]
    assert not any(b in page for b in others), "healthy boards are not listed"


def test_the_fleet_docs_queries_run_as_written(tmp_path, monkeypatch):
    """Every python block of docs/fleet.md's query section, run in a folder holding a gathered fleet ``fleet/``
    (DuckDB's block only where duckdb is installed)."""
    _boards(tmp_path / "fleet", 3)
    gather(tmp_path / "fleet", say=lambda *a: None)
    text = (HERE.parent / "docs" / "fleet.md").read_text()
    section = text[text.index("## Queries"):]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    ran = 0
    for block in blocks:
        if "duckdb" in block:
            try:
                import duckdb  # noqa: F401
            except ImportError:
                continue
        exec(compile(block, "docs/fleet.md", "exec"), {})
        ran += 1
    assert ran >= len(blocks) - 1
