"""The run command's own process imports no GPU library, compiler or analysis stack before its first probe:
the probes' packages load in their worker processes, Triton and Numba in compile workers, and the derivation
of the quantities once the run's end is recorded."""
import subprocess
import sys

#: Modules the run's parent process must not import on its way to the first probe.
NOT_BEFORE_FIRST_PROBE = ("torch", "triton", "numba", "cupy", "scipy", "matplotlib", "seaborn", "analysis.derive")

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
    """runner.execute names analysis.derive inside itself, after ``meta["ended"]`` is written."""
    import inspect

    from gpuatlas.machinery import runner

    source = inspect.getsource(runner.execute)
    assert source.index('meta["ended"] = _now()') < source.index("from analysis.derive import derive")
    assert "analysis.derive" not in inspect.getsource(runner).replace(source, "")
