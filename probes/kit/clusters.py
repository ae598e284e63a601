"""Thread-block clusters (compute capability 9.0): a cluster launch, the driver's refusal of a cluster size
recorded as a ``cluster_refused`` sample (flagged ``invalid``, so no fit uses it), and the CUfunction attributes
a cluster kernel and a large dynamic shared-memory kernel set."""
from __future__ import annotations

from gpuatlas.probes.kit.harness import Sample

#: The largest cluster every cluster-capable GPU launches without an opt-in.
PORTABLE_CLUSTER = 8
#: CUfunction_attribute values the installed CuPy does not name.
NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def set_attribute(func, attribute: int, value: int) -> None:
    import cupy

    cupy.cuda.driver.funcSetAttribute(getattr(func, "kernel", func).ptr, attribute, value)


class ClusterRefused(Exception):
    """The driver would not launch a cluster of this size; ``status`` is its CUresult."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def cluster_launch(func, cluster_size: int, launch):
    """Run ``launch()`` (the first launch of a cluster kernel); a cluster size the driver refuses (or above
    the portable size without the opt-in) raises ClusterRefused with the driver's words."""
    import cupy

    try:
        if cluster_size > PORTABLE_CLUSTER:
            set_attribute(func, NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
        result = launch()
        cupy.cuda.get_current_stream().synchronize()
        return result
    except cupy.cuda.driver.CUDADriverError as exc:
        if any(word in str(exc).upper() for word in ("CLUSTER", "INVALID_VALUE", "OUT_OF_RESOURCES")):
            raise ClusterRefused(str(exc), int(getattr(exc, "status", -1))) from None
        raise


def refused_samples(exc: ClusterRefused) -> list[Sample]:
    """The record of a refused cluster size: one sample holding the driver's CUresult, flagged so no fit
    uses it."""
    return [Sample("cluster_refused", float(exc.status), "CUresult", 0, None, "driver", "invalid")]
