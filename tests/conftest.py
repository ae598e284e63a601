import os
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("MPLBACKEND", "Agg")

# The same examples on every run and every machine: a property test fails for a reason anyone can replay.
settings.register_profile("gpuatlas", derandomize=True, database=None, deadline=None)
settings.load_profile("gpuatlas")


#: Where the workers of one test run keep what they compiled and disassembled, for each other: beside their own
#: temporary folders (pytest prunes it with them); set in ``pytest_configure``, none in a run of one process.
_SHARED: dict = {}


def _shared(kind: str, key: str, make, encode, decode):
    """``make()``, or what a worker of this test run stored under ``key`` after making it (written whole by
    rename, so a reader never sees a part of it; two workers making it at once both write the same bytes)."""
    folder = _SHARED.get("folder")
    if folder is None:
        return make()
    path = folder / f"{key}.{kind}"
    if path.exists():
        return decode(path.read_bytes())
    value = make()
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_bytes(encode(value))
    os.replace(partial, path)
    return value


def _compile_once_per_content() -> None:
    """Many tests read the same kernel file's cubin and SASS: a test run compiles a given text for a given
    target (and disassembles a given cubin) once, in whichever worker needs it first.  The keys are the
    contents, so a test that compiles an edited copy (a negative control) still compiles its own text; the SASS
    dict is copied, so no test sees another's edits.  Installed before any test module imports these names."""
    import functools
    import hashlib
    import json
    import pickle

    import gpuatlas.probes.kit.cuda as cuda

    compile_cubin, sass = cuda.compile_cubin, cuda.sass

    @functools.lru_cache(maxsize=None)
    def compiled(name, text, arch, options):
        key = hashlib.sha256("\0".join([name, text, arch, *options]).encode()).hexdigest()
        return _shared("cubin", key, lambda: compile_cubin(name, arch), pickle.dumps, pickle.loads)

    def compile_cached(name: str, arch: str = "sm_90") -> tuple[bytes, str]:
        return compiled(name, cuda.source(name), arch, (*cuda.NVRTC_OPTIONS, *cuda.CUPY_IMPLICIT_OPTIONS))

    @functools.lru_cache(maxsize=None)
    def disassembled(cubin: bytes) -> dict[str, str]:
        return _shared("sass", hashlib.sha256(cubin).hexdigest(), lambda: sass(cubin),
                       lambda code: json.dumps(code).encode(), json.loads)

    def sass_cached(cubin: bytes) -> dict[str, str]:
        return dict(disassembled(cubin))

    cuda.compile_cubin, cuda.sass = functools.wraps(compile_cubin)(compile_cached), functools.wraps(sass)(sass_cached)


_compile_once_per_content()

REPO = Path(__file__).resolve().parents[1]
COMMITTED_RUN = REPO / "reports" / "h200"
#: A run in results schema 1 (session 3's quick run, kept as a fixture of the old format): older runs must load.
SCHEMA1_RUN = REPO / "tests" / "fixtures" / "schema1-run"


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


#: Session fixtures worth computing once per test run: under pytest-xdist each worker has its own session, so
#: the tests that use one go to one worker (``--dist loadgroup``), which computes it once.
SHARED_FIXTURES = ("committed_report", "committed_figures", "simulated_quick_run")
#: Files of the longest single tests: started first, so that no worker is left running one at the end.
SLOW_FIRST = ("test_declarations.py", "test_reliability.py", "test_new_gpu.py", "test_numba_sim.py",
              "test_smem_banks_sim.py", "test_fleet.py")


