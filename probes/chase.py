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

import dataclasses

import numpy as np

from probes import kit
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


#: Strides of the capacity-in-lines sweeps: a cache of L-byte lines holds one element per line when the stride
#: is L or more, and L/stride elements per line below, so the capacity knee's footprint is flat up to L and
#: grows with the stride past it.
LINE_STRIDES = (32, 64, 256)


def latency_configs(device: dict) -> list[dict]:
    """The full staircase at 128-byte stride, through L1 and L2-only; the through-L1 chase again at 32, 64 and
    256 bytes around the L1's capacity (1/16..8x shared memory per SM, 8 per octave), and the L2-only one at 64
    and 256 bytes around the L2 (L2/16..4x L2, 4 per octave), for each cache's line size."""
    configs = [{"footprint_bytes": f, "stride_bytes": 128, "flavour": flavour}
               for flavour in ("default", "cg") for f in footprint_sweep(device)]
    smem, l2 = device["smem_per_sm_bytes"], device["l2_bytes"]
    for stride in LINE_STRIDES:
        configs += [{"footprint_bytes": f, "stride_bytes": stride, "flavour": "default"}
                    for f in geom(smem // 16, 8 * smem, per_octave=8, jitter_seed=smem + stride, align=stride)]
    for stride in (64, 256):
        configs += [{"footprint_bytes": f, "stride_bytes": stride, "flavour": "cg"}
                    for f in geom(l2 // 16, 4 * l2, per_octave=4, jitter_seed=l2 + stride, align=stride)]
    return configs


@probe("chase.latency",
       sweeps={"quick": lambda d: {"footprint_bytes": three_footprints(d), "stride_bytes": [128],
                                   "flavour": ["default"]},
               "full": latency_configs},
       axes={"footprint_bytes": "quick: one footprint in L1, L2 and HBM; full: 1 KiB..4x L2, 8/octave, and the "
                                "line-size sweeps around each cache's capacity",
             "stride_bytes": "bytes between chain elements: 128 (one per line); full adds 32, 64 and 256 around the "
                             "L1 and 64 and 256 around the L2 (capacity counted in lines)",
             "flavour": "default (ld.global, through L1) or cg (ld.global.cg, L2 only)"},
       quantities=("l1.latency_cycles", "l1.capacity_bytes", "l1.line_bytes", "l1.line_lower_bound_bytes",
                   "l2.latency_cycles", "l2.partition_bytes", "l2.far_plateau_cycles", "l2.far_reach_bytes",
                   "l2.line_bytes", "l2.line_lower_bound_bytes"),
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
       quantities=("l1.fill_bytes", "l1.sector_bytes", "l2.dram_fetch_bytes"), kernels=("chase.cu",))
def chase_line(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per load of a chase walked in address order at a given stride: a load hits while it stays in
    the block the previous miss brought in, so latency rises with stride until the stride reaches that
    fill block (a sector where the cache fills sector by sector; not the line, whose span only a capacity
    count shows) and is flat beyond."""
    return measure_chase(ctx, footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64",
                         order="sequential")


def page_footprints(device: dict, stride_bytes: int, per_octave: int = 4) -> list[int]:
    """Chains of 2 to ``total memory / 4`` bytes at one element per ``stride_bytes`` block."""
    top = device["total_memory_bytes"] // 4 // stride_bytes * stride_bytes
    return sorted({f // stride_bytes * stride_bytes for f in geom(2 * stride_bytes, top, per_octave=per_octave)})


#: The block one chain element sits in (at a random sector of it): 2 MiB, the page of large cudaMalloc
#: allocations by the driver's documentation.  The sweep measures the page instead of trusting it: the
#: footprint where a TLB level overflows is (entries) x max(page, stride), so the knee stays put at strides
#: below the page and moves with the stride above it.
PAGE_STRIDE = 2 << 20
PAGE_STRIDES = tuple(PAGE_STRIDE * 2**k // 4 for k in (0, 1, 3, 4, 5, 6, 7, 8, 9))  # 0.5 MiB .. 256 MiB


def tlb_configs(device: dict, quick: bool = False) -> list[dict]:
    """One element per 2 MiB block, 4 footprints per octave (quick: 2), and in ``full`` the same chase at
    block strides of 1/4 to 128 pages, 2 per octave, to measure the span one TLB entry covers."""
    configs = [{"footprint_bytes": f, "stride_bytes": PAGE_STRIDE, "flavour": "cg"}
               for f in page_footprints(device, PAGE_STRIDE, 2 if quick else 4)]
    if not quick:
        configs += [{"footprint_bytes": f, "stride_bytes": s, "flavour": "cg"} for s in PAGE_STRIDES
                    for f in page_footprints(device, s, 2) if f >= 32 * PAGE_STRIDE]
    return configs


@probe("chase.tlb",
       sweeps={"quick": lambda d: tlb_configs(d, quick=True), "full": tlb_configs},
       axes={"footprint_bytes": "2 blocks .. total memory / 4, 4 per octave at 2 MiB blocks (quick: 2), 2 per "
                                "octave from 64 MiB at the other block sizes",
             "stride_bytes": "one chain element per block of this size, at a random sector of it: 2 MiB; full adds "
                             "0.5 MiB..256 MiB blocks (the page size from how the knee moves)",
             "flavour": "cg: L2 only, so the few lines touched always hit L2"},
       quantities=("tlb.l1.reach_bytes", "tlb.l1.miss_cycles", "tlb.l2.reach_bytes", "tlb.l2.miss_cycles",
                   "tlb.reach_lower_bound_bytes", "tlb.page_bytes"), kernels=("chase.cu",))
def chase_tlb(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per load with one chain element per large block: the lines touched fit in L2 at every
    footprint, so latency steps only where the pages touched outgrow a TLB's reach, by that TLB's miss
    penalty.  Each element sits at a random sector of its block, so no two share a set by their low bits."""
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
    return kit.clock_samples(ctx, float(out[0]), steps, repeat, timer, ns=float(out[1]))


def chain_order(rng: np.random.Generator, elements: int) -> np.ndarray:
    """The order in which the chase visits the elements: a random permutation, walked as one cycle."""
    return rng.permutation(elements).astype(np.int64)


def fill_chain(words, order, stride_bytes: int, base: int, offsets=None) -> None:
    """Write the chain into ``words`` (uint64, numpy or cupy): element ``order[i]`` holds the address of
    element ``order[i+1]``, and the last holds the first's, so the chain is one cycle through all of them.
    Element ``order[i]`` sits at byte ``order[i] * stride_bytes + offsets[i]`` (``offsets``: 8-byte multiples
    below the stride, parallel to ``order``; none: every element at the start of its block).  Addresses are
    ``base`` plus byte offsets; other words are left alone."""
    xp = _array_module(words)
    at = order.astype(xp.uint64) * xp.uint64(stride_bytes)
    if offsets is not None:
        at = at + xp.asarray(offsets).astype(xp.uint64)
    words[(at // xp.uint64(8)).astype(xp.int64)] = xp.uint64(base) + xp.roll(at, -1)


def _array_module(array):
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy.get_array_module(array)


def expected_address(order: np.ndarray, steps: int, stride_bytes: int, base: int, offsets=None) -> int:
    """Where a chase that started at ``order[0]`` must be after ``steps`` steps: the sink it must report."""
    k = steps % len(order)
    return base + int(order[k]) * stride_bytes + (0 if offsets is None else int(offsets[k]))


def steps_for(seconds_per_step: float) -> int:
    """Timed steps per launch for a sample of about SAMPLE_S, a multiple of the kernel's unroll."""
    return kit.steps_for(seconds_per_step, UNROLL, sample_s=SAMPLE_S, low=MIN_STEPS, high=MAX_STEPS)


class ChainWalker:
    """Launches that continue one chain where the last stopped, each checked against the chain: after ``k``
    steps in all, the kernel's final address (its sink) must be the ``k``-th element of the cycle."""

    def __init__(self, order_host: np.ndarray, stride_bytes: int, base: int, footprint_bytes: int,
                 offsets: np.ndarray | None = None):
        self.order, self.stride, self.base, self.footprint = order_host, stride_bytes, base, footprint_bytes
        self.offsets = offsets
        self.position = 0

    def start(self) -> int:
        return expected_address(self.order, self.position, self.stride, self.base, self.offsets)

    def advance(self, steps: int, sink: int) -> None:
        self.position += steps
        expected = expected_address(self.order, self.position, self.stride, self.base, self.offsets)
        if sink != expected:
            raise RuntimeError(f"chase sink mismatch at footprint {self.footprint} B: the kernel ended at "
                               f"{sink:#x}, the chain says {expected:#x} after {self.position} steps")


SECTOR_ALIGN = 32  # bytes: chain elements sit at random multiples of this inside their stride-sized block


def element_offsets(rng: np.random.Generator, count: int, stride_bytes: int) -> np.ndarray:
    """A random 32-byte-aligned offset inside each element's ``stride_bytes`` block: the elements' addresses
    then share no low bits, so a power-of-two stride cannot alias a cache's or TLB's sets, while each element
    still lies in one sector of one line of its own block."""
    if stride_bytes <= SECTOR_ALIGN:
        return np.zeros(count, dtype=np.int64)
    return rng.integers(0, stride_bytes // SECTOR_ALIGN, count, dtype=np.int64) * SECTOR_ALIGN


#: Elements of a cold path (chase.miss): more than any measurement of one config visits, so none is revisited.
PATH_ELEMENTS = 1 << 18


def chain_on_gpu(ctx, footprint_bytes: int, stride_bytes: int, order: str = "random"):
    """The chain over ``footprint_bytes`` on the GPU: ``(words, ChainWalker)``.  A chain no larger than the L2
    is then read sector by sector from the whole grid, so it starts resident in the L2; a larger one is not
    (a chase visits a small part of it per sample, and lines left resident would make those visits hits).  ``order``: ``random`` (a random single cycle through every element, each at a
    random sector of its block), ``sequential`` (address order at the block starts, then wrap), or ``path``
    (a random cycle through ``PATH_ELEMENTS`` distinct elements drawn from the footprint, at random sectors:
    a walk shorter than the path never returns to a line it has loaded)."""
    import cupy

    from probes.cuda import kernel

    if footprint_bytes < 2 * stride_bytes or stride_bytes % 8:
        raise ValueError(f"footprint_bytes={footprint_bytes} must hold two elements of stride_bytes="
                         f"{stride_bytes}, a multiple of 8")
    elements = footprint_bytes // stride_bytes
    rng = ctx.rng(footprint_bytes, stride_bytes)
    words = cupy.zeros(elements * stride_bytes // 8, dtype=cupy.uint64)
    base = words.data.ptr
    offsets = None
    if order == "sequential":
        order_host = np.arange(elements, dtype=np.int64)
    elif order == "random":
        order_host = chain_order(rng, elements)
        offsets = element_offsets(rng, elements, stride_bytes)
    elif order == "path":
        order_host = rng.choice(elements, min(PATH_ELEMENTS, elements), replace=False).astype(np.int64)
        offsets = element_offsets(rng, order_host.size, stride_bytes)
    else:
        raise ValueError(f"unknown chain order {order!r}")
    fill_chain(words, cupy.asarray(order_host), stride_bytes, base,
               None if offsets is None else cupy.asarray(offsets))
    if order != "path" and footprint_bytes <= ctx.device["l2_bytes"]:
        sink = cupy.zeros(1, dtype=cupy.uint64)
        kernel("chase.cu", "touch")((ctx.device["sm_count"] * 4,), (256,),
                                    (words, np.int64(words.size), np.int64(SECTOR_ALIGN // 8), sink))
    return words, ChainWalker(order_host, stride_bytes, base, footprint_bytes, offsets)


_FLUSH: dict = {}


def flush_l2(device: dict) -> None:
    """Evict the L2: read a buffer of 4x its capacity twice, so the lines it then holds are that buffer's,
    clean (no write-back of a chain's dirty lines lands in a timed walk)."""
    import cupy

    size = 4 * device["l2_bytes"] // 8
    scratch = _FLUSH.get(size)
    if scratch is None:
        scratch = _FLUSH.setdefault(size, cupy.ones(size, dtype=cupy.uint64))
    for _ in range(2):
        if int(scratch.sum()) != size:
            raise RuntimeError("L2 flush buffer lost its contents")


def warm_steps(device: dict, footprint_bytes: int, elements: int) -> int:
    """Untimed steps at the start of every launch: a whole pass over a chain that may fit in L1 (the L1
    starts every launch empty, so without it each sample would hold one cold pass through the L2), none for
    larger chains, which the L2 keeps from launch to launch."""
    if footprint_bytes <= 2 * device["smem_per_sm_bytes"] and elements <= MAX_WARM_STEPS:
        return elements
    return 0


def measure_chase(ctx, footprint_bytes: int, stride_bytes: int, launch, timer: str,
                  order: str = "random") -> list[Sample]:
    """Build the chain on the GPU, warm it, then time launches of ``launch(start, warm, steps) -> out``
    until stable.  Shared by the CuPy and Numba front ends, so both time exactly the same chain.

    A ``path`` chain is measured cold: the L2 is flushed after the chain is written, there is no warm walk,
    and the steps per launch are capped so that the whole measurement never revisits an element: every
    access misses the L2."""
    words, walker = chain_on_gpu(ctx, footprint_bytes, stride_bytes, order)
    elements = len(walker.order)
    budget = ctx.budget
    if order == "path":
        flush_l2(ctx.device)
        warm, budget = 0, dataclasses.replace(budget, warmup_s=0.0)
    else:
        warm = warm_steps(ctx.device, footprint_bytes, elements)

    def run(warm: int, steps: int) -> np.ndarray:
        out = launch(walker.start(), warm, steps)
        walker.advance(warm + steps, int(out[2]))
        return out

    first = run(warm if order == "path" else max(warm, min(elements, MAX_WARM_STEPS)), CALIBRATION_STEPS)
    steps = steps_for(float(first[1]) * 1e-9 / CALIBRATION_STEPS)
    if order == "path":  # calibration + one warm-up launch + every repeat stay inside the path
        room = (elements - walker.position) // (budget.max_repeats + 1)
        steps = min(steps, max(UNROLL, room // UNROLL * UNROLL))

    return repeat_until_stable(lambda repeat: chase_samples(ctx, run(warm, steps), steps, repeat, timer),
                               "latency", budget)


def miss_footprints(device: dict, per_octave: int = 2) -> list[int]:
    """2x the L2 up to 128x (capped by a quarter of memory), ``per_octave`` per doubling: where every access
    of a cold path misses the L2, inside and past the TLBs' reach."""
    top = min(128 * device["l2_bytes"], device["total_memory_bytes"] // 4)
    return geom(2 * device["l2_bytes"], top, per_octave=per_octave, align=128)


@probe("chase.miss",
       sweeps={"quick": lambda d: {"footprint_bytes": miss_footprints(d)[:1], "stride_bytes": [128],
                                   "flavour": ["default"]},
               "full": lambda d: {"footprint_bytes": miss_footprints(d), "stride_bytes": [128],
                                  "flavour": ["default", "cg"]}},
       axes={"footprint_bytes": "2x..128x the L2 (2 per octave; quick: 2x the L2): the span the path's elements "
                                "are drawn from",
             "stride_bytes": "one element per 128-byte block, at a random sector of it",
             "flavour": "default (ld.global, the plain load) or cg (ld.global.cg, L2 only)"},
       quantities=("dram.latency_cycles", "dram.latency_ns", "dram.latency_tlb_miss_cycles",
                   "dram.latency_tlb_miss_ns", "dram.latency_cg_cycles"),
       kernels=("chase.cu",))
def chase_miss(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles per dependent load that misses the L2: a random path through distinct lines of a footprint
    larger than the L2, walked cold (the L2 flushed, no line visited twice), so every access goes to HBM.
    Small footprints keep the path's pages inside the TLBs' reach; large ones add translation misses."""
    return measure_chase(ctx, footprint_bytes, stride_bytes, cupy_launcher(flavour), timer="clock64",
                         order="path")


def every_sm_footprints(device: dict) -> list[int]:
    """L2/4 to 4x the L2, 8 jittered points per octave."""
    return geom(device["l2_bytes"] // 4, 4 * device["l2_bytes"], per_octave=8, jitter_seed=device["sm_count"],
                align=128)


@probe("chase.every_sm",
       sweeps={"quick": lambda d: {"footprint_bytes": every_sm_footprints(d)[::8], "stride_bytes": [128]},
               "full": lambda d: {"footprint_bytes": every_sm_footprints(d), "stride_bytes": [128]}},
       axes={"footprint_bytes": "L2/4..4x L2, 8 per octave (quick: 1 per octave)",
             "stride_bytes": "one chain element per 128-byte line, at a random sector of it"},
       quantities=("l2.capacity_chase_bytes",), kernels=("chase.cu",))
def chase_every_sm(ctx, footprint_bytes: int, stride_bytes: int) -> list[Sample]:
    """Cycles per dependent L2-only load with one chaser on every SM, each walking its own stretch of one
    random cycle: the chain's lines are read from both L2 partitions, so the knee where loads turn from
    hits to misses is the capacity the whole GPU can use (a line the two partitions both hold counts twice)."""
    import cupy

    from probes.cuda import kernel

    blocks = ctx.device["sm_count"]
    words, walker = chain_on_gpu(ctx, footprint_bytes, stride_bytes)
    elements = len(walker.order)
    segment = max(1, elements // blocks)
    positions = np.arange(blocks, dtype=np.int64) * segment
    every_sm = kernel("chase.cu", "chase_cg_every_sm")
    out = cupy.zeros(3 * blocks, dtype=cupy.uint64)

    def run(warm: int, steps: int) -> np.ndarray:
        starts = [expected_address(walker.order, int(p), stride_bytes, walker.base, walker.offsets)
                  for p in positions]
        every_sm((blocks,), (32,), (cupy.asarray(np.array(starts, dtype=np.uint64)), np.int64(warm),
                                    np.int64(steps), out))
        result = out.get().reshape(blocks, 3)
        positions[:] += warm + steps
        for b, p in enumerate(positions):
            want = expected_address(walker.order, int(p), stride_bytes, walker.base, walker.offsets)
            if int(result[b, 2]) != want:
                raise RuntimeError(f"every-SM chase sink mismatch in block {b}: ended at {int(result[b, 2]):#x}, "
                                   f"the chain says {want:#x}")
        return result

    first = run(segment, CALIBRATION_STEPS)  # each chaser walks its stretch once: the whole chain is visited
    steps = steps_for(float(np.median(first[:, 1])) * 1e-9 / CALIBRATION_STEPS)

    def sample(repeat: int) -> list[Sample]:
        result = run(0, steps).astype(float)
        cycles, ns = np.median(result[:, 0]), np.median(result[:, 1])
        return chase_samples(ctx, (cycles, ns), steps, repeat, "clock64")

    return repeat_until_stable(sample, "latency", ctx.budget)


#: Accesses recorded per launch of chase_cg_record (16 bits each in shared memory), launches per footprint,
#: and the most steps of the warm walk that brings a footprint's chain to its steady state in the caches.
RECORDED_ACCESSES, RECORD_LAUNCHES, MAX_RECORD_WARM_STEPS = 4096, 2, 1 << 19


def access_footprints(device: dict, quick: bool = False) -> list[int]:
    """Chains from deep inside one L2 partition (every access a near hit) through the far partition's
    range (far hits mixed with misses) to cold paths of 2x and 4x the L2 (every access a miss), in fractions of
    the L2."""
    fractions = (1 / 8, 3 / 4, 2) if quick else (1 / 8, 5 / 8, 3 / 4, 7 / 8, 1, 2, 4)
    return [int(device["l2_bytes"] * f) // 128 * 128 for f in fractions]


@probe("chase.access",
       sweeps={"quick": lambda d: {"footprint_bytes": access_footprints(d, quick=True),
                                   "stride_bytes": [128],
                                   "flavour": ["cg"]},
               "full": lambda d: {"footprint_bytes": access_footprints(d), "stride_bytes": [128],
                                  "flavour": ["cg"]}},
       axes={"footprint_bytes": "L2/8 (near hits only), 5/8..1 x L2 (near, far and missing accesses mixed), "
                                "2 and 4 x L2 (cold paths: misses only); quick: L2/8, 3/4 x L2 and 2 x L2",
             "stride_bytes": "one chain element per 128-byte line",
             "flavour": "cg (ld.global.cg, L2 only)"},
       quantities=("l2.far_latency_cycles", "dram.near_latency_cycles", "dram.far_latency_cycles"),
       kernels=("chase.cu",))
def chase_access(ctx, footprint_bytes: int, stride_bytes: int, flavour: str) -> list[Sample]:
    """Cycles of each access of one SM's L2-only chase, one by one: a chain larger than one L2 partition
    mixes near-partition hits, far-partition hits and HBM misses, and each is a cluster of its own in the
    distribution, at a latency that does not depend on the mix (the plain chase's average does).  Chains of
    2x the L2 and more are walked as cold paths (chase.miss's method), so their record shows whether any
    access still hits the L2."""
    import cupy

    from probes.cuda import kernel

    if flavour != "cg":
        raise ValueError(f"chase.access records L2-only (cg) chases; got flavour {flavour!r}")
    cold = footprint_bytes >= 2 * ctx.device["l2_bytes"]
    words, walker = chain_on_gpu(ctx, footprint_bytes, stride_bytes, "path" if cold else "random")
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

    if cold:  # a cold path: every recorded access is a first visit after the flush, so a miss
        flush_l2(ctx.device)
    else:
        run(min(len(walker.order), MAX_RECORD_WARM_STEPS))
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
