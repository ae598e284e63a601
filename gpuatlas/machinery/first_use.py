"""What a JIT backend's first use in a probe reads from disk, read ahead by a run's compile workers while the GPU
measures: on a freshly started machine nothing of it is in the page cache yet.  CPU and disk only: no CUDA
context, nothing launched.

* Numba: its first kernel loads libNVVM and reads libdevice; a compile worker compiles a one-line kernel to PTX
  for the device's compute capability (``numba_ptx``), which reads both.
* torch: its first CUDA operations and cuBLAS's first product page in torch's CUDA library and cuBLAS's
  kernels (hundreds of MB); ``readahead`` asks the kernel to read those files into the page cache
  (``posix_fadvise`` WILLNEED: the reading happens in the kernel's background, this worker does not wait).
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

#: Shared libraries torch's first CUDA operations and first matmul page in (by file name prefix).
TORCH_CUDA_LIBRARIES = ("libtorch_cuda", "libc10_cuda", "libcublas", "libcudart")


def numba_ptx(capability: int) -> None:
    """Compile a one-line Numba kernel to PTX for compute capability ``capability`` (e.g. 90)."""
    from numba import cuda, types

    def store_one(a):
        a[0] = 1

    cuda.compile_ptx(store_one, (types.int64[:],), cc=divmod(capability, 10))


def torch_libraries() -> list[Path]:
    """TORCH_CUDA_LIBRARIES as installed: torch's own lib folder and the NVIDIA wheels' (found without
    importing either package)."""
    folders = []
    for package in ("torch", "nvidia"):
        spec = importlib.util.find_spec(package)
        folders += [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    return sorted({path for folder in folders for path in folder.rglob("lib*.so*")
                   if path.name.startswith(TORCH_CUDA_LIBRARIES) and path.is_file()})


def readahead(paths: list[Path]) -> int:
    """Ask the kernel to read ``paths`` into the page cache; returns how many it was asked for."""
    asked = 0
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            asked += 1
        finally:
            os.close(fd)
    return asked
