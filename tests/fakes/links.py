"""Links and collectives (probes/families/links.py, collectives.py): a node of NVLinked GPUs."""
from __future__ import annotations

from fakes import DEVICE, _samples
from gpuatlas.probes.kit.harness import Sample

#: A node of simulated GPUs: NVLinks per GPU at a one-way rate each; copies and kernels reach a fraction of
#: their sum, a copy of LINK_HALF_BYTES half of its plateau; remote loads cross the link both ways.
NVLINKS, NVLINK_BYTES_PER_S, NVLINK_VERSION = 18, 25e9, 4
LINK_PEAK = NVLINKS * NVLINK_BYTES_PER_S
COPY_FRACTION, KERNEL_FRACTION = {"one_way": 0.8, "both_ways": 1.5}, {"read": 0.85, "write": 0.9}
LINK_HALF_BYTES = 1 << 20
REMOTE = {"hbm": 1500.0, "l2": 1100.0}  # cycles


def _topology(ctx, src, dst):
    return [Sample(m, v, u, 0, None, "nvml") for m, v, u in (
        ("nvlink_active_links", NVLINKS, "1"), ("nvlink_links_to_peer", 0, "1"),
        ("nvlink_links_to_switch", NVLINKS, "1"), ("nvlink_version", NVLINK_VERSION, "1"),
        ("nvlink_link_bytes_per_s", NVLINK_BYTES_PER_S, "B/s"), ("pcie_common_ancestor_level", 60, "1"),
        ("p2p_read_supported", 1, "1"))]


def _memcpy(ctx, src, dst, direction, message_bytes):
    """A copy costs a fixed overhead plus its bytes at the plateau: half the plateau at LINK_HALF_BYTES."""
    plateau = COPY_FRACTION[direction] * LINK_PEAK
    value = plateau * message_bytes / (message_bytes + LINK_HALF_BYTES)
    return [Sample("bandwidth", value, "B/s", r, None, "cuda_event") for r in range(5)]


def _p2p_bandwidth(ctx, src, dst, op):
    return [Sample("bandwidth", KERNEL_FRACTION[op] * LINK_PEAK, "B/s", r, None, "cuda_event") for r in range(5)]


def _p2p_latency(ctx, src, dst, footprint_bytes):
    cycles = REMOTE["l2"] if footprint_bytes <= DEVICE["l2_bytes"] else REMOTE["hbm"]
    return _samples(cycles, footprint_bytes)


def _collectives(ctx, collective, message_bytes):
    """A ring: all-reduce sends 2(n-1) chunks of S/n per rank, all-gather and reduce-scatter n-1, broadcast
    pipelines S once; each rank's link carries them at LINK_PEAK one way."""
    n = ctx.device["gpu_count"]
    sent = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "broadcast": 1.0}[collective] * message_bytes
    seconds = sent / LINK_PEAK
    return [s for r in range(5) for s in (Sample("busbw", sent / seconds, "B/s", r, None, "cuda_event"),
                                           Sample("algbw", message_bytes / seconds, "B/s", r, None, "cuda_event"),
                                           Sample("seconds", seconds, "s", r, None, "cuda_event"))]


#: probe id -> its fake.
FAKES = {"link.topology": _topology, "link.memcpy": _memcpy, "link.p2p_bandwidth": _p2p_bandwidth,
         "link.p2p_latency": _p2p_latency, "nccl.collectives": _collectives}
