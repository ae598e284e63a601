"""Every GPU of a node: one worker per device, the node summary's outliers against the run-to-run spread,
the node page with the links' section."""
import argparse
import json
import sys

import pandas as pd
import pytest

from analysis.boards import compare_boards, load_boards, run_to_run_spread
from analysis.errors import UsageError
from fakes import DEVICE, SLOW_FACTOR, SLOW_UUID, fleet_probes, simulated_probes
from gpuatlas import node
from probes import runner


def _derived_run(folder, uuid, values: dict, name):
    run, meta = runner.new_run(folder, dict(DEVICE, uuid=uuid), {}, [], "full", {}, 0, ["x"])
    meta["run_id"] = name
    run.write_meta(meta)
    run.write_derived(pd.DataFrame([{"quantity": q, "value": v, "unit": "B/s", "ci_low": v, "ci_high": v,
                                     "method": "m", "probe": "p", "note": ""} for q, v in values.items()]))
    return run.path


def test_spread_is_the_largest_range_of_one_boards_repeats(tmp_path):
    """Board A moves 2% between its runs, board B 6%: the spread is B's; a quantity measured once per board
    has none."""
    a, b = tmp_path / "a", tmp_path / "b"
    _derived_run(a, "GPU-a", {"x": 100.0, "once": 1.0}, "a1")
    _derived_run(a, "GPU-a", {"x": 102.0}, "a2")
    _derived_run(b, "GPU-b", {"x": 97.0, "once": 2.0}, "b1")
    _derived_run(b, "GPU-b", {"x": 103.0}, "b2")
    spread = run_to_run_spread((a, b))
    assert spread["x"] == pytest.approx(6 / 100)
    assert "once" not in spread
    assert run_to_run_spread((a,))["x"] == pytest.approx(2 / 101), "control: board A alone"


def test_the_committed_repeat_runs_give_a_spread_per_quantity():
    spread = run_to_run_spread()
    assert {"dram.read_bandwidth_bytes_per_s", "dram.latency_cycles", "clock.sm_hz"} <= set(spread.index)
    assert (spread >= 0).all() and spread["dram.read_bandwidth_bytes_per_s"] < 1 - SLOW_FACTOR


def test_a_board_is_an_outlier_only_beyond_the_spread(tmp_path):
    paths = [_derived_run(tmp_path, f"GPU-{i}", {"x": v}, f"r{i}") for i, v in enumerate((100.0, 101.0, 99.5, 110.0))]
    _, long = load_boards(paths)
    compared = compare_boards(long, pd.Series({"x": 0.05}))
    assert list(compared.loc[compared["outlier"], "run_id"]) == ["r3"]
    assert compared.loc[compared["run_id"] == "r3", "deviation"].iat[0] == pytest.approx(110 / 100.5 - 1)
    assert not compare_boards(long, pd.Series({"x": 0.2}))["outlier"].any(), "control: a wider spread flags none"
    assert not compare_boards(long, pd.Series(dtype=float))["outlier"].any(), "no spread, no verdict"


def test_gpus_are_parsed_against_the_visible_devices():
    assert node.parse_gpus("all", ["4", "5"]) == ["4", "5"]
    assert node.parse_gpus("1", ["4", "5"]) == ["5"], "an index into CUDA_VISIBLE_DEVICES, not a raw ordinal"
    for bad in ("2", "x", "0,0", ""):
        with pytest.raises(UsageError):
            node.parse_gpus(bad, ["4", "5"])


def _args(**kw):
    base = dict(profile="quick", probe=None, axis=None, seed=0, probe_timeout=60.0)
    return argparse.Namespace(**{**base, **kw})


class _Done:
    def __init__(self, code):
        self.code = code

    def wait(self):
        return self.code


