"""``gpuatlas doctor``: fix commands are printed as written, and a missing Python package is named as one."""
import sys

import pytest

from gpuatlas.cli import main
from probes import doctor


@pytest.fixture
def fresh_numba_check():
    doctor.numba_problem.cache_clear()
    yield
    doctor.numba_problem.cache_clear()


def doctor_output(monkeypatch, capsys, checks) -> list[str]:
    monkeypatch.setenv("COLUMNS", "40")  # narrower than every fix: a fix line must still come out whole
    monkeypatch.setattr(doctor, "run_checks", lambda: checks)
    assert main(["doctor"]) == (1 if any(c.required and not c.ok for c in checks) else 0)
    return capsys.readouterr().out.splitlines()


def test_a_missing_pynvml_is_a_missing_package_with_its_install_line_verbatim(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    check = doctor.check_driver()
    assert check.ok is False
    assert "nvidia-ml-py is not installed" in check.detail
    assert "NVIDIA GPU" not in check.fix and "driver" not in check.fix, "not blamed on the driver"
    lines = doctor_output(monkeypatch, capsys, [check])
    assert "      fix: pip install -e '.[gpu]'   (or just this package: pip install nvidia-ml-py)" in lines


def test_missing_cupy_and_numba_are_named_with_the_gpu_extra(monkeypatch, capsys, fresh_numba_check):
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setitem(sys.modules, "numba", None)
    cupy, numba = doctor.check_cupy(), doctor.check_numba()
    assert "cupy-cuda13x is not installed" in cupy.detail and "numba is not installed" in numba.detail
    out = "\n".join(doctor_output(monkeypatch, capsys, [cupy, numba]))
    assert out.count("pip install -e '.[gpu]'") == 2
    assert "not ready to run probes: CuPy, Numba CUDA" in out


def test_fix_text_is_never_read_as_markup(monkeypatch, capsys):
    check = doctor.Check("Something", False, "detail with [bold]brackets[/bold]", "run `x --opt '[a]'` then [red]y")
    lines = doctor_output(monkeypatch, capsys, [check])
    assert "FAIL Something: detail with [bold]brackets[/bold]" in lines
    assert "      fix: run `x --opt '[a]'` then [red]y" in lines


def test_a_machine_with_every_backend_says_so(monkeypatch, capsys):
    """The negative control of the exit code: only a failed required check makes doctor exit 1."""
    checks = [doctor.Check("A", True, "fine"), doctor.Check("Triton", None, "skipped", "pip install torch",
                                                            required=False)]
    lines = doctor_output(monkeypatch, capsys, checks)
    assert lines[-1] == "everything gpuatlas needs works here"
