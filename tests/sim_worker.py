"""Simulated probes that log the process measuring them (tests/test_reliability.py counts the workers)."""
import dataclasses
import os

import fakes


def _log(probe_id: str) -> None:
    with open(os.environ["GPUATLAS_TEST_PID_LOG"], "a") as log:
        log.write(f"{probe_id} {os.getpid()}\n")


def clock(ctx, **params):
    _log("clock.sm")
    return fakes.FAKES["clock.sm"](ctx, **params)


def launch(ctx, **params):
    _log("launch.overhead")
    return fakes.FAKES["launch.overhead"](ctx, **params)


def smem(ctx, **params):
    _log("chase.smem")
    return fakes.FAKES["chase.smem"](ctx, **params)


def cupy_settings(ctx, **params):
    """clock.sm's samples, each flagged with the CuPy compile switch of the worker's environment."""
    flag = f"pch={os.environ.get('CUPY_NVRTC_USE_PCH')}"
    return [dataclasses.replace(s, flag=flag) for s in fakes.FAKES["clock.sm"](ctx, **params)]


def numba_chase(ctx, **params):
    """chase.latency_numba's samples, logged with the modules its worker had imported before the probe came."""
    import sys

    _log("chase.latency_numba")
    with open(os.environ["GPUATLAS_TEST_PID_LOG"] + ".modules", "a") as log:
        log.write(" ".join(sorted(m for m in ("sim_worker", "json.tool") if m in sys.modules)) + "\n")
    return fakes.FAKES["chase.latency_numba"](ctx, **params)


def banks(ctx, **params):
    _log("smem.banks")
    return fakes.FAKES["smem.banks"](ctx, **params)
