"""The links between the GPUs one run sees: topology from NVML, copy and kernel bandwidth through peer
pointers, and the latency of a load that crosses the link.

Every config names a source GPU (where the copy is issued or the kernel runs) and a destination GPU (whose
memory is read or written), as CUDA device ordinals of the run (CUDA_VISIBLE_DEVICES applied).  Message
sizes and buffers are sized from the device's L2 so that a stream leaves no chance of cache reuse.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.registry import geom, probe

THREADS = 256
#: Bytes per sample of a bandwidth measurement at least: the link's rate times a few milliseconds.
MIN_SAMPLE_BYTES_L2 = 4
MAX_COPIES = 1000


def ordered_pairs(device: dict) -> list[tuple[int, int]]:
    n = device.get("gpu_count", 1) if device else 1
    return [(s, d) for s in range(n) for d in range(n) if s != d]


def message_sizes(device: dict, per_octave: int) -> list[int]:
    """4 KiB to 4x L2: from a copy that is all overhead to one no cache can hold."""
    return geom(4096, 4 * device["l2_bytes"], per_octave=per_octave, align=4096)


def topology_configs(device: dict) -> list[dict]:
    return [{"src": s, "dst": d} for s, d in ordered_pairs(device) if s < d]


def memcpy_configs(device: dict, profile: str) -> list[dict]:
    """Every ordered pair at the largest message (the matrix); the size sweep on the first pair, or on every
    pair in the full profile."""
    pairs = ordered_pairs(device)
    if not pairs:
        return []
    sizes = message_sizes(device, 2 if profile == "quick" else 4)
    swept = pairs if profile == "full" else pairs[:1]
    configs = []
    for direction in ("one_way", "both_ways"):
        for s, d in pairs:
            for size in (sizes if (s, d) in swept else sizes[-1:]):
                configs.append({"src": s, "dst": d, "direction": direction, "message_bytes": size})
    return configs


def kernel_configs(device: dict) -> list[dict]:
    return [{"src": s, "dst": d, "op": op} for s, d in ordered_pairs(device) for op in ("read", "write")]


def latency_configs(device: dict) -> list[dict]:
    """A chain that fits the peer's L2 and one four times larger (the peer's HBM)."""
    if not ordered_pairs(device):
        return []
    return [{"src": s, "dst": d, "footprint_bytes": f} for s, d in ordered_pairs(device)
            for f in (device["l2_bytes"] // 4, 4 * device["l2_bytes"])]


def _enable_peer(cupy, src: int, dst: int) -> None:
    """Map ``dst``'s memory into ``src``'s address space (once per process)."""
    if not cupy.cuda.runtime.deviceCanAccessPeer(src, dst):
        raise RuntimeError(f"GPU {src} cannot access GPU {dst}'s memory (cudaDeviceCanAccessPeer is 0)")
    with cupy.cuda.Device(src):
        try:
            cupy.cuda.runtime.deviceEnablePeerAccess(dst)
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            if "PeerAccessAlreadyEnabled" not in str(exc):
                raise


def _kernel_on_this_device(name: str):
    """links.cu's kernel ``name`` compiled and loaded for the current device (peer pointers are passed as
    64-bit integers, so no array of another device is handed to a launch)."""
    import cupy

    from gpuatlas.probes.kit.cuda import NVRTC_OPTIONS, source

    return cupy.RawModule(code=source("links.cu"), options=NVRTC_OPTIONS).get_function(name)


def bus_key(bus_id) -> tuple[int, ...]:
    """A PCI bus id (``0000:18:00.0`` or NVML's ``00000000:18:00.0``, bytes or str) as numbers, so ids
    written with different domain widths compare equal."""
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    domain, bus, rest = text.strip().rstrip("\x00").split(":")
    device, function = rest.split(".")
    return tuple(int(part, 16) for part in (domain, bus, device, function))


#: nvmlValue_t's member for each NVML_VALUE_TYPE (0 double, 1 unsigned int, ... 6 unsigned short).
VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def field_value(field) -> float:
    """The number an nvmlFieldValue_t holds, read through the union member its valueType names."""
    return float(getattr(field.value, VALUE_MEMBERS[field.valueType]))


def nvml_link_facts(src_bus: str, dst_bus: str) -> list[tuple[str, float, str]]:
    """(metric, value, unit) of the pair from NVML: active NVLinks of the source, how many end at the
    destination itself or at an NVSwitch, their version and per-link speed, P2P read support and the
    deepest PCIe element both GPUs share (NVML_TOPOLOGY_* level: 0 same board ... 60 across the system)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByPciBusId(src_bus)
        peer = pynvml.nvmlDeviceGetHandleByPciBusId(dst_bus)
        peer_bus = bus_key(pynvml.nvmlDeviceGetPciInfo(peer).busId)
        active = to_peer = to_switch = 0
        versions = []
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            try:
                if pynvml.nvmlDeviceGetNvLinkState(h, link) != pynvml.NVML_FEATURE_ENABLED:
                    continue
            except pynvml.NVMLError:
                continue
            active += 1
            versions.append(pynvml.nvmlDeviceGetNvLinkVersion(h, link))
            if bus_key(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId) == peer_bus:
                to_peer += 1
                continue
            try:  # older drivers do not name the far end's type: then the link is not counted as a switch's
                far = pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)
            except (pynvml.NVMLError, AttributeError):
                continue
            to_switch += far == pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
        facts = [("nvlink_active_links", active, "1"), ("nvlink_links_to_peer", to_peer, "1"),
                 ("nvlink_links_to_switch", to_switch, "1")]
        if versions:
            facts.append(("nvlink_version", max(versions), "1"))
            speed = pynvml.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON])[0]
            if speed.nvmlReturn == pynvml.NVML_SUCCESS:  # NVML's unit: MB/s per link
                facts.append(("nvlink_link_bytes_per_s", field_value(speed) * 1e6, "B/s"))
        level = pynvml.nvmlDeviceGetTopologyCommonAncestor(h, peer)
        facts.append(("pcie_common_ancestor_level", int(level), "1"))
        p2p = pynvml.nvmlDeviceGetP2PStatus(h, peer, pynvml.NVML_P2P_CAPS_INDEX_READ)
        facts.append(("p2p_read_supported", float(p2p == pynvml.NVML_P2P_STATUS_OK), "1"))
        return facts
    finally:
        pynvml.nvmlShutdown()


