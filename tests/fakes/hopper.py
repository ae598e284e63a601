"""Hopper's units (probes/families/hopper/): DSMEM, TMA and DPX, and the cluster size the driver refuses."""
from __future__ import annotations

from fakes import CLOCK_HZ, DEVICE, LEVELS, _samples
from gpuatlas.probes.kit.harness import Sample

#: Hopper units: remote shared memory between shared memory and L2; cluster size 16 refused by the driver.
DSMEM = {"local": LEVELS["smem"], "self": 35.0, "remote": 190.0}
REFUSED_CLUSTER, REFUSED_STATUS = 16, 912  # CUDA_ERROR_INVALID_CLUSTER_SIZE
DSMEM_BYTES_PER_CLK_SM = {"local": 125.0, "pair": 28.0, "ring": 24.0}
TMA_LATENCY = {"l2": 480.0, "dram": 900.0}  # plus one cycle per 64 bytes copied
COPY_BANDWIDTH = {"tma": 3.6e12, "cp_async": 3.4e12, "ldg": 3.0e12}  # HBM; L2 twice these
DPX_LATENCY = {("viaddmax", "dpx"): 4.0, ("viaddmax", "emu"): 8.0, ("vimax3", "dpx"): 4.0}
DPX_OPS_PER_CLK_SM = {("viaddmax", "dpx"): 64.0, ("viaddmax", "emu"): 32.0, ("vimax3", "dpx"): 64.0}


def _refused():
    return [Sample("cluster_refused", float(REFUSED_STATUS), "CUresult", 0, None, "driver", "invalid")]


def _dsmem_latency(ctx, cluster_size, mode):
    if cluster_size == REFUSED_CLUSTER:
        return _refused()
    return [s for s in _samples(DSMEM[mode], cluster_size) if s.metric == "latency"]


def _dsmem_bandwidth(ctx, cluster_size, pattern):
    if cluster_size == REFUSED_CLUSTER:
        return _refused()
    per_clk = DSMEM_BYTES_PER_CLK_SM[pattern]
    return [s for r in range(5) for s in (
        Sample("bandwidth", per_clk * DEVICE["sm_count"] * CLOCK_HZ, "B/s", r, CLOCK_HZ, "cuda_event"),
        Sample("bytes_per_clk_sm", per_clk, "B/cycle", r, CLOCK_HZ, "cuda_event"))]


def _tma_latency(ctx, copy_bytes, level):
    return [s for s in _samples(TMA_LATENCY[level] + copy_bytes / 64, copy_bytes) if s.metric == "latency"]


def _tma_tensor(ctx, box_cols, box_rows, level):
    return _tma_latency(ctx, box_cols * box_rows * 4, level)


def _copy_bandwidth(ctx, path, chunk_bytes, level):
    value = COPY_BANDWIDTH[path] * (2 if level == "l2" else 1) * min(1.0, chunk_bytes / 16384)
    return [Sample("bandwidth", value, "B/s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


def _dpx(ctx, op, impl):
    return [s for r in range(5) for s in (
        Sample("latency", DPX_LATENCY[(op, impl)], "cycles", r, CLOCK_HZ, "clock64"),
        Sample("ops_per_clk_sm", DPX_OPS_PER_CLK_SM[(op, impl)], "1/cycle", r, CLOCK_HZ, "cuda_event"))]


#: probe id -> its fake.
FAKES = {"hopper.dsmem_latency": _dsmem_latency, "hopper.dsmem_bandwidth": _dsmem_bandwidth,
         "hopper.tma_latency": _tma_latency, "hopper.tma_tensor": _tma_tensor,
         "hopper.copy_bandwidth": _copy_bandwidth, "hopper.dpx": _dpx}
