"""Load-to-use latency of each memory level, by pointer chase (CuPy RawModule, chase.cu).

One thread follows a random single-cycle chain of absolute addresses laid one per ``stride_bytes`` through
a buffer of ``footprint_bytes``.  Each load's address is the previous load's value, so no two loads
overlap: cycles per step is the latency of whichever level holds the footprint.  The random order defeats
prefetching and spreads the chain over every line, page and L2 slice of the footprint.

The probe proves its own result: the chain is one cycle through every line by construction
(``chain_order``/``fill_chain``), and after ``k`` steps the kernel's final address (the sink) must be the
``k``-th element of that cycle -- the host checks it on every launch.
"""
from __future__ import annotations

import math

import numpy as np

from probes.harness import Sample, repeat_until_stable
from probes.registry import geom, probe

#: A sample of the chase should last about this long (globaltimer ticks are far shorter).
SAMPLE_S = 1e-3
#: Steps of the first launch, used to size the later ones; and the bounds on steps per launch.
CALIBRATION_STEPS, MIN_STEPS, MAX_STEPS = 1024, 1024, 1 << 21
#: Steps of the in-kernel warm walk that loads the chain into L1 before the first timed launch.
MAX_WARM_STEPS = 1 << 14
UNROLL = 32  # chase.cu's inner unroll: timed steps are a multiple of this
FLAVOURS = {"default": "chase_default", "cg": "chase_cg"}


def three_footprints(device: dict) -> list[int]:
    """One footprint in L1, one in L2 and one in device memory, sized from the device's own properties."""
    in_l1 = device["smem_per_sm_bytes"] // 16 // 128 * 128  # far below any L1/shared carve-out
    in_l2 = device["l2_bytes"] // 8
    in_dram = 4 * device["l2_bytes"]
    return [in_l1, in_l2, in_dram]


def footprint_sweep(device: dict) -> list[int]:
    """1 KiB to 4x L2, 8 jittered points per octave (about 220 points on a 60 MiB L2)."""
    return geom(1 << 10, 4 * device["l2_bytes"], per_octave=8, jitter_seed=device["l2_bytes"], align=128)


@probe("chase.latency",
       sweeps={"quick": lambda d: {"footprint_bytes": three_footprints(d), "stride_bytes": [128],
                                   "flavour": ["default"]},
               "full": lambda d: {"footprint_bytes": footprint_sweep(d), "stride_bytes": [128, 32],
                                  "flavour": ["default", "cg"]}},
       axes={"footprint_bytes": "quick: one footprint in L1, L2 and HBM; full: 1 KiB..4x L2, 8/octave",
             "stride_bytes": "bytes between chain elements: 128 (one per line); full adds 32 (one per sector)",
             "flavour": "default (ld.global, through L1) or cg (ld.global.cg, L2 only)"},
       quantities=("l1.latency_cycles", "l2.latency_cycles", "dram.latency_cycles", "dram.latency_ns",
                   "l1.capacity_bytes", "l2.partition_bytes", "l2.far_plateau_cycles", "l2.far_reach_bytes"),
       kernels=("chase.cu",))
