"""Write policies (CuPy RawModule, write_policy.cu): does the L1 keep a line a store wrote into, does the L2
allocate the lines a kernel writes, and what a store of less than a sector costs the HBM.

* store_reload: a chain the L1 holds, walked with loads only, L2-only, or with each loaded word stored straight
  back.  The stored walk steps at the load-only walk's latency if the L1 keeps written lines (write-back, or
  write-through updating the line), at the L2-only walk's if a store leaves the L1 without the line.
* write_allocate: every block writes a slice of a fresh buffer (a quarter of the L2 in all), then reads it
  L2-only twice, then reads a slice no one touched since the L2 was flushed.  The first read costs what the
  second (all L2 hits) does if the L2 allocated the written lines, what the cold read (HBM) does if not.
* partial_write: 4-byte stores over a span of HBM_FOOTPRINT_L2 x the L2, one word per 32-byte sector or every
  word.  A memory that writes the one word (byte-masked) moves sectors at the full-sector rate; one that must
  read the sector to merge the word (a read-modify-write, as ECC over the sector needs) moves them slower.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit import samplers as kit
from gpuatlas.probes.kit.chain import chase_launcher, flush_l2, measure_chase
from gpuatlas.probes.kit.harness import Sample, Sink, repeat_until_stable
from gpuatlas.probes.registry import probe

CHASE_KERNELS = {"load": "wp_chase_load", "store": "wp_chase_store", "cg": "wp_chase_cg"}
#: Chain stride (one element per 128-byte line) and the chain's footprint: far inside any L1.
STRIDE = 128
#: Write-allocate: rounds per launch, blocks per SM, threads per block.
ALLOCATE_ROUNDS, ALLOCATE_BLOCKS_PER_SM, THREADS = 4, 2, 256
#: Partial writes: a word per sector (a 32-byte sector of 4-byte words), or every word.
SECTOR_BYTES, WORD_BYTES = 32, 4
PARTIAL_STRIDES = {"full": 1, "word_per_sector": SECTOR_BYTES // WORD_BYTES}
SCATTER_BLOCKS_PER_SM, SCATTER_VALUE = 8, 0x5EED0001
SAMPLE_S = 5e-3
PHASES = ("first_read_cycles", "second_read_cycles", "cold_read_cycles")


def chain_bytes(device: dict) -> int:
    return device["smem_per_sm_bytes"] // 16 // STRIDE * STRIDE


def allocate_slice_bytes(device: dict) -> int:
    """Each block's slice per round: the written buffer in all is a quarter of the L2."""
    blocks = ALLOCATE_BLOCKS_PER_SM * device["sm_count"]
    return int(device["l2_bytes"] * kit.L2_TOUCH_FRACTION) // (ALLOCATE_ROUNDS * blocks) // 16 * 16


def partial_span_bytes(device: dict) -> int:
    """HBM_FOOTPRINT_L2 x the L2 (so the L2 holds a negligible share of it), at most MEMORY_FRACTION of memory."""
    span = min(kit.HBM_FOOTPRINT_L2 * device["l2_bytes"], kit.MEMORY_FRACTION * device["total_memory_bytes"])
    return int(span) // SECTOR_BYTES * SECTOR_BYTES


def write_configs(device: dict) -> list[dict]:
    return ([{"measure": "store_reload", "access": a} for a in CHASE_KERNELS]
            + [{"measure": "write_allocate", "access": "plain"}]
            + [{"measure": "partial_write", "access": a} for a in PARTIAL_STRIDES])


@probe("geometry.write_policy", sweeps={"quick": write_configs, "full": write_configs},
       axes={"measure": "store_reload (the L1), write_allocate (the L2) or partial_write (the HBM)",
             "access": "store_reload: load, store (each loaded word stored back) or cg (L2-only loads); "
                       "write_allocate: plain 16-byte stores; partial_write: full (every word) or "
                       "word_per_sector (one 4-byte word per 32-byte sector)"},
       quantities=("l1.store_reload_cycles", "l1.keeps_stored_lines", "l2.written_hit_fraction",
                   "l2.write_allocates", "dram.partial_write_sector_bytes_per_s",
                   "dram.partial_write_useful_bytes_per_s", "dram.partial_write_sector_ratio",
                   "dram.partial_write_rmw"),
       kernels=("write_policy.cu", "chase.cu"))
