import os
from pathlib import Path

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
COMMITTED_RUN = REPO / "reports" / "h200"


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

    from analysis.render import draw_figures
    from analysis.results import RunDir

    meta, measurements = committed_run
    drawn = {spec.stem: fig for spec, fig in draw_figures(meta, measurements, RunDir(COMMITTED_RUN).read_derived())}
    yield drawn
    for fig in drawn.values():
        plt.close(fig)
