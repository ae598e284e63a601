"""A family derived while the run measures (gpuatlas/machinery/early_derive.py) makes the rows the end of the run
makes: from the samples of its own probes and earlier families' alone, on the committed runs; and the runner's
background jobs hand back those rows."""
from __future__ import annotations

import functools
import io
import shutil

import pandas as pd
import pytest

from conftest import COMMITTED_RUN, REPO
from gpuatlas.analysis.derive import FAMILIES, INDEPENDENT, finished_family_rows
from gpuatlas.analysis.family import families
from gpuatlas.analysis.results import RunDir
from gpuatlas.analysis.stats import split_by_probe
from gpuatlas.machinery.early_derive import EarlyFamilies
from gpuatlas.probes.registry import all_probes

QUICK_RUN = REPO / "reports" / "h200-quick-cold" / "20261202T212517-nvidia-h200-061d"


@functools.lru_cache(maxsize=None)
def _read(path):
    """(run, meta, probes, merged samples) of a committed run, read once per test process (never changed)."""
    run = RunDir(path)
    meta = run.read_meta()
    probes = [all_probes()[pid] for pid in meta["probes"]]
    return run, meta, probes, run.read_merged(list(meta["probes"]))


def _rows(index: int, frame: pd.DataFrame, device: dict) -> pd.DataFrame:
    with split_by_probe(frame):
        return pd.DataFrame(FAMILIES[index](frame, device))


@functools.lru_cache(maxsize=None)
def _whole_run(path) -> list[pd.DataFrame]:
    """Every family's rows from the whole of a committed run, as the end of the run derives them (one split)."""
    _, meta, _, frame = _read(path)
    with split_by_probe(frame):
        return [_rows(index, frame, meta["device"]) for index in range(len(FAMILIES))]


def _whole_run_rows(path, index: int) -> pd.DataFrame:
    """Family ``index``'s rows from the whole of a committed run."""
    return _whole_run(path)[index]


def test_every_family_reads_only_its_own_and_earlier_families_probes():
    """On the full run (its fits take paths the quick one does not: the L2 partition from the set probe); the
    quick run's families are held to it below, as the background processes derive them."""
    path = COMMITTED_RUN
    run, meta, probes, frame = _read(path)
    early = EarlyFamilies(run, meta["device"], probes)
    assert len(early.needs) == len(FAMILIES) and len(set(early.needs)) >= 15
    names = [name for name, family in families().items() if not family.reads_rows]
    for index, needs in enumerate(early.needs):
        if needs >= set(meta["probes"]):
            continue  # derived at the end, from the whole run
        prefix = frame[frame["probe"].isin(needs)]
        pd.testing.assert_frame_equal(_rows(index, prefix, meta["device"]), _whole_run_rows(path, index),
                                      obj=f"{names[index]}'s rows (name the later probe modules they read in its "
                                          "FAMILY's reads_later)")


def test_the_check_sees_a_family_that_misses_a_probe():
    """Negative control: the same comparison, with one of the family's own probes left out, fails."""
    run, meta, probes, frame = _read(COMMITTED_RUN)
    index = next(i for i, f in enumerate(INDEPENDENT) if "clock" in f.probe_modules)
    without = frame[~frame["probe"].astype(str).str.startswith("clock.")]
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(_rows(index, without, meta["device"]), _whole_run_rows(COMMITTED_RUN, index))


