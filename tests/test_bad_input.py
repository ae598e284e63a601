"""Bad input, fuzzed: any argument list and any damage to a run's files ends in exit 0, 1 or 2 with at
most one line of error, never a traceback, and never changes a file."""
import json
import shutil

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fakes
from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.results import load_run
from gpuatlas import commands
from gpuatlas.cli import main
from gpuatlas.machinery import runner
from tests_support import tree_digest

TOKENS = ["list", "run", "report", "compare", "-p", "--probe", "--profile", "quick", "full", "nope", "-a",
          "footprint_bytes=4KiB", "footprint_bytes=", "x=1", "--out", "--resume", "--seed", "abc", "-1",
          "--csv", "ref:h100-sxm", "ref:nope", "chase", "bw.dram", "--probe-timeout", "0", "--bogus", ""]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A small simulated run (two probes, so parameter columns are partly empty as in a real merge): the
    damage below is to files, whatever their size, and a small run keeps each example cheap."""
    probes = [p for p in fakes.simulated_probes() if p.id in ("clock.sm", "chase.latency")]
    run, meta = runner.new_run(tmp_path_factory.mktemp("pristine"), fakes.DEVICE, {}, probes, "quick", {}, 0,
                               ["test"])
    runner.execute(run, meta, probes, isolate=False)
    shutil.rmtree(run.parts)
    return run.path


@pytest.fixture
def rendered(monkeypatch):
    """Stands in for drawing the report: records what ``report`` would render (rendering itself is tested on
    the committed run, once, in the ``committed_report`` fixture)."""
    import gpuatlas.analysis.render

    calls = []

    def record(meta, measurements, derived, out, **kwargs):
        calls.append((meta, measurements))
        return out / "index.html"

    monkeypatch.setattr(gpuatlas.analysis.render, "render", record)
    return calls


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=st.lists(st.sampled_from(TOKENS), max_size=6))
def test_any_argument_list_ends_cleanly(tmp_path, monkeypatch, capsys, pristine, rendered, argv):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(commands, "DEFAULT_RUN", pristine)  # `report` with no run renders the default run
    before = tree_digest(pristine)
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 1, 2), (argv, code)
    assert "Traceback" not in err
    if code == 2:
        assert err.strip().startswith("gpuatlas: error: ") and err.strip().count("\n") == 0, err
    assert tree_digest(pristine) == before


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(["run.json", "measurements.parquet", "derived.csv"]),
       cut=st.floats(0, 1), junk=st.binary(max_size=64))
def test_any_damaged_run_is_refused_in_one_line_and_left_alone(pristine, rendered, tmp_path, capsys, target, cut,
                                                               junk):
    meta, measurements = load_run(pristine)
    run = tmp_path / "damaged"
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(pristine, run)
    data = (run / target).read_bytes()
    (run / target).write_bytes(data[: int(len(data) * cut)] + junk)
    before = tree_digest(run)
    rendered.clear()
    for argv in (["report", str(run), "--out", str(tmp_path / "out")], ["compare", str(run), "ref:h100-sxm"]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code in (0, 2) and "Traceback" not in err, (argv, err)
        if code == 2:
            assert err.strip().startswith("gpuatlas: error: ") and "\n" not in err.strip()
    for seen_meta, seen_measurements in rendered:  # what gets past the loaders is the undamaged run
        assert seen_meta == meta
        pd.testing.assert_frame_equal(seen_measurements, measurements)
    assert tree_digest(run) == before


def test_resume_on_a_run_from_another_gpu_is_refused(tmp_path):
    probes = fakes.simulated_probes()
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    other = {**fakes.DEVICE, "uuid": "GPU-other"}
    before = tree_digest(run.path)
    with pytest.raises(UsageError, match="measured on Simulated GPU"):
        runner.resume_run(run.path, other)
    assert tree_digest(run.path) == before


def test_unstable_configs_are_warned_in_the_report(tmp_path):
    from gpuatlas.analysis.derive import derive
    from gpuatlas.analysis.render import render

    probes = fakes.simulated_probes()[:1]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    frame = run.read_measurements()
    frame.loc[frame.index[::2], "value"] *= 1.5  # every other repeat 50% off: a noisy config
    page = render(meta, frame, derive(meta, frame), tmp_path / "report").read_text()
    assert "configs spread more than 5%" in page
    json.loads(run.run_json.read_text())
