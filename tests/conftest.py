import os
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("MPLBACKEND", "Agg")

# The same examples on every run and every machine: a property test fails for a reason anyone can replay.
settings.register_profile("gpuatlas", derandomize=True, database=None, deadline=None)
settings.load_profile("gpuatlas")

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


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def committed_run():
    from analysis.results import load_run

    meta, measurements = load_run(COMMITTED_RUN)
    return meta, measurements


@pytest.fixture(scope="session")
def committed_figures(committed_run):
    """Every report figure of the committed run, drawn and laid out once per test session ({file stem: Figure}),
    from its committed derived.csv (test_committed_run checks that it is what derive() gives)."""
    import matplotlib.pyplot as plt

    from analysis.render import _figure_specs, draw_figures
    from analysis.results import RunDir

    meta, measurements = committed_run
    drawn = {spec.stem: fig for spec, fig in draw_figures(meta, measurements, RunDir(COMMITTED_RUN).read_derived(),
                                                          _figure_specs(measurements))}
    yield drawn
    for fig in drawn.values():
        plt.close(fig)


@pytest.fixture(scope="session")
def committed_report(tmp_path_factory):
    """The committed run's report, rendered once for the whole test run by `gpuatlas report` with no
    arguments (its default): ``(index.html, derived quantities)``; the derive is observed, not repeated."""
    import analysis.derive
    from gpuatlas.cli import main
    from tests_support import tree_digest

    derive, seen = analysis.derive.derive, []

    def observed(meta, measurements, **kwargs):
        seen.append(derive(meta, measurements, **kwargs))
        return seen[-1]

    out = tmp_path_factory.mktemp("committed-report")
    before = tree_digest(COMMITTED_RUN)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(analysis.derive, "derive", observed)
        assert main(["report", "--out", str(out)]) == 0
    assert tree_digest(COMMITTED_RUN) == before, "rendering never writes into the run"
    (page,) = out.glob("*/index.html")
    (derived,) = seen
    return page, derived