def test_families_made_in_the_background_are_the_families_made_at_the_end(tmp_path):
    """The runner's path: a probe finishes, the families it completes are derived by a background process from
    the run directory; at the end the rest are derived from the merged samples.  Those the last probe completes
    wait for the end (nothing is left to overlap them with): here the chase latencies, which read the last
    family's shared-memory chase.  Every other family of the quick run is thus held to reading no later
    family's probes."""
    path = tmp_path / QUICK_RUN.name
    shutil.copytree(QUICK_RUN, path)
    run, meta, probes, frame = _read(path)
    early = EarlyFamilies(run, meta["device"], probes)
    for probe in probes:
        early.finished(probe.id)
    early.wait()
    last = probes[-1].id
    assert sorted(early.jobs) == [i for i, needs in enumerate(early.needs) if last not in needs]
    assert 2 not in early.jobs and len(early.jobs) == len(FAMILIES) - 1 and len(set(early.jobs.values())) >= 10
    with split_by_probe(frame):
        made = early.rows(frame)()
    assert early.pool._shutdown_thread
    for index in range(len(FAMILIES)):
        pd.testing.assert_frame_equal(pd.DataFrame(made[index]), _whole_run_rows(QUICK_RUN, index))


def test_a_family_read_from_the_run_directory_sees_only_the_finished_probes():
    """finished_family_rows reads only the finished probes, though the run directory holds later ones: the chase
    latencies, given their own probes without the later L2 set and lecture probes they read, make the rows of
    those probes alone, not the whole run's."""
    _, meta, probes, frame = _read(QUICK_RUN)
    index = next(i for i, f in enumerate(INDEPENDENT) if "chase" in f.probe_modules)
    later = {p.id for p in probes if p.func.__module__.rsplit(".", 1)[-1] in ("l2_sets", "l2_partition", "lecture")}
    needs = EarlyFamilies(RunDir(QUICK_RUN), meta["device"], probes).needs[index]
    finished = tuple(pid for pid in meta["probes"] if pid in needs and pid not in later)  # in run order
    (rows,) = finished_family_rows(str(QUICK_RUN), (index,), finished, meta["device"])
    pd.testing.assert_frame_equal(pd.DataFrame(rows), _rows(index, frame[frame["probe"].isin(finished)],
                                                            meta["device"]))
    assert len(rows) != len(_whole_run_rows(QUICK_RUN, index)), "the later probes change these rows"


def test_a_run_that_derives_early_writes_the_derived_table_of_its_samples(tmp_path, monkeypatch):
    """The runner end to end (simulated probes): families started as their probes finish, the rest at the end,
    and derived.csv is the derive of the merged samples."""
    import fakes
    from gpuatlas.analysis.derive import derive
    from gpuatlas.machinery import early_derive, runner

    outcomes = []
    rows = early_derive.EarlyFamilies.rows

    def seen(self, measurements):
        outcomes.extend(job.exception() for job in self.jobs.values())
        return rows(self, measurements)

    monkeypatch.setattr(early_derive.EarlyFamilies, "rows", seen)
    probes = [p for p in fakes.simulated_probes()
              if p.id in ("clock.sm", "launch.overhead", "chase.latency", "chase.smem", "bw.l2", "bw.dram")]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False, derive_early=True)
    # the clock, launch, chase latency and bank families complete before the last probe (bw.dram), which the
    # others wait for (the translation family reads it too)
    assert len(outcomes) == 4 and not any(outcomes), "families made by the background processes"
    written = run.read_derived()
    expected = derive(meta, run.read_measurements()).reindex(columns=written.columns)
    pd.testing.assert_frame_equal(written, pd.read_csv(io.StringIO(expected.to_csv(index=False))))


def test_a_family_whose_job_found_no_samples_is_derived_at_the_end(tmp_path):
    """The first probe failed before any sample landed: the job for its family finds a run with nothing to read
    (a UsageError there), and the end of the run derives that family from the whole run instead."""
    from gpuatlas.analysis.errors import UsageError

    _, meta, probes, frame = _read(QUICK_RUN)
    empty = RunDir(tmp_path / "run")
    empty.path.mkdir()
    early = EarlyFamilies(empty, meta["device"], probes)
    early.finished(probes[0].id)
    early.wait()
    assert list(early.jobs) == [0] and isinstance(early.jobs[0].exception(), UsageError)
    with split_by_probe(frame):
        made = early.rows(frame)()
    pd.testing.assert_frame_equal(pd.DataFrame(made[0]), _whole_run_rows(QUICK_RUN, 0))
