"""``gpuatlas doctor``: is a GPU reachable, and can each backend compile and launch a kernel here?

Each check answers in plain words and, when it fails, says what to do.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass
class Check:
    name: str
    ok: bool | None  # None: skipped
    detail: str
    fix: str = ""
    required: bool = True


#: Installs every Python package the GPU checks need (CuPy, Numba CUDA, nvidia-ml-py); run in the repository.
GPU_EXTRA = "pip install -e '.[gpu]'"


def _missing(check: str, package: str, exc: ImportError) -> Check:
    """A check failed because a Python package is not installed: name the package and the line that installs it."""
    return Check(check, False, f"the Python package {package} is not installed ({_why(exc)})",
                 f"{GPU_EXTRA}   (or just this package: pip install {package})")


def _why(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {lines[0] if lines else ''}".rstrip(": ")


@functools.lru_cache(maxsize=None)
def numba_problem() -> str | None:
    """Why Numba CUDA cannot compile kernels here, in plain words; None if it can (needs no GPU)."""
    try:
        import numpy as np
        from numba import cuda, types
    except ImportError as exc:
        package = "numba" if exc.name == "numba" else "numba-cuda"
        return (f"the Python package {package} is not installed ({_why(exc)}). Fix: {GPU_EXTRA}   "
                f"(or just this package: pip install {package})")

    def probe(a):
        a[0] = 1

    try:
        cuda.compile_ptx(probe, (types.int64[:],), cc=(9, 0))
    except AttributeError as exc:
        if "row_stack" in str(exc):
            import importlib.metadata

            version = importlib.metadata.version("numba-cuda")
            return (f"numba-cuda {version} cannot compile any kernel with numpy {np.__version__}: numpy 2.5 "
                    "removed np.row_stack, which numba-cuda overloads. Fix: install numpy<2.5 "
                    "(`pip install 'numpy<2.5'`; offline, put a numpy<2.5 wheel's install first on PYTHONPATH)")
        return f"Numba CUDA fails to compile a trivial kernel ({_why(exc)})"
    except Exception as exc:
        return f"Numba CUDA fails to compile a trivial kernel ({_why(exc)})"
    return None


def check_driver() -> Check:
    try:
        import pynvml
    except ImportError as exc:
        return _missing("NVIDIA driver", "nvidia-ml-py", exc)
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return Check("NVIDIA driver", False, f"NVML does not answer ({_why(exc)})",
                     "run on a machine with an NVIDIA GPU and its driver (nvidia-smi must work)")
    try:
        count = pynvml.nvmlDeviceGetCount()
        driver = pynvml.nvmlSystemGetDriverVersion()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    finally:
        pynvml.nvmlShutdown()
    names = [n.decode() if isinstance(n, bytes) else n for n in names]
    driver = driver.decode() if isinstance(driver, bytes) else driver
    return Check("NVIDIA driver", count > 0, f"driver {driver}, {count} GPU(s): {', '.join(names)}",
                 "" if count else "no GPU visible: check CUDA_VISIBLE_DEVICES")


def check_cupy() -> Check:
    try:
        import cupy
    except ImportError as exc:
        return _missing("CuPy", "cupy-cuda13x", exc)
    try:
        kernel = cupy.RawKernel(r'extern "C" __global__ void add_one(int* a) { a[threadIdx.x] += 1; }',
                                "add_one")
        a = cupy.arange(32, dtype=cupy.int32)
        kernel((1,), (32,), (a,))
        if not bool((a == cupy.arange(1, 33, dtype=cupy.int32)).all()):
            return Check("CuPy", False, "a kernel ran but computed the wrong answer", "report this GPU/driver")
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        name = name.decode() if isinstance(name, bytes) else name
        return Check("CuPy", True, f"cupy {cupy.__version__} compiled and ran a kernel on {name}")
    except Exception as exc:
        fix = ("install the NVRTC that matches CuPy (`pip install 'nvidia-cuda-nvrtc==13.0.*'`)"
               if "nvrtc" in str(exc).lower() else "run on a machine with a CUDA GPU; see the NVIDIA driver check")
        return Check("CuPy", False, f"cannot compile and launch a kernel ({_why(exc)})", fix)


def check_numba() -> Check:
    problem = numba_problem()
    if problem:
        detail, _, fix = problem.partition(". Fix: ")
        return Check("Numba CUDA", False, detail, fix or GPU_EXTRA)
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
        return Check("Numba CUDA", False, f"compiles but cannot launch ({_why(exc)})",
                     "run on a machine with a CUDA GPU; see the NVIDIA driver check")


def check_triton() -> Check:
    try:
        import triton
        import triton.language as tl
    except ImportError as exc:
        return Check("Triton", None, f"the Python package triton is not installed ({_why(exc)})",
                     "pip install triton", required=False)
    try:
        import torch
    except ImportError:
        return Check("Triton", None, f"triton {triton.__version__} imports; launching needs the Python "
                     "package torch, which is not installed",
                     "pip install torch", required=False)
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
    return [check_driver(), check_cupy(), check_numba(), check_triton()]
