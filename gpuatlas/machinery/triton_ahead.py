"""Triton kernels compiled ahead: what the Triton probes will compile, built by a run's compile workers into
Triton's on-disk cache (kernel and launcher) while the GPU measures, so the probe finds them there.

A probe's Triton launch compiles on a miss of Triton's cache, whose key is the kernel's source, its
specialization (argument types, 16-byte alignment of pointers, integers divisible by 16 or equal to 1), its
constexprs and options (num_warps, num_stages, debug), the target (backend, compute capability, warp size),
ptxas's version and the TRITON_* environment: nothing of the process or the device beyond the target.  A
compile worker binds the same arguments through the kernel's own binder (``warmup``) under a driver that
answers the device's target and owns no GPU, so it makes no CUDA context and launches nothing; its key is the
probe's key.  Then it builds the kernel's C launcher and Triton's driver utilities (gcc, cached on disk too).

``PLANS`` mirrors how each Triton probe launches (tests/test_triton_ahead.py runs the probes with faked
tensors and checks that their launches are the plan's).  A plan that drifts costs time only: the probe then
compiles for itself, as without it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

#: Triton's warp size on NVIDIA GPUs (its CUDA driver's target says so too).
WARP_SIZE = 32


@dataclass(frozen=True)
class Pointer:
    """A tensor argument as Triton's binder sees one: its element type (a triton.language dtype's name) and a
    16-byte-aligned address (torch's allocations are 512-byte aligned, so every probe tensor is)."""

    dtype_name: str

    @property
    def dtype(self):
        import triton.language as tl

        return getattr(tl, self.dtype_name)

    @staticmethod
    def data_ptr() -> int:
        return 0


BF16, FP32 = Pointer("bfloat16"), Pointer("float32")


def matmul_launch(m: int, n: int, k: int, block_m: int, block_n: int, block_k: int, group_m: int,
                  num_warps: int, num_stages: int) -> tuple:
    """``matmul_kernel`` as torch_kit.triton_matmul launches it on contiguous bf16 A (m x k), B (k x n), C."""
    return ("matmul_kernel", (BF16, BF16, BF16, m, n, k, k, 1, n, 1, n, 1),
            {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": group_m,
             "num_warps": num_warps, "num_stages": num_stages})


def _library(module, configs: list[dict], device: dict) -> list[tuple]:
    return [matmul_launch(side, side, side, *cfg[:3], module.GROUP_M, *cfg[3:])
            for side in sorted({int(c["matrix_side"]) for c in configs if c["impl"] == "triton"})
            for cfg in module.library_configs(device)]


def _roofline(module, configs: list[dict], device: dict) -> list[tuple]:
    return [matmul_launch(int(c["matrix_side"]), int(c["matrix_side"]), int(c["matrix_side"]), int(c["block"]),
                          int(c["block"]), int(c["block"]), 1, module.roofline_warps(int(c["block"])), 2)
            for c in configs]


def _lecture_tile(module, configs: list[dict], device: dict) -> list[tuple]:
    return [matmul_launch(int(c["matrix_side"]), int(c["matrix_side"]), int(c["matrix_side"]),
                          *module.LECTURE_TILE, 1, module.LECTURE_WARPS, module.LECTURE_STAGES) for c in configs]


def _waves(module, configs: list[dict], device: dict) -> list[tuple]:
    """One launch: N = BLOCK_N x tiles is a multiple of 16 for every tile count, so Triton builds one kernel."""
    bm, bn, bk, warps, stages = module.WAVE_TILE
    return [matmul_launch(bm, bn * int(c["tiles"]), module.WAVE_K, bm, bn, bk, 1, warps, stages) for c in configs[:1]]


def _softmax(module, configs: list[dict], device: dict) -> list[tuple]:
    """fusion.py's kernels on a square bf16 matrix of ``matrix_side``: one program per row, BLOCK its next
    power of two."""
    launches = []
    for c in configs:
        side = int(c["matrix_side"])
        opts = {"BLOCK": 1 << (side - 1).bit_length(), "num_warps": module.NUM_WARPS}
        if c["variant"] == "unfused":
            launches += [("row_max_kernel", (BF16, FP32, side, side), opts),
                         ("exp_sum_kernel", (BF16, FP32, BF16, FP32, side, side), opts),
                         ("normalize_kernel", (BF16, FP32, BF16, side, side), opts)]
        else:
            launches.append(("softmax_kernel", (BF16, BF16, side, side), opts))
    return launches


#: Probe id -> plan(probe module, configs to measure, device) -> the launches it compiles, each
#: ``(kernel name in probes/kit/triton_kernels.py, positional arguments, keyword arguments)``.
PLANS: dict[str, Callable] = {"matmul.library": _library, "matmul.roofline": _roofline,
                              "fusion.softmax": _softmax, "matmul.lecture_tile": _lecture_tile,
                              "matmul.waves": _waves}


def triton_jobs(probe, configs: list[dict], device: dict) -> list[tuple]:
    """Compile jobs ``("triton", kernel, args, kwargs, capability)`` of ``probe``'s configs (none without a
    plan), plus ``("triton-utils",)``: Triton's driver utilities, which its first launch in a process builds."""
    import sys

    plan = PLANS.get(probe.id)
    if plan is None or not configs:
        return []
    capability = int(device["compute_capability"].replace(".", ""))
    try:
        launches = dict.fromkeys((name, args, tuple(sorted(kwargs.items())))
                                 for name, args, kwargs in plan(sys.modules[probe.func.__module__], configs, device))
    except Exception:  # a plan that no longer fits its probe: the probe compiles for itself
        return []
    return [("triton-utils",), *(("triton", name, args, kwargs, capability) for name, args, kwargs in launches)]


class CompileOnlyDriver:
    """Triton's active driver in a compile worker: the target of the device the run measures (Triton's CUDA
    driver reads it from torch, which would initialize CUDA here), device 0, no stream; it owns no GPU."""

    def __init__(self, capability: int):
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", capability, WARP_SIZE)

    def get_current_target(self):
        return self.target

    @staticmethod
    def get_current_device() -> int:
        return 0

    @staticmethod
    def get_current_stream(device: int) -> int:
        return 0


def compile_kernel(name: str, args: tuple, kwargs: tuple, capability: int):
    """Compile ``name`` of probes/kit/triton_kernels.py for ``args`` into Triton's cache, launching nothing;
    returns the compiled kernel."""
    from triton.runtime.driver import driver

    from gpuatlas.probes.kit import triton_kernels

    previous = driver._active  # not reset_active(): that would make Triton's default driver, torch's
    driver.set_active(CompileOnlyDriver(capability))
    try:
        return getattr(triton_kernels, name).warmup(*args, grid=(1,), **dict(kwargs))
    finally:
        driver.set_active(previous)


def compile_launch(name: str, args: tuple, kwargs: tuple, capability: int) -> None:
    """The compile job: the kernel, then its C launcher (built into Triton's cache and loaded, not run)."""
    from triton.backends.nvidia.driver import CudaLauncher

    kernel = compile_kernel(name, args, kwargs, capability)
    CudaLauncher(kernel.src, kernel.metadata)


def build_utils() -> None:
    """Triton's CUDA driver utilities (a C module it builds with gcc on first use): built into its cache."""
    from triton.backends.nvidia.driver import CudaUtils

    CudaUtils()
