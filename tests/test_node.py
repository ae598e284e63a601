"""Every GPU of a node: one worker per device, the robust outlier screen of the node and fleet summaries,
the node page with the links' section."""
import argparse
import json
import sys

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.boards import load_boards, screen, z_threshold
from gpuatlas.analysis.errors import UsageError
from fakes import DEVICE, SLOW_FACTOR, SLOW_UUID, fleet_probes, simulated_probes
from gpuatlas import node
from gpuatlas.machinery import runner


def _derived_run(folder, uuid, values: dict, name, ci=0.0, repro=None, gpu=None):
    """A finished run's run.json and derived.csv: ``values`` with a CI of +-``ci`` (relative) and a repro
    interval of +-``repro`` (relative; empty if None, as a run without one)."""
    device = dict(DEVICE, uuid=uuid, **({"name": gpu} if gpu else {}))
    run, meta = runner.new_run(folder, device, {}, [], "full", {}, 0, ["x"])
    meta["run_id"] = name
    run.write_meta(meta)
    nan = float("nan")
    run.write_derived(pd.DataFrame([{"quantity": q, "value": v, "unit": "B/s", "ci_low": v * (1 - ci),
                                     "ci_high": v * (1 + ci), "repro_low": nan if repro is None else v * (1 - repro),
                                     "repro_high": nan if repro is None else v * (1 + repro), "method": "m",
                                     "probe": "p", "note": ""} for q, v in values.items()]))
    return run.path


def _screen(tmp_path, values, **kw):
    paths = [_derived_run(tmp_path / f"b{i}", f"GPU-{i:03d}", {"x": v}, f"r{i:03d}", **kw)
             for i, v in enumerate(values)]
    return screen(load_boards(paths)[1])


def _flagged(compared):
    return sorted(compared.loc[compared["outlier"], "run_id"])


def test_a_board_far_out_of_its_models_spread_is_an_outlier(tmp_path):
    """Healthy boards drawn normal around 100 with σ = 1 (seeded); one board 10 σ low is found, one 3 σ low
    is not (the threshold for 42 boards lies between), and the robust z is (value - median) over the larger
    of 1.4826 MAD and 1.2533 times the mean absolute deviation."""
    values = np.array(list(100 + np.random.default_rng(7).standard_normal(40)) + [90.0, 97.0])
    compared = _screen(tmp_path, values)
    assert _flagged(compared) == ["r040"]
    median = np.median(values)
    sigma = max(1.4826 * np.median(np.abs(values - median)), 1.2533 * np.mean(np.abs(values - median)))
    assert compared.loc[compared["run_id"] == "r040", "z"].iat[0] == pytest.approx((90 - median) / sigma)
    assert 100 - 97 < z_threshold(42, 1) * sigma < 100 - 90, "one board inside the threshold, one beyond"


def test_the_quantitys_intervals_hold_a_verdict_back(tmp_path):
    """A board whose CI reaches the model's median, or which lies inside the median's repro interval, is not an
    outlier however many σ away; runs without a repro interval are screened without it."""
    values = list(100 + 0.05 * np.random.default_rng(3).standard_normal(30)) + [95.0]
    assert _flagged(_screen(tmp_path / "tight", values, ci=0.001)) == ["r030"]
    assert _flagged(_screen(tmp_path / "wide-ci", values, ci=0.06)) == [], "its CI holds the median"
    assert _flagged(_screen(tmp_path / "repro", values, ci=0.001, repro=0.06)) == [], "inside the repro interval"
    assert _flagged(_screen(tmp_path / "narrow", values, ci=0.001, repro=0.02)) == ["r030"], "beyond it"


