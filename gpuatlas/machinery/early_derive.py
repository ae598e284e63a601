"""The families' rows, derived while the run still measures.

A family's rows depend on its own probes' samples, on earlier families' (the clock, for one) and on the later
probe modules it names in ``reads_later``.  So once those have finished, a background process reads their
samples from the run directory and makes its rows, while the GPU measures the next probes.  The end of the
run then derives only what the last probes complete, and the rows are the same as a derive of the whole run
(tests/test_derive_early.py checks every family against the committed runs).
"""
from __future__ import annotations

import importlib
import threading
from concurrent.futures import Future
from typing import Callable

import pandas as pd

from gpuatlas.analysis.family import independent
from gpuatlas.analysis.results import RunDir
from gpuatlas.probes.registry import Probe, all_probes

#: Background processes that derive: the families are small jobs, done long before the run ends.
DERIVE_WORKERS = 2


class EarlyFamilies:
    """Derives each family of a run's ``probes`` (in run order) as soon as it can; ``finished(id)`` after each
    probe, then ``rows(measurements)`` for ``derive``'s ``families``."""

    def __init__(self, run: RunDir, device: dict, probes: list[Probe]):
        self.run, self.device, self.order = run, device, [p.id for p in probes]
        registered = all_probes()  # where each probe is declared (a simulated probe's function is elsewhere)
        by_module: dict[str, list[str]] = {}
        for probe in probes:
            by_module.setdefault((registered.get(probe.id) or probe).func.__module__, []).append(probe.id)

        def of(modules) -> set[str]:
            return {pid for module in modules for pid in by_module.get(f"gpuatlas.probes.families.{module}", ())}

        self.needs: list[frozenset] = []  # per family: the probes finished before its rows are made
        before: set[str] = set()
        for family in independent():
            before |= of(family.probe_modules)
            self.needs.append(frozenset(before | of(family.reads_later)))
        self.done: set[str] = set()
        self.jobs: dict[int, Future] = {}
        self.pool = None

    def finished(self, probe_id: str) -> None:
        """``probe_id`` has finished (measured, failed or skipped): start the families that were waiting for it,
        unless nothing is left to measure (then the end of the run derives them from what it has in hand)."""
        self.done.add(probe_id)
        if self.done >= set(self.order):
            return
        ready = tuple(i for i, needs in enumerate(self.needs) if i not in self.jobs and needs <= self.done)
        if not ready:
            return
        if self.pool is None:
            self.pool = _start_pool()
        finished = tuple(pid for pid in self.order if pid in self.done)
        job = self.pool.submit(_derive, str(self.run.path), ready, finished, self.device)
        self.jobs.update({i: job for i in ready})

    def wait(self) -> None:
        """Until every started family has read its samples (before the run's files are merged away)."""
        for job in set(self.jobs.values()):
            job.exception()  # waits; what it raised is handled in ``rows``

    def rows(self, measurements: pd.DataFrame) -> Callable[[], list[list[dict]]]:
        """``derive``'s ``families``: each family's rows, as its job made them, or made here from
        ``measurements`` (the whole run) for those that had none."""
        def families() -> list[list[dict]]:
            from gpuatlas.analysis.derive import FAMILIES

            made = []
            for index, rows_of in enumerate(FAMILIES):
                job = self.jobs.get(index)
                try:
                    made.append(job.result()[_position(self.jobs, job, index)] if job else None)
                except Exception:
                    # its process died, or its probes had left no sample yet: derived here from the whole run
                    # instead (a family that fails there raises, as a derive at the end always did)
                    made.append(None)
                if made[-1] is None:
                    made[-1] = rows_of(measurements, self.device)
            self.close()
            return made
        return families

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


def _derive(run_path: str, indices: tuple, finished: tuple, device: dict) -> list[list[dict]]:
    """A deriving process's job (``finished_family_rows``); the run's own process imports the derivation only
    once the run has ended."""
    from gpuatlas.analysis.derive import finished_family_rows

    return finished_family_rows(run_path, indices, finished, device)


def _position(jobs: dict[int, Future], job: Future, index: int) -> int:
    """Where family ``index``'s rows are in the list its job returns (a job derives its families in index order)."""
    return sorted(i for i, other in jobs.items() if other is job).index(index)


def _start_pool():
    """The deriving processes; and, in a thread of this one, the import the end of the run's repro intervals
    need (SciPy's t quantile), which would otherwise wait until then."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from gpuatlas.machinery.workers import background_worker_start

    threading.Thread(target=importlib.import_module, args=("scipy.special",), daemon=True).start()
    return ProcessPoolExecutor(DERIVE_WORKERS, mp_context=multiprocessing.get_context("spawn"),
                               initializer=background_worker_start)