def chase_latency(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per dependent 64-bit load over a random single-cycle chain of the given footprint."""
    return measure_chase(ctx, footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64")


def cupy_launcher(flavour: str):
    """``launch(start, warm, steps) -> out`` for chase.cu's kernel of ``flavour``."""
    import cupy

    from probes.cuda import kernel

    step_kernel = kernel("chase.cu", FLAVOURS[flavour])
    out = cupy.zeros(3, dtype=cupy.uint64)

    def launch(start: int, warm: int, steps: int):
        step_kernel((1,), (1,), (np.uint64(start), np.int64(warm), np.int64(steps), out))
        return out.get()

    return launch


SECTOR_SPAN = 32  # bytes: the smallest block a cache fills, so the smallest block the sweep must overflow


def line_configs(device: dict, strides: list[int]) -> list[dict]:
    """Address-order chases at every stride: through L1 with a chain that overflows L1 but stays in L2,
    and L2-only with one that overflows L2.

    A chain must touch more blocks than the cache holds even when each element fills one sector, so its
    footprint grows with the stride: span / 32 B * stride, at least span = 4x shared memory per SM (L1) or
    2x L2 (L2); the L1 chain is capped at half the L2 so that its misses still hit L2."""
    def footprint(span: int, stride: int, cap: float) -> int:
        return int(min(max(span, span // SECTOR_SPAN * stride), cap)) // stride * stride

    l1_span, l2_span = 4 * device["smem_per_sm_bytes"], 2 * device["l2_bytes"]
    return ([{"footprint_bytes": footprint(l1_span, s, device["l2_bytes"] / 2), "stride_bytes": s,
              "flavour": "default"} for s in strides]
            + [{"footprint_bytes": footprint(l2_span, s, float("inf")), "stride_bytes": s, "flavour": "cg"}
               for s in strides])


@probe("chase.line",
       sweeps={"quick": lambda d: line_configs(d, [16, 32, 64, 128, 256]),
               "full": lambda d: line_configs(d, [8, 16, 32, 48, 64, 96, 128, 192, 256, 512])},
       axes={"footprint_bytes": "through L1: beyond L1 but inside L2; L2-only: beyond L2; grown with the stride "
                                "so the chain always overflows the cache",
             "stride_bytes": "bytes between consecutive chain elements, walked in address order",
             "flavour": "default (through L1: the L1 fill block) or cg (L2 only: the L2 fill block from HBM)"},
       quantities=("l1.line_bytes", "mem.sector_bytes"), kernels=("chase.cu",))
def chase_line(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per load of a chase walked in address order at a given stride: a load hits while it stays in
    the block the previous miss brought in, so latency rises with stride until the stride reaches that
    fill granularity (the line or sector size) and is flat beyond."""
    return measure_chase(ctx, footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64",
                         order="sequential")


def page_footprints(device: dict, stride_bytes: int) -> list[int]:
    """Chains of 2 to ``total memory / 4`` bytes at one element per page-sized stride, 4 per octave."""
    top = device["total_memory_bytes"] // 4 // stride_bytes * stride_bytes
    return sorted({f // stride_bytes * stride_bytes for f in geom(2 * stride_bytes, top, per_octave=4)})


PAGE_STRIDE = 2 << 20  # the page size of large cudaMalloc allocations


@probe("chase.tlb",
       sweeps={"quick": lambda d: {"footprint_bytes": page_footprints(d, PAGE_STRIDE)[::2],
                                   "stride_bytes": [PAGE_STRIDE], "flavour": ["cg"]},
               "full": lambda d: {"footprint_bytes": page_footprints(d, PAGE_STRIDE),
                                  "stride_bytes": [PAGE_STRIDE], "flavour": ["cg"]}},
       axes={"footprint_bytes": "2 pages .. total memory / 4, 4 per octave (quick: 2 per octave)",
             "stride_bytes": "one chain element per 2 MiB page",
             "flavour": "cg: L2 only, so the few lines touched always hit L2"},
       quantities=("tlb.level1_reach_bytes", "tlb.level1_miss_cycles", "tlb.level2_reach_bytes",
                   "tlb.level2_miss_cycles", "tlb.reach_lower_bound_bytes"), kernels=("chase.cu",))
def chase_tlb(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per load with one chain element per page: the lines touched fit in L2 at every footprint,
    so latency steps only where the pages touched outgrow a TLB's reach, by that TLB's miss penalty."""
    return measure_chase(ctx, footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64")


def smem_footprints(device: dict) -> list[int]:
    return geom(1 << 10, device["smem_per_block_bytes"] // 2, per_octave=1)


@probe("chase.smem",
       sweeps={"quick": lambda d: {"footprint_bytes": smem_footprints(d)[:1], "stride_bytes": [4]},
               "full": lambda d: {"footprint_bytes": smem_footprints(d), "stride_bytes": [4, 128]}},
       axes={"footprint_bytes": "bytes of shared memory the chain spans (1 KiB .. half a block's limit)",
             "stride_bytes": "bytes between chain elements"},
       quantities=("smem.latency_cycles",), kernels=("chase.cu",))
def chase_smem(ctx, footprint_bytes: int, stride_bytes: int) -> list[Sample]:
    """Cycles per dependent 32-bit shared-memory load (LDS) over a random single-cycle chain."""
    import cupy

    from probes.cuda import kernel

    elements = footprint_bytes // stride_bytes
    order = chain_order(ctx.rng(footprint_bytes, stride_bytes), elements)
    next_index = np.empty(elements, dtype=np.uint32)
    next_index[order] = np.roll(order, -1)
    next_gpu = cupy.asarray(next_index)
    out = cupy.zeros(3, dtype=cupy.uint64)
    chase_kernel = kernel("chase.cu", "chase_shared")
    position = 0

    def run(warm: int, steps: int) -> np.ndarray:
        nonlocal position
        start = int(order[position % elements])
        chase_kernel((1,), (32,), (next_gpu, np.int32(elements), np.int32(stride_bytes // 4), np.int32(start),
                                   np.int64(warm), np.int64(steps), out), shared_mem=footprint_bytes)
        result = out.get()
        position += warm + steps
        if int(result[2]) != int(order[position % elements]):
            raise RuntimeError(f"shared chase sink mismatch: ended at element {int(result[2])}, the chain "
                               f"says {int(order[position % elements])}")
        return result

    first = run(min(elements, MAX_WARM_STEPS), CALIBRATION_STEPS)
    steps = steps_for(float(first[1]) * 1e-9 / CALIBRATION_STEPS)
    return repeat_until_stable(lambda repeat: chase_samples(ctx, run(0, steps), steps, repeat, "clock64"),
                               "latency", ctx.budget)


def chase_samples(ctx, out, steps: int, repeat: int, timer: str) -> list[Sample]:
    """The two samples of one timed launch: cycles per step (clock64) and seconds per step (globaltimer)."""
    cycles, ns = float(out[0]), float(out[1])
    hz = cycles / ns * 1e9
    flag = ctx.throttle_flag(hz)
    return [Sample("latency", cycles / steps, "cycles", repeat, hz, timer, flag),
            Sample("latency_time", ns * 1e-9 / steps, "s", repeat, hz, "globaltimer", flag)]


def chain_order(rng: np.random.Generator, elements: int) -> np.ndarray:
    """The order in which the chase visits the elements: a random permutation, walked as one cycle."""
    return rng.permutation(elements).astype(np.int64)


def fill_chain(words, order, stride_bytes: int, base: int) -> None:
    """Write the chain into ``words`` (uint64, numpy or cupy): element ``order[i]`` holds the address of
    element ``order[i+1]``, and the last holds the first's, so the chain is one cycle through all of them.
    Addresses are ``base`` plus byte offsets; other words are left alone."""
    xp = _array_module(words)
    stride_words = stride_bytes // 8
    nxt = xp.roll(order, -1).astype(xp.uint64)
    words[order * stride_words] = xp.uint64(base) + nxt * xp.uint64(stride_bytes)


def _array_module(array):
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy.get_array_module(array)


def expected_address(order: np.ndarray, steps: int, stride_bytes: int, base: int) -> int:
    """Where a chase that started at ``order[0]`` must be after ``steps`` steps: the sink it must report."""
    return base + int(order[steps % len(order)]) * stride_bytes


def steps_for(seconds_per_step: float) -> int:
    """Timed steps per launch for a sample of about SAMPLE_S, a multiple of the kernel's unroll."""
    steps = SAMPLE_S / max(seconds_per_step, 1e-12)
    steps = min(MAX_STEPS, max(MIN_STEPS, steps))
    return int(math.ceil(steps / UNROLL) * UNROLL)


def chain_on_gpu(ctx, footprint_bytes: int, stride_bytes: int, order: str = "random"):
    """The chain of ``footprint_bytes`` on the GPU, every line touched by the whole grid so it starts in L2
    with its pages mapped: ``(words, base address, visiting order)``.  ``order`` is ``random`` (a random
    single cycle) or ``sequential`` (address order, then wrap)."""
    import cupy

    from probes.cuda import kernel

    if footprint_bytes < 2 * stride_bytes or stride_bytes % 8:
        raise ValueError(f"footprint_bytes={footprint_bytes} must hold two elements of stride_bytes="
                         f"{stride_bytes}, a multiple of 8")
    elements = footprint_bytes // stride_bytes
    words = cupy.zeros(elements * stride_bytes // 8, dtype=cupy.uint64)
    base = words.data.ptr
    order_host = (chain_order(ctx.rng(footprint_bytes, stride_bytes), elements) if order == "random"
                  else np.arange(elements, dtype=np.int64))
    fill_chain(words, cupy.asarray(order_host), stride_bytes, base)
    sink = cupy.zeros(1, dtype=cupy.uint64)
    kernel("chase.cu", "touch")((ctx.device["sm_count"] * 4,), (256,),
                                (words, np.int64(words.size), np.int64(stride_bytes // 8), sink))
    return words, base, order_host


class ChainWalker:
    """Launches that continue one chain where the last stopped, each checked against the chain: after ``k``
    steps in all, the kernel's final address (its sink) must be the ``k``-th element of the cycle."""

    def __init__(self, order_host: np.ndarray, stride_bytes: int, base: int, footprint_bytes: int):
        self.order, self.stride, self.base, self.footprint = order_host, stride_bytes, base, footprint_bytes
        self.position = 0

    def start(self) -> int:
        return self.base + int(self.order[self.position % len(self.order)]) * self.stride

    def advance(self, steps: int, sink: int) -> None:
        self.position += steps
        expected = expected_address(self.order, self.position, self.stride, self.base)
        if sink != expected:
            raise RuntimeError(f"chase sink mismatch at footprint {self.footprint} B: the kernel ended at "
                               f"{sink:#x}, the chain says {expected:#x} after {self.position} steps")


def measure_chase(ctx, footprint_bytes: int, stride_bytes: int, launch, timer: str,
                  order: str = "random") -> list[Sample]:
    """Build the chain on the GPU, warm it, then time launches of ``launch(start, warm, steps) -> out``
    until stable.  Shared by the CuPy and Numba front ends, so both time exactly the same chain."""
    words, base, order_host = chain_on_gpu(ctx, footprint_bytes, stride_bytes, order)
    walker = ChainWalker(order_host, stride_bytes, base, footprint_bytes)

    def run(warm: int, steps: int) -> np.ndarray:
        out = launch(walker.start(), warm, steps)
        walker.advance(warm + steps, int(out[2]))
        return out

    first = run(min(len(order_host), MAX_WARM_STEPS), CALIBRATION_STEPS)
    steps = steps_for(float(first[1]) * 1e-9 / CALIBRATION_STEPS)

    return repeat_until_stable(lambda repeat: chase_samples(ctx, run(0, steps), steps, repeat, timer),
                               "latency", ctx.budget)


#: Accesses recorded per launch of chase_cg_record (16 bits each in shared memory), launches per footprint,
#: and the most steps of the warm walk that brings a footprint's chain to its steady state in the caches.
RECORDED_ACCESSES, RECORD_LAUNCHES, MAX_RECORD_WARM_STEPS = 4096, 2, 1 << 19


def access_footprints(device: dict, quick: bool = False) -> list[int]:
    """Chains from deep inside one L2 partition (every access a near hit) through the far partition's
    range (far hits mixed with misses) to 4x the L2 (nearly all misses), in fractions of the L2."""
    fractions = (1 / 8, 3 / 4, 4) if quick else (1 / 8, 5 / 8, 3 / 4, 7 / 8, 1, 4)
    return [int(device["l2_bytes"] * f) // 128 * 128 for f in fractions]


@probe("chase.access",
       sweeps={"quick": lambda d: {"footprint_bytes": access_footprints(d, quick=True),
                                   "stride_bytes": [128],
                                   "flavour": ["cg"]},
               "full": lambda d: {"footprint_bytes": access_footprints(d), "stride_bytes": [128],
                                  "flavour": ["cg"]}},
       axes={"footprint_bytes": "L2/8 (near hits only), 5/8..1 x L2 (near, far and missing accesses mixed), "
                                "4 x L2 (mostly misses); quick: L2/8, 3/4 x L2 and 4 x L2",
             "stride_bytes": "one chain element per 128-byte line",
             "flavour": "cg (ld.global.cg, L2 only)"},
       quantities=("l2.far_latency_cycles", "dram.near_latency_cycles", "dram.far_latency_cycles"),
       kernels=("chase.cu",))
def chase_access(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles of each access of one SM's L2-only chase, one by one: a chain larger than one L2 partition
    mixes near-partition hits, far-partition hits and HBM misses, and each is a cluster of its own in the
    distribution, at a latency that does not depend on the mix (the plain chase's average does)."""
    import cupy

    from probes.cuda import kernel

    if flavour != "cg":
        raise ValueError(f"chase.access records L2-only (cg) chases; got flavour {flavour!r}")
    words, base, order_host = chain_on_gpu(ctx, footprint_bytes, stride_bytes)
    walker = ChainWalker(order_host, stride_bytes, base, footprint_bytes)
    record = kernel("chase.cu", "chase_cg_record")
    intervals = cupy.zeros(RECORDED_ACCESSES, dtype=cupy.uint16)
    out = cupy.zeros(3, dtype=cupy.uint64)
    smem_bytes = 2 * RECORDED_ACCESSES + 8

    def run(warm: int) -> np.ndarray:
        record((1,), (1,), (np.uint64(walker.start()), np.int64(warm), np.int32(RECORDED_ACCESSES), intervals,
                            out), shared_mem=smem_bytes)
        result = out.get()
        walker.advance(warm + RECORDED_ACCESSES, int(result[2]))
        return result

    run(min(len(order_host), MAX_RECORD_WARM_STEPS))
    samples = []
    for repeat in range(RECORD_LAUNCHES):
        cycles, ns = (float(v) for v in run(0)[:2])
        hz = cycles / ns * 1e9
        flag = ctx.throttle_flag(hz)
        samples.append(Sample("record_step", cycles / RECORDED_ACCESSES, "cycles", repeat, hz, "clock64", flag))
        first = repeat * RECORDED_ACCESSES  # one row per access: its index in the recording is its repeat
        samples += [Sample("access", float(v), "cycles", first + i, hz, "clock", flag)
                    for i, v in enumerate(intervals.get())]
    # The plain chase over the same chain: its cycles per step against the recording loop's give the constant
    # cost of recording (the STS and the clock read), which the analysis takes off every access.
    plain = cupy_launcher("cg")

    def chase(repeat: int) -> list[Sample]:
        result = plain(walker.start(), 0, RECORDED_ACCESSES)
        walker.advance(RECORDED_ACCESSES, int(result[2]))
        return chase_samples(ctx, result, RECORDED_ACCESSES, repeat, "clock64")

    return samples + [s for repeat in range(RECORD_LAUNCHES) for s in chase(repeat)]