@probe("link.topology", sweeps={"quick": topology_configs, "full": topology_configs},
       axes={"src": "GPU whose links are read", "dst": "its peer (each unordered pair once)"},
       quantities=("nvlink.links", "nvlink.version", "nvlink.link_bandwidth_bytes_per_s",
                   "nvlink.pair_bandwidth_bytes_per_s"), backend="nvml",
       min_gpus=2)
def link_topology(ctx, src: int, dst: int) -> list[Sample]:
    """NVLink count, version and per-link speed, and the PCIe path, between two GPUs as NVML reports them."""
    import cupy

    buses = [cupy.cuda.runtime.deviceGetPCIBusId(i) for i in (src, dst)]
    return [Sample(metric, float(value), unit, 0, None, "nvml") for metric, value, unit in nvml_link_facts(*buses)]


def _stream_pair(cupy, src: int, dst: int, nbytes: int):
    """A buffer on each GPU, a stream on each: what a copy in each direction needs."""
    buffers, streams = {}, {}
    for gpu in (src, dst):
        with cupy.cuda.Device(gpu):
            buffers[gpu] = (cupy.empty(nbytes, cupy.uint8), cupy.empty(nbytes, cupy.uint8))
            streams[gpu] = cupy.cuda.Stream(non_blocking=True)
    return buffers, streams


@probe("link.memcpy", sweeps={"quick": lambda d: memcpy_configs(d, "quick"),
                              "full": lambda d: memcpy_configs(d, "full")},
       axes={"src": "GPU the data leaves", "dst": "GPU the data reaches",
             "direction": "one_way (src -> dst) or both_ways (src -> dst and dst -> src at once)",
             "message_bytes": "bytes per cudaMemcpyPeerAsync: 4 KiB..4x L2 on the first pair (every pair in "
                              "full); the largest on every pair (the matrix)"},
       quantities=("p2p.memcpy_bandwidth_bytes_per_s", "p2p.memcpy_bidirectional_bandwidth_bytes_per_s"),
       min_gpus=2)
