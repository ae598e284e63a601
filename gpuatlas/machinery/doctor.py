"""``gpuatlas doctor``: is a GPU reachable, and can each backend compile and launch a kernel here?

Each check answers in plain words and, when it fails, says what to do.  The install line it gives is the one for
this machine's driver: the newest CUDA version the driver supports (what ``nvidia-smi`` prints as "CUDA
Version") picks the CUDA 12 or the CUDA 13 packages, with the pins this project's metadata declares.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import re
from dataclasses import dataclass

from gpuatlas.probes.kit.numba_kit import GPU_EXTRA, _why, numba_problem


@dataclass
class Check:
    name: str
    ok: bool | None  # None: skipped
    detail: str
    fix: str = ""
    required: bool = True




#: CUDA 13 drivers (580 or newer) and CUDA 12 ones (525 to 575) each have their extra.
EXTRAS = {13: "cuda13", 12: "cuda12"}
#: The cuda12 extra's floor: CUDA 12 compilers that build every kernel (NVRTC 12.0 cannot: FP8 mma.sync, sparse
#: wgmma and some Hopper PTX came later) and leave the process's text encoding alone (NVRTC 12.4 builds every
#: kernel but leaves its thread in the C locale, after which Python reads the UTF-8 kernel files as ASCII).
CUDA12_FLOOR = (12, 6)
#: The CUDA 12 compilers whose PTX a driver must JIT (NVRTC; NVVM and ptxas; nvJitLink), capped at the driver.
CUDA12_COMPILERS = ("nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvcc-cu12", "nvidia-nvjitlink-cu12")


def driver_cuda() -> tuple[int, int] | None:
    """The newest CUDA version the installed driver supports, as (major, minor), read through NVML or else the
    driver API (``cuDriverGetVersion`` in libcuda; neither needs CuPy nor a CUDA context); None without one."""
    for read in (_nvml_cuda_version, _libcuda_cuda_version):
        try:
            version = read()
        except Exception:  # no such library, no driver behind it: try the next way, else there is none
            continue
        if version > 0:
            return version // 1000, version % 1000 // 10
    return None


def _nvml_cuda_version() -> int:
    import pynvml

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlSystemGetCudaDriverVersion())
    finally:
        pynvml.nvmlShutdown()


def _libcuda_cuda_version() -> int:
    version = ctypes.c_int(0)
    if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) != 0:
        raise OSError("cuDriverGetVersion failed")
    return version.value


def extra_for(cuda: tuple[int, int] | None) -> str:
    """The extra for a driver of CUDA ``cuda``; without a driver, the one whose CuPy is installed (else cuda13,
    which the gpu extra names)."""
    if cuda is not None:
        return EXTRAS.get(cuda[0], "cuda13")
    return "cuda12" if _installed("cupy-cuda12x") else "cuda13"


def install_line(cuda: tuple[int, int] | None) -> str:
    """The command that installs gpuatlas's GPU packages for a driver of CUDA ``cuda``, in the repository.

    On CUDA 12 the compilers are capped at the driver's own CUDA version (and at least the floor), so none
    writes PTX newer than the driver can JIT."""
    extra = extra_for(cuda)
    line = f"pip install -e '.[{extra}]'"
    if extra == "cuda12" and cuda is not None:
        cap = f"<12.{max(cuda[1], CUDA12_FLOOR[1]) + 1}"
        line += "".join(f" '{name}{cap}'" for name in CUDA12_COMPILERS)
    return line


def pinned(package: str, extra: str) -> str:
    """``package`` as this project's installed metadata requires it in ``extra`` (its pin, e.g.
    ``numba-cuda==0.30.4``), else in any extra; just the name where no extra has it or gpuatlas is not
    installed."""
    try:
        requirements = importlib.metadata.requires("gpuatlas") or []
    except importlib.metadata.PackageNotFoundError:
        return package
    found = {}
    for requirement in requirements:
        spec, _, marker = requirement.partition(";")
        name = re.match(r"[A-Za-z0-9._-]+", spec.strip())
        in_extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        if name and in_extra and _canonical(name.group()) == _canonical(package):
            found[in_extra.group(1)] = spec.strip()
    return found.get(extra) or next(iter(found.values()), package)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _missing(check: str, package: str, exc: ImportError) -> Check:
    """A check failed because a Python package is not installed: name the package and the line that installs it
    on this machine, then the package alone with this project's pin."""
    cuda = driver_cuda()
    return Check(check, False, f"the Python package {package} is not installed ({_why(exc)})",
                 f"{install_line(cuda)}   (or just this package: pip install '{pinned(package, extra_for(cuda))}')")


