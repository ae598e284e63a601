"""Cache geometry by fine-grained pointer chases (CuPy RawModule, geometry.cu): the L1's ways, sets,
replacement and capacity at each shared-memory allocation (geometry.l1), the constant caches
(geometry.const) and L2 persistence (geometry.l2_persist); the L2 partition maps are in l2_partition.py.

A chain of N lines at a stride of S bytes, walked as a cycle through the L1-caching load, touches
min(N, sets x line / S) sets evenly when S is a power of two and the set index is the address's low bits.
N lines spread over k sets all stay resident while N <= k x ways, whatever the replacement policy, and once
N passes that, every pass must miss at least N - k x ways times.  So the smallest missing N (the onset) is
capacity / S + 1 for strides inside one set's span and ways + 1 for strides of the span and beyond: the
ways from where the onset stops falling, the sets from the stride where it does.  How the miss fraction
grows past the onset at those strides tells LRU-like replacement (LRU, FIFO and tree pseudo-LRU miss nearly
every access of a cyclic walk one line too long) from random replacement (which misses a few).

Each access is timed alone (geometry.cu records one clock interval per load), so the probe counts misses
directly: an interval more than twice the all-hit interval (a one-line chain) is a miss.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.chain import ChainWalker, fill_chain
from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.registry import geom, probe, quick_and_full

#: Accesses timed per walk (16 bits each in shared memory) and the shared memory that record needs.
RECORDED = 3072
RECORD_BYTES = 2 * RECORDED + 8
#: The smallest stride: one chain element per 128-byte block, the block chase.latency counts capacity in.
LINE_STRIDE = 128
#: Points of the miss-fraction curve past the onset, spread up to twice the lines held.
CURVE_POINTS = 12
#: An access slower than this multiple of the all-hit interval missed the L1 (an L2 hit costs several times
#: an L1 hit; the recording's own cost is in both).
MISS_FACTOR = 2.0


def set_strides(device: dict) -> list[int]:
    """Powers of two from LINE_STRIDE to the first one of at least 4x shared memory per SM: past any L1's
    capacity, so past any set span, by two octaves."""
    top = 4 * device["smem_per_sm_bytes"]
    strides = [LINE_STRIDE]
    while strides[-1] < top:
        strides.append(2 * strides[-1])
    return strides


def max_lines(device: dict, stride_bytes: int) -> int:
    """The longest chain: twice the lines of an L1 as large as all of shared memory, its footprint capped at
    1/64 of device memory."""
    return int(max(2, min(2 * device["smem_per_sm_bytes"] // LINE_STRIDE,
                          device["total_memory_bytes"] // 64 // stride_bytes)))


def carveout_allocations(device: dict) -> list[int]:
    """Dynamic shared memory per block: the record alone, then 1/8..all of the opt-in limit."""
    top = device.get("smem_per_block_optin_bytes", device["smem_per_block_bytes"])
    return [RECORD_BYTES] + [max(RECORD_BYTES, top * k // 8 // 1024 * 1024) for k in (1, 2, 4, 6, 8)]


def geometry_configs(device: dict, quick: bool = False) -> list[dict]:
    """Every set stride (quick: every other one, the largest kept) with the record's shared memory alone, and
    lines at random places; the line stride at each shared allocation (quick: every third)."""
    strides = set_strides(device)
    if quick:
        strides = sorted(set(strides[::2]) | {strides[-1]})
    configs = [{"stride_bytes": s, "smem_bytes": RECORD_BYTES, "placement": "stride"} for s in strides]
    configs.append({"stride_bytes": LINE_STRIDE, "smem_bytes": RECORD_BYTES, "placement": "random"})
    allocations = carveout_allocations(device)[1:]
    for smem in allocations[::3] if quick else allocations:
        configs.append({"stride_bytes": LINE_STRIDE, "smem_bytes": smem, "placement": "stride"})
    return configs


#: Random placement draws a chain's lines from this many times as many blocks as the longest chain has.
RANDOM_SPREAD = 64


def chain_blocks(placement: str, n_max: int, rng: np.random.Generator) -> np.ndarray:
    """The blocks (multiples of the stride) of the longest chain in the order walked; a chain of N lines is
    the first N.  ``stride``: blocks 0, 1, 2, ...; ``random``: distinct blocks drawn at random from
    RANDOM_SPREAD x n_max.  A fully associative cache holds as many random lines as strided ones; a
    set-associative one, its index hashed or not, overfills some set first."""
    if placement == "stride":
        return np.arange(n_max, dtype=np.int64)
    if placement == "random":
        return rng.choice(RANDOM_SPREAD * n_max, n_max, replace=False).astype(np.int64)
    raise ValueError(f"unknown placement {placement!r}: stride or random")


def onset(misses, lo: int, hi: int) -> int | None:
    """The smallest N in (lo, hi] with ``misses(N)``, by bisection (a chain that misses at N misses at every
    longer N of the same stride: lines only add to their sets); None if even ``hi`` does not miss."""
    if not misses(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if misses(mid):
            hi = mid
        else:
            lo = mid
    return hi


def missed(intervals: np.ndarray, hit_cycles: float) -> np.ndarray:
    return intervals > MISS_FACTOR * hit_cycles


def is_missing(count: int, lines: int, accesses: int) -> bool:
    """A walk over more lines than its sets hold misses at least once per pass of ``lines`` accesses; half of
    that (and at least 2) tells it from a stray slow access."""
    return count >= max(2.0, accesses / (2.0 * lines))


def sweep_lines(walk, n_max: int, hz: float | None = None) -> list[Sample]:
    """Find one stride's onset by bisection over the chain length, then the miss-fraction curve past it.

    ``walk(lines) -> intervals`` walks a cyclic chain of that many lines (at most ``n_max``) to its steady
    state and returns the recorded per-access cycles.  Samples, paired by ``repeat`` (one per chain length
    measured): ``lines``, ``misses`` and ``accesses``; ``hit_cycles`` (the one-line chain's median interval);
    and the record of the onset's walk, one ``access`` row per access (repeat = its index)."""
    hit = float(np.median(walk(1)))
    counts: dict[int, tuple[int, int]] = {}
    records: dict[int, np.ndarray] = {}

    def misses(lines: int) -> bool:
        if lines not in counts:
            intervals = walk(lines)
            records[lines] = intervals
            counts[lines] = (int(missed(intervals, hit).sum()), intervals.size)
        count, accesses = counts[lines]
        return is_missing(count, lines, accesses)

    first = onset(misses, 1, n_max)
    if first is not None:
        held = first - 1
        top = min(n_max, max(first + 1, 2 * held))
        for lines in np.unique(np.linspace(first, top, CURVE_POINTS).astype(int)):
            misses(int(lines))
    samples = [Sample("hit_cycles", hit, "cycles", 0, hz, "clock")]
    for k, lines in enumerate(sorted(counts)):
        count, accesses = counts[lines]
        samples += [Sample("lines", float(lines), "1", k, hz, "config"),
                    Sample("misses", float(count), "1", k, hz, "clock"),
                    Sample("accesses", float(accesses), "1", k, hz, "config")]
    if first is not None:
        samples += [Sample("access", float(v), "cycles", i, hz, "clock") for i, v in enumerate(records[first])]
    return samples


@probe("geometry.l1",
       sweeps=quick_and_full(geometry_configs),
       axes={"stride_bytes": "bytes between the chain's lines: powers of two from 128 B to 4x shared memory per "
                             "SM (the set construction), and 128 B at each shared allocation (the capacity)",
             "placement": "stride (block i at i x stride) or random (distinct 128-B blocks drawn at random "
                          "from 64x the span of the longest chain)",
             "smem_bytes": "dynamic shared memory the walking block allocates: the record alone, then 1/8..all of "
                           "the opt-in limit (quick: two of them), which moves the L1/shared carve-out"},
       quantities=("l1.ways", "l1.sets", "l1.set_pattern_departures", "l1.replacement_miss_fraction",
                   "l1.capacity_bytes_at_carveout", "l1.unified_bytes", "l1.shared_trade_ratio"),
       kernels=("geometry.cu",))
def geometry_l1(ctx, stride_bytes: int, smem_bytes: int, placement: str) -> list[Sample]:
    """Misses of a cyclic chain of N lines at a fixed stride through the L1, timed access by access, N found
    by bisection where misses begin and swept past it: ways and sets from how that onset moves with the
    stride, the policy from the curve, the capacity at each shared-memory allocation."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    if smem_bytes < RECORD_BYTES or stride_bytes % 8:
        raise ValueError(f"smem_bytes={smem_bytes} must hold the record ({RECORD_BYTES} B) and stride_bytes="
                         f"{stride_bytes} be a multiple of 8")
    n_max = max_lines(ctx.device, stride_bytes)
    blocks = chain_blocks(placement, n_max, ctx.rng(stride_bytes, smem_bytes))
    words = cupy.zeros((int(blocks.max()) + 1) * stride_bytes // 8, dtype=cupy.uint64)
    base = words.data.ptr
    record = kernel("geometry.cu", "l1_record")
    record.preferred_shared_memory_carveout = 0  # as much L1 as the shared allocation leaves
    if smem_bytes > ctx.device["smem_per_block_bytes"]:
        record.max_dynamic_shared_size_bytes = smem_bytes
    intervals = cupy.zeros(RECORDED, dtype=cupy.uint16)
    out = cupy.zeros(3, dtype=cupy.uint64)
    clocks: list[float] = []

    def walk(lines: int) -> np.ndarray:
        order = blocks[:lines]
        fill_chain(words, cupy.asarray(order), stride_bytes, base)
        walker = ChainWalker(order, stride_bytes, base, lines * stride_bytes)
        warm = 2 * lines
        record((1,), (1,), (np.uint64(walker.start()), np.int64(warm), np.int32(RECORDED), intervals, out),
               shared_mem=smem_bytes)
        result = out.get()
        walker.advance(warm + RECORDED, int(result[2]))
        clocks.append(float(result[0]) / float(result[1]) * 1e9)
        return intervals.get().astype(np.float64)

    samples = sweep_lines(walk, n_max)
    if stride_bytes == LINE_STRIDE and not any(s.metric == "access" for s in samples):
        raise RuntimeError(f"L1 record: no miss in a chain of {n_max} lines at {stride_bytes} B, "
                           f"{n_max * stride_bytes} B: more than any L1 beside this shared memory can hold")
    hz = float(np.median(clocks))
    flag = ctx.throttle_flag(hz)
    for s in samples:
        s.sm_clock_hz, s.flag = hz, flag
    return samples


#: Bytes of __constant__ memory the chain may span (geometry.cu's const_chain: the space a kernel may use),
#: and the stride between its elements: below any cache line, so a footprint touches all of its lines.
CONST_BYTES, CONST_STRIDE = 64 << 10, 16


def const_footprints(device: dict, per_octave: int = 4) -> list[int]:
    """256 B to the whole constant space, ``per_octave`` per doubling."""
    return geom(256, CONST_BYTES, per_octave=per_octave, align=CONST_STRIDE)


@probe("geometry.const",
       sweeps={"quick": lambda d: {"footprint_bytes": const_footprints(d, 1)},
               "full": lambda d: {"footprint_bytes": const_footprints(d)}},
       axes={"footprint_bytes": "bytes of __constant__ memory the chain spans, 256 B..64 KiB (4 per octave; "
                                "quick: 1)"},
       quantities=("const.l1.latency_cycles", "const.l1.capacity_bytes", "const.l15.latency_cycles",
                   "const.l15.capacity_bytes"),
       kernels=("geometry.cu",))
def geometry_const(ctx, footprint_bytes: int) -> list[Sample]:
    """Cycles per dependent constant-memory load (LDC) over a random single-cycle chain of the given
    footprint: the constant caches' latency staircase."""
    import cupy

    from gpuatlas.probes.kit.chain import CALIBRATION_STEPS, chain_order, chase_samples, steps_for
    from gpuatlas.probes.kit.cuda import kernel, module

    if not 2 * CONST_STRIDE <= footprint_bytes <= CONST_BYTES:
        raise ValueError(f"footprint_bytes={footprint_bytes} must lie in {2 * CONST_STRIDE}..{CONST_BYTES}")
    elements = footprint_bytes // CONST_STRIDE
    order = chain_order(ctx.rng(footprint_bytes), elements)
    chain = np.zeros(footprint_bytes // 4, dtype=np.uint32)
    chain[order * CONST_STRIDE // 4] = np.roll(order, -1) * CONST_STRIDE
    module("geometry.cu").get_global("const_chain").copy_from_host(chain.ctypes.data, chain.nbytes)
    chase = kernel("geometry.cu", "const_chase")
    out = cupy.zeros(3, dtype=cupy.uint64)
    position = 0

    def run(warm: int, steps: int) -> np.ndarray:
        nonlocal position
        chase((1,), (1,), (np.uint32(order[position % elements] * CONST_STRIDE), np.int64(warm), np.int64(steps),
                           out))
        result = out.get()
        position += warm + steps
        if int(result[2]) != int(order[position % elements]) * CONST_STRIDE:
            raise RuntimeError(f"constant chase sink mismatch: ended at byte {int(result[2])}, the chain says "
                               f"{int(order[position % elements]) * CONST_STRIDE}")
        return result

    first = run(elements, CALIBRATION_STEPS)  # every launch walks the chain once untimed: the caches' state
    steps = steps_for(float(first[1]) * 1e-9 / CALIBRATION_STEPS)
    return repeat_until_stable(lambda repeat: chase_samples(ctx, run(elements, steps), steps, repeat, "clock64"),
                               "latency", ctx.budget)


#: cudaLimitPersistingL2CacheSize (driver_types.h): the share of the L2 set aside for persisting lines.
PERSISTING_LIMIT = 0x06
#: Rounds of one launch: each reads the hot set, then streams one L2-sized slice of the cold buffer.
PERSIST_ROUNDS = 8
PERSIST_KERNELS = {"normal": "persist_normal", "evict_last": "persist_evict_last"}


def persist_hot_bytes(device: dict) -> int:
    """The reused set: half the L2 the driver lets persist (half the L2 where the property is missing)."""
    return int(device.get("persisting_l2_max_bytes") or device["l2_bytes"]) // 2 // 4096 * 4096


@probe("geometry.l2_persist",
       sweeps={"quick": lambda d: {"hint": ["normal", "evict_last"]},
               "full": lambda d: {"hint": ["normal", "evict_last"]}},
       axes={"hint": "L2 eviction priority of the hot set's loads: normal, or evict_last (persisting, with the "
                     "driver's persisting set-aside at its maximum)"},
       quantities=("l2.persisting_speedup",), kernels=("geometry.cu",))
def geometry_l2_persist(ctx, hint: str) -> list[Sample]:
    """Seconds per launch that re-reads a hot set half the persisting L2's size while an L2-sized stream
    passes between its reads: with normal priority the stream evicts the hot set, which then comes from HBM;
    persisting (evict_last) lines stay in the L2, so the speed-up is what persistence saves."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel
    from gpuatlas.probes.kit.harness import EventTimer, Sink

    device = ctx.device
    hot_bytes, slice_bytes = persist_hot_bytes(device), device["l2_bytes"] // 4096 * 4096
    hot = cupy.ones(hot_bytes // 4, dtype=cupy.uint32)
    cold = cupy.ones(PERSIST_ROUNDS * slice_bytes // 4, dtype=cupy.uint32)
    sink = Sink(f"geometry.l2_persist {hint}")
    per_launch = PERSIST_ROUNDS * (hot.size + slice_bytes // 4)
    threads = 256
    grid = 4 * device["sm_count"]
    args = (hot, np.int64(hot_bytes // 16), cold, np.int64(slice_bytes // 16), np.int32(PERSIST_ROUNDS),
            sink.array)
    previous = cupy.cuda.runtime.deviceGetLimit(PERSISTING_LIMIT)
    if hint == "evict_last":
        cupy.cuda.runtime.deviceSetLimit(PERSISTING_LIMIT, int(device.get("persisting_l2_max_bytes") or 0))
    read = kernel("geometry.cu", PERSIST_KERNELS[hint])

    def launch():
        read((grid,), (threads,), args)
        sink.launches += 1

    try:
        timer = EventTimer(launch, ctx.budget.min_sample_s)

        def sample(repeat: int) -> list[Sample]:
            seconds = timer.seconds_per_launch()
            return [Sample("seconds", seconds, "s", repeat, None, "cuda_event")]

        samples = repeat_until_stable(sample, "seconds", ctx.budget)
        sink.check(per_launch)
    finally:  # demote the hot lines and give the set-aside back: later probes see a plain L2
        kernel("geometry.cu", "persist_evict_first")((grid,), (threads,), args)
        sink.launches += 1
        cupy.cuda.runtime.deviceSetLimit(PERSISTING_LIMIT, previous)
    return samples + [Sample("hot_bytes", float(hot_bytes), "B", 0, None, "config"),
                      Sample("stream_bytes_per_round", float(slice_bytes), "B", 0, None, "config")]
