"""A run's log holds gpuatlas's own lines: the Numba probes launch one block (or one warp) on purpose, and
Numba's performance warning about such a grid is silenced in the probe process.

No GPU here: device arrays are host arrays, so each probe gets as far as configuring its launch (where
Numba warns) and fails at the launch itself."""
import warnings

import numpy as np
import pytest

import fakes
from probes.harness import Budget, Context

numba_cuda = pytest.importorskip("numba.cuda")


@pytest.fixture
def no_gpu_launch(monkeypatch):
    from probes.doctor import numba_problem

    if numba_problem():
        pytest.skip(numba_problem())
    monkeypatch.setattr(numba_cuda, "device_array", lambda n, dtype: np.zeros(n, dtype))
    return Context(device=fakes.DEVICE, budget=Budget.for_profile("quick"), seed=0)


def launch_warnings(probe_call) -> list[str]:
    """Messages of every warning raised while ``probe_call`` configures (and fails to make) its launch."""
    from probes import chase_numba, smem_banks_numba

    for kernels in (chase_numba.gpu_kernel, smem_banks_numba.gpu_kernel):
        kernels.cache_clear()  # a fresh kernel: Numba warns once per kernel and launch configuration
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(Exception):  # noqa: B017 - no GPU: the launch fails after its configuration
            probe_call()
    return [str(w.message) for w in caught]


def numba_probe_calls(ctx, monkeypatch):
    from probes import chase_numba, smem_banks_numba

    monkeypatch.setattr(chase_numba, "measure_chase", lambda ctx, fp, stride, launch, timer: launch(0, 0, 32))
    return {
        "chase.latency_numba": lambda: chase_numba.chase_latency_numba(ctx, 4096, 128, "default"),
        "smem.banks_numba": lambda: smem_banks_numba.smem_banks_numba(ctx, 4, 1, 0, "latency"),
    }


def test_numba_probes_launch_without_performance_warnings(no_gpu_launch, monkeypatch):
    for probe_id, call in numba_probe_calls(no_gpu_launch, monkeypatch).items():
        messages = launch_warnings(call)
        assert not [m for m in messages if "under-utilization" in m], (probe_id, messages)


def test_numba_warns_about_a_one_block_grid_unless_silenced(no_gpu_launch, monkeypatch):
    """The negative control: without the filter, the same launches do warn."""
    from probes import chase_numba, smem_banks_numba

    monkeypatch.setattr(chase_numba, "quiet_numba", lambda: None)
    monkeypatch.setattr(smem_banks_numba, "quiet_numba", lambda: None)
    for probe_id, call in numba_probe_calls(no_gpu_launch, monkeypatch).items():
        assert any("under-utilization" in m for m in launch_warnings(call)), probe_id
