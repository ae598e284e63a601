"""A probe that faults on purpose (test-only): a kernel stores through a wild pointer."""
import numpy as np


def illegal_address(ctx, **params):
    import cupy

    store = cupy.RawKernel(r'extern "C" __global__ void wild(unsigned long long a) { *(int*)a = 1; }', "wild")
    store((1,), (1,), (np.uint64(0xDEAD0000000),))
    cupy.cuda.Device().synchronize()  # raises cudaErrorIllegalAddress; the context is lost for good
    return []