def test_a_zero_mad_flags_a_lone_board_not_a_shared_value(tmp_path):
    """Structural values: one board of 22 off the value the others share is an outlier; three of ten sharing
    another value are not; all alike, none.  Few boards give no verdict: a lone board's |z| is at most
    n / 1.2533, under the threshold of three boards (and two are not screened at all)."""
    assert _flagged(_screen(tmp_path / "lone", [128.0] * 21 + [64.0])) == ["r021"]
    assert _flagged(_screen(tmp_path / "shared", [128.0] * 7 + [64.0] * 3)) == []
    assert _flagged(_screen(tmp_path / "alike", [128.0] * 5)) == []
    assert _flagged(_screen(tmp_path / "three", [100.0, 100.0, 50.0])) == []
    assert 3 / 1.2533 < z_threshold(3, 1)
    assert _flagged(_screen(tmp_path / "two", [100.0, 50.0])) == [], "two boards: no verdict"


def test_a_board_is_one_value_and_models_are_screened_apart(tmp_path):
    """A board measured three times counts once (the median of its runs); another model's boards do not
    move this model's median."""
    paths = [_derived_run(tmp_path / "a", "GPU-a", {"x": v}, f"a{i}") for i, v in enumerate((80.0, 81.0, 200.0))]
    paths += [_derived_run(tmp_path / f"b{i}", f"GPU-b{i:02d}", {"x": 100.0 + i / 100}, f"b{i:02d}") for i in range(24)]
    paths += [_derived_run(tmp_path / f"c{i}", f"GPU-c{i}", {"x": 50.0 + i}, f"c{i}", gpu="Other GPU") for i in range(3)]
    compared = screen(load_boards(paths)[1])
    mine = compared[compared["gpu"] == DEVICE["name"]]
    assert len(mine) == 25 and (mine["boards"] == 25).all()
    assert mine.loc[mine["uuid"] == "GPU-a", ["value", "runs"]].values.tolist() == [[81.0, 3]]
    assert list(compared.loc[compared["outlier"], "uuid"]) == ["GPU-a"]
    assert not compared[compared["gpu"] == "Other GPU"]["outlier"].any()


def test_an_older_runs_quantities_are_read_under_their_new_ids(tmp_path):
    """The screen reads derived.csv with pyarrow: a run of an older schema has its renamed quantities under
    their new ids, as the run's own reader gives them."""
    from gpuatlas.analysis.results import RENAMED_QUANTITIES, RunDir

    version = max(RENAMED_QUANTITIES)
    old_id, new_id = next(iter(RENAMED_QUANTITIES[version].items()))
    path = _derived_run(tmp_path, "GPU-old", {old_id: 4.0, "x": 1.0}, "old")
    meta = json.loads((path / "run.json").read_text())
    (path / "run.json").write_text(json.dumps(dict(meta, schema_version=version - 1)))
    _, long = load_boards([path])
    assert sorted(long["quantity"]) == sorted(RunDir(path).read_derived()["quantity"]) == sorted([new_id, "x"])


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


def test_a_node_run_measures_each_gpu_then_the_links_and_records_the_slow_board(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUATLAS_TEST_FLEET_DIR", str(tmp_path))
    start, seen = simulated_worker(tmp_path)
    args = _args(probe=["clock.sm", "bw.dram", "link"])
    folder, code = node.run_node(args, ["0", "1", "2"], tmp_path / "out", start=start, say=lambda *a: None)
    assert code == 0
    assert [d for _, d in seen] == ["0", "1", "2", "0,1,2"], "one worker per device, then the links over all"
    assert all("link.memcpy" not in a for a, _ in seen[:3]) and "link.memcpy" in seen[3][0]
    summary = json.loads((folder / "node.json").read_text())
    assert len(summary["boards"]) == 3 and summary["links_run"]
    table = pd.read_csv(folder / "node.csv")
    hbm = table[(table["quantity"] == "dram.read_bandwidth_bytes_per_s") & (table["uuid"] == SLOW_UUID)]
    assert hbm["deviation"].iat[0] == pytest.approx(SLOW_FACTOR - 1), "the slow board's deviation, beside the others'"
    assert (table[table["quantity"] == "clock.sm_hz"]["deviation"] == 0).all(), "the clock is the same on every board"
    assert summary["outliers"] == [] and not table["outlier"].any(), "three boards give no verdict"
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