def geometry_write_policy(ctx, measure: str, access: str) -> list[Sample]:
    """Cycles per step of an L1-resident chase whose loads are each followed by a store of the loaded word;
    the cost of reading freshly written lines against L2 hits and HBM misses; HBM write bandwidth of one
    word per sector against whole sectors."""
    if measure == "store_reload" and access in CHASE_KERNELS:
        launch = chase_launcher("write_policy.cu", CHASE_KERNELS[access])
        return measure_chase(ctx, chain_bytes(ctx.device), STRIDE, launch, timer="clock64")
    if measure == "write_allocate" and access == "plain":
        return allocate_samples(ctx)
    if measure == "partial_write" and access in PARTIAL_STRIDES:
        return partial_samples(ctx, PARTIAL_STRIDES[access])
    raise ValueError(f"unknown config: measure={measure!r} access={access!r}")


def allocate_samples(ctx) -> list[Sample]:
    """Per launch (the L2 flushed before it): the median over blocks of each read phase's cycles, and the
    written lines' hit fraction (cold - first) / (cold - second): 1 when the first read of the written lines
    costs what L2 hits do, 0 when it costs what HBM misses do."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    device = ctx.device
    blocks = ALLOCATE_BLOCKS_PER_SM * device["sm_count"]
    slice_bytes = allocate_slice_bytes(device)
    total = ALLOCATE_ROUNDS * blocks * slice_bytes
    cold = kit.Golden.at_least(total)
    written = cupy.empty(total // 4, dtype=cupy.uint32)
    cycles = cupy.zeros(3 * blocks, dtype=cupy.uint64)
    sink = Sink("geometry.write_policy write_allocate")
    # the written words are the Golden words, read twice; the cold ones once
    per_launch = 3 * kit.sum32(cold, 0, total // 4)
    allocate = kernel("write_policy.cu", "wp_allocate")

    def sample(repeat: int) -> list[Sample]:
        flush_l2(device)
        allocate((blocks,), (THREADS,), (written, cold, np.int64(slice_bytes // 16), np.int32(ALLOCATE_ROUNDS),
                                         cycles, sink.array))
        sink.launches += 1
        sink.check(per_launch)
        hz = ctx.sm_clock()
        flag = ctx.throttle_flag(hz)
        first, second, cold_read = np.median(cycles.get().reshape(blocks, 3).astype(float), axis=0)
        fraction = (cold_read - first) / (cold_read - second) if cold_read != second else float("nan")
        return ([Sample(name, value, "cycles", repeat, hz, "clock64", flag)
                 for name, value in zip(PHASES, (first, second, cold_read))]
                + [Sample("written_hit_fraction", fraction, "1", repeat, hz, "clock64", flag),
                   Sample("written_bytes", float(total), "B", repeat, hz, "config", flag)])

    return repeat_until_stable(sample, "written_hit_fraction", ctx.budget)


def partial_samples(ctx, stride_words: int) -> list[Sample]:
    """Event-timed scatters of 4-byte words at ``stride_words`` over the span: useful bytes per second, with
    the stride in each sample (the sectors per useful byte).  Every written word must hold the value after a
    sample (the buffer zeroed before it)."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    device = ctx.device
    span = partial_span_bytes(device)
    words = cupy.zeros(span // WORD_BYTES, dtype=cupy.uint32)
    count = words.size // stride_words
    scatter = kernel("write_policy.cu", "wp_scatter")
    grid = SCATTER_BLOCKS_PER_SM * device["sm_count"]

    def launch():
        scatter((grid,), (THREADS,), (words, np.int64(count), np.int64(stride_words), np.uint32(SCATTER_VALUE)))

    def verify():
        got = kit.sum32(words, 0, count, pitch_bytes=WORD_BYTES * stride_words)
        if got != count * SCATTER_VALUE % 2**32:
            raise RuntimeError(f"partial write at a stride of {stride_words} words: the words sum to {got:#010x}, "
                               f"{count} stores of {SCATTER_VALUE:#x} make {count * SCATTER_VALUE % 2**32:#010x}")

    return kit.bandwidth_samples(ctx, launch, lambda: words.fill(0), verify, float(count * WORD_BYTES),
                                 sample_s=SAMPLE_S, bound=kit.bandwidth_bound(device, "dram"),
                                 extra=(("stride_words", float(stride_words), "1"),))
