"""``gpuatlas doctor``: fix commands are printed as written, a missing Python package is named as one with this
project's pin, and the install line follows the driver's CUDA version (read through NVML or libcuda, faked here
at those APIs)."""
import ctypes
import importlib.metadata
import re
import sys
import tomllib
import types
from pathlib import Path

import pytest

from gpuatlas.cli import main
from gpuatlas.machinery import doctor

PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


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


def requirement(extra: str, name: str) -> str:
    """``name``'s requirement in ``extra`` of pyproject.toml, without its comment."""
    (found,) = [r for r in EXTRAS[extra] if re.match(rf"{re.escape(name)}\b(?![-\w])", r)]
    return found


@pytest.fixture
def machine(monkeypatch):
    """A machine whose driver supports CUDA ``cuda`` (an int as NVML and cuDriverGetVersion give it:
    1000 * major + 10 * minor; None: no driver), with ``packages`` installed and this repository's pyproject as
    gpuatlas's installed metadata."""
    requires = [f"{r}; extra == \"{extra}\"" for extra, reqs in EXTRAS.items() for r in reqs]

    def make(cuda: int | None, packages: dict[str, str] = {}, nvml: bool = True):
        def nvml_call(*_):
            if cuda is None:
                raise RuntimeError("NVML Shared Library Not Found")

        fake = types.SimpleNamespace(
            nvmlInit=nvml_call, nvmlShutdown=lambda: None, nvmlSystemGetCudaDriverVersion=lambda: cuda,
            nvmlSystemGetDriverVersion=lambda: "999.1", nvmlDeviceGetCount=lambda: 1,
            nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda h: "Some GPU")
        monkeypatch.setitem(sys.modules, "pynvml", fake if nvml else None)
        real_cdll = ctypes.CDLL

        class LibCuda:
            @staticmethod
            def cuDriverGetVersion(pointer):
                pointer._obj.value = cuda
                return 0

        def cdll(name, *args, **kwargs):
            if name != "libcuda.so.1":
                return real_cdll(name, *args, **kwargs)
            if cuda is None:
                raise OSError("libcuda.so.1: cannot open shared object file")
            return LibCuda()

        def version(name):
            if name not in packages:
                raise importlib.metadata.PackageNotFoundError(name)
            return packages[name]

        monkeypatch.setattr(ctypes, "CDLL", cdll)
        monkeypatch.setattr(importlib.metadata, "version", version)
        monkeypatch.setattr(importlib.metadata, "requires", lambda name: requires if name == "gpuatlas" else None)

    return make


def test_a_missing_pynvml_is_a_missing_package_with_its_install_line_verbatim(monkeypatch, capsys, machine):
    machine(None, nvml=False)
    check = doctor.check_driver()
    assert check.ok is False
    assert "nvidia-ml-py is not installed" in check.detail
    assert "NVIDIA GPU" not in check.fix and "driver" not in check.fix, "not blamed on the driver"
    lines = doctor_output(monkeypatch, capsys, [check])
    assert (f"      fix: pip install -e '.[cuda13]'   (or just this package: pip install "
            f"'{requirement('cuda13', 'nvidia-ml-py')}')") in lines


def test_missing_cupy_and_numba_are_named_with_the_machines_extra(monkeypatch, capsys, fresh_numba_check,
                                                                    machine):
    machine(None)
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setitem(sys.modules, "numba", None)
    cupy, numba = doctor.check_cupy(), doctor.check_numba()
    assert "cupy-cuda13x is not installed" in cupy.detail and "numba is not installed" in numba.detail
    out = "\n".join(doctor_output(monkeypatch, capsys, [cupy, numba]))
    assert out.count("pip install -e '.[cuda13]'") == 2
    assert f"pip install '{requirement('cuda13', 'numba')}'" in out, "numba with the project's pin"
    assert "not ready to run probes: CuPy, Numba CUDA" in out


#: The oldest CUDA 12 compilers the cuda12 extra allows (its NVRTC's lower bound).
FLOOR_MINOR = int(re.search(r">=12\.(\d+)", requirement("cuda12", "nvidia-cuda-nvrtc-cu12")).group(1))


