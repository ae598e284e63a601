"""The pointer-chain kit: one thread follows a chain of absolute addresses, each load's address the value
of the last, so no two loads overlap and cycles per step is the latency of the level holding the chain.

The chain is a random single cycle through every element (``chain_order``/``fill_chain``), each element at a
random sector of its block, so prefetchers and power-of-two aliasing are defeated; after ``k`` steps the
kernel's final address (its sink) must be the ``k``-th element of that cycle, and ``ChainWalker`` checks it on
every launch.  The chase families (CuPy, Numba), the geometry probes and the lecture's probes all walk it.

The draws are numpy's on the host; on the GPU only chase.cu's own kernels lay the chain (``lay_chain``),
bring it into the L2 and flush the L2 (``touch``), compiled ahead with the probe's kernel file, never a CuPy
elementwise or reduction kernel that CuPy would build at its first use.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from gpuatlas.probes.kit import samplers as kit
from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.registry import geom


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


def cupy_launcher(flavour: str):
    """``launch(start, warm, steps) -> out`` for chase.cu's kernel of ``flavour``."""
    return chase_launcher("chase.cu", FLAVOURS[flavour])


def chase_launcher(filename: str, name: str, pairs: bool = False):
    """``launch(start, warm, steps) -> out`` for a one-thread chase kernel ``name`` of ``filename`` (taking
    start, warm steps, timed steps, out = {cycles, ns, sink}); with ``pairs`` it walks pairs of steps, so warm
    and steps must be even."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    step_kernel = kernel(filename, name)
    out = cupy.zeros(3, dtype=cupy.uint64)

    def launch(start: int, warm: int, steps: int):
        if pairs and (warm % 2 or steps % 2):
            raise ValueError(f"the chase walks pairs of steps: warm={warm} and steps={steps} must be even")
        step_kernel((1,), (1,), (np.uint64(start), np.int64(warm), np.int64(steps), out))
        return out.get()

    return launch


def measure_shared_chase(ctx, footprint_bytes: int, stride_bytes: int, chase_kernel, what: str,
                         min_cycles_per_step: float = 0.0) -> list[Sample]:
    """Time a shared-memory chase until stable: ``chase_kernel`` (one warp: next_index, elements, stride in
    words, start, warm, steps, out = {cycles, ns, sink element}) over a random single cycle of
    footprint / stride elements.  Each launch continues where the last stopped and its sink must be the
    element the chain says; fewer than ``min_cycles_per_step`` cycles a step fails the probe."""
    import cupy

    elements = footprint_bytes // stride_bytes
    order = chain_order(ctx.rng(footprint_bytes, stride_bytes), elements)
    next_index = np.empty(elements, dtype=np.uint32)
    next_index[order] = np.roll(order, -1)
    next_gpu = cupy.asarray(next_index)
    out = cupy.zeros(3, dtype=cupy.uint64)
    position = 0

    def run(warm: int, steps: int) -> np.ndarray:
        nonlocal position
        start = int(order[position % elements])
        chase_kernel((1,), (32,), (next_gpu, np.int32(elements), np.int32(stride_bytes // 4), np.int32(start),
                                   np.int64(warm), np.int64(steps), out), shared_mem=footprint_bytes)
        result = out.get()
        position += warm + steps
        if int(result[2]) != int(order[position % elements]):
            raise RuntimeError(f"{what} sink mismatch: ended at element {int(result[2])}, the chain "
                               f"says {int(order[position % elements])}")
        if float(result[0]) / steps < min_cycles_per_step:
            raise RuntimeError(f"{what} took {float(result[0]) / steps:.2f} cycles per step, fewer than a "
                               f"dependent load and its address arithmetic can take")
        return result

    first = run(min(elements, MAX_WARM_STEPS), CALIBRATION_STEPS)
    steps = steps_for(float(first[1]) * 1e-9 / CALIBRATION_STEPS)
    return repeat_until_stable(lambda repeat: chase_samples(ctx, run(0, steps), steps, repeat, "clock64"),
                               "latency", ctx.budget)


def smem_footprints(device: dict) -> list[int]:
    return geom(1 << 10, device["smem_per_block_bytes"] // 2, per_octave=1)


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
    ``base`` plus byte offsets; other words are left alone.  On the GPU chase.cu's ``lay_chain`` writes it
    (compiled ahead with the kit's kernels: no CuPy kernel is built at first use)."""
    if not isinstance(words, np.ndarray):
        return _lay_on_gpu(words, order, stride_bytes, base, offsets)
    at = order.astype(np.uint64) * np.uint64(stride_bytes)
    if offsets is not None:
        at = at + np.asarray(offsets).astype(np.uint64)
    words[(at // np.uint64(8)).astype(np.int64)] = np.uint64(base) + np.roll(at, -1)


def _lay_on_gpu(words, order, stride_bytes: int, base: int, offsets) -> None:
    """fill_chain into a CuPy array: the order and offsets copied over as int64, then one lay_chain launch."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    def int64_on_gpu(values):
        host = values.get() if isinstance(values, cupy.ndarray) else values
        return cupy.asarray(np.ascontiguousarray(host, dtype=np.int64))

    order_gpu = int64_on_gpu(order)
    offsets_gpu = np.uint64(0) if offsets is None else int64_on_gpu(offsets)
    blocks = min(4096, -(-order_gpu.size // 256))
    kernel("chase.cu", "lay_chain")((blocks,), (256,), (words, order_gpu, offsets_gpu, np.int64(order_gpu.size),
                                                       np.int64(stride_bytes), np.uint64(base)))


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
    """The chain over ``footprint_bytes`` on the GPU: ``(words, ChainWalker)``. A chain no larger than the L2 is
    then read sector by sector from the whole grid, so it starts resident in the L2; a larger one is not (a chase
    visits a small part of it per sample, and lines left resident would make those visits hits). ``order``:
    ``random`` (a random single cycle through every element, each at a random sector of its block), ``sequential``
    (address order at the block starts, then wrap), or ``path`` (a random cycle through ``PATH_ELEMENTS`` distinct
    elements drawn from the footprint, at random sectors: a walk shorter than the path never returns to a line it
    has loaded)."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    if footprint_bytes < 2 * stride_bytes or stride_bytes % 8:
        raise ValueError(f"footprint_bytes={footprint_bytes} must hold two elements of stride_bytes="
                         f"{stride_bytes}, a multiple of 8")
    elements = footprint_bytes // stride_bytes
    words = cupy.zeros(elements * stride_bytes // 8, dtype=cupy.uint64)
    walker = place_chain(words, words.data.ptr, ctx.rng(footprint_bytes, stride_bytes), footprint_bytes,
                         stride_bytes, order)
    if order != "path" and footprint_bytes <= ctx.device["l2_bytes"]:
        sink = cupy.zeros(1, dtype=cupy.uint64)
        kernel("chase.cu", "touch")((ctx.device["sm_count"] * 4,), (256,),
                                    (words, np.int64(words.size), np.int64(SECTOR_ALIGN // 8), sink))
    return words, walker


def place_chain(words, base: int, rng: np.random.Generator, footprint_bytes: int, stride_bytes: int,
                order: str = "random") -> ChainWalker:
    """Lay a chain of ``order`` (see ``chain_on_gpu``) into ``words`` (numpy or cupy; addresses ``base`` plus
    byte offsets) with ``rng``'s draws, and return its walker.  Laid again with another draw, a random chain
    takes a new placement in the same buffer: another visiting order and other sectors of each block, so other
    L2 slices and other TLB sets (the old chain's words are left behind, never visited)."""
    elements = footprint_bytes // stride_bytes
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
    fill_chain(words, order_host, stride_bytes, base, offsets)
    return ChainWalker(order_host, stride_bytes, base, footprint_bytes, offsets)


_FLUSH: dict = {}


def flush_l2(device: dict) -> None:
    """Evict the L2: read every sector of a buffer of 4x its capacity twice (chase.cu's ``touch`` from the
    whole grid), so the lines it then holds are that buffer's, clean (no write-back of a chain's dirty lines
    lands in a timed walk)."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

    size = 4 * device["l2_bytes"] // 8
    scratch = _FLUSH.get(size)
    if scratch is None:
        scratch = _FLUSH.setdefault(size, cupy.zeros(size, dtype=cupy.uint64))
    sink = cupy.zeros(1, dtype=cupy.uint64)
    touch = kernel("chase.cu", "touch")
    for _ in range(2):
        touch((device["sm_count"] * 4,), (256,), (scratch, np.int64(size), np.int64(SECTOR_ALIGN // 8), sink))


def warm_steps(device: dict, footprint_bytes: int, elements: int) -> int:
    """Untimed steps at the start of every launch: a whole pass over a chain that may fit in L1 (the L1
    starts every launch empty, so without it each sample would hold one cold pass through the L2), none for
    larger chains, which the L2 keeps from launch to launch."""
    if footprint_bytes <= 2 * device["smem_per_sm_bytes"] and elements <= MAX_WARM_STEPS:
        return elements
    return 0


def measure_chase(ctx, footprint_bytes: int, stride_bytes: int, launch, timer: str,
                  order: str = "random", placements: bool = False) -> list[Sample]:
    """Build the chain on the GPU, warm it, then time launches of ``launch(start, warm, steps) -> out``
    until stable.  Shared by the CuPy and Numba front ends, so both time exactly the same chain.

    A ``path`` chain is measured cold: the L2 is flushed after the chain is written, there is no warm walk,
    and the steps per launch are capped so that the whole measurement never revisits an element: every
    access misses the L2.  With ``placements`` (a random chain), every timed sample lays the chain afresh
    (``place_chain``, the ``repeat``-th draw) and walks it once untimed in the same launch: the samples then
    average over placements what one placement's few elements would leave to the luck of their L2 slices."""
    words, walker = chain_on_gpu(ctx, footprint_bytes, stride_bytes, order)
    chain = {"walker": walker}
    elements = len(walker.order)
    budget = ctx.budget
    if order == "path":
        flush_l2(ctx.device)
        warm, budget = 0, dataclasses.replace(budget, warmup_s=0.0)
    else:
        warm = warm_steps(ctx.device, footprint_bytes, elements)

    def run(warm: int, steps: int) -> np.ndarray:
        out = launch(chain["walker"].start(), warm, steps)
        chain["walker"].advance(warm + steps, int(out[2]))
        return out

    first = run(warm if order == "path" else max(warm, min(elements, MAX_WARM_STEPS)), CALIBRATION_STEPS)
    steps = steps_for(float(first[1]) * 1e-9 / CALIBRATION_STEPS)
    if order == "path":  # calibration + one warm-up launch + every repeat stay inside the path
        room = (elements - walker.position) // (budget.max_repeats + 1)
        steps = min(steps, max(UNROLL, room // UNROLL * UNROLL))

    def sample(repeat: int) -> list[Sample]:
        if placements and repeat >= 0:
            chain["walker"] = place_chain(words, walker.base, ctx.rng(footprint_bytes, stride_bytes, repeat + 1),
                                          footprint_bytes, stride_bytes, order)
            return chase_samples(ctx, run(elements, steps), steps, repeat, timer)
        return chase_samples(ctx, run(warm, steps), steps, repeat, timer)

    return repeat_until_stable(sample, "latency", budget)