def link_memcpy(ctx, src: int, dst: int, direction: str, message_bytes: int) -> list[Sample]:
    """cudaMemcpyPeerAsync bandwidth: bytes moved (both directions counted) per second of CUDA-event time."""
    import cupy

    _enable_peer(cupy, src, dst)
    _enable_peer(cupy, dst, src)
    buffers, streams = _stream_pair(cupy, src, dst, message_bytes)
    legs = [(src, dst)] + ([(dst, src)] if direction == "both_ways" else [])
    # enough bytes per sample to time, but at most MAX_COPIES calls: the smallest copies are issue-bound
    reps = max(1, min(MAX_COPIES, MIN_SAMPLE_BYTES_L2 * ctx.device["l2_bytes"] // message_bytes))
    with cupy.cuda.Device(src):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    joins = {}
    for a, _ in legs:
        with cupy.cuda.Device(a):
            joins[a] = cupy.cuda.Event(disable_timing=True)

    def sample(repeat: int) -> list[Sample]:
        with cupy.cuda.Device(src):
            start.record(streams[src])
        for a, b in legs:
            with cupy.cuda.Device(a):
                streams[a].wait_event(start)
                for _ in range(reps):
                    cupy.cuda.runtime.memcpyPeerAsync(buffers[b][1].data.ptr, b, buffers[a][0].data.ptr, a,
                                                      message_bytes, streams[a].ptr)
                joins[a].record(streams[a])
        with cupy.cuda.Device(src):
            for a, _ in legs:
                streams[src].wait_event(joins[a])
            stop.record(streams[src])
            stop.synchronize()
            seconds = cupy.cuda.get_elapsed_time(start, stop) * 1e-3
        return [Sample("bandwidth", len(legs) * reps * message_bytes / seconds, "B/s", repeat, None, "cuda_event")]

    return repeat_until_stable(sample, "bandwidth", ctx.budget)


@probe("link.p2p_bandwidth", sweeps={"quick": kernel_configs, "full": kernel_configs},
       axes={"src": "GPU running the kernel", "dst": "GPU whose memory it reads or writes",
             "op": "read (16-byte loads) or write (16-byte stores) through a peer pointer"},
       quantities=("p2p.read_bandwidth_bytes_per_s", "p2p.write_bandwidth_bytes_per_s",
                   "p2p.read_fraction_of_nvlink"), kernels=("links.cu",),
       min_gpus=2)
def link_p2p_bandwidth(ctx, src: int, dst: int, op: str) -> list[Sample]:
    """Bytes per second a kernel on every SM of ``src`` moves through a peer pointer into ``dst``'s memory:
    the link's bandwidth as loads and stores see it, no copy engine involved."""
    import cupy

    from gpuatlas.probes.kit.cuda import blocks_per_sm

    _enable_peer(cupy, src, dst)
    nbytes = 4 * ctx.device["l2_bytes"] // 16 * 16
    with cupy.cuda.Device(dst):
        remote = cupy.zeros(nbytes // 16 * 4, cupy.uint32)
    with cupy.cuda.Device(src):
        func = _kernel_on_this_device(f"peer_{op}")
        sink = cupy.zeros(1, cupy.uint32)
        grid = ctx.device["sm_count"] * blocks_per_sm(func, THREADS)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        extra = (sink,) if op == "read" else (np.uint32(ctx.seed + 1),)

        def sample(repeat: int) -> list[Sample]:
            with cupy.cuda.Device(src):
                start.record()
                func((grid,), (THREADS,), (np.uint64(remote.data.ptr), np.int64(nbytes // 16), np.int32(2), *extra))
                stop.record()
                stop.synchronize()
                seconds = cupy.cuda.get_elapsed_time(start, stop) * 1e-3
            return [Sample("bandwidth", 2 * nbytes / seconds, "B/s", repeat, None, "cuda_event")]

        return repeat_until_stable(sample, "bandwidth", ctx.budget)


def chain(base: int, footprint_bytes: int, stride_bytes: int, rng: np.random.Generator) -> np.ndarray:
    """A single-cycle random chain of absolute 64-bit addresses, one element per ``stride_bytes`` block of a
    buffer at ``base``: element i holds the address of the next element, the cycle visiting every block."""
    n = footprint_bytes // stride_bytes
    order = rng.permutation(n)
    words = np.zeros(footprint_bytes // 8, dtype=np.uint64)
    slot = stride_bytes // 8
    nxt = np.roll(order, -1)
    words[order * slot] = (base + nxt.astype(np.uint64) * np.uint64(stride_bytes)).astype(np.uint64)
    return words


@probe("link.p2p_latency", sweeps={"quick": latency_configs, "full": latency_configs},
       axes={"src": "GPU running the chase", "dst": "GPU holding the chain",
             "footprint_bytes": "chain size: a quarter of L2 (the peer's L2) or 4x L2 (the peer's HBM)"},
       quantities=("p2p.latency_cycles", "p2p.latency_ns", "p2p.l2_latency_cycles"), kernels=("links.cu",), min_gpus=2)
def link_p2p_latency(ctx, src: int, dst: int, footprint_bytes: int) -> list[Sample]:
    """Cycles (clock64 of ``src``) and seconds (%globaltimer) per dependent load of a chain in the peer's
    memory: the remote load-to-use latency, link crossing both ways included."""
    import cupy

    _enable_peer(cupy, src, dst)
    stride = 128
    with cupy.cuda.Device(dst):
        remote = cupy.empty(footprint_bytes // 8, cupy.uint64)
        remote.set(chain(remote.data.ptr, footprint_bytes, stride, ctx.rng(src, dst, footprint_bytes)))
        cupy.cuda.Device(dst).synchronize()
    steps = 4096
    # the L2-sized chain is walked once whole first so it sits in the peer's L2; the larger one stays cold
    warm = footprint_bytes // stride if footprint_bytes <= ctx.device["l2_bytes"] else 0
    with cupy.cuda.Device(src):
        func = _kernel_on_this_device("peer_chase")
        out = cupy.zeros(3, cupy.uint64)

        def sample(repeat: int) -> list[Sample]:
            with cupy.cuda.Device(src):
                func((1,), (1,), (np.uint64(remote.data.ptr), np.int64(warm), np.int64(steps), out))
                cycles, ns, _ = out.get().astype(float)
            hz = cycles / ns * 1e9
            return [Sample("latency", cycles / steps, "cycles", repeat, hz, "clock64"),
                    Sample("latency_time", ns / steps * 1e-9, "s", repeat, hz, "globaltimer")]

        return repeat_until_stable(sample, "latency", ctx.budget)
