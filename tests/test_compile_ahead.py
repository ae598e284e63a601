"""Compile workers: a run builds its probes' kernels into the cubin cache on other cores before the probes need
them, and nothing a compile worker does (a hit, a miss, a failure) changes what the run records."""
import dataclasses
import os
from pathlib import Path

import pandas as pd
import pytest

import fakes
from gpuatlas.machinery import runner
from gpuatlas.machinery import workers
from gpuatlas.probes.families.icache import INSTRUCTION_BYTES, SOURCE_NAME, kernel_sources, loop_source
from gpuatlas.probes.kit import cuda
from gpuatlas.probes.registry import all_probes

pytest.importorskip("cupy")


def quick_jobs(probes, **emptied):
    todo = {p.id: p.configs(fakes.DEVICE, "quick") for p in probes}
    return workers.compile_jobs(probes, fakes.DEVICE, {**todo, **emptied}), todo


def cubins(jobs) -> list[tuple[str, str]]:
    return [(job[2], job[3]) for job in jobs if job[0] == "cubin"]


def test_each_kernel_file_is_built_once_for_the_target_its_probe_loads():
    probes = list(all_probes().values())
    jobs, todo = quick_jobs(probes)
    files = [c for c in cubins(jobs) if c[0] != SOURCE_NAME]
    assert len(files) == len(set(files))
    assert ("wgmma.cu", "sm_90a") in files and ("clock.cu", "sm_90") in files and ("barriers_sm90.cu", "sm_90") in files
    assert ("wgmma.cu", "sm_90") not in files and ("clock.cu", "sm_90a") not in files  # each file its own target
    assert ("import", "torch") in jobs and ("import", "numba.cuda") in jobs
    # the instruction-cache probe's generated loops: one per code size of its sweep, built for the plain target
    loops = [job for job in jobs if job[0] == "cubin" and job[2] == SOURCE_NAME]
    sizes = {c["code_bytes"] for c in todo["geometry.icache"]}
    assert {job[1] for job in loops} == {loop_source(s // INSTRUCTION_BYTES) for s in sizes}
    assert len(loops) == len(sizes) and {job[3] for job in loops} == {"sm_90"}


def test_a_probe_with_nothing_to_measure_gets_no_jobs_and_simulated_probes_none_at_all():
    probes = list(all_probes().values())
    jobs, _ = quick_jobs(probes, **{"compute.wgmma": [], "geometry.icache": []})
    assert ("wgmma.cu", "sm_90a") not in cubins(jobs) and SOURCE_NAME not in {c[0] for c in cubins(jobs)}
    assert ("tensor_units.cu", "sm_90a") in cubins(jobs)  # the negative control: the others keep theirs
    assert quick_jobs(fakes.simulated_probes())[0] == []


def test_the_loops_are_generated_largest_first_each_size_once():
    configs = [{"code_bytes": b} for b in (1024, 4096, 2048, 4096)]
    assert kernel_sources(configs) == [(loop_source(n), SOURCE_NAME) for n in (256, 128, 64)]


def test_two_cores_stay_with_the_measuring_process():
    assert workers.start_compiles([("import", "json")], cpus=2) is None
    assert workers.start_compiles([], cpus=16) is None


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cubin cache, the same for this process and the compile workers it spawns."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(cuda, "CUBIN_CACHE", tmp_path / "gpuatlas-cubins")
    return tmp_path / "gpuatlas-cubins"


def no_compile(*args):
    raise AssertionError("compiled again: the cache missed")


def test_a_compile_worker_builds_the_cubin_the_probe_then_loads_without_compiling(cache, monkeypatch):
    job = ("cubin", cuda.source("clock.cu"), "clock.cu", "sm_90")
    want = cuda.compile_cubin("clock.cu", "sm_90")[0]
    pool = workers.start_compiles([job], cpus=3)
    pool.shutdown(wait=True)
    monkeypatch.setattr(cuda, "compile_source", no_compile)
    assert cuda.cubin_file(*job[1:]).read_bytes() == want
    with pytest.raises(AssertionError, match="cache missed"):  # the negative control: a target nobody built
        cuda.cubin_file(job[1], "clock.cu", "sm_80")


BAD = "this is not CUDA"


def run_with(tmp_path, monkeypatch, compile_ahead: bool) -> tuple[dict, pd.DataFrame]:
    """clock.sm as simulated, and chase.smem replaced by a probe whose kernel does not compile; the compile
    workers get that kernel, a package that does not exist and a kernel that compiles."""
    def needs_bad_kernel(ctx, **params):
        cuda.cubin_file(BAD, "bad.cu", "sm_90")

    monkeypatch.setattr(workers, "RESERVED_CPUS", 0)
    monkeypatch.setattr(runner, "compile_jobs", lambda *args: [
        ("cubin", BAD, "bad.cu", "sm_90"), ("import", "no_such_package_of_gpuatlas"),
        ("cubin", cuda.source("launch.cu"), "launch.cu", "sm_90")])
    probes = [dataclasses.replace(p, func=needs_bad_kernel) if p.id == "chase.smem" else p
              for p in fakes.simulated_probes() if p.id in ("clock.sm", "chase.smem")]
    out = tmp_path / ("ahead" if compile_ahead else "plain")
    run, meta = runner.new_run(out, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False, compile_ahead=compile_ahead)
    return meta["probes"], run.read_measurements()


def test_failing_compile_jobs_change_nothing_and_the_probe_that_needs_the_kernel_records_its_error(
        cache, tmp_path, monkeypatch):
    ahead, ahead_rows = run_with(tmp_path, monkeypatch, compile_ahead=True)
    plain, plain_rows = run_with(tmp_path, monkeypatch, compile_ahead=False)
    for states in (ahead, plain):
        assert states["clock.sm"]["status"] == "ok"
        assert states["chase.smem"]["status"] == "failed"
        assert states["chase.smem"]["error"].startswith("footprint_bytes=")
        assert "RuntimeError: NVRTC failed on bad.cu:" in states["chase.smem"]["error"]
    columns = ["probe", "config", "metric", "value", "repeat"]
    pd.testing.assert_frame_equal(ahead_rows[columns], plain_rows[columns])
    assert not list(cache.glob("bad.*"))  # nothing is cached for a kernel that does not compile


def test_a_probe_process_compiles_cupys_own_kernels_with_precompiled_headers(tmp_path, monkeypatch):
    """The probe process has the switch set before it imports CuPy, and CuPy's compiler reads that switch when
    imported (a fresh interpreter with and without it: the negative control)."""
    import subprocess
    import sys

    import sim_worker

    monkeypatch.delenv("CUPY_NVRTC_USE_PCH", raising=False)
    probe = dataclasses.replace(next(p for p in fakes.simulated_probes() if p.id == "clock.sm"),
                                func=sim_worker.cupy_settings)
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, [probe], "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, [probe], isolate=True, timeout_s=120, compile_ahead=False)
    assert meta["probes"]["clock.sm"]["status"] == "ok", meta["probes"]["clock.sm"]["error"]
    assert set(run.read_measurements()["flag"]) == {"pch=1"}
    read = "from cupy.cuda import compiler; print(compiler._use_pch)"
    for value, want in (("1", "True"), (None, "False")):
        env = {k: v for k, v in os.environ.items() if k != "CUPY_NVRTC_USE_PCH"}
        env.update({"CUPY_NVRTC_USE_PCH": value} if value else {})
        assert subprocess.run([sys.executable, "-c", read], env=env, capture_output=True, text=True,
                              check=True).stdout.strip() == want


def test_a_probe_loads_each_kernel_file_from_the_cache_built_for_the_devices_target(cache, monkeypatch):
    import cupy

    loaded = []
    monkeypatch.setattr(cupy, "RawModule", lambda **kwargs: loaded.append(kwargs) or kwargs)
    monkeypatch.setattr(cuda, "device_arch", lambda: "sm_90")
    cuda.module.cache_clear()
    try:
        cuda.module("clock.cu")
        cuda.module("clock.cu")  # once per process
        cuda.module("wgmma.cu", "sm_90a")  # an explicit target: its own file
    finally:
        cuda.module.cache_clear()
    paths = [Path(kwargs["path"]) for kwargs in loaded]
    assert [p.name.split(".")[:2] for p in paths] == [["clock", "sm_90"], ["wgmma", "sm_90a"]]
    assert all(p.parent == cache and p.read_bytes().startswith(b"\x7fELF") for p in paths)
    plain = cuda.arch_of(fakes.DEVICE["compute_capability"])
    assert paths[0] == cuda.cubin_file(cuda.source("clock.cu"), "clock.cu", plain)
