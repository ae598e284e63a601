"""The L2 partition map (geometry.cu's recorders, chase.cu's L2-only one): which lines each L2 partition homes,
seen from one SM (geometry.l2_partition) and from every SM in turn (geometry.l2_sm_map).  Each access is a cold
L2-only miss timed alone; a miss homed by the SM's near partition returns sooner than one the far partition
homes."""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.families.geometry import LINE_STRIDE, RECORD_BYTES
from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.registry import probe


#: Lines of one cold walk in address order (chase.cu's recorder keeps 16 bits per access in shared memory),
#: and the walks per config (the L2 flushed before each).
PARTITION_LINES, PARTITION_WALKS = 4096, 3


def partition_strides(device: dict) -> list[int]:
    """128 B (the walk spans 512 KiB, line by line) and 4 KiB (16 MiB, past any interleave finer than that)."""
    return [LINE_STRIDE, 32 * LINE_STRIDE]


@probe("geometry.l2_partition",
       sweeps={"quick": lambda d: {"stride_bytes": partition_strides(d)[:1]},
               "full": lambda d: {"stride_bytes": partition_strides(d)}},
       axes={"stride_bytes": "bytes between consecutive lines of the address-order walk (128 B and 4 KiB)"},
       quantities=("l2.partition_interleave_bytes", "l2.far_home_fraction"), kernels=("chase.cu",))
def geometry_l2_partition(ctx, stride_bytes: int) -> list[Sample]:
    """One SM's L2-only loads over lines in address order, each timed alone and each a cold miss (the L2
    flushed first, no line visited twice): a miss homed by the SM's near L2 partition returns sooner than
    one homed by the far partition, so the record, line by line, is the partition map as this SM sees it."""
    import cupy

    from gpuatlas.probes.kit.chain import chain_on_gpu, flush_l2
    from gpuatlas.probes.kit.cuda import kernel

    footprint = PARTITION_LINES * stride_bytes
    words, walker = chain_on_gpu(ctx, footprint, stride_bytes, "sequential")
    record = kernel("chase.cu", "chase_cg_record")
    intervals = cupy.zeros(PARTITION_LINES, dtype=cupy.uint16)
    out = cupy.zeros(3, dtype=cupy.uint64)
    samples = []
    for walk in range(PARTITION_WALKS):
        flush_l2(ctx.device)
        start = walker.start()
        if start != walker.base:
            raise RuntimeError("partition walk does not start at the buffer's first line")
        record((1,), (1,), (np.uint64(start), np.int64(0), np.int32(PARTITION_LINES), intervals, out),
               shared_mem=2 * PARTITION_LINES + 8)
        result = out.get()
        walker.advance(PARTITION_LINES, int(result[2]))
        hz = float(result[0]) / float(result[1]) * 1e9
        flag = ctx.throttle_flag(hz)
        samples += [Sample("access", float(v), "cycles", walk * PARTITION_LINES + i, hz, "clock", flag)
                    for i, v in enumerate(intervals.get())]
    return samples + [Sample("walk_lines", float(PARTITION_LINES), "1", 0, hz, "config")]


#: Lines each SM's cold walk records for the per-SM map (every 128 B, in address order); full profile: every SM,
#: quick: every SM_MAP_QUICK_STRIDE-th.
SM_MAP_LINES, SM_MAP_QUICK_STRIDE = 256, 8


@probe("geometry.l2_sm_map",
       sweeps={"quick": lambda d: {"sm_stride": [SM_MAP_QUICK_STRIDE]}, "full": lambda d: {"sm_stride": [1]}},
       axes={"sm_stride": "every SM (1), or every 8th of them in SM-id order (quick)"},
       quantities=("l2.sm_sides", "l2.sm_side_fraction", "l2.sm_map_consistency"), kernels=("geometry.cu",))
def geometry_l2_sm_map(ctx, sm_stride: int) -> list[Sample]:
    """The partition map of geometry.l2_partition, from every SM in turn over the same lines: SMs that see
    the same lines near share an L2 partition (a side of the GPU), and the other side sees the complement."""
    import cupy

    from gpuatlas.probes.kit.chain import chain_on_gpu, flush_l2
    from gpuatlas.probes.kit.cuda import kernel

    blocks = ctx.device["sm_count"]
    optin = ctx.device.get("smem_per_block_optin_bytes") or ctx.device["smem_per_block_bytes"]
    smem = min(optin, ctx.device["smem_per_sm_bytes"] // 2 + RECORD_BYTES)  # one block per SM
    if 2 * smem <= ctx.device["smem_per_sm_bytes"]:
        raise RuntimeError(f"a block may ask for {optin} B of shared memory, too little to hold an SM alone")
    census, record = kernel("geometry.cu", "sm_ids"), kernel("geometry.cu", "l2_record_on_sm")
    census.max_dynamic_shared_size_bytes = record.max_dynamic_shared_size_bytes = smem
    ids = cupy.zeros(blocks, dtype=cupy.uint32)
    census((blocks,), (32,), (ids,), shared_mem=smem)
    present = sorted(set(int(i) for i in ids.get()))
    if len(present) != blocks:
        raise RuntimeError(f"{blocks} blocks of one per SM ran on {len(present)} distinct SMs")
    words, walker = chain_on_gpu(ctx, SM_MAP_LINES * LINE_STRIDE, LINE_STRIDE, "sequential")
    intervals = cupy.zeros(SM_MAP_LINES, dtype=cupy.uint16)
    out = cupy.zeros(4, dtype=cupy.uint64)
    samples = []
    for rank, sm in enumerate(present[::int(sm_stride)]):
        flush_l2(ctx.device)
        start = walker.start()
        if start != walker.base:
            raise RuntimeError("per-SM partition walk does not start at the buffer's first line")
        out.fill(np.uint64(2**64 - 1))  # no SM has this id: a walk that never ran fails the check
        record((blocks,), (32,), (np.uint64(start), np.int32(SM_MAP_LINES), np.uint32(sm), intervals, out),
               shared_mem=smem)
        result = out.get()
        if int(result[3]) != sm:
            raise RuntimeError(f"the walk meant for SM {sm} ran on SM {int(result[3])} (or not at all)")
        walker.advance(SM_MAP_LINES, int(result[2]))
        hz = float(result[0]) / float(result[1]) * 1e9
        flag = ctx.throttle_flag(hz)
        samples += [Sample("access", float(v), "cycles", rank * SM_MAP_LINES + i, hz, "clock", flag)
                    for i, v in enumerate(intervals.get())]
        samples.append(Sample("smid", float(sm), "1", rank, hz, "config"))
    return samples + [Sample("walk_lines", float(SM_MAP_LINES), "1", 0, hz, "config")]
