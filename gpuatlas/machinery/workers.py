"""The run's processes: the workers that measure probe after probe (a probe's configs, each written as its part
the moment it is measured), in lanes (the JIT backends' probes in a second worker that imports their packages
while the first measures), and the compile workers that build the coming probes' kernels on spare cores.
gpuatlas/machinery/runner.py hands them the probes and keeps the run's record.
"""
from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from gpuatlas.analysis.results import TELEMETRY_COLUMNS, RunDir, config_filename, config_key
from gpuatlas.probes.kit import telemetry
from gpuatlas.probes.kit.harness import Budget, Context
from gpuatlas.probes.kit.telemetry import EMPTY as TELEMETRY_EMPTY, POLL_S
from gpuatlas.probes.registry import Probe


def telemetry_windows(samples, start: float, poll_s: float = POLL_S) -> list[tuple[float, float]]:
    """Each sample's telemetry window ``(t0, t1]``: from the last sample made more than one poll interval
    before it (samples made together, such as a rate and its per-clock form, share a window), or ``start``."""
    times = np.sort([s.created for s in samples])
    windows = []
    for s in samples:
        earlier = np.searchsorted(times, s.created - poll_s, side="left")
        windows.append((max(float(times[earlier - 1]), start) if earlier else start, s.created))
    return windows


def samples_table(meta: dict, probe_id: str, params: dict, samples, recorder=None,
                  start: float | None = None, origin: float | None = None) -> pa.Table:
    """One row per sample, as an Arrow table (a config's part); with a telemetry ``recorder``, each row carries
    the readings of its window (from ``start``, the config's), and ``elapsed_s``, its time since ``origin`` (the
    probe's start)."""
    samples = list(samples)
    if not samples:
        return pa.table({})
    start = min(s.created for s in samples) if start is None else start
    origin = start if origin is None else origin
    windows = telemetry_windows(samples, start)
    readings = recorder.windows(windows) if recorder is not None else [TELEMETRY_EMPTY for _ in windows]
    n = len(samples)
    columns = {"run_id": [meta["run_id"]] * n, "gpu": [meta["gpu"]] * n, "probe": [probe_id] * n,
               "config": [config_key(params)] * n, **{name: [value] * n for name, value in params.items()},
               "metric": [s.metric for s in samples], "value": [float(s.value) for s in samples],
               "unit": [s.unit for s in samples], "repeat": [s.repeat for s in samples],
               "sm_clock_hz": [s.sm_clock_hz for s in samples], "timer": [s.timer for s in samples],
               "flag": [s.flag for s in samples]}
    for name in TELEMETRY_COLUMNS[:-1]:
        columns[name] = [reading[name] for reading in readings]
    columns["clock_event_reasons"] = pa.array(columns["clock_event_reasons"], pa.int64())
    columns["elapsed_s"] = [s.created - origin for s in samples]
    return pa.table(columns)


def samples_frame(meta: dict, probe_id: str, params: dict, samples, recorder=None,
                  start: float | None = None, origin: float | None = None) -> pd.DataFrame:
    """``samples_table``'s rows as a DataFrame."""
    return samples_table(meta, probe_id, params, samples, recorder, start, origin).to_pandas()


class ProbeFailed(Exception):
    """A probe's own failure: recorded in run.json, and the run goes on with the next probe."""


def measure_configs(run: RunDir, meta: dict, probe_id: str, func: Callable, todo: list[dict], ctx: Context,
                    report: Callable[[dict], None]) -> None:
    """Measure ``todo`` with ``func``, writing each config's part as soon as it is measured, and the probe's
    file (its parts in the order a reader of the parts reads them) once all are."""
    recorder = telemetry.recorder(ctx.device.get("uuid"))
    origin = time.monotonic()
    tables = {}
    for params in todo:
        start = time.monotonic()
        try:
            samples = func(ctx, **params)
        except Exception as exc:
            raise ProbeFailed(f"{config_key(params)}: {exc.__class__.__name__}: {exc}") from None
        tables[config_filename(params)] = samples_table(meta, probe_id, params, samples, recorder, start, origin)
        run.write_part(probe_id, params, tables[config_filename(params)])
        report(params)
    if tables:
        run.write_probe(probe_id, [tables[name] for name in sorted(tables)])


