"""``gpuatlas run``: measure the selected probes' configs into a run directory, resumably.

Each finished config is written at once as its own part (atomic rename), run.json is rewritten after every
probe, and a failing probe is recorded with its error while the run goes on.  ``--resume`` re-reads the
run's own settings and measures only the configs that have no part yet.
"""
from __future__ import annotations

import datetime as dt
import importlib.util
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pandas as pd

from analysis.errors import UsageError
from analysis.results import SCHEMA, SCHEMA_VERSION, RunDir, config_key
from probes.harness import Budget, Context
from probes.registry import PROFILES, Probe, all_probes, select

REPO = Path(__file__).resolve().parents[1]


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


def samples_frame(meta: dict, probe_id: str, params: dict, samples) -> pd.DataFrame:
    rows = [{"run_id": meta["run_id"], "gpu": meta["gpu"], "probe": probe_id, "config": config_key(params),
             **params, "metric": s.metric, "value": float(s.value), "unit": s.unit, "repeat": s.repeat,
             "sm_clock_hz": s.sm_clock_hz, "timer": s.timer, "flag": s.flag} for s in samples]
    return pd.DataFrame(rows)


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


#: Seconds a probe may run in its child process before it is killed and recorded as hung.
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
    missing = [name for name in BACKEND_PACKAGES.get(probe.backend, ()) if importlib.util.find_spec(name) is None]
    if missing:
        return f"needs {' and '.join(missing)}, not installed here (pip install {' '.join(missing)})"
    return None


class ProbeFailed(Exception):
    """A probe's own failure: recorded in run.json, and the run goes on with the next probe."""


def measure_configs(run: RunDir, meta: dict, probe_id: str, func: Callable, todo: list[dict], ctx: Context,
                    report: Callable[[dict], None]) -> None:
    """Measure ``todo`` with ``func``, writing each config's part as soon as it is measured."""
    for params in todo:
        try:
            samples = func(ctx, **params)
        except Exception as exc:
            raise ProbeFailed(f"{config_key(params)}: {exc.__class__.__name__}: {exc}") from None
        rows = samples_frame(meta, probe_id, params, samples)
        run.write_part(probe_id, params, rows)
        report(params)


def _child(run_path: str, probe_id: str, module: str, qualname: str, todo: list[dict], budget: Budget,
           events) -> None:
    """Entry point of a probe's child process: measure, report each config, exit 1 on failure."""
    import importlib

    func = importlib.import_module(module)
    for part in qualname.split("."):
        func = getattr(func, part)
    run = RunDir(Path(run_path))
    meta = run.read_meta()
    ctx = Context(device=meta["device"], budget=budget, seed=meta["seed"])
    try:
        measure_configs(run, meta, probe_id, func, todo, ctx, lambda params: events.put(("config", params)))
    except ProbeFailed as exc:
        events.put(("error", str(exc)))
        sys.exit(1)


def _run_isolated(run: RunDir, probe: Probe, todo: list[dict], budget: Budget, timeout_s: float,
                  report: Callable[[dict], None]) -> str | None:
    """Run the probe in a child process with a time limit; returns the error, or None."""
    import multiprocessing
    import queue

    mp = multiprocessing.get_context("spawn")
    events = mp.Queue()
    child = mp.Process(target=_child, args=(str(run.path), probe.id, probe.func.__module__,
                                            probe.func.__qualname__, todo, budget, events), daemon=True)
    child.start()
    error, deadline = None, time.monotonic() + timeout_s

    def drain(block: bool) -> None:
        nonlocal error
        try:
            while True:
                kind, payload = events.get(timeout=0.1) if block else events.get_nowait()
                if kind == "config":
                    report(payload)
                else:
                    error = payload
        except queue.Empty:
            pass

    try:
        while child.is_alive():
            drain(block=True)
            if time.monotonic() > deadline:
                child.kill()
                child.join()
                drain(block=False)
                return f"timed out after {timeout_s:.0f} s (a hang); the child process was killed"
        child.join()
        drain(block=False)
    except KeyboardInterrupt:
        child.kill()
        raise
    if error is None and child.exitcode != 0:
        error = f"the child process died (exit code {child.exitcode}): a crash outside Python, such as a fault"
    return error


def execute(run: RunDir, meta: dict, probes: list[Probe], *, on_config: Callable = None,
            on_probe: Callable = None, budget: Budget | None = None, isolate: bool = True,
            timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """Measure every config of ``probes`` that ``run`` lacks; returns the final run.json.

    With ``isolate`` each probe runs in its own child process (a CUDA fault or a hang there is recorded and
    the run goes on); without it, in this process."""
    from analysis.derive import derive

    device = meta["device"]
    budget = budget or Budget.for_profile(meta["profile"])
    ctx = Context(device=device, budget=budget, seed=meta["seed"])
    cc = tuple(int(x) for x in device["compute_capability"].split("."))
    run.remove_temporaries()
    try:
        for probe in probes:
            state = meta["probes"][probe.id]
            configs = probe.configs(device, meta["profile"], meta.get("overrides"))
            state["configs_total"] = len(configs)
            reason = skip_reason(probe, cc, device.get("gpu_count", 1))
            if reason:
                state.update(status="skipped", error=reason)
                run.write_meta(meta)
                if on_probe:
                    on_probe(probe, state)
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

            if isolate:
                error = _run_isolated(run, probe, todo, budget, timeout_s, report)
            else:
                try:
                    measure_configs(run, meta, probe.id, probe.func, todo, ctx, report)
                    error = None
                except ProbeFailed as exc:
                    error = str(exc)
            state.update(status="failed" if error else "ok", error=error,
                         seconds=round(state["seconds"] + time.perf_counter() - started, 3))
            if any(run.parts.glob("*/*.parquet")):
                run.merge_parts()
            run.write_meta(meta)
            if on_probe:
                on_probe(probe, state)
    except KeyboardInterrupt:
        for state in meta["probes"].values():
            if state["status"] == "running":
                state["status"] = "interrupted"
        run.write_meta(meta)
        raise RunInterrupted(run.path) from None
    meta["ended"] = _now()
    run.write_meta(meta)
    if any(s["configs_done"] for s in meta["probes"].values()):
        run.write_derived(derive(meta, run.merge_parts()))
    return meta


def prepare(probe_names: list[str] | None, profile: str, out_root: Path, resume: Path | None,
            overrides: dict, seed: int) -> tuple[RunDir, dict, list[Probe]]:
    """Check the request and the GPU, then create the run directory (or open the one to resume)."""
    from probes.device import device_properties, require_gpu, software_versions

    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)}")
    probes = select(probe_names) if resume is None else None  # check names before touching the GPU
    require_gpu()
    device = device_properties()
    if resume is not None:
        run, meta, probes = resume_run(resume, device)
    else:
        run, meta = new_run(out_root, device, software_versions(), probes, profile, overrides, seed,
                            list(sys.argv))
    return run, meta, probes