def cuda12_line(minor: int) -> str:
    """The CUDA 12 install line, worked out here: the compilers no newer than the driver's own CUDA 12.minor,
    and no older than the extra's floor."""
    cap = f"<12.{max(minor, FLOOR_MINOR) + 1}"
    return ("pip install -e '.[cuda12]' "
            f"'nvidia-cuda-nvrtc-cu12{cap}' 'nvidia-cuda-nvcc-cu12{cap}' 'nvidia-nvjitlink-cu12{cap}'")


@pytest.mark.parametrize("cuda, line", [(12040, cuda12_line(4)), (12080, cuda12_line(8)),
                                        (13000, "pip install -e '.[cuda13]'")], ids=["12.4", "12.8", "13.0"])
@pytest.mark.parametrize("nvml", [True, False], ids=["nvml", "libcuda"])
def test_each_driver_gets_its_install_line(monkeypatch, capsys, machine, cuda, line, nvml):
    machine(cuda, nvml=nvml)
    assert doctor.driver_cuda() == (cuda // 1000, cuda % 1000 // 10)
    check = doctor.check_cuda_packages()
    assert check.ok is True
    assert f"its install line: {line}" in doctor_output(monkeypatch, capsys, [check])[-2]
    below_floor = cuda // 1000 == 12 and cuda % 1000 // 10 < FLOOR_MINOR
    assert ("minor version compatibility" in check.detail) == below_floor


def test_the_install_lines_name_real_extras_and_the_cuda12_floor_is_the_extras():
    """The extras doctor names exist; the gpu extra is the CUDA 13 one; the floor is what cuda12 pins."""
    assert set(doctor.EXTRAS.values()) <= set(EXTRAS) and EXTRAS["gpu"] == ["gpuatlas[cuda13]"]
    floor = "%d.%d" % doctor.CUDA12_FLOOR
    assert doctor.CUDA12_FLOOR == (12, FLOOR_MINOR)
    for name in ("nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvcc-cu12"):
        assert f">={floor}," in requirement("cuda12", name), name
        assert requirement("test", name).startswith(f"{name}=={floor}."), "CI compiles with the floor"
    assert not any("cuda13" in r or "cu13" in r for r in EXTRAS["cuda12"])


def test_packages_built_for_a_newer_cuda_than_the_driver_are_named_with_the_fix(monkeypatch, capsys, machine):
    cuda13_stack = {"cupy-cuda13x": "14.2.0", "nvidia-cuda-nvrtc": "13.0.88", "nvidia-nvvm": "13.0.88",
                    "cuda-bindings": "13.5.0", "nvidia-cuda-nvrtc-cu12": "12.9.86"}
    machine(12040, cuda13_stack)
    check = doctor.check_cuda_packages()
    assert check.ok is False
    assert "built for a newer CUDA than this driver supports (CUDA 12.4)" in check.detail
    for name, version in cuda13_stack.items():
        assert f"{name} {version}" in check.detail
    uninstall = "pip uninstall -y cupy-cuda13x cuda-bindings nvidia-cuda-nvrtc nvidia-nvvm && "
    assert check.fix == uninstall + cuda12_line(4), "the other major's packages go; the 12.x ones are capped"
    assert doctor_output(monkeypatch, capsys, [check])[-1].startswith("not ready to run probes: CUDA packages")
    # the negative control: a CUDA 13.0 driver runs every one of them
    machine(13000, cuda13_stack)
    assert doctor.check_cuda_packages().ok is True
    machine(12090, {"nvidia-cuda-nvrtc-cu12": "12.9.86", "cupy-cuda12x": "14.2.0"})
    assert doctor.check_cuda_packages().ok is True, "12.9 compilers on a 12.9 driver"


def test_without_a_driver_doctor_says_so_plainly(monkeypatch, capsys, machine):
    machine(None)
    assert doctor.driver_cuda() is None
    check = doctor.check_cuda_packages()
    assert check.ok is None and "no NVIDIA driver on this machine" in check.detail
    driver = doctor.check_driver()
    assert driver.ok is False and driver.detail.startswith("no NVIDIA driver answers on this machine")
    lines = doctor_output(monkeypatch, capsys, [driver, check])
    assert lines[-1] == "not ready to run probes: NVIDIA driver (see each fix above)"


@pytest.mark.parametrize("cuda, extra", [(12040, "cuda12"), (13000, "cuda13")])
def test_a_missing_numba_cuda_is_fixed_with_the_pin_of_the_machines_extra(monkeypatch, capsys, machine, cuda,
                                                                           extra):
    machine(cuda)
    monkeypatch.setitem(sys.modules, "numba", None)  # numba_problem names numba; numba-cuda is named below
    monkeypatch.setattr(doctor, "numba_problem", lambda: "the Python package numba-cuda is not installed "
                        "(ModuleNotFoundError: No module named 'numba.cuda'). Fix: pip install numba-cuda")
    check = doctor.check_numba()
    pin = requirement(extra, "numba-cuda")
    assert re.search(r"==\d", pin), "the extra pins numba-cuda"
    assert check.fix.endswith(f"(or just this package: pip install '{pin}')"), check.fix
    assert "pip install numba-cuda" not in check.fix
    out = doctor_output(monkeypatch, capsys, [check])
    assert len([l for l in out if l.startswith("      fix: ")]) == 1 and "Traceback" not in "\n".join(out)


def test_triton_and_torch_fixes_carry_the_pin_and_never_an_undeclared_package(monkeypatch, capsys, machine):
    machine(13000)
    monkeypatch.setitem(sys.modules, "triton", None)
    check = doctor.check_triton()
    assert check.fix == f"pip install '{requirement('test', 'triton')}'" and "==" in check.fix
    language = types.SimpleNamespace()
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(__version__="3.6.0", language=language))
    monkeypatch.setitem(sys.modules, "triton.language", language)
    monkeypatch.setitem(sys.modules, "torch", None)
    check = doctor.check_triton()
    assert not any("torch" in r for extra in EXTRAS.values() for r in extra), "torch is in no extra"
    assert "pip install" not in check.fix and "requires triton==3.6.0" in check.fix
    assert doctor_output(monkeypatch, capsys, [check])[-1] == "everything gpuatlas needs works here"


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


