"""A simulated GPU backend: the registered probes with their kernels replaced by known physics.

Lets the runner, resume, derive and report be tested on a CPU with answers known in advance.  This module
holds the simulated GPU every family shares (its device, clock, levels, memory rates and partitions) and the
simulated runs built from it (a fleet of boards, other parts, faults); each family's fakes live in a module
of this package beside it (``tests/fakes/<family>.py``, named after its probe family), which declares
``FAKES = {probe id: fake}``.  No list names them: ``FAKES`` here is every module's, gathered on first use, and
a name not found here (``fakes.bank_ways``) is looked up in the family modules.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil

import numpy as np

from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.registry import all_probes

CLOCK_HZ = 1.98e9
LEVELS = {"smem": 29.0, "l1": 33.0, "l2": 270.0, "dram": 650.0}
#: The simulated caches: 128-byte lines of 32-byte sectors; the L1 fills one sector per miss, the L2 fetches two
#: sectors from HBM per miss.
LINE_BYTES, SECTOR_BYTES, DRAM_FETCH_BYTES = 128, 32, 64
#: The L1's capacity (bytes) in LINE_BYTES lines.
L1_BYTES = 200 << 10
#: A TLB of TLB_REACH / PAGE_BYTES entries of PAGE_BYTES pages, and what a miss adds.
PAGE_BYTES, TLB_REACH, TLB_MISS = 2 << 20, 512 << 20, 120.0
DEVICE = {"name": "Simulated GPU", "uuid": "GPU-sim-0", "compute_capability": "9.0", "sm_count": 132,
          "l2_bytes": 60 << 20, "smem_per_sm_bytes": 228 << 10, "total_memory_bytes": 141 << 30,
          "memory_bus_bits": 6144, "memory_clock_hz": 2.6e9, "regs_per_sm": 65536, "sm_clock_max_hz": CLOCK_HZ,
          "smem_per_block_bytes": 48 << 10, "smem_per_block_optin_bytes": 227 << 10, "max_threads_per_sm": 2048,
          "max_threads_per_block": 1024, "max_blocks_per_sm": 32, "warp_size": 32}


#: Tensor-core BF16 peak and HBM read bandwidth of the simulated GPU (bw.dram's read figure).
TC_PEAK, HBM_READ = 900e12, 4.5e12


def latency_of(footprint_bytes: float, stride_bytes: int = LINE_BYTES, flavour: str = "default") -> float:
    """Cycles per step of a chain with one element per stride: it occupies footprint / max(stride, line) lines,
    so it fits a cache of C bytes up to the footprint C * max(1, stride / line); L2-only loads skip the L1."""
    lines = max(1.0, stride_bytes / LINE_BYTES)
    if flavour == "default" and footprint_bytes <= L1_BYTES * lines:
        return LEVELS["l1"]
    return LEVELS["l2"] if footprint_bytes <= DEVICE["l2_bytes"] * lines else LEVELS["dram"]


def _samples(cycles: float, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for r in range(5):
        value = cycles * (1 + 0.002 * rng.standard_normal())
        out += [Sample("latency", value, "cycles", r, CLOCK_HZ, "clock64"),
                Sample("latency_time", value / CLOCK_HZ, "s", r, CLOCK_HZ, "globaltimer")]
    return out


#: chase.access's clusters (cycles): far-partition hits, and misses homed by the near and the far partition;
#: and the cost the recording adds to every access.
FAR_L2, NEAR_MISS, FAR_MISS, RECORD_COST, RECORDED = 450.0, 530.0, 720.0, 12.0, 512


#: HBM write bandwidth of the simulated GPU (bw.dram's write figure, its best variant's).
HBM_WRITE = 4.5e12


#: L2 bandwidth a re-read footprint gets from the lines still resident; past TLB_REACH each pass refetches
#: every page's translation, at this fraction of the HBM rate.
L2_READ, TRANSLATION_LOSS = 9e12, 0.95


def _flops(rate):
    return [s for r in range(5) for s in (Sample("flop_rate", rate, "FLOP/s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("seconds", 1.0 / rate, "s", r, CLOCK_HZ, "cuda_event"))]


#: The simulated L2 homes each PARTITION_INTERLEAVE-byte block in one of two partitions, by the parity of the
#: block number's bits (a hash, not plain alternation).
PARTITION_INTERLEAVE = 4 << 10


def far_homed(address: np.ndarray, interleave: int = PARTITION_INTERLEAVE) -> np.ndarray:
    block = np.asarray(address, dtype=np.int64) // interleave
    parity = np.zeros(block.shape, dtype=bool)
    while block.any():
        parity ^= (block & 1).astype(bool)
        block >>= 1
    return parity


#: A fleet of simulated boards: the board of SLOW_UUID moves SLOW_FACTOR of every other board's bytes per
#: second; Ray's GPU id names a board.
SLOW_UUID, SLOW_FACTOR = "GPU-sim-1", 0.8
FLEET_PROBES = ("clock.sm", "bw.dram", "chase.latency")


def fleet_device():
    """The simulated board this Ray task holds (Ray's GPU id, which it also put in CUDA_VISIBLE_DEVICES)."""
    import ray

    return dict(DEVICE, uuid=f"GPU-sim-{int(ray.get_gpu_ids()[0])}")


def _board(func):
    """``func`` on the board of ctx.device: bandwidths scaled on the slow board; every call logged to
    $GPUATLAS_TEST_FLEET_DIR/<uuid>.calls, and the process killed (SIGKILL, as a lost node would) after
    KILL_AFTER calls on the slow board while the file ``kill`` is there (it is removed first: once)."""
    import os
    import signal
    from pathlib import Path

    def call(ctx, **params):
        folder = Path(os.environ["GPUATLAS_TEST_FLEET_DIR"])
        log = folder / f"{ctx.device['uuid']}.calls"
        calls = log.read_text().count("\n") if log.exists() else 0
        if ctx.device["uuid"] == SLOW_UUID and calls >= KILL_AFTER and (folder / "kill").exists():
            (folder / "kill").unlink()
            os.kill(os.getpid(), signal.SIGKILL)
        samples = func(ctx, **params)
        with open(log, "a") as f:
            f.write(f"{sorted(params.items())}\n")
        if ctx.device["uuid"] != SLOW_UUID:
            return samples
        return [dataclasses.replace(s, value=s.value * SLOW_FACTOR) if s.unit == "B/s" else s for s in samples]

    return call


KILL_AFTER = 3


def fleet_probes():
    return [dataclasses.replace(p, func=_board(p.func)) for p in simulated_probes() if p.id in FLEET_PROBES]


def simulated_probes():
    """Every registered probe with its simulated physics; no backend package is needed to run them."""
    fakes = gathered()
    missing = [p.id for p in all_probes().values() if p.id not in fakes]
    if missing:
        raise KeyError(f"no fake for {missing}: declare each in its family's FAKES under tests/fakes/")
    return [dataclasses.replace(p, func=fakes[p.id], backend="simulated") for p in all_probes().values()]


def crash(ctx, **params):
    """A fault outside Python: the process dies as a CUDA illegal-address abort would take it down."""
    import os

    os.abort()


def hang(ctx, **params):
    import time

    time.sleep(3600)


def fail(ctx, **params):
    raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")



# -- other parts: an A100 and an RTX 5090, simulated from their published widths -------------------------------

@dataclasses.dataclass(frozen=True)
class Part:
    """A GPU other than the simulated one: its driver properties are tests/fixtures/devices.json's, and its
    peaks come from its published widths per SM per clock at its boost clock (the A100's 312 dense BF16
    TFLOP/s = 108 SMs x 1.41 GHz x 2,048; the RTX 5090's 209.5 with FP32 accumulation = 170 x 2.407 GHz x
    512); its memory reads at READ_EFFICIENCY of its pins (memory clock x bus / 8 x 2)."""

    key: str
    mma_sync_per_clk: dict  # dense tensor FLOP per SM per clock through mma.sync, by dtype
    fp32_per_clk: float  # FP32 FMA FLOP per SM per clock


PARTS = {"a100-40gb": Part("a100-40gb", {"bf16": 2048.0, "fp16": 2048.0, "tf32": 1024.0}, 128.0),
         "rtx-5090": Part("rtx-5090", {"bf16": 512.0, "fp16": 512.0, "tf32": 256.0, "e4m3": 1024.0}, 256.0)}
READ_EFFICIENCY = 0.9
#: The probes a part's simulated run measures: enough for its tensor peak, ridge and roofline.
PART_PROBES = ("clock.sm", "bw.dram", "chase.latency", "compute.vector", "compute.mma_sync", "compute.wgmma",
               "matmul.roofline")


def part_device(key: str) -> dict:
    """The device block of a part's run: its recorded properties, with a uuid."""
    import json
    from pathlib import Path

    recorded = json.loads((Path(__file__).parents[1] / "fixtures/devices.json").read_text())[key]
    return {**{k: v for k, v in recorded.items() if not k.startswith("_")}, "uuid": f"GPU-sim-{key}"}


def part_probes(key: str) -> list:
    """PART_PROBES with the part's physics: its clock, memory read rate, FP32 and mma.sync widths, and a
    roofline matmul at exactly min(its mma.sync BF16 peak, BLOCK/2 x its read rate)."""
    from fakes.compute import VECTOR_PER_CLK

    part, device = PARTS[key], part_device(key)
    hz = device["sm_clock_max_hz"]
    read = READ_EFFICIENCY * device["memory_clock_hz"] * device["memory_bus_bits"] / 8 * 2
    peak = part.mma_sync_per_clk["bf16"] * device["sm_count"] * hz

    def rates(per_clk):
        return [s for r in range(5) for s in (Sample("per_clk_sm", per_clk, "FLOP/cycle", r, hz, "cuda_event"),
                                               Sample("throughput", per_clk * device["sm_count"] * hz, "FLOP/s", r,
                                                      hz, "cuda_event"))]

    physics = {
        "clock.sm": lambda ctx, busy_sms: [Sample("sm_clock", hz, "Hz", r, hz, "globaltimer") for r in range(5)],
        "bw.dram": lambda ctx, op, variant=None: [Sample("bandwidth", read, "B/s", r, hz, "cuda_event")
                                                   for r in range(5)],
        "compute.vector": lambda ctx, op: rates(part.fp32_per_clk * VECTOR_PER_CLK[op] / VECTOR_PER_CLK["fp32"]),
        "compute.mma_sync": lambda ctx, dtype: rates(part.mma_sync_per_clk[dtype]),
        "matmul.roofline": lambda ctx, block, matrix_side: [
            s for r in range(5) for s in (Sample("flop_rate", min(peak, block / 2 * read), "FLOP/s", r, hz,
                                                 "cuda_event"),
                                          Sample("seconds", 1 / min(peak, block / 2 * read), "s", r, hz,
                                                 "cuda_event"))]}
    return [dataclasses.replace(p, func=physics.get(p.id, gathered()[p.id]), backend="simulated")
            for p in all_probes().values() if p.id in PART_PROBES]


def _family_modules() -> list:
    """Every module of this package (each family's fakes), imported, in name order."""
    return [importlib.import_module(f"{__name__}.{info.name}")
            for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)]


@functools.lru_cache(maxsize=None)
def gathered() -> dict:
    """probe id -> its fake, from every family module's FAKES; an id two modules fake is an error."""
    fakes, owner = {}, {}
    for module in _family_modules():
        for probe_id, fake in module.FAKES.items():
            if probe_id in owner:
                raise ValueError(f"{probe_id} is faked by both {owner[probe_id]} and {module.__name__}")
            fakes[probe_id], owner[probe_id] = fake, module.__name__
    return fakes


def __getattr__(name: str):
    """FAKES (every family's), or a name one family module defines (its constants and physics)."""
    if name == "FAKES":
        return gathered()
    if name.startswith("__"):
        raise AttributeError(name)
    modules = _family_modules()
    if name in globals():  # a family module itself, imported just now
        return globals()[name]
    found = {id(vars(module)[name]): module for module in modules if name in vars(module)}
    if len(found) > 1:
        raise AttributeError(f"{name!r} means different things in {sorted(m.__name__ for m in found.values())}: "
                             f"import it from its family's module")
    if not found:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(next(iter(found.values())), name)