#: Distributions built for one CUDA version, and how far a driver must reach for each: CuPy's wheel and
#: cuda-bindings name only a major (any driver of that major runs them), the compilers a major.minor (their PTX
#: is JIT-compiled by the driver, which takes no newer PTX than its own CUDA version's).
BUILT_FOR = {"cupy-cuda13x": "13", "cupy-cuda12x": "12", "cuda-bindings": "major",
             "nvidia-cuda-nvrtc": "minor", "nvidia-nvvm": "minor", "nvidia-cuda-nvrtc-cu12": "minor",
             "nvidia-cuda-nvcc-cu12": "minor", "nvidia-nvjitlink-cu12": "minor"}


def too_new(cuda: tuple[int, int]) -> list[tuple[str, str, str]]:
    """(distribution, version, the CUDA it needs) of each installed CUDA package a driver of ``cuda`` cannot
    run."""
    found = []
    for name, kind in BUILT_FOR.items():
        version = _installed(name)
        if version is None:
            continue
        numbers = [int(n) for n in re.findall(r"\d+", version)[:2]] + [0]
        needs = ((int(kind), 0) if kind.isdigit() else (numbers[0], 0) if kind == "major"
                 else (numbers[0], numbers[1]))
        if needs > cuda:
            found.append((name, version, f"{needs[0]}.x" if kind != "minor" else f"{needs[0]}.{needs[1]}"))
    return found


def check_driver() -> Check:
    try:
        import pynvml
    except ImportError as exc:
        return _missing("NVIDIA driver", "nvidia-ml-py", exc)
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return Check("NVIDIA driver", False, f"no NVIDIA driver answers on this machine (NVML: {_why(exc)})",
                     "run on a machine with an NVIDIA GPU and its driver (nvidia-smi must work)")
    try:
        count = pynvml.nvmlDeviceGetCount()
        driver = pynvml.nvmlSystemGetDriverVersion()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    finally:
        pynvml.nvmlShutdown()
    names = [n.decode() if isinstance(n, bytes) else n for n in names]
    driver = driver.decode() if isinstance(driver, bytes) else driver
    cuda = driver_cuda()
    supports = f" (supports CUDA {cuda[0]}.{cuda[1]})" if cuda else ""
    return Check("NVIDIA driver", count > 0, f"driver {driver}{supports}, {count} GPU(s): {', '.join(names)}",
                 "" if count else "no GPU visible: check CUDA_VISIBLE_DEVICES")


def check_cuda_packages() -> Check:
    """Can this driver run the CUDA packages installed here?  Names the install line for it either way."""
    cuda = driver_cuda()
    if cuda is None:
        return Check("CUDA packages", None, "no NVIDIA driver on this machine, so no CUDA version to install for",
                     "on the GPU machine, gpuatlas doctor prints the install line for its driver", required=False)
    version, line = f"{cuda[0]}.{cuda[1]}", install_line(cuda)
    if cuda[0] < 12:
        return Check("CUDA packages", False, f"the driver supports CUDA {version}; gpuatlas needs a driver of "
                     "CUDA 12 (525 or newer) or CUDA 13 (580 or newer)", "update the NVIDIA driver")
    newer = too_new(cuda)
    if newer:
        other_major = [name for name, _, needs in newer if not needs.startswith(f"{cuda[0]}.")]
        listed = ", ".join(f"{name} {v} (CUDA {needs})" for name, v, needs in newer)
        return Check("CUDA packages", False, f"{listed} {'was' if len(newer) == 1 else 'were'} built for a newer "
                     f"CUDA than this driver supports (CUDA {version})",
                     (f"pip uninstall -y {' '.join(other_major)} && " if other_major else "") + line)
    below = (f"; the kernels need CUDA {CUDA12_FLOOR[0]}.{CUDA12_FLOOR[1]} compilers, which reach this driver "
             "through CUDA's minor version compatibility (untested here)" if cuda[0] == 12 and cuda < CUDA12_FLOOR
             else "")
    return Check("CUDA packages", True, f"the driver supports CUDA {version}; its install line: {line}{below}")


_NO_DRIVER = "run on a machine with a CUDA GPU; see the NVIDIA driver check"


def check_cupy() -> Check:
    cuda = driver_cuda()
    try:
        import cupy
    except ImportError as exc:
        return _missing("CuPy", "cupy-cuda12x" if extra_for(cuda) == "cuda12" else "cupy-cuda13x", exc)
    try:
        kernel = cupy.RawKernel(r'extern "C" __global__ void add_one(int* a) { a[threadIdx.x] += 1; }',
                                "add_one")
        a = cupy.arange(32, dtype=cupy.int32)
        kernel((1,), (32,), (a,))
        if not bool((a == cupy.arange(1, 33, dtype=cupy.int32)).all()):
            return Check("CuPy", False, "a kernel ran but computed the wrong answer", "report this GPU/driver")
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else name
        mixed = _own_kernels_problem(cupy)
        if mixed:
            return Check("CuPy", False, mixed, f"measure from an environment whose CUDA packages are all of one CUDA "
                                               f"version, as installed by: {install_line(cuda)}")
        return Check("CuPy", True, f"cupy {cupy.__version__} compiled and ran a kernel and its own reductions "
                                   f"on {name}")
    except Exception as exc:
        if cuda is None:
            return Check("CuPy", False, f"no NVIDIA driver to launch a kernel on ({_why(exc)})", _NO_DRIVER)
        fix = (f"install the NVRTC that matches CuPy and this driver: {install_line(cuda)}"
               if "nvrtc" in str(exc).lower() else _NO_DRIVER)
        return Check("CuPy", False, f"cannot compile and launch a kernel ({_why(exc)})", fix)