def _worker(budget: Budget, tasks, events, prefetch: tuple = ()) -> None:
    """Entry point of the worker process: import ``prefetch`` (modules its probes will need), then measure
    probe after probe until told to stop.

    Imports and the CUDA context are made once and kept.  A probe that fails ends the worker (a sticky
    CUDA error may have poisoned its context), and so does the parent's death."""
    import queue
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it kills this worker
    # Numba warns at every launch of fewer than 128 blocks; a latency probe launches one block on purpose.
    # Read when Numba is first imported, which is below: the run's log keeps only gpuatlas's own lines.
    os.environ["NUMBA_DISABLE_PERFORMANCE_WARNINGS"] = "1"
    # CuPy's own kernels (its elementwise, reduction and random kernels, which the probes' host-side fills and
    # checks compile on first use) each parse the same CuPy headers: with NVRTC's precompiled headers, parsed
    # once per process.  Read when CuPy's compiler is first imported, below; the kernels built are the same.
    os.environ.setdefault("CUPY_NVRTC_USE_PCH", "1")
    parent = os.getppid()

    def report(params):
        if os.getppid() != parent:
            os._exit(1)  # the parent was killed: measure no more for a run nobody records
        events.put(("config", params))

    for name in prefetch:  # a module that fails to import fails its probe later, with the error
        try:
            importlib.import_module(name)
        except Exception:
            pass
    if "cupy" in prefetch:  # its CUDA context too, made as the worker starts (no probe measures then)
        try:
            sys.modules["cupy"].cuda.runtime.free(0)
        except Exception:
            pass
    while True:
        try:
            task = tasks.get(timeout=1.0)
        except queue.Empty:
            if os.getppid() != parent:
                return
            continue
        if task is None:
            return
        run_path, probe_id, module, qualname, todo = task
        run = RunDir(Path(run_path))
        func = importlib.import_module(module)
        for part in qualname.split("."):
            func = getattr(func, part)
        meta = run.read_meta()
        ctx = Context(device=meta["device"], budget=budget, seed=meta["seed"])
        try:
            measure_configs(run, meta, probe_id, func, todo, ctx, report)
        except ProbeFailed as exc:
            events.put(("error", str(exc)))
            sys.exit(1)
        _release_memory()
        events.put(("done", probe_id))


def _release_memory() -> None:
    """Hand the GPU memory the finished probe's frames freed back to the driver, so that the next probe
    (possibly through the other library: CuPy or torch) finds device memory as a fresh process would;
    buffers a probe module keeps on purpose stay.  What survives the collection (the libraries' modules,
    kernels, kept buffers) is frozen, so later collections, these and the automatic ones during a probe,
    scan only what was made since, not every object CuPy, Numba and torch hold."""
    import gc

    gc.collect()
    gc.freeze()
    if "cupy" in sys.modules:
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()