def _group(item) -> str | None:
    """The xdist group of ``item``: its shared session fixture's, else its module's where it uses a fixture
    made once per module (so one worker makes it), else none (the test goes wherever a worker is free)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    shared = [name for name in SHARED_FIXTURES if name in defs]
    if shared:
        return shared[0]
    if any(fixturedefs[-1].scope == "module" for fixturedefs in defs.values()):
        return item.module.__name__
    return None


def _group_names(item) -> set[str]:
    """The xdist groups an item is marked with, named as pytest-xdist names them (it joins several into one)."""
    return {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}


def _serialize_gpu_tests(items) -> None:
    """Tests that time the GPU must never share it: every ``gpu``-marked test gets the same xdist groups (at
    least "gpu"), so ``--dist loadgroup`` sends them all to one worker, which runs them one at a time, whatever
    ``-n`` is."""
    gpu = [item for item in items if "gpu" in item.keywords]
    names = {"gpu"}.union(*(_group_names(item) for item in gpu))
    for item in gpu:
        for name in sorted(names - _group_names(item)):
            item.add_marker(pytest.mark.xdist_group(name))


def pytest_configure(config):
    if hasattr(config, "workerinput") and config.option.basetemp:  # a pytest-xdist worker: its folder's parent
        _SHARED["folder"] = Path(config.option.basetemp).parent / "kernels"  # is the whole test run's


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    gpu = _gpu_available()
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "gpu" not in item.keywords and not any(item.iter_markers("xdist_group")) and _group(item):
            item.add_marker(pytest.mark.xdist_group(_group(item)))
    _serialize_gpu_tests(items)  # one group for every GPU test, whose worker makes their module fixtures once
    items.sort(key=lambda item: item.path.name not in SLOW_FIRST)  # stable: otherwise in collection order


@pytest.fixture(scope="session")
def committed_run():
    from gpuatlas.analysis.results import load_run

    meta, measurements = load_run(COMMITTED_RUN)
    return meta, measurements


@pytest.fixture
def committed_derive_shared(monkeypatch, committed_run, committed_report):
    """compare's derive of the committed run answered by the session's one derive of it (the committed report's,
    which test_committed_run checks against derived.csv): the same frame, not made again; other runs as ever."""
    import gpuatlas.analysis.compare as compare

    derived_for = compare.derived_for

    def shared(run, *args, **kwargs):
        if Path(run.path).resolve() == COMMITTED_RUN.resolve():
            return committed_run[0], committed_run[1], committed_report[1]
        return derived_for(run, *args, **kwargs)

    monkeypatch.setattr(compare, "derived_for", shared)


@pytest.fixture(scope="session")
def committed_figures(committed_run):
    """Every report figure of the committed run, drawn and laid out once per test session ({file stem: Figure}),
    from its committed derived.csv (test_committed_run checks that it is what derive() gives)."""
    import matplotlib
    import matplotlib.pyplot as plt

    from gpuatlas.analysis.figure_job import draw_figures
    from gpuatlas.analysis.report_figures import figure_specs
    from gpuatlas.analysis.results import RunDir

    meta, measurements = committed_run
    # every report figure stays open for the session: more than matplotlib's 20 is the point, not a leak
    previous, matplotlib.rcParams["figure.max_open_warning"] = matplotlib.rcParams["figure.max_open_warning"], 0
    drawn = {spec.stem: fig for spec, fig in draw_figures(meta, measurements, RunDir(COMMITTED_RUN).read_derived(),
                                                          figure_specs(measurements))}
    yield drawn
    for fig in drawn.values():
        plt.close(fig)
    matplotlib.rcParams["figure.max_open_warning"] = previous


@pytest.fixture(scope="session")
def committed_report(tmp_path_factory):
    """The committed run's report, rendered once for the whole test run by `gpuatlas report` with no
    arguments (its default): ``(index.html, derived quantities)``; the derive is observed, not repeated."""
    import gpuatlas.analysis.derive
    from gpuatlas.cli import main
    from tests_support import tree_digest

    derive, seen = gpuatlas.analysis.derive.derive, []

    def observed(meta, measurements, **kwargs):
        seen.append(derive(meta, measurements, **kwargs))
        return seen[-1]

    out = tmp_path_factory.mktemp("committed-report")
    before = tree_digest(COMMITTED_RUN)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gpuatlas.analysis.derive, "derive", observed)
        assert main(["report", "--out", str(out)]) == 0
    assert tree_digest(COMMITTED_RUN) == before, "rendering never writes into the run"
    (page,) = out.glob("*/index.html")
    (derived,) = seen
    return page, derived


@pytest.fixture(scope="session")
def simulated_quick_run(tmp_path_factory):
    """A quick run of every simulated probe (tests/fakes/), measured once for the test run by the runner as
    `gpuatlas run` measures, in its worker process: ``(RunDir, probes)``.  Read it; damage only a copy."""
    from fakes import DEVICE, simulated_probes
    from gpuatlas.machinery import runner

    probes = simulated_probes()
    run, meta = runner.new_run(tmp_path_factory.mktemp("simulated-quick"), DEVICE, {"python": "3"}, probes,
                               "quick", {}, 0, ["gpuatlas", "run"])
    runner.execute(run, meta, probes)
    return run, probes
