"""The read-only data path (ld.global.nc, what __ldg emits) against the plain ld.global path
(CuPy RawModule, readonly.cu): its latency at a footprint inside L1, inside L2 and past L2; where its chase
leaves the first-level cache; whether it shares that cache's capacity with plain loads; and its read
bandwidth at an L1- and an L2-resident footprint.

Sharing is told by a chain whose elements alternate between the two paths (readonly.cu's mixed chase): if one
array sits behind both paths, the mixed chain leaves it where the plain chain does (its knee over the plain
knee is 1); two separate arrays of the plain path's capacity hold it to twice that (a ratio of 2).

The texture path (tex1Dfetch through a texture object, TLD) is chased too, as 32-bit texel indices in a
linear 1-D texture, each fetch returning the next element's index: over the same knee sweep and at L2/8.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit import samplers as kit
from gpuatlas.probes.kit.chain import chase_launcher, measure_chase
from gpuatlas.probes.kit.harness import Sample, Sink, repeat_until_stable
from gpuatlas.probes.registry import geom, probe, quick_and_full

PATHS = {"plain": "ro_chase_plain", "nc": "ro_chase_nc", "mixed": "ro_chase_mixed", "tex": "ro_chase_tex"}
READ_KERNELS = {"plain": "ro_read_plain", "nc": "ro_read_nc"}
#: Chain stride: one element per 128-byte block (the chase family's line), so the knee counts lines.
STRIDE = 128
#: Footprints are multiples of this: an even number of elements, so the mixed chain reads each element
#: through one path only (launches always start at an even step).
ALIGN = 2 * STRIDE
#: Read kernels: threads per block, blocks per SM, passes over an L1-resident region per launch.
READ_THREADS, READ_BLOCKS_PER_SM, L1_PASSES = 256, 4, 256
SAMPLE_S = 2e-3


def knee_footprints(device: dict, per_octave: int = 4) -> list[int]:
    """1/4 to 4x shared memory per SM (the unified L1/shared array's size): the first-level cache's knee."""
    smem = device["smem_per_sm_bytes"]
    return geom(smem // 4, 4 * smem, per_octave=per_octave, align=ALIGN)


def level_footprints(device: dict) -> list[int]:
    """One footprint inside L2 (1/8 of it) and one past it (4x), for the latency of each level."""
    return [device["l2_bytes"] // 8 // ALIGN * ALIGN, 4 * device["l2_bytes"] // ALIGN * ALIGN]


def read_footprints(device: dict) -> dict[str, int]:
    """Bytes each block reads: ``l1``, its own region of 1/16 of shared memory per SM (four blocks per SM
    hold a quarter of the array, however the blocks land); ``l2``, one region of a quarter of the L2 that
    every block reads in a single pass, far past any L1."""
    return {"l1": device["smem_per_sm_bytes"] // 16 // 16 * 16,
            "l2": int(device["l2_bytes"] * kit.L2_TOUCH_FRACTION) // 16 * 16}


def readonly_configs(device: dict, quick: bool = False) -> list[dict]:
    """Chases over the L1 knee for every path (quick: 2 per octave), plain and nc in L2 and past it; the read
    bandwidth of plain and nc at the L1 and the L2 footprint."""
    knee = knee_footprints(device, 2 if quick else 4)
    configs = [{"measure": "chase", "load": path, "footprint_bytes": f} for path in PATHS for f in knee]
    configs += [{"measure": "chase", "load": path, "footprint_bytes": f}
                for path in ("plain", "nc") for f in level_footprints(device)]
    configs.append({"measure": "chase", "load": "tex", "footprint_bytes": level_footprints(device)[0]})
    configs += [{"measure": "read", "load": path, "footprint_bytes": f}
                for path in READ_KERNELS for f in read_footprints(device).values()]
    return configs


@probe("geometry.readonly",
       sweeps=quick_and_full(readonly_configs),
       axes={"measure": "chase (one thread's dependent loads: cycles per step) or read (every SM reading: bytes "
                        "per clock per SM)",
             "load": "plain (ld.global), nc (ld.global.nc, the read-only path), mixed (a chase alternating "
                     "the two) or tex (tex1Dfetch of a texture object: texel indices)",
             "footprint_bytes": "chase: 1/4..4x shared memory per SM (4 per octave; quick: 2), L2/8 and 4x L2 (tex: "
                                "L2/8 only); "
                                "read: 1/16 of shared memory per SM per block (L1) or L2/4 read by every block"},
       quantities=("readonly.latency_cycles", "readonly.l2_latency_cycles", "readonly.dram_latency_cycles",
                   "readonly.capacity_bytes", "readonly.capacity_ratio", "readonly.shared_capacity_ratio",
                   "readonly.l1_shared", "readonly.l1_bandwidth_bytes_per_clk_sm", "readonly.l1_bandwidth_ratio",
                   "readonly.l2_bandwidth_ratio", "readonly.tex_latency_cycles", "readonly.tex_capacity_bytes",
                   "readonly.tex_l2_latency_cycles"),
       kernels=("readonly.cu", "chase.cu"))
def geometry_readonly(ctx, measure: str, load: str, footprint_bytes: int) -> list[Sample]:
    """Cycles per dependent load of a random chain through the plain, the read-only (nc) or both paths by
    turns; or bytes per clock per SM of every SM reading through the plain or the nc path."""
    if measure == "chase":
        if load not in PATHS or footprint_bytes % ALIGN:
            raise ValueError(f"chase load {load!r} must be one of {', '.join(PATHS)} and footprint_bytes="
                             f"{footprint_bytes} a multiple of {ALIGN}")
        if load == "tex":
            return tex_samples(ctx, footprint_bytes)
        launch = chase_launcher("readonly.cu", PATHS[load], pairs=True)
        return measure_chase(ctx, footprint_bytes, STRIDE, launch, timer="clock64")
    if measure == "read" and load in READ_KERNELS and footprint_bytes % 16 == 0:
        return read_samples(ctx, load, footprint_bytes)
    raise ValueError(f"unknown config: measure={measure!r} load={load!r} footprint_bytes={footprint_bytes}")


def read_samples(ctx, path: str, region_bytes: int) -> list[Sample]:
    """Every block reads ``region_bytes``: its own region, L1_PASSES times, when four blocks' regions fit
    the array beside shared memory; else one region all blocks share, once (each launch starts with an
    empty L1, so a region past it comes from the L2).  The words are the kit's hashed buffer, and the
    kernels' sum must be what the buffer says."""
    from gpuatlas.probes.kit.cuda import kernel

    device = ctx.device
    grid = READ_BLOCKS_PER_SM * device["sm_count"]
    own = READ_BLOCKS_PER_SM * region_bytes <= device["smem_per_sm_bytes"]
    passes, stride = (L1_PASSES, region_bytes // 16) if own else (1, 0)
    span = grid * region_bytes if own else region_bytes
    words = kit.Filled.at_least(span, device)
    per_launch = passes * (kit.sum32(words, 0, span // 4) if own else grid * kit.sum32(words, 0, span // 4))
    sink = Sink(f"geometry.readonly read {path} {region_bytes} B")
    read = kernel("readonly.cu", READ_KERNELS[path])

    def launch():
        read((grid,), (READ_THREADS,), (words, np.int64(region_bytes // 16), np.int64(stride), np.int32(passes),
                                        sink.array))
        sink.launches += 1

    return kit.bandwidth_samples(ctx, launch, sink.reset, lambda: sink.check(per_launch % 2**32),
                                 float(grid) * passes * region_bytes, sample_s=SAMPLE_S,
                                 per_clk_bound=kit.MAX_BYTES_PER_CLK_SM)


def tex_samples(ctx, footprint_bytes: int) -> list[Sample]:
    """The chase through a texture object: element ``order[i]`` (texel ``order[i] x STRIDE/4`` plus a random
    sector of its block) holds the texel index of element ``order[i+1]``; after k steps in all the kernel's
    final index must be the k-th element's, checked on every launch."""
    import cupy
    from cupy.cuda import runtime, texture

    from gpuatlas.probes.kit.chain import (CALIBRATION_STEPS, MAX_WARM_STEPS, chain_order, chase_samples,
                                           element_offsets, steps_for, warm_steps)
    from gpuatlas.probes.kit.cuda import kernel

    elements = footprint_bytes // STRIDE
    rng = ctx.rng(footprint_bytes, STRIDE)
    order = chain_order(rng, elements)
    at = (order * STRIDE + element_offsets(rng, elements, STRIDE)) // 4  # texel of each element, walk order
    texels = np.zeros(footprint_bytes // 4, dtype=np.uint32)
    texels[at] = np.roll(at, -1)
    words = cupy.asarray(texels)
    channel = texture.ChannelFormatDescriptor(32, 0, 0, 0, runtime.cudaChannelFormatKindUnsigned)
    resource = texture.ResourceDescriptor(runtime.cudaResourceTypeLinear, arr=words, chDesc=channel,
                                          sizeInBytes=words.nbytes)
    tex = texture.TextureObject(resource, texture.TextureDescriptor(filterMode=runtime.cudaFilterModePoint,
                                                                    readMode=runtime.cudaReadModeElementType))
    chase = kernel("readonly.cu", "ro_chase_tex")
    out = cupy.zeros(3, dtype=cupy.uint64)
    position = 0

    def run(warm: int, steps: int) -> np.ndarray:
        nonlocal position
        chase((1,), (1,), (tex, np.uint32(at[position % elements]), np.int64(warm), np.int64(steps), out))
        result = out.get()
        position += warm + steps
        if int(result[2]) != int(at[position % elements]):
            raise RuntimeError(f"texture chase sink mismatch at footprint {footprint_bytes} B: ended at texel "
                               f"{int(result[2])}, the chain says {int(at[position % elements])}")
        return result

    warm = warm_steps(ctx.device, footprint_bytes, elements)
    first = run(max(warm, min(elements, MAX_WARM_STEPS)), CALIBRATION_STEPS)
    steps = steps_for(float(first[1]) * 1e-9 / CALIBRATION_STEPS)
    return repeat_until_stable(lambda repeat: chase_samples(ctx, run(warm, steps), steps, repeat, "clock64"),
                               "latency", ctx.budget)