class Worker:
    """A measuring process of the run ``run`` (set before its first probe), spawned on first use and replaced
    after a fault, a hang or a failure; ``prefetch``: modules it imports as it starts, before its first probe."""

    def __init__(self, budget: Budget, prefetch: tuple = (), run: RunDir | None = None):
        self.run, self.budget, self.prefetch, self.process = run, budget, tuple(prefetch), None

    def start(self) -> None:
        import multiprocessing

        mp = multiprocessing.get_context("spawn")
        self.tasks, self.events = mp.Queue(), mp.Queue()
        self.process = mp.Process(target=_worker, args=(self.budget, self.tasks, self.events, self.prefetch),
                                  daemon=True)
        self.process.start()

    def measure(self, probe: Probe, todo: list[dict], timeout_s: float, report: Callable[[dict], None],
                meanwhile: Callable[[], None] | None = None) -> str | None:
        """Measure ``todo`` of ``probe`` within ``timeout_s``; returns the error, or None.  ``meanwhile`` runs
        here once the probe is handed over, while the worker measures."""
        import queue

        if self.process is None or not self.process.is_alive():
            self.start()
        self.tasks.put((str(self.run.path), probe.id, probe.func.__module__, probe.func.__qualname__, todo))
        deadline = time.monotonic() + timeout_s
        if meanwhile is not None:
            meanwhile()
        try:
            while True:
                try:
                    kind, payload = self.events.get(timeout=0.1)
                except queue.Empty:
                    if not self.process.is_alive():
                        return self._lost(report)
                    if time.monotonic() > deadline:
                        self.stop(kill=True)
                        return f"timed out after {timeout_s:.0f} s (a hang); the worker process was killed"
                    continue
                if kind == "config":
                    report(payload)
                elif kind == "done":
                    return None
                else:
                    self.stop(kill=False)
                    return payload
        except KeyboardInterrupt:
            self.stop(kill=True)
            raise

    def _lost(self, report: Callable[[dict], None]) -> str:
        """The worker died mid-probe: take the events it sent before dying, then report the death."""
        import queue

        try:
            while True:
                kind, payload = self.events.get(timeout=0.2)
                if kind == "config":
                    report(payload)
                elif kind == "error":
                    self.stop(kill=False)
                    return payload
        except queue.Empty:
            pass
        code = self.process.exitcode
        self.stop(kill=False)
        return f"the worker process died (exit code {code}): a crash outside Python, such as a fault"

    def ask_to_finish(self) -> None:
        """Ask the worker to end after its current task, without waiting for it (``stop`` waits)."""
        if self.process is not None and self.process.is_alive():
            self.tasks.put(None)

    def stop(self, kill: bool = False) -> None:
        """End the worker: ask it to finish, or kill it; the next probe starts a fresh one."""
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.ask_to_finish()
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.process = None


#: Packages a backend's probes import on first use, beyond CuPy: a run's compile workers import them early, so
#: the probe process finds their files in the page cache on a freshly started machine.
BACKEND_IMPORTS = {"triton": ("torch", "triton"), "torch": ("torch",), "numba": ("numba.cuda",)}


def compile_jobs(probes: list[Probe], device: dict, todo: dict) -> list[tuple]:
    """What the probes with configs to measure (``todo``: probe id -> configs) will compile or import, in run
    order, each once: ``("cubin", source, name, arch)`` for a CUDA kernel file of a CuPy probe (``kernels``; an
    architecture-specific probe, one with ``max_cc``, builds its own ``sm_XYa``) and for each source its module's
    ``kernel_sources(configs)`` generates, ``("import", package)`` for a backend's packages, a Triton
    probe's kernels and launchers (``triton_ahead.triton_jobs``), and what a backend's first use reads
    (``FIRST_USE``)."""
    from gpuatlas.machinery.triton_ahead import triton_jobs
    from gpuatlas.probes.kit.cuda import arch_of, source

    jobs: dict = {}
    for probe in probes:
        configs = todo.get(probe.id)
        if not configs:
            continue
        if probe.backend == "cupy":
            arch = arch_of(device["compute_capability"], specific=probe.max_cc is not None)
            for filename in probe.kernels:
                if filename.endswith(".cu"):
                    jobs.setdefault(("cubin", filename, arch), ("cubin", source(filename), filename, arch))
            generate = getattr(sys.modules.get(probe.func.__module__), "kernel_sources", None)
            plain = arch_of(device["compute_capability"])
            for code, name in generate(configs) if generate else ():
                jobs.setdefault(("cubin", code, plain), ("cubin", code, name, plain))
        for package in BACKEND_IMPORTS.get(probe.backend, ()):
            jobs.setdefault(("import", package), ("import", package))
        if probe.backend == "triton":
            for job in triton_jobs(probe, configs, device):
                jobs.setdefault(job, job)
        for job in FIRST_USE.get(probe.backend, ()):
            job = (job, int(device["compute_capability"].replace(".", ""))) if job == "numba-ptx" else (job,)
            jobs.setdefault(job, job)
    return list(jobs.values())


#: What a backend's first use reads from disk, read ahead by a compile worker (gpuatlas/machinery/first_use.py).
FIRST_USE = {"numba": ("numba-ptx",), "triton": ("torch-readahead",), "torch": ("torch-readahead",)}


