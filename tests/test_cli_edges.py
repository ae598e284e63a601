"""Small edges of the command line: each mistake is named in one line, with exit code 2."""
import pytest

from conftest import COMMITTED_RUN
from gpuatlas.cli import main
from tests_support import tree_digest


def one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("gpuatlas: error: ") and "\n" not in err and not captured.out, err
    return err


@pytest.mark.parametrize("argv", [["--frobnicate"], ["--frobnicate", "list"], ["list", "--frobnicate"]])
def test_an_unknown_option_is_named(capsys, argv):
    err = one_line_error(capsys, argv)
    assert "--frobnicate" in err and "required" not in err


def test_no_command_asks_for_one(capsys):
    assert "name a command: list, run, report, compare or doctor" in one_line_error(capsys, [])


@pytest.mark.parametrize("source", [str(COMMITTED_RUN), "ref:h100-sxm"])
def test_compare_of_one_run_is_refused(capsys, source):
    err = one_line_error(capsys, ["compare", source])
    assert "two or more" in err and source in err


def test_compare_of_two_sources_is_accepted_by_the_parser():
    """The negative control: two sources pass the count check."""
    from gpuatlas.cli import parser

    assert parser().parse_args(["compare", "ref:h100-sxm", "ref:a100-sxm4-80gb"]).runs == [
        "ref:h100-sxm", "ref:a100-sxm4-80gb"]


def test_report_of_references_alone_is_refused(tmp_path, capsys):
    err = one_line_error(capsys, ["report", "ref:h100-sxm", "ref:a100-sxm4-80gb", "--out", str(tmp_path / "o")])
    assert "at least one run directory" in err
    assert not (tmp_path / "o").exists()


# -- every argument and output path is checked before any work ------------------------------------------------
@pytest.fixture
def no_work(monkeypatch):
    """Fails a command that gets as far as asking for a GPU, deriving a run or loading a comparison."""
    import gpuatlas.analysis.compare
    import gpuatlas.machinery.device
    from gpuatlas import commands

    def started(*args, **kwargs):
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(gpuatlas.machinery.device, "require_gpu", started)
    monkeypatch.setattr(commands, "_derived_with_figures", started)
    monkeypatch.setattr(gpuatlas.analysis.compare, "comparison", started)


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("kept as it is\n")
    return path


@pytest.mark.parametrize("argv, says", [
    (["-a", "footprint_bytes=abc"], "'abc' is not a number"),
    (["--probe-timeout", "-5"], "--probe-timeout: '-5' is not a number of seconds above zero"),
    (["--gpus", "foo"], "--gpus: 'foo' is not a GPU index"),
    (["--gpus", "0,0"], "names a GPU twice"),
    (["--resume", "/nonexistent"], "--resume: /nonexistent is not a directory"),
    (["--resume", "{file}"], "is not a directory"),
    (["--out", "{file}"], "a-file is a file, not a folder"),
    (["--out", "{file}/sub"], "a-file is a file, not a folder"),
    (["-p", "energy"], "energy.per_operation measure only in the full profile: add --profile full"),
])
def test_run_refuses_bad_arguments_before_asking_for_a_gpu(tmp_path, capsys, no_work, a_file, argv, says):
    before = tree_digest(tmp_path)
    err = one_line_error(capsys, ["run", *(a.replace("{file}", str(a_file)) for a in argv)])
    assert says in err and "Traceback" not in err, err
    assert tree_digest(tmp_path) == before


