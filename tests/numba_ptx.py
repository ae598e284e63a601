"""Print the PTX of the Numba chase kernel built by the NVVM library given (``python tests/numba_ptx.py NVVM
LIBDEVICE FLAVOUR``): in a process of its own, since one process loads one ``libnvvm.so.4``."""
import ctypes
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))


def main(nvvm: str, libdevice: str, flavour: str) -> None:
    # Loaded first, the library answers the soname lookup Numba's NVVM binding makes later.
    ctypes.CDLL(nvvm, mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)
    from numba.cuda import cuda_paths

    cuda_paths._get_libdevice_path = lambda: cuda_paths._env_path_tuple("argument", libdevice)
    from numba import cuda, types

    from gpuatlas.probes.families.chase_numba import make_chase_kernel
    from gpuatlas.probes.kit.numba_kit import gpu_primitives

    kernel = make_chase_kernel(cuda, *gpu_primitives(flavour))
    ptx, _ = cuda.compile_ptx(kernel.py_func, (types.uint64[:], types.uint64, types.int64, types.int64,
                                               types.uint64[:]), cc=(9, 0))
    print(ptx)


if __name__ == "__main__":
    main(*sys.argv[1:])
