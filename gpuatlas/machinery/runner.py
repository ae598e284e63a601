"""``gpuatlas run``: measure the selected probes' configs into a run directory, resumably.

Each finished config is written at once as its own part (atomic rename) and each finished probe's parts as
one file, run.json is rewritten after every probe, and a failing probe is recorded with its error while the
run goes on; measurements.parquet is merged once, at the end (or at Ctrl-C).  ``--resume`` re-reads the run's
own settings and measures only the configs that have no part yet.  The processes that measure and compile
are gpuatlas/machinery/workers.py's.
"""
from __future__ import annotations

import datetime as dt
import importlib.util
import os
import secrets
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.results import SCHEMA, SCHEMA_VERSION, RunDir, config_key
from gpuatlas.machinery.early_derive import EarlyFamilies
from gpuatlas.machinery.workers import (ProbeFailed, Worker, compile_jobs, lanes, measure_configs, start_compiles,
                                        start_lanes)
from gpuatlas.probes.kit.harness import Budget, Context
from gpuatlas.probes.registry import PROFILES, Probe, all_probes, select

REPO = Path(__file__).resolve().parents[2]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: everything finished is on disk and ``path`` can be resumed."""

    def __init__(self, path: Path):
        super().__init__(str(path))
        self.path = path


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-").replace("--", "-")


def git_state() -> dict:
    """The commit measured; GPUATLAS_GIT_SHA names it when the tree is a copy without git history."""
    if os.environ.get("GPUATLAS_GIT_SHA"):
        return {"sha": os.environ["GPUATLAS_GIT_SHA"], "dirty": None}

    def git(*args):
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              timeout=10).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        if len(sha) != 40:
            return {"sha": None, "dirty": None}
        return {"sha": sha, "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None}


def new_run(out_root: Path, device: dict, software: dict, probes: list[Probe], profile: str,
            overrides: dict, seed: int, argv: list[str]) -> tuple[RunDir, dict]:
    started = dt.datetime.now(dt.timezone.utc)
    run_id = f"{started:%Y%m%dT%H%M%S}-{_slug(device['name'])}-{secrets.token_hex(2)}"
    run = RunDir(out_root / run_id)
    run.path.mkdir(parents=True, exist_ok=False)
    meta = {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "run_id": run_id, "gpu": device["name"],
        "profile": profile, "seed": seed, "overrides": overrides, "argv": argv, "git": git_state(),
        "started": started.isoformat(timespec="seconds"), "ended": None,
        "device": device, "software": software,
        "probes": {p.id: {"status": "pending", "version": p.version, "configs_total": None,
                          "configs_done": 0, "seconds": 0.0, "error": None} for p in probes},
    }
    run.write_meta(meta)
    return run, meta


def resume_run(path: Path, device: dict, registry: dict | None = None) -> tuple[RunDir, dict, list[Probe]]:
    """Open ``path`` to finish it on ``device`` with the probes of ``registry`` (default: the registered ones)."""
    run = RunDir(path)
    meta = run.read_meta()
    if meta["device"].get("uuid") != device.get("uuid") or meta["gpu"] != device["name"]:
        raise UsageError(f"{path} was measured on {meta['gpu']} ({meta['device'].get('uuid')}), not this "
                         f"{device['name']} ({device.get('uuid')}): start a new run here instead")
    registry = registry or all_probes()
    unknown = [pid for pid in meta["probes"] if pid not in registry]
    if unknown:
        raise UsageError(f"{path} has probes this gpuatlas does not know ({', '.join(unknown)}): resume it "
                         "with the gpuatlas that started it")
    probes = [registry[pid] for pid in meta["probes"]]
    changed = [p.id for p in probes if p.version != meta["probes"][p.id]["version"]
               and meta["probes"][p.id]["status"] != "ok"]
    if changed:
        raise UsageError(f"probes {', '.join(changed)} changed since {path} started, so old and new samples "
                         "would mix: start a new run")
    return run, meta, probes


#: Seconds a probe may run in the worker process before the worker is killed and the probe recorded as hung.
PROBE_TIMEOUT_S = 900.0
#: Packages a probe backend needs beyond the core install: the Triton probes launch on torch tensors.  A
#: probe whose backend lacks one is skipped with the reason, not failed.
BACKEND_PACKAGES = {"triton": ("torch", "triton"), "torch": ("torch",)}


def skip_reason(probe: Probe, cc: tuple, gpus: int = 1) -> str | None:
    """Why ``probe`` cannot run here (compute capability, GPUs visible, missing packages), or None."""
    if cc < probe.min_cc:
        return f"needs compute capability {probe.min_cc}, GPU has {cc}"
    if gpus < probe.min_gpus:
        return (f"{'one GPU' if gpus == 1 else f'{gpus} GPUs'}: needs {probe.min_gpus} GPUs visible to the run "
                "(a peer to measure against)")
    if probe.max_cc is not None and cc > probe.max_cc:
        return (f"its kernels are built for compute capability {probe.max_cc} only (an architecture-specific "
                f"target), GPU has {cc}")
    missing = [name for name in BACKEND_PACKAGES.get(probe.backend, ()) if importlib.util.find_spec(name) is None]
    if missing:
        return f"needs {' and '.join(missing)}, not installed here (pip install {' '.join(missing)})"
    return None


#: Cores from which the end-of-run derive spreads its families over forked workers (the same rows as serially);
#: on fewer, starting the workers costs more than it saves.
PARALLEL_DERIVE_CPUS = 8


def execute(run: RunDir, meta: dict, probes: list[Probe], *, on_config: Callable = None,
            on_probe: Callable = None, budget: Budget | None = None, isolate: bool = True,
            timeout_s: float = PROBE_TIMEOUT_S, compile_ahead: bool = True,
            workers: dict[str, Worker] | None = None, derive_early: bool | None = None) -> dict:
    """Measure every config of ``probes`` that ``run`` lacks; returns the final run.json.

    With ``isolate`` the probes run one after another in worker processes (``lanes``), each within
    ``timeout_s``; a CUDA fault, a hang or a failure there is recorded, that worker is replaced and the run
    goes on.  Without it, they run in this process.  With ``compile_ahead``, compile workers build the probes'
    kernels (and import their backends' packages, where no JIT lane does) while the GPU measures, so a probe
    finds them built (``compile_jobs``); they are planned and started once the first probe is handed to its
    worker, so the first measurement waits for neither.  ``on_probe`` reports a finished probe while the next
    one measures.  ``workers``: lanes started before (``start_lanes``) to measure in, instead of starting them
    here.  With ``derive_early`` (default: measuring in workers, on PARALLEL_DERIVE_CPUS cores or more) each
    family's rows are derived as soon as its probes have finished (``early_derive``), so the end of the run
    derives only what the last probes complete."""
    device = meta["device"]
    budget = budget or Budget.for_profile(meta["profile"])
    ctx = Context(device=device, budget=budget, seed=meta["seed"])
    cc = tuple(int(x) for x in device["compute_capability"].split("."))
    run.remove_temporaries()
    plans = {probe.id: (probe.configs(device, meta["profile"], meta.get("overrides")),
                        skip_reason(probe, cc, device.get("gpu_count", 1))) for probe in probes}
    pending = {}
    for pid, (configs, reason) in plans.items():
        done = set() if reason else run.done_configs(pid)
        pending[pid] = [] if reason else [c for c in configs if config_key(c) not in done]
    lane, prefetch = lanes(probes, pending, os.cpu_count() or 1)
    if derive_early is None:
        derive_early = isolate and (os.cpu_count() or 1) >= PARALLEL_DERIVE_CPUS
    early = EarlyFamilies(run, device, probes) if derive_early else None
    unreported: list = []  # the last finished probe's report, made while the next one measures

    def report_finished():
        while unreported:
            on_probe(*unreported.pop())

    compiles = []  # the compile workers' pool, once started (None there: no jobs or too few cores)

    def meanwhile():
        if compile_ahead and not compiles:
            compiles.append(start_compiles([job for job in compile_jobs(probes, device, pending)
                                            if job[0] != "import" or not (isolate and prefetch["jit"])]))
        report_finished()

    try:
        if workers is None:
            workers = start_lanes(probes, budget, pending) if isolate else {}
        for worker in workers.values():
            worker.run = run
        for probe in probes:
            state = meta["probes"][probe.id]
            configs, reason = plans[probe.id]
            state["configs_total"] = len(configs)
            if reason:
                state.update(status="skipped", error=reason)
                run.write_meta(meta)
                report_finished()
                if on_probe:
                    on_probe(probe, state)
                if early:
                    early.finished(probe.id)
                continue
            done = run.done_configs(probe.id)
            todo = [c for c in configs if config_key(c) not in done]
            state.update(status="running", configs_done=len(configs) - len(todo), error=None)
            run.write_meta(meta)
            started = time.perf_counter()

            def report(params, probe=probe, state=state):
                state["configs_done"] += 1
                if on_config:
                    on_config(probe, params)

            if isolate and todo:
                error = workers[lane[probe.id]].measure(probe, todo, timeout_s, report, meanwhile=meanwhile)
            else:
                meanwhile()
                try:
                    measure_configs(run, meta, probe.id, probe.func, todo, ctx, report)
                    error = None
                except ProbeFailed as exc:
                    error = str(exc)
            state.update(status="failed" if error else "ok", error=error,
                         seconds=round(state["seconds"] + time.perf_counter() - started, 3))
            run.write_meta(meta)
            if early:
                early.finished(probe.id)
            if on_probe:
                unreported.append((probe, state))
        report_finished()
    except KeyboardInterrupt:
        for state in meta["probes"].values():
            if state["status"] == "running":
                state["status"] = "interrupted"
        run.write_meta(meta)
        if any(s["configs_done"] for s in meta["probes"].values()):
            run.merge_parts(order=list(meta["probes"]))
        raise RunInterrupted(run.path) from None
    finally:
        if early and sys.exc_info()[0] is not None:  # the run stops here: nothing more is derived
            early.close()
        for worker in (workers or {}).values():  # all asked first: each tears down a CUDA context as it ends
            worker.ask_to_finish()
        for worker in (workers or {}).values():
            worker.stop()
        for pool in filter(None, compiles):
            pool.shutdown(wait=False, cancel_futures=True)
    meta["ended"] = _now()
    run.write_meta(meta)
    from gpuatlas.analysis.derive import derive

    if any(s["configs_done"] for s in meta["probes"].values()):
        if early:
            early.wait()  # the families started read the probes' files, which the merge removes
        measurements = run.read_merged(order=list(meta["probes"]))
        with ThreadPoolExecutor(1) as writer:  # measurements.parquet written while the rest is derived
            written = writer.submit(run.write_merged, measurements)
            derived = derive(meta, measurements, parallel=(os.cpu_count() or 1) >= PARALLEL_DERIVE_CPUS,
                             families=early.rows(measurements) if early else None)
            written.result()
        run.write_derived(derived)
    elif early:
        early.close()
    return meta


def prepare(probe_names: list[str] | None, profile: str, out_root: Path, resume: Path | None,
            overrides: dict, seed: int, on_gpu: Callable[[list[Probe], str], None] | None = None
            ) -> tuple[RunDir, dict, list[Probe]]:
    """Check the request and the GPU, then create the run directory (or open the one to resume); ``on_gpu``
    gets the probes and the profile once a GPU has answered (for a new run, before the device is read and the
    run made, so that what it starts overlaps them)."""
    from gpuatlas.machinery.device import device_properties, require_gpu, software_versions

    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)}")
    probes = select(probe_names) if resume is None else None  # check names before touching the GPU
    require_gpu()
    if resume is None and on_gpu:
        on_gpu(probes, profile)
    device = device_properties()
    if resume is not None:
        run, meta, probes = resume_run(resume, device)
        if on_gpu:
            on_gpu(probes, meta["profile"])
    else:
        run, meta = new_run(out_root, device, software_versions(), probes, profile, overrides, seed,
                            list(sys.argv))
    return run, meta, probes