def _compile_job(job: tuple) -> None:
    """One compile job, in a compile worker: the cubin into the cache the probes load from, a Triton kernel and
    its launcher (or Triton's driver utilities) into Triton's cache, a backend's first-use reads, or an
    import."""
    if job[0] == "cubin":
        from gpuatlas.probes.kit.cuda import cubin_file

        cubin_file(*job[1:])
    elif job[0] == "triton":
        from gpuatlas.machinery.triton_ahead import compile_launch

        compile_launch(*job[1:])
    elif job[0] == "triton-utils":
        from gpuatlas.machinery.triton_ahead import build_utils

        build_utils()
    elif job[0] == "numba-ptx":
        from gpuatlas.machinery.first_use import numba_ptx

        numba_ptx(job[1])
    elif job[0] == "torch-readahead":
        from gpuatlas.machinery.first_use import readahead, torch_libraries

        readahead(torch_libraries())
    else:
        importlib.import_module(job[1])


def background_worker_start() -> None:
    """For a process that works beside the measuring one (compiling, deriving): Ctrl-C is the runner's to
    handle, and the measuring process comes first for the CPU."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(10)


def start_compiles(jobs: list[tuple], cpus: int | None = None):
    """Run ``jobs`` on compile workers (NVRTC and ptxas are CPU work, done while the GPU measures); returns the
    pool, or None with no jobs or too few cores (RESERVED_CPUS stay with the measuring process and the runner).
    A job's failure is dropped: the probe that needs the kernel compiles it again and records the error."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    workers = min(len(jobs), MAX_COMPILE_WORKERS, (cpus or os.cpu_count() or 1) - RESERVED_CPUS)
    if workers < 1:
        return None
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=background_worker_start)
    for job in jobs:
        pool.submit(_compile_job, job)
    return pool


#: Compile workers at most (the largest compiles, the instruction-cache loops, take seconds each), and the cores
#: a run leaves to its measuring process and itself.
MAX_COMPILE_WORKERS, RESERVED_CPUS = 8, 2


#: With at least LANE_CPUS cores the probes of the JIT backends (BACKEND_IMPORTS: Numba, torch and Triton, whose
#: imports take seconds) measure in a second worker, which imports their packages and probe modules as the run
#: starts, while the first worker measures the CuPy probes; still one probe at a time on the GPU.
LANE_CPUS = 4


def lanes(probes: list[Probe], pending: dict, cpus: int) -> tuple[dict, dict]:
    """``(lane of each probe id, modules each lane's worker imports as it starts)``: lane ``main`` for the CuPy
    probes, ``jit`` for the JIT backends' with ``cpus`` >= LANE_CPUS (else everything is ``main``).  The main
    lane's worker imports CuPy and makes its CUDA context as it starts, while the run is being set up, where a
    CuPy probe has configs to measure; the jit lane's makes its context in its first probe, as the other
    worker may be measuring by then."""
    lane = {p.id: "jit" if cpus >= LANE_CPUS and p.backend in BACKEND_IMPORTS else "main" for p in probes}
    cupy_first = any(lane[p.id] == "main" and p.backend == "cupy" and pending.get(p.id) for p in probes)
    prefetch = {"main": ("cupy",) if cupy_first else (), "jit": tuple(dict.fromkeys(
        name for p in probes if lane[p.id] == "jit" and pending.get(p.id)
        for name in (*BACKEND_IMPORTS[p.backend], p.func.__module__)))}
    return lane, prefetch


def start_lanes(probes: list[Probe], budget: Budget, pending: dict | None = None) -> dict[str, Worker]:
    """The workers of ``probes``' lanes (``pending``: probe id -> configs left; default all), those with configs
    to measure started: their imports overlap whatever the run does before its first probe."""
    pending = {p.id: [True] for p in probes} if pending is None else pending
    lane, prefetch = lanes(probes, pending, os.cpu_count() or 1)
    workers = {name: Worker(budget, modules) for name, modules in prefetch.items()}
    for name in {lane[pid] for pid, todo in pending.items() if todo}:
        workers[name].start()
    return workers
