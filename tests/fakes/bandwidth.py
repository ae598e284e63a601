"""Bandwidth (probes/families/bandwidth/): sector-granular strides, the L2 and on-chip rates, HBM streams
and a re-read footprint."""
from __future__ import annotations

from fakes import CLOCK_HZ, DEVICE, HBM_READ, HBM_WRITE, L2_READ, SECTOR_BYTES, TLB_REACH, TRANSLATION_LOSS
from gpuatlas.probes.kit.harness import Sample


def sector_efficiency(stride_elements, element_bytes):
    """Useful over moved bytes of one warp-wide load in the simulated memory: lane l reads ``element_bytes``
    at l x stride x element_bytes, and every 32-byte sector holding any byte asked for moves whole."""
    starts = {lane * stride_elements * element_bytes for lane in range(32)}
    sectors = {byte // SECTOR_BYTES for start in starts for byte in range(start, start + element_bytes)}
    return element_bytes * len(starts) / (len(sectors) * SECTOR_BYTES)


def _bw_stride(ctx, element_bytes, stride_elements, aligned, level):
    peak = 4.5e12 if level == "dram" else 9e12
    useful = peak * sector_efficiency(stride_elements, element_bytes)
    return [Sample("bandwidth", useful, "B/s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


def _bw_l2(ctx, footprint_bytes):
    return [Sample("bandwidth", 9e12, "B/s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


#: HBM write of the simulated GPU: every variant writes whole sectors; 16-byte stores issue half the store
#: instructions of 8-byte ones, the streaming hint leaves the L2's replacement to the writes alone, and a
#: grid-stride loop keeps its blocks resident (each factor below 1 is what the variant loses of HBM_WRITE).
WRITE_LOSS = {"grid_stride_16": 0.95, "grid_stride_16_cs": 0.97, "once_8": 0.98, "once_16": 0.99,
              "once_16_cs": 1.0}


#: The read's grid-stride kernels lose this fraction against one trip per thread (the once_64 variant).
GRID_STRIDE_READ_LOSS = 0.02


#: The simulated GPU's fastest read kernel: block-contiguous chunks of FAKE_READ_UNROLL 16-byte loads per
#: thread of FAKE_READ_THREADS-thread blocks, each warp load 32 lanes x 16 B, FAKE_READ_BLOCKS blocks per SM,
#: over a buffer of FAKE_READ_L2S L2s; the one-trip read (once_64) over a buffer of twice that.
FAKE_READ_UNROLL, FAKE_READ_THREADS, FAKE_READ_BLOCKS, FAKE_READ_L2S = 8, 256, 4, 32


def _read_layout(variant: str) -> list[tuple[str, float, str]]:
    if variant == "once_64":
        return [("buffer_bytes", 2 * FAKE_READ_L2S * DEVICE["l2_bytes"], "B")]
    chunk = FAKE_READ_UNROLL * FAKE_READ_THREADS * 16
    return [("loads_in_flight_per_thread", FAKE_READ_UNROLL, "1"), ("contiguous_bytes_per_warp_trip", 32 * 16, "B"),
            ("contiguous_bytes_per_block_trip", chunk, "B"), ("threads_per_block", FAKE_READ_THREADS, "1"),
            ("blocks_per_sm", FAKE_READ_BLOCKS, "1"), ("buffer_bytes", FAKE_READ_L2S * DEVICE["l2_bytes"], "B")]


def _bw_dram(ctx, op, variant=None):
    rate = (HBM_WRITE * WRITE_LOSS[variant or "grid_stride_16"] if op == "write"
            else HBM_READ * (1 - GRID_STRIDE_READ_LOSS) if (op, variant) == ("read", "fastest")
            else {"read": HBM_READ, "copy": 4.0e12, "memcpy": 4.2e12}[op])
    layout = _read_layout(variant) if op == "read" else []
    return [s for r in range(5) for s in (Sample("bandwidth", rate, "B/s", r, CLOCK_HZ, "cuda_event"),
            *(Sample(metric, float(value), unit, r, CLOCK_HZ, "config") for metric, value, unit in layout))]


def read_bandwidth(footprint_bytes):
    """A footprint F re-read pass after pass: the L2 serves h = min(1, L2 / F) of the bytes (every line it
    can keep), HBM the rest, at a translation-limited rate past the TLB's reach."""
    hbm = HBM_READ * (TRANSLATION_LOSS if footprint_bytes > TLB_REACH else 1.0)
    h = min(1.0, DEVICE["l2_bytes"] / footprint_bytes)
    return 1 / (h / L2_READ + (1 - h) / hbm)


def _bw_dram_footprint(ctx, footprint_bytes):
    return [s for r in range(5) for s in (
        Sample("bandwidth", read_bandwidth(footprint_bytes), "B/s", r, CLOCK_HZ, "cuda_event"),
        Sample("buffer_bytes", float(footprint_bytes), "B", r, CLOCK_HZ, "config"))]


def _bw_onchip(ctx, level):
    return [Sample("bytes_per_clk_sm", 125.0, "B/cycle", r, CLOCK_HZ, "cuda_event") for r in range(5)]


#: probe id -> its fake.
FAKES = {"bw.stride": _bw_stride, "bw.l2": _bw_l2, "bw.dram": _bw_dram, "bw.onchip": _bw_onchip,
         "bw.dram_footprint": _bw_dram_footprint}