def simulated_worker(tmp_path):
    """``start`` for run_node: the worker's run made here on the simulated backend, its device from
    CUDA_VISIBLE_DEVICES as the worker would see it; the link worker sees them all."""
    seen = []

    def start(argv, device, log):
        seen.append((argv, device))
        out = argv[argv.index("--out") + 1]
        ids = [argv[i + 1] for i, a in enumerate(argv) if a == "-p"]
        devices = device.split(",")
        board = dict(DEVICE, uuid=f"GPU-sim-{devices[0]}", gpu_count=len(devices))
        probes = [p for p in simulated_probes() + fleet_probes() if p.id in ids]
        probes = list({p.id: p for p in probes}.values())
        run, meta = runner.new_run(tmp_path / out, board, {}, probes, "quick", {}, 0, argv)
        runner.execute(run, meta, probes, isolate=False)
        return _Done(0)

    return start, seen


def test_a_node_run_measures_each_gpu_then_the_links_and_finds_the_slow_board(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUATLAS_TEST_FLEET_DIR", str(tmp_path))
    start, seen = simulated_worker(tmp_path)
    args = _args(probe=["clock.sm", "bw.dram", "link"])
    folder, code = node.run_node(args, ["0", "1", "2"], tmp_path / "out", start=start, say=lambda *a: None)
    assert code == 0
    assert [d for _, d in seen] == ["0", "1", "2", "0,1,2"], "one worker per device, then the links over all"
    assert all("link.memcpy" not in a for a, _ in seen[:3]) and "link.memcpy" in seen[3][0]
    summary = json.loads((folder / "node.json").read_text())
    assert len(summary["boards"]) == 3 and summary["links_run"]
    assert ("sim-1", "dram.read_bandwidth_bytes_per_s") in {(o["board"], o["quantity"]) for o in summary["outliers"]}
    table = pd.read_csv(folder / "node.csv")
    flagged = table[table["outlier"]]
    assert set(flagged["uuid"]) == {SLOW_UUID}
    assert "dram.read_bandwidth_bytes_per_s" in set(flagged["quantity"])
    assert not table[table["quantity"] == "clock.sm_hz"]["outlier"].any(), "the clock is the same on every board"
    page = (folder / "report" / "index.md").read_text()
    assert "Outliers" in page and "P2P matrix: kernel reads through a peer pointer" in page


def test_a_one_gpu_node_records_the_links_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUATLAS_TEST_FLEET_DIR", str(tmp_path))
    start, seen = simulated_worker(tmp_path)
    folder, code = node.run_node(_args(probe=["clock.sm", "link", "nccl"]), ["0"], tmp_path / "out", start=start,
                                 say=lambda *a: None)
    page = (folder / "report" / "index.md").read_text()
    assert "link.p2p_latency: skipped: one GPU" in page and "nccl.collectives: skipped: one GPU" in page
    assert "Outliers" in page and len(json.loads((folder / "node.json").read_text())["boards"]) == 1
    from gpuatlas.cli import main

    assert main(["report", str(folder), "--out", str(tmp_path / "pages")]) == 0
    assert "nccl.collectives: skipped: one GPU" in (tmp_path / "pages" / folder.name / "index.md").read_text()


def test_gpus_cannot_resume(capsys):
    from gpuatlas.cli import main

    assert main(["run", "--gpus", "all", "--resume", "somewhere"]) == 2
    assert capsys.readouterr().err.startswith("gpuatlas: error: --gpus")


def test_a_worker_is_the_plain_command_on_its_device(tmp_path):
    args = _args(probe=["clock"], axis=["busy_sms=all"])
    argv = node.worker_args(args, ["clock.sm"], tmp_path / "gpu3")
    assert argv[:3] == ["run", "--profile", "quick"] and ["-p", "clock.sm"] == argv[-4:-2]
    proc = node.launch(["--version-of-nothing"], "3", tmp_path / "log.txt")
    assert proc.wait() == 2
    assert "gpuatlas: error" in (tmp_path / "log.txt").read_text()
    env_probe = node.subprocess.run([sys.executable, "-c", "import os;print(os.environ['CUDA_VISIBLE_DEVICES'])"],
                                    env=dict(node.os.environ, CUDA_VISIBLE_DEVICES="3"), capture_output=True, text=True)
    assert env_probe.stdout.strip() == "3"
