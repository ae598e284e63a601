"""On a GPU: the quick profile end to end, and the probes' own checks.  Skipped without a GPU."""
import pytest

from gpuatlas.cli import main

pytestmark = pytest.mark.gpu


def test_quick_run_measures_an_ordered_hierarchy_and_both_front_ends_agree(tmp_path):
    from gpuatlas.analysis.chase_levels import frontend_agreement
    from gpuatlas.analysis.results import RunDir

    assert main(["run", "--profile", "quick", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.iterdir()
    run = RunDir(path)
    meta = run.read_meta()
    from gpuatlas.probes.registry import all_probes

    alone = {pid for pid, p in all_probes().items() if p.min_gpus > meta["device"]["gpu_count"]}
    assert {s["status"] for pid, s in meta["probes"].items() if pid not in alone} == {"ok"}
    for pid in alone:  # the link and collective probes on a machine of fewer GPUs than they need
        assert meta["probes"][pid]["status"] == "skipped" and meta["probes"][pid]["error"].startswith("one GPU")
    d = run.read_derived().set_index("quantity")["value"]
    assert d["l1.latency_cycles"] < d["l2.latency_cycles"] < d["dram.latency_cycles"]
    assert 0.5 * meta["device"]["sm_clock_max_hz"] < d["clock.sm_hz"] <= 1.02 * meta["device"]["sm_clock_max_hz"]
    agreement = frontend_agreement(run.read_measurements())
    assert len(agreement) == 3 and ((agreement["ratio"] - 1).abs() < 0.05).all(), agreement


def test_chase_refuses_a_kernel_that_does_not_follow_the_chain():
    from gpuatlas.probes.kit.chain import measure_chase
    from gpuatlas.probes.kit.harness import Budget, Context
    from gpuatlas.machinery.device import device_properties

    ctx = Context(device=device_properties(), budget=Budget())

    def lazy_kernel(start, warm, steps):  # reports the start as where it ended: no hops taken
        import numpy as np

        return np.array([steps * 30, steps * 15, start], dtype=np.uint64)

    with pytest.raises(RuntimeError, match="sink mismatch"):
        measure_chase(ctx, 1 << 16, 128, lazy_kernel, timer="clock64")


def test_a_faulting_probe_is_isolated_and_the_rest_of_the_suite_completes(tmp_path):
    import dataclasses

    from gpu_faults import illegal_address
    from gpuatlas.machinery import runner
    from gpuatlas.machinery.device import device_properties
    from gpuatlas.probes.registry import all_probes

    registry = all_probes()
    probes = [dataclasses.replace(registry["clock.sm"], func=illegal_address), registry["launch.overhead"],
              registry["chase.latency"]]
    run, meta = runner.new_run(tmp_path, device_properties(), {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=True)
    assert meta["probes"]["clock.sm"]["status"] == "failed"
    assert "illegal" in meta["probes"]["clock.sm"]["error"].lower()
    assert meta["probes"]["launch.overhead"]["status"] == "ok" and meta["probes"]["chase.latency"]["status"] == "ok"


def test_a_real_run_killed_with_sigkill_mid_probe_resumes_to_exactly_its_configs(tmp_path):
    """The CLI measuring on the GPU is killed (SIGKILL to its whole process group, the probe's child process
    too) once configs have landed; the run directory stays readable and ``--resume`` measures exactly the
    missing configs."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import pandas as pd

    from gpuatlas.analysis.results import RunDir
    from gpuatlas.machinery import runner
    from gpuatlas.probes.registry import all_probes

    probes = ("chase.latency", "smem.banks")
    command = [sys.executable, "-m", "gpuatlas.cli", "run", "--profile", "quick", "--out", str(tmp_path)]
    command += [arg for pid in probes for arg in ("-p", pid)]
    child = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    parts = []
    while time.monotonic() < deadline and child.poll() is None and len(parts) < 5:
        time.sleep(0.05)
        parts = list(tmp_path.glob("*/parts/*/*.parquet"))
    assert child.poll() is None, "the run ended before it could be killed"
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    (path,) = tmp_path.iterdir()
    run = RunDir(path)
    meta = run.read_meta()
    for part in run.parts.glob("*/*.parquet"):
        pd.read_parquet(part)  # only complete files
    done = subprocess.run([sys.executable, "-m", "gpuatlas.cli", "run", "--resume", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert not list(path.rglob("*.tmp"))
    frame = run.read_measurements()
    registry = all_probes()
    for pid in probes:
        rows = frame[frame["probe"] == pid]
        want = {runner.config_key(c) for c in registry[pid].configs(meta["device"], "quick")}
        assert set(rows["config"]) == want, f"{pid}: missing or foreign configs"
        assert not rows.duplicated(["config", "metric", "repeat"]).any(), f"{pid}: duplicated samples"
    assert {s["status"] for s in run.read_meta()["probes"].values()} == {"ok"}
@pytest.mark.parametrize("probe_id, params", [("compute.vector", {"op": "fp32"}), ("compute.vector", {"op": "int32"}),
                                              ("compute.latency", {"op": "fp32"}),
                                              ("compute.mma_sync", {"dtype": "e4m3"}),
                                              ("compute.wgmma", {"dtype": "bf16", "n": 256}),
                                              ("compute.wgmma", {"dtype": "e4m3", "n": 64})])
def test_compute_probes_pass_their_own_result_checks(probe_id, params):
    """Each kernel's stored results match the host's recomputation (the wgmma layout check included), and
    no rate exceeds its physical bound."""
    from gpuatlas.machinery.device import device_properties
    from gpuatlas.probes.kit.harness import Budget, Context
    from gpuatlas.probes.registry import all_probes

    device = device_properties()
    probe = all_probes()[probe_id]
    if tuple(int(x) for x in device["compute_capability"].split(".")) < probe.min_cc:
        pytest.skip(f"{probe_id} needs compute capability {probe.min_cc}")
    samples = probe.func(Context(device=device, budget=Budget(min_repeats=3, max_repeats=3, time_s=0.05)), **params)
    assert samples and not [s for s in samples if s.flag == "invalid"]


def test_every_gpu_of_the_node_is_measured_and_the_links_recorded(tmp_path):
    """`run --gpus all`: one run per GPU, the node summary and page; the link and collective probes measured
    over every GPU, or on one GPU skipped with the reason."""
    import json

    from gpuatlas.analysis.results import RunDir
    from gpuatlas.machinery.device import require_gpu

    gpus = require_gpu().cuda.runtime.getDeviceCount()
    assert main(["run", "--gpus", "all", "-p", "clock.sm", "-p", "link", "-p", "nccl", "--out", str(tmp_path)]) == 0
    (node,) = tmp_path.glob("node-*")
    summary = json.loads((node / "node.json").read_text())
    assert len(summary["boards"]) == gpus and len({b["uuid"] for b in summary["boards"]}) == gpus
    links = RunDir(node / "links" / summary["links_run"]).read_meta()
    for pid, state in links["probes"].items():
        if gpus == 1:
            assert state["status"] == "skipped" and state["error"].startswith("one GPU"), (pid, state)
        else:
            assert state["status"] == "ok", (pid, state)
    assert (node / "report" / "index.html").is_file()


def test_a_fleet_on_a_local_ray_cluster_measures_every_gpu(tmp_path):
    """`gpuatlas fleet --address local`: a one-node Ray cluster of this machine's GPUs, the fleet report."""
    import json

    pytest.importorskip("ray", reason="Ray is not installed here (pip install -e '.[fleet]', or carry its wheels)")
    from gpuatlas.machinery.device import require_gpu

    gpus = require_gpu().cuda.runtime.getDeviceCount()
    out = tmp_path / "fleet"
    assert main(["fleet", "--address", "local", "--profile", "quick", "-p", "clock.sm", "-p", "bw.dram",
                 "--out", str(out)]) == 0
    assert len(json.loads((out / "fleet.json").read_text())["boards"]) == gpus
    assert (out / "report" / "index.html").is_file() and list((out / "dataset").glob("run_id=*/part-0.parquet"))
    assert main(["fleet", "--address", "local", "--profile", "quick", "-p", "clock.sm", "-p", "bw.dram",
                 "--out", str(out)]) == 0, "a second call measures nothing and gathers again"


@pytest.mark.parametrize("probe_id", ["numerics.mma_sync", "numerics.wgmma"])
def test_the_numerics_probes_prove_their_layouts_and_the_table_reads_their_outputs(probe_id):
    """Every dtype's control case comes back exact and every crafted case's D is zero outside (0, 0) (the probe
    raises otherwise); the int8 sums are exact; every floating-point type gets a row of each property."""
    import pandas as pd

    from gpuatlas.analysis.tensor_numerics import numerics_rows
    from gpuatlas.machinery.device import device_properties
    from gpuatlas.probes.kit.harness import Budget, Context
    from gpuatlas.probes.registry import all_probes

    device = device_properties()
    probe = all_probes()[probe_id]
    cc = tuple(int(x) for x in device["compute_capability"].split("."))
    if cc < probe.min_cc or (probe.max_cc and cc > probe.max_cc):
        pytest.skip(f"{probe_id} needs compute capability {probe.min_cc} to {probe.max_cc}")
    frame = []
    for config in probe.configs(device, "quick"):
        samples = probe.func(Context(device=device, budget=Budget()), **config)
        frame += [{"probe": probe_id, "dtype": config["dtype"], "metric": s.metric, "value": s.value,
                   "repeat": s.repeat} for s in samples]
    rows = pd.DataFrame(numerics_rows(pd.DataFrame(frame), device)).set_index("quantity")
    instruction = probe_id.split(".")[1]
    assert rows.loc[f"numerics.int8.{instruction}.accumulation_exact", "value"] == 1
    assert (rows.index.str.endswith("accumulator_mantissa_bits")).sum() == len(probe.configs(device, "quick")) - 1
