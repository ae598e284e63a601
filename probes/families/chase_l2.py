"""The L2 seen by L2-only chases: one chaser on every SM at once (the capacity the whole GPU can use), and
one chaser whose every access is recorded (near hits, far hits and misses, each a cluster of its own).
The chain and its checks are the chain kit's (probes/kit/chain.py)."""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.kit.chain import (CALIBRATION_STEPS, chain_on_gpu, chase_samples, cupy_launcher, expected_address,
                                       flush_l2, steps_for)
from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.registry import geom, probe


def every_sm_footprints(device: dict) -> list[int]:
    """L2/4 to 4x the L2, 8 jittered points per octave."""
    return geom(device["l2_bytes"] // 4, 4 * device["l2_bytes"], per_octave=8, jitter_seed=device["sm_count"],
                align=128)


def every_sm_configs(device: dict, quick: bool = False) -> list[dict]:
    """Each SM its own stretch at every footprint (quick: one per octave); every SM the whole chain at every
    other footprint up to 2x the L2, where the knee lies whether a line is held once or twice."""
    footprints = every_sm_footprints(device)
    own = [{"footprint_bytes": f, "stride_bytes": 128, "readers": "own"} for f in footprints[::8 if quick else 1]]
    if quick:
        return own
    return own + [{"footprint_bytes": f, "stride_bytes": 128, "readers": "all"} for f in footprints[::2]
                  if f <= 2 * device["l2_bytes"]]


@probe("chase.every_sm",
       sweeps={"quick": lambda d: every_sm_configs(d, quick=True), "full": every_sm_configs},
       axes={"footprint_bytes": "L2/4..4x L2, 8 per octave (quick: 1 per octave; readers=all: 4 per octave up "
                                "to 2x L2)",
             "stride_bytes": "one chain element per 128-byte line, at a random sector of it",
             "readers": "own: each SM walks its own stretch of the cycle before timing (a line is read by about "
                        "one SM); all: every SM walks the whole cycle first (every line is read from every SM, "
                        "so from both L2 partitions)"},
       quantities=("l2.capacity_chase_bytes", "l2.capacity_chase_all_readers_bytes"), kernels=("chase.cu",))
def chase_every_sm(ctx, footprint_bytes: int, stride_bytes: int, readers: str = "own") -> list[Sample]:
    """Cycles per dependent L2-only load with one chaser on every SM, each starting at its own stretch of one
    random cycle: the chain's lines are read from both L2 partitions, so the knee where loads turn from
    hits to misses is the capacity the whole GPU can use (a line the two partitions both hold counts twice).
    With ``readers="all"`` every SM first walks the whole cycle: if a line read from both partitions is held
    in both, that knee falls to half the capacity."""
    import cupy

    from gpuatlas.probes.kit.cuda import kernel

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

    if readers not in ("own", "all"):
        raise ValueError(f"chase.every_sm readers must be 'own' or 'all', not {readers!r}")
    # Each chaser walks its stretch once (the whole chain is visited), or the whole cycle (every line from
    # every SM).
    first = run(segment if readers == "own" else elements, CALIBRATION_STEPS)
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

    from gpuatlas.probes.kit.cuda import kernel

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
