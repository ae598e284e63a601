"""The command line: bad input ends in one line on stderr and exit 2, and never touches existing files."""
import io
import shutil

import pandas as pd
import pytest

import fakes
from gpuatlas.analysis.results import RunDir
from gpuatlas.cli import main
from tests_support import small_simulated_run, tree_digest

from conftest import COMMITTED_RUN


@pytest.fixture
def run_copy(tmp_path):
    dest = tmp_path / "run"
    shutil.copytree(COMMITTED_RUN, dest, ignore=shutil.ignore_patterns("report"))
    return dest


def one_line_error(capsys, argv, code=2) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuatlas: error: ") and "\n" not in err, err
    assert "Traceback" not in err
    return err


def test_list_needs_no_gpu(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for probe in ("clock.sm", "launch.overhead", "chase.latency", "chase.latency_numba"):
        assert probe in out


def test_list_shows_what_each_axis_sweeps_as_sized_for_the_committed_gpu(capsys, monkeypatch):
    """Beside each axis's prose, the values its full sweep takes on the committed run's GPU: a few named, many
    as a count and a range (the TLB chase's 2 MiB blocks run from 2 blocks to 0.8 of device memory)."""
    from gpuatlas import commands
    from gpuatlas.analysis.units import fmt_bytes

    assert main(["list", "-p", "chase.latency"]) == 0
    out = capsys.readouterr().out
    assert "flavour (full: cg, default): default (ld.global" in out and " values, 1 KiB .. " in out
    assert main(["list", "-p", "chase.tlb"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "footprint_bytes (full: " in line)
    count, span = line.split("(full: ")[1].split(")")[0].split(" values, ")
    low, high = span.split(" .. ")
    memory = commands._reference_device()["total_memory_bytes"]
    assert int(count) > 6 and low == fmt_bytes(4 << 20)
    assert high.endswith(" GiB") and 0.4 * memory / 2**30 < float(high.split()[0]) <= 0.8 * memory / 2**30 + 0.5
    monkeypatch.setattr(commands, "_reference_device", lambda: None)  # no committed run: nothing is sized
    assert main(["list", "-p", "chase.tlb"]) == 0
    out = capsys.readouterr().out
    assert "footprint_bytes: 2 blocks" in out and "footprint_bytes (full: " not in out


@pytest.mark.parametrize("argv, message", [
    (["run", "-p", "nope"], "unknown probe 'nope'"),
    (["run", "--profile", "huge"], "unknown profile 'huge'"),
    (["run", "-p", "chase.latency", "-a", "footprint_bytes"], "malformed sweep override"),
    (["run", "-p", "chase.latency", "-a", "bogus=1"], "unknown axis 'bogus'"),
    (["list", "-p", "nope"], "unknown probe 'nope'"),
])
def test_bad_run_requests_fail_before_touching_anything(tmp_path, capsys, argv, message):
    out = tmp_path / "results"
    assert message in one_line_error(capsys, argv + (["--out", str(out)] if argv[0] == "run" else []))
    assert not out.exists()


def test_run_without_a_gpu_says_so(tmp_path, capsys):
    pytest.importorskip("cupy")
    from conftest import _gpu_available

    if _gpu_available():
        pytest.skip("this machine has a GPU")
    err = one_line_error(capsys, ["run", "--out", str(tmp_path / "r")])
    assert ("no NVIDIA driver" in err or "no CUDA GPU is reachable" in err) and "gpuatlas doctor" in err
    assert not (tmp_path / "r").exists()


def test_report_of_a_directory_that_is_not_a_run(tmp_path, capsys):
    assert "no run.json" in one_line_error(capsys, ["report", str(tmp_path), "--out", str(tmp_path / "o")])
    assert "not a directory" in one_line_error(capsys, ["compare", str(tmp_path / "missing"), "ref:h100-sxm"])
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("damage, message", [
    (lambda run: (run / "measurements.parquet").write_bytes((run / "measurements.parquet").read_bytes()[:500]),
     "not a readable parquet"),
    (lambda run: (run / "run.json").write_text((run / "run.json").read_text()[:100]), "not valid JSON"),
    (lambda run: (run / "run.json").write_text('{"schema": "gpuatlas.run", "schema_version": 99}'),
     "upgrade gpuatlas"),
])
def test_damaged_runs_are_refused_and_left_as_they_are(run_copy, tmp_path, capsys, damage, message):
    damage(run_copy)
    before = tree_digest(run_copy)
    assert message in one_line_error(capsys, ["report", str(run_copy), "--out", str(tmp_path / "o")])
    assert tree_digest(run_copy) == before
    assert not (tmp_path / "o").exists()


def test_resume_of_something_that_is_not_a_run(tmp_path, capsys):
    pytest.importorskip("cupy")
    err = one_line_error(capsys, ["run", "--resume", str(tmp_path)])
    assert "no run.json" in err  # checked before a GPU is asked for


def test_report_defaults_to_the_committed_h200_run(committed_report):
    page, _ = committed_report  # `gpuatlas report` with no arguments; the fixture checks the run is untouched
    assert "NVIDIA H200" in page.read_text()
    assert page.parent.name == RunDir(COMMITTED_RUN).read_meta()["run_id"]


def test_compare_prints_ratios_and_csv(tmp_path, capsys):
    """Two copies of one small simulated run (the committed run is compared in test_compare)."""
    run = small_simulated_run(tmp_path / "runs")
    copy = shutil.copytree(run, tmp_path / "copy")
    assert main(["compare", str(run), str(copy)]) == 2  # the same run twice is refused
    assert "same run as" in capsys.readouterr().err
    meta = copy / "run.json"
    meta.write_text(meta.read_text().replace('"run_id": "', '"run_id": "copy-'))
    assert main(["compare", str(run), str(copy), "--csv"]) == 0
    out = capsys.readouterr().out
    assert "l2.latency_cycles" in out and ",ratio," in out.splitlines()[0]
    ratios = pd.read_csv(io.StringIO(out))["ratio"].dropna()
    assert len(ratios) >= 3 and (ratios == 1.0).all(), "a copy of a run measures the same as the run"


def test_report_of_several_runs_adds_a_comparison_page_with_run_to_run_spread(tmp_path, capsys):
    """Two copies of one small simulated run (the committed run's report is rendered once, elsewhere)."""
    run = small_simulated_run(tmp_path / "runs")
    copy = shutil.copytree(run, tmp_path / "copy")
    (copy / "run.json").write_text((copy / "run.json").read_text().replace('"run_id": "', '"run_id": "copy-'))
    assert main(["report", str(run), str(copy), "ref:h100-sxm", "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "comparison" / "index.html").read_text()
    assert f"Run-to-run spread: {fakes.DEVICE['name']} (2 runs)" in page and "0.00%" in page
    assert "ref:h100-sxm, published" in page
    assert "Notes: caveats, sources" in page and "] caveat: [R]" in page and "n/c[" in page


def test_compare_of_the_readme_fits_a_reader_at_80_columns(monkeypatch, capsys, committed_derive_shared):
    """`COLUMNS=80 gpuatlas compare reports/h200 ref:h100-sxm ref:a100-sxm4-80gb`: the quantities all three
    have, at most 200 lines of at most 80 columns, every value, CI and mark whole; `--all` adds the rest."""
    from gpuatlas.analysis.compare import common_only, comparison, format_value
    from gpuatlas.analysis.compare_text import _cell_tokens

    monkeypatch.setenv("COLUMNS", "80")
    argv = ["compare", str(COMMITTED_RUN), "ref:h100-sxm", "ref:a100-sxm4-80gb"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 200 and max(map(len, lines)) <= 80, (len(lines), max(map(len, lines)))
    every = comparison(argv[1:])
    common = common_only(every)
    assert 0 < common["quantity"].nunique() < every["quantity"].nunique()
    for row in common.itertuples():
        if row.quantity in common.attrs["companions"]:  # a like-for-like ratio's stand-in, named in its note
            assert any(row.quantity in line for line in lines), row.quantity
            continue
        for token in _cell_tokens(format_value(row.value, row.unit, row.ci_low, row.ci_high)):
            assert any(token in line for line in lines), (row.quantity, token)
    one_sided = every["quantity"].nunique() - common["quantity"].nunique()
    assert any(line.startswith(f"{one_sided} more quantities, on some sides only") for line in lines)
    assert not any(line.startswith("l1.ways") for line in lines)  # the committed run's alone: not shown
    assert main(argv + ["--all"]) == 0
    everything = capsys.readouterr().out.splitlines()
    assert any(line.startswith("l1.ways") for line in everything) and len(everything) > len(lines)


def test_output_into_a_file_is_not_wrapped(tmp_path):
    """Rich wraps at a terminal's width only: `gpuatlas list > file` keeps each sentence on its line."""
    import subprocess
    import sys

    from conftest import REPO

    with open(tmp_path / "list.txt", "w") as out:
        subprocess.run([sys.executable, "-m", "gpuatlas", "list", "-p", "chase.access"], stdout=out, check=True,
                       cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "80"})
    lines = (tmp_path / "list.txt").read_text().splitlines()
    assert max(map(len, lines)) > 80, "the probe's summary is one line, however long"