#: What NVRTC 12.6 printed on the H200 when CuPy handed it a CUDA 13 toolkit's headers for a column sum.
MIXED_HEADERS = ("/opt/venv/lib/python3.12/site-packages/nvidia/cu13/include/cuda_fp8.hpp(1460): error: this "
                 "declaration has no storage class or type specifier\n      __NV_SILENCE_DEPRECATION_BEGIN")


def fake_cupy(reduction_error: str | None):
    """A CuPy whose plain kernel runs; its own reduction raises ``reduction_error`` (None: it runs)."""
    class Array:
        def __init__(self, n):
            self.n = n

        def __iadd__(self, other):
            return self

        def __eq__(self, other):
            return types.SimpleNamespace(all=lambda: True)

        def reshape(self, *shape):
            return self

        def sum(self, axis=None):
            if reduction_error:
                raise RuntimeError(reduction_error)
            return self

    def raw_kernel(code, name):
        return lambda grid, block, args: None

    return types.SimpleNamespace(
        __version__="14.2.0", RawKernel=raw_kernel, int32="int32", float32="float32",
        arange=lambda *a, **k: Array(a[-1]),
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceProperties=lambda i: {"name": b"Some GPU"}),
                                   nvrtc=types.SimpleNamespace(getVersion=lambda: (12, 6)),
                                   Stream=types.SimpleNamespace(null=types.SimpleNamespace(synchronize=lambda: None))))


@pytest.mark.parametrize("cuda", [12080, 13000], ids=["12.8", "13.0"])
def test_cupys_own_kernels_failing_on_another_cudas_headers_are_named_with_the_headers(monkeypatch, machine, cuda):
    """A plain kernel compiles, but CuPy's own reduction meets another CUDA version's headers: doctor says so, names
    the header folder and CuPy's NVRTC, and gives the machine's install line for a one-version environment."""
    machine(cuda)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(MIXED_HEADERS))
    check = doctor.check_cupy()
    assert check.ok is False
    assert "CuPy's own kernels do not compile: NVRTC 12.6" in check.detail
    assert "/opt/venv/lib/python3.12/site-packages/nvidia/cu13/include" in check.detail
    assert doctor.install_line(doctor.driver_cuda()) in check.fix
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(None))  # control: the same machine, its reductions compile
    check = doctor.check_cupy()
    assert check.ok is True and "its own reductions" in check.detail
