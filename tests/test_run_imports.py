"""The run command's own process imports no GPU library, compiler or analysis stack before its first probe:
the probes' packages load in their worker processes, Triton and Numba in compile workers, and the derivation
of the quantities in deriving processes as families finish, and here once the run's end is recorded."""
import subprocess
import sys

#: Modules the run's parent process must not import on its way to the first probe.
NOT_BEFORE_FIRST_PROBE = ("torch", "triton", "numba", "cupy", "scipy", "matplotlib", "seaborn",
                          "gpuatlas.analysis.derive")

PARENT = """
import sys
from gpuatlas.cli import parser
from gpuatlas.machinery import first_use, runner, triton_ahead, workers
import gpuatlas.commands
parser().parse_args(["run", "--profile", "quick"])
print(" ".join(sorted(sys.modules)))
"""


def test_the_run_path_leaves_heavy_modules_to_the_workers():
    loaded = set(subprocess.run([sys.executable, "-c", PARENT], capture_output=True, text=True, check=True,
                                timeout=120).stdout.split())
    assert "gpuatlas.machinery.runner" in loaded  # the negative control: the probe sees the modules
    assert not [m for m in NOT_BEFORE_FIRST_PROBE if m in loaded]


def test_execute_imports_the_derivation_only_after_the_run_ends():
    """runner.execute names gpuatlas.analysis.derive inside itself, after ``meta["ended"]`` is written."""
    import inspect

    from gpuatlas.machinery import runner

    source = inspect.getsource(runner.execute)
    assert source.index('meta["ended"] = _now()') < source.index("from gpuatlas.analysis.derive import derive")
    assert "gpuatlas.analysis.derive" not in inspect.getsource(runner).replace(source, "")


def test_the_main_lane_worker_makes_its_cuda_context_as_it_starts(monkeypatch):
    """Where a CuPy probe has configs, the main lane's worker imports CuPy and makes its context (cudaFree(0))
    before its first probe comes; the jit lane's never does (the other worker may be measuring by then)."""
    import queue
    import signal
    import types

    import fakes
    from gpuatlas.machinery import workers
    from gpuatlas.probes.kit.harness import Budget
    from gpuatlas.probes.registry import all_probes

    probes = list(all_probes().values())
    pending = {p.id: [{}] for p in probes}
    assert workers.lanes(probes, pending, 16)[1]["main"] == ("cupy",)
    assert "cupy" not in workers.lanes(probes, pending, 16)[1]["jit"]
    only_jit = {p.id: ([{}] if p.backend != "cupy" else []) for p in probes}
    assert workers.lanes(probes, only_jit, 16)[1]["main"] == ()
    assert workers.lanes(fakes.simulated_probes(), pending, 16)[1]["main"] == ()

    freed = []
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(free=freed.append))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(signal, "signal", lambda *a: None)
    for name in ("NUMBA_DISABLE_PERFORMANCE_WARNINGS", "CUPY_NVRTC_USE_PCH"):
        monkeypatch.setenv(name, "1")
    tasks = queue.Queue()
    for prefetch in ((), ("cupy",)):
        tasks.put(None)  # stop at once
        workers._worker(Budget(), tasks, queue.Queue(), prefetch)
    assert freed == [0]