def test_a_good_run_request_gets_as_far_as_the_gpu(tmp_path, capsys, no_work):
    """The negative control of the cases above: the same checks pass a sound request, which then asks for a GPU."""
    assert main(["run", "-p", "chase.latency", "-a", "footprint_bytes=4KiB,64KiB", "--probe-timeout", "5",
                 "--out", str(tmp_path / "new")]) == 1
    assert "work started" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    assert main(["run", "-p", "energy", "--profile", "full", "--out", str(tmp_path / "new")]) == 1
    assert "work started" in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["report", "--out", "{file}"], "a-file is a file, not a folder"),
    (["report", "--out", "{file}/sub"], "a-file is a file, not a folder"),
    (["compare", "ref:h100-sxm", "ref:a100-sxm4-80gb", "--plot", "{tmp}"], "is a folder: give a file name"),
    (["compare", "ref:h100-sxm", "ref:a100-sxm4-80gb", "--plot", "{tmp}/x.docx"], "name the file with one of"),
    (["compare", "ref:h100-sxm", "ref:a100-sxm4-80gb", "--plot", "{tmp}/missing/x.png"], "does not exist"),
    (["compare", "ref:h100-sxm", "ref:nope"], "unknown reference 'ref:nope'"),
    (["report", "ref:h100-sxm", "{tmp}/missing"], "is not a directory"),
])
def test_report_and_compare_refuse_bad_paths_before_any_work(tmp_path, capsys, no_work, a_file, argv, says):
    before = tree_digest(tmp_path)
    err = one_line_error(capsys, [a.replace("{file}", str(a_file)).replace("{tmp}", str(tmp_path)) for a in argv])
    assert says in err and "Traceback" not in err, err
    assert tree_digest(tmp_path) == before


def main_without_write_permission(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` as a user who may not write a folder of mode 0555: this process unless it is root, else a
    forked child that drops to the unprivileged user nobody.  Returns (exit code, stdout, stderr)."""
    import contextlib
    import io
    import json
    import os

    from gpuatlas.cli import main

    def call():
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        return code, out.getvalue(), err.getvalue()

    if os.geteuid() != 0:
        return call()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, json.dumps(call()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return tuple(json.loads(data))


@pytest.fixture
def read_only_folder():
    """A folder nobody but root may write (mode 0555), in a folder everyone may enter."""
    import shutil
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp())
    root.chmod(0o755)
    folder = root / "read-only"
    folder.mkdir(mode=0o555)
    folder.chmod(0o555)
    yield folder
    shutil.rmtree(root)


@pytest.mark.parametrize("argv", [
    ["report", "--out", "{ro}/sub"],
    ["report", "--out", "{ro}"],
    ["compare", "ref:h100-sxm", "ref:a100-sxm4-80gb", "--plot", "{ro}/x.png"],
])
def test_an_output_folder_that_cannot_be_written_is_refused_before_any_work(no_work, read_only_folder, argv):
    code, out, err = main_without_write_permission([a.replace("{ro}", str(read_only_folder)) for a in argv])
    err = err.strip()
    assert code == 2 and not out, (code, out, err)
    assert err.startswith("gpuatlas: error: ") and "\n" not in err and "Traceback" not in err, err
    assert "cannot be written" in err and str(read_only_folder) in err
    assert not any(read_only_folder.iterdir())


def test_without_a_driver_run_says_so_in_those_words(tmp_path, capsys, monkeypatch):
    """A CuPy whose runtime finds no driver (version 0) and fails to count devices, as on a machine without one;
    with an older driver the runtime's own reason is given instead."""
    import sys
    import types

    versions = {"driver": 0}

    def no_devices():
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime")

    runtime = types.SimpleNamespace(getDeviceCount=no_devices, driverGetVersion=lambda: versions["driver"])
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime)))
    err = one_line_error(capsys, ["run", "--out", str(tmp_path / "r")])
    assert "no NVIDIA driver" in err and "cudaError" not in err
    versions["driver"] = 12020
    err = one_line_error(capsys, ["run", "--out", str(tmp_path / "r")])
    assert "no NVIDIA driver" not in err and "cudaErrorInsufficientDriver" in err
    assert not (tmp_path / "r").exists()


def test_without_the_committed_run_a_numeric_axis_is_checked_against_this_gpu(tmp_path, capsys, monkeypatch):
    """An installed wheel has no committed run: the sweeps are then sized for the GPU's own description, read
    before a run directory is made."""
    import fakes
    import gpuatlas.machinery.device
    from gpuatlas import commands

    monkeypatch.setattr(commands, "DEFAULT_RUN", tmp_path / "not-installed")
    monkeypatch.setattr(gpuatlas.machinery.device, "device_properties", lambda index=0: dict(fakes.DEVICE))
    err = one_line_error(capsys, ["run", "-a", "footprint_bytes=abc", "--out", str(tmp_path / "r")])
    assert "'abc' is not a number" in err
    assert not (tmp_path / "r").exists()
