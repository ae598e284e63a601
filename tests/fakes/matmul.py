"""The matmuls (probes/families/matmul.py): the libraries at a fraction of the tensor peak, the roofline
exactly."""
from __future__ import annotations

from fakes import HBM_READ, TC_PEAK, _flops

LIBRARY_FRACTION = {"cublas": 0.8, "triton": 0.7}


def _matmul_library(ctx, impl, matrix_side):
    return _flops(LIBRARY_FRACTION[impl] * TC_PEAK)


def _matmul_roofline(ctx, block, matrix_side):
    """Exactly the roofline: min(peak, BLOCK/2 x HBM bandwidth)."""
    return _flops(min(TC_PEAK, block / 2 * HBM_READ))


#: probe id -> its fake.
FAKES = {"matmul.library": _matmul_library, "matmul.roofline": _matmul_roofline}