#: Where a compile error quotes a CUDA header: the include directory CuPy handed NVRTC.
_HEADER_DIR = re.compile(r"(/[^\s\"'()]+?)/[\w.-]+\.(?:h|hpp|cuh)\(\d+\)")


def _own_kernels_problem(cupy) -> str | None:
    """CuPy compiles its own kernels (reductions, here a column sum) with its NVRTC and the CUDA headers it finds
    through cuda-pathfinder; with a second CUDA version's packages in the environment (a CUDA 13 toolkit beside
    CUDA 12 wheels, say) NVRTC reads the other version's headers and fails, though a plain kernel compiles."""
    try:
        cupy.arange(64, dtype=cupy.float32).reshape(8, 8).sum(axis=0)
        cupy.cuda.Stream.null.synchronize()
        return None
    except Exception as exc:
        text = str(exc)
        where = _HEADER_DIR.search(text)
        version = ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
        first = next((line.strip() for line in text.splitlines() if "error" in line), _why(exc))
        return (f"CuPy's own kernels do not compile: NVRTC {version} failed on the CUDA headers of "
                f"{where.group(1) if where else 'its include path'} ({first}); another CUDA version's packages in "
                "this environment put their headers first on CuPy's path")


def check_numba() -> Check:
    problem = numba_problem()
    if problem:
        detail, _, fix = problem.partition(". Fix: ")
        missing = re.match(r"the Python package (\S+) is not installed", detail)
        if missing or not fix:  # the machine's install line, and the package with this project's pin
            cuda = driver_cuda()
            fix = install_line(cuda) + (f"   (or just this package: pip install "
                                        f"'{pinned(missing.group(1), extra_for(cuda))}')" if missing else "")
        return Check("Numba CUDA", False, detail, fix)
    try:
        import numpy as np
        from numba import cuda

        @cuda.jit
        def add_one(a):
            a[cuda.threadIdx.x] += 1

        a = cuda.to_device(np.arange(32, dtype=np.int32))
        add_one[1, 32](a)
        ok = bool((a.copy_to_host() == np.arange(1, 33)).all())
        import numba

        return Check("Numba CUDA", ok, f"numba {numba.__version__} compiled and ran a kernel"
                     if ok else "a kernel ran but computed the wrong answer")
    except Exception as exc:
        if driver_cuda() is None:
            return Check("Numba CUDA", False, f"compiles; no NVIDIA driver to launch on ({_why(exc)})", _NO_DRIVER)
        return Check("Numba CUDA", False, f"compiles but cannot launch ({_why(exc)})", _NO_DRIVER)


def check_triton() -> Check:
    try:
        import triton
        import triton.language as tl
    except ImportError as exc:
        return Check("Triton", None, f"the Python package triton is not installed ({_why(exc)})",
                     f"pip install '{pinned('triton', extra_for(driver_cuda()))}'", required=False)
    try:
        import torch
    except ImportError:
        return Check("Triton", None, f"triton {triton.__version__} imports; launching needs the Python "
                     "package torch, which is not installed",
                     "gpuatlas installs no torch (each torch wheel is built for one CUDA version): install the torch "
                     f"whose wheel requires triton=={triton.__version__}, built for this driver's CUDA", required=False)
    try:
        @triton.jit
        def add_one(ptr, n: tl.constexpr):
            offs = tl.arange(0, n)
            tl.store(ptr + offs, tl.load(ptr + offs) + 1)

        a = torch.arange(32, dtype=torch.int32, device="cuda")
        add_one[(1,)](a, 32)
        ok = bool((a.cpu() == torch.arange(1, 33, dtype=torch.int32)).all())
        return Check("Triton", ok, f"triton {triton.__version__} compiled and ran a kernel", required=False)
    except Exception as exc:
        return Check("Triton", False, f"cannot compile and launch a kernel ({_why(exc)})",
                     "check that triton matches the installed torch and CUDA", required=False)


def run_checks() -> list[Check]:
    return [check_driver(), check_cuda_packages(), check_cupy(), check_numba(), check_triton()]
