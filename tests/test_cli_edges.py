"""Small edges of the command line: each mistake is named in one line, with exit code 2."""
import pytest

from conftest import COMMITTED_RUN
from gpuatlas.cli import main


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
