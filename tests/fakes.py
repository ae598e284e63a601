"""A simulated GPU backend: the registered probes with their kernels replaced by known physics.

Lets the runner, resume, derive and report be tested on a CPU with answers known in advance.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from fake_numerics import numerics as _numerics
from probes.kit.harness import Sample
from probes.registry import all_probes

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
#: occupancy.throughput follows Little's law exactly: min(warp loads in flight x bytes / latency, peak).
OCCUPANCY_LATENCY_S = {"dram": 700e-9, "l2": 300e-9}
OCCUPANCY_PEAK = {"dram": 4.4e12, "l2": 9e12}
#: Tensor-core BF16 peak and HBM read bandwidth of the simulated GPU (bw.dram's read figure).
TC_PEAK, HBM_READ = 900e12, 4.5e12
LIBRARY_FRACTION = {"cublas": 0.8, "triton": 0.7}


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


def _chase(ctx, footprint_bytes, stride_bytes, flavour):
    return _samples(latency_of(footprint_bytes, stride_bytes, flavour), footprint_bytes)


def _translation(footprint_bytes, stride_bytes) -> float:
    """The TLB miss cost: a chain spans footprint / max(page, stride) pages, one translation each."""
    return TLB_MISS if footprint_bytes / max(PAGE_BYTES, stride_bytes) > TLB_REACH / PAGE_BYTES else 0.0


def _every_sm(ctx, footprint_bytes, stride_bytes, readers="own"):
    """Every SM chasing: hits while the chain fits the whole L2, misses past it.  The simulated L2 keeps a
    copy of a line in each partition that reads it, so a chain every SM has read fits half of it."""
    capacity = DEVICE["l2_bytes"] / (2 if readers == "all" else 1)
    return _samples(LEVELS["l2"] if footprint_bytes <= capacity else LEVELS["dram"], footprint_bytes)


def _miss(ctx, footprint_bytes, stride_bytes, flavour):
    return _samples(LEVELS["dram"] + _translation(footprint_bytes, stride_bytes), footprint_bytes)


#: chase.access's clusters (cycles): far-partition hits, and misses homed by the near and the far partition;
#: and the cost the recording adds to every access.
FAR_L2, NEAR_MISS, FAR_MISS, RECORD_COST, RECORDED = 450.0, 530.0, 720.0, 12.0, 512


def _access(ctx, footprint_bytes, stride_bytes, flavour):
    rng = np.random.default_rng(footprint_bytes)
    l2 = DEVICE["l2_bytes"]
    if footprint_bytes <= l2 / 2:
        centres, weights = [LEVELS["l2"]], [1.0]
    elif footprint_bytes <= l2:
        centres, weights = [FAR_L2, NEAR_MISS, FAR_MISS], [0.45, 0.45, 0.1]
    else:
        centres, weights = [NEAR_MISS, FAR_MISS], [0.5, 0.5]
    cycles = rng.choice(centres, RECORDED, p=weights) + rng.normal(0, 4, RECORDED)
    recorded = np.round(cycles + RECORD_COST)
    return ([Sample("access", float(v), "cycles", i, CLOCK_HZ, "clock") for i, v in enumerate(recorded)]
            + [Sample("record_step", float(recorded.mean()), "cycles", 0, CLOCK_HZ, "clock64"),
               Sample("latency", float(cycles.mean()), "cycles", 0, CLOCK_HZ, "clock64")])


def _line(ctx, footprint_bytes, stride_bytes, flavour):
    block, hit, miss = ((SECTOR_BYTES, LEVELS["l1"], LEVELS["l2"]) if flavour == "default"
                        else (DRAM_FETCH_BYTES, LEVELS["l2"], LEVELS["dram"]))
    return _samples(hit + (miss - hit) * min(stride_bytes / block, 1), stride_bytes)


def _tlb(ctx, footprint_bytes, stride_bytes, flavour):
    return _samples(LEVELS["l2"] + _translation(footprint_bytes, stride_bytes), footprint_bytes)


def _smem(ctx, footprint_bytes, stride_bytes):
    return _samples(LEVELS["smem"], footprint_bytes)


#: Latency of one dependent integer instruction (IMAD, LEA): an index-computing chase step issues two of them.
INT_LATENCY = 4.0


def _smem_index(ctx, footprint_bytes, stride_bytes):
    return _samples(LEVELS["smem"] + 2 * INT_LATENCY, footprint_bytes)


def _clock(ctx, busy_sms):
    return [Sample("sm_clock", CLOCK_HZ, "Hz", r, CLOCK_HZ, "globaltimer") for r in range(5)]


def _launch(ctx, mode):
    per = 2e-6 if mode == "plain" else 7e-7
    return [s for r in range(5) for s in (Sample("launch_interval", per, "s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("host_call", per, "s", r, CLOCK_HZ, "perf_counter"))]


def bank_ways(stride_words, access_bytes, offset_words=0):
    """The simulated shared memory: 32 banks of 4-byte words, one 128-byte bank row per phase (a warp of
    4-byte loads at once, of 8-byte loads in halves, of 16-byte loads in quarters).  Lane l reads the
    ``access_bytes`` at (l x stride + offset) x access_bytes; a bank asked for k distinct words in a phase
    takes k passes (lanes reading the same word share it).  Returns the worst k."""
    lanes_per_phase = min(32, 128 // access_bytes)
    worst = 0
    for first in range(0, 32, lanes_per_phase):
        words_of_bank = {}
        for lane in range(first, first + lanes_per_phase):
            start = (lane * stride_words + offset_words) * access_bytes
            for word in range(start // 4, (start + access_bytes) // 4):
                words_of_bank.setdefault(word % 32, set()).add(word)
        worst = max(worst, max(len(words) for words in words_of_bank.values()))
    return worst


def _banks(ctx, access_bytes, stride_words, offset_words=0, form="latency", layout="plain"):
    ways = 1 if layout != "plain" else bank_ways(stride_words, access_bytes, offset_words)
    base, per_way = (23.0, 2.0) if form == "latency" else (1.0, 1.0)
    return [Sample("cycles_per_access", base + per_way * (ways - 1), "cycles", r, CLOCK_HZ, "clock64")
            for r in range(5)]


def _column(ctx, matrix_side, method):
    useful = 4e11 if method == "direct" else 2e12
    return [Sample("useful_bandwidth", useful, "B/s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


def sector_efficiency(stride_elements, element_bytes):
    """Useful over moved bytes of one warp-wide load in the simulated memory: lane l reads ``element_bytes``
    at l x stride x element_bytes, and every 32-byte sector holding any byte asked for moves whole."""
    starts = {lane * stride_elements * element_bytes for lane in range(32)}
    sectors = {byte // SECTOR_BYTES for start in starts for byte in range(start, start + element_bytes)}
    return element_bytes * len(starts) / (len(sectors) * SECTOR_BYTES)


def _bw_stride(ctx, element_bytes, stride_elements, aligned, level):
    peak = 4.5e12 if level == "dram" else 9e12
    useful = peak * sector_efficiency(stride_elements, element_bytes)
    return [Sample("bandwidth", useful, "B/s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


def _bw_l2(ctx, footprint_bytes):
    return [Sample("bandwidth", 9e12, "B/s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


#: HBM write of the simulated GPU: every variant writes whole sectors; 16-byte stores issue half the store
#: instructions of 8-byte ones, the streaming hint leaves the L2's replacement to the writes alone, and a
#: grid-stride loop keeps its blocks resident (each factor below 1 is what the variant loses).
HBM_WRITE = 4.5e12
WRITE_LOSS = {"grid_stride_16": 0.95, "grid_stride_16_cs": 0.97, "once_8": 0.98, "once_16": 0.99,
              "once_16_cs": 1.0}
#: L2 bandwidth a re-read footprint gets from the lines still resident; past TLB_REACH each pass refetches
#: every page's translation, at this fraction of the HBM rate.
L2_READ, TRANSLATION_LOSS = 9e12, 0.95


#: The read's grid-stride kernels lose this fraction against one trip per thread (the once_64 variant).
GRID_STRIDE_READ_LOSS = 0.02


#: The simulated GPU's fastest read kernel: block-contiguous chunks of FAKE_READ_UNROLL 16-byte loads per
#: thread of FAKE_READ_THREADS-thread blocks, each warp load 32 lanes x 16 B, FAKE_READ_BLOCKS blocks per SM,
#: over a buffer of FAKE_READ_L2S L2s; the one-trip read (once_64) over a buffer of twice that.
FAKE_READ_UNROLL, FAKE_READ_THREADS, FAKE_READ_BLOCKS, FAKE_READ_L2S = 8, 256, 4, 32


def _read_layout(variant: str) -> list[tuple[str, float, str]]:
    if variant == "once_64":
        return [("buffer_bytes", 2 * FAKE_READ_L2S * DEVICE["l2_bytes"], "B")]
    chunk = FAKE_READ_UNROLL * FAKE_READ_THREADS * 16
    return [("loads_in_flight_per_thread", FAKE_READ_UNROLL, "1"), ("contiguous_bytes_per_warp_trip", 32 * 16, "B"),
            ("contiguous_bytes_per_block_trip", chunk, "B"), ("threads_per_block", FAKE_READ_THREADS, "1"),
            ("blocks_per_sm", FAKE_READ_BLOCKS, "1"), ("buffer_bytes", FAKE_READ_L2S * DEVICE["l2_bytes"], "B")]


def _bw_dram(ctx, op, variant=None):
    rate = (HBM_WRITE * WRITE_LOSS[variant or "grid_stride_16"] if op == "write"
            else HBM_READ * (1 - GRID_STRIDE_READ_LOSS) if (op, variant) == ("read", "fastest")
            else {"read": HBM_READ, "copy": 4.0e12, "memcpy": 4.2e12}[op])
    layout = _read_layout(variant) if op == "read" else []
    return [s for r in range(5) for s in (Sample("bandwidth", rate, "B/s", r, CLOCK_HZ, "cuda_event"),
            *(Sample(metric, float(value), unit, r, CLOCK_HZ, "config") for metric, value, unit in layout))]


def read_bandwidth(footprint_bytes):
    """A footprint F re-read pass after pass: the L2 serves h = min(1, L2 / F) of the bytes (every line it
    can keep), HBM the rest, at a translation-limited rate past the TLB's reach."""
    hbm = HBM_READ * (TRANSLATION_LOSS if footprint_bytes > TLB_REACH else 1.0)
    h = min(1.0, DEVICE["l2_bytes"] / footprint_bytes)
    return 1 / (h / L2_READ + (1 - h) / hbm)


def _bw_dram_footprint(ctx, footprint_bytes):
    return [s for r in range(5) for s in (
        Sample("bandwidth", read_bandwidth(footprint_bytes), "B/s", r, CLOCK_HZ, "cuda_event"),
        Sample("buffer_bytes", float(footprint_bytes), "B", r, CLOCK_HZ, "config"))]


def _bw_onchip(ctx, level):
    return [Sample("bytes_per_clk_sm", 125.0, "B/cycle", r, CLOCK_HZ, "cuda_event") for r in range(5)]


def _occupancy(ctx, resident_warps_per_sm, ilp, load_bytes, level):
    """Little's law: every resident warp keeps ``ilp`` warp-wide loads in flight, each of 32 lanes x
    ``load_bytes``, and each load returns one latency after it was issued; so the memory is asked for the
    bytes in flight once per latency, and serves at most its peak (beyond it, requests queue)."""
    bytes_in_flight = ctx.device["sm_count"] * resident_warps_per_sm * ilp * 32 * load_bytes
    bandwidth = min(bytes_in_flight / OCCUPANCY_LATENCY_S[level], OCCUPANCY_PEAK[level])
    rng = np.random.default_rng([resident_warps_per_sm, ilp, load_bytes])
    return [s for r in range(5) for s in (
        Sample("bandwidth", bandwidth * (1 + 0.002 * rng.standard_normal()), "B/s", r, CLOCK_HZ, "cuda_event"),
        Sample("resident_warps_per_sm_api", resident_warps_per_sm, "1", r, CLOCK_HZ, "config"),
        Sample("resident_warps_per_sm_calc", resident_warps_per_sm, "1", r, CLOCK_HZ, "config"))]


#: Simulated compute widths (per clock per SM) and the FP32 FMA latency, H100-like.
VECTOR_PER_CLK = {"fp32": 256.0, "fp64": 128.0, "fp16x2": 512.0, "int32": 128.0}
FMA_LATENCY = 4.0
MMA_SYNC_PER_CLK = {"bf16": 2048.0, "fp16": 2048.0, "tf32": 1024.0, "e4m3": 2048.0}
WGMMA_PER_CLK = {"bf16": 4096.0, "fp16": 4096.0, "tf32": 2048.0, "e4m3": 8192.0}


def wgmma_per_clk(dtype, n):
    """Wider N reuses A over more columns: N=256 reaches the peak, narrower N a smaller fraction."""
    return WGMMA_PER_CLK[dtype] * (0.7 + 0.3 * int(n) / 256)


def _rates(per_clk, unit="FLOP"):
    rate = per_clk * DEVICE["sm_count"] * CLOCK_HZ
    return [s for r in range(5) for s in (Sample("per_clk_sm", per_clk, f"{unit}/cycle", r, CLOCK_HZ, "cuda_event"),
                                           Sample("throughput", rate, f"{unit}/s", r, CLOCK_HZ, "cuda_event"))]


def _compute_vector(ctx, op):
    return _rates(VECTOR_PER_CLK[op], "op" if op == "int32" else "FLOP")


def _compute_latency(ctx, op):
    return [Sample("latency", FMA_LATENCY, "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]


def _compute_mma_sync(ctx, dtype):
    return _rates(MMA_SYNC_PER_CLK[dtype])


#: compute.tensor_units' simulated widths (operations per clock per SM): bf16 wgmma with A from shared memory
#: as compute.wgmma's; A from registers skips A's shared-memory read, which at N=128 is a third of the operand
#: bytes per wgmma (A 64 rows, B 128): RS reaches the peak there, SS TENSOR_SS_N128 of it; N=256 both the peak.
#: INT8 twice BF16 (half the bits), and 2:4 sparse BF16 too (dense-equivalent: half the products skipped) with A
#: from registers; with A from shared memory the sparse form is fed at the rate shared memory supplies B alone,
#: so it reaches B / (A + B) of that -- A's 64 x 16 kept values against B's 256 x 32 (TENSOR_SPARSE_SS).
#: FP64 mma.sync (DMMA) DMMA_OVER_DFMA x the DFMA width, its native 16x8x16 shape full and the 8x8x4 one
#: DMMA_884_FRACTION of it (a quarter of the operands per instruction).
TENSOR_SS_N128, DMMA_OVER_DFMA, DMMA_884_FRACTION = 0.9, 2.0, 0.5
TENSOR_SPARSE_SS = 256 * 32 / (256 * 32 + 64 * 16)


def tensor_unit_per_clk(op):
    bf16 = WGMMA_PER_CLK["bf16"]
    if op.startswith(("bf16_ss", "bf16_rs")):
        return bf16 * (TENSOR_SS_N128 if op == "bf16_ss_n128" else 1.0)
    if op in ("int8_n256", "bf16_sparse_rs_n256"):
        return 2 * bf16
    if op == "bf16_sparse_n256":
        return 2 * bf16 * TENSOR_SPARSE_SS
    dmma = DMMA_OVER_DFMA * VECTOR_PER_CLK["fp64"]
    return dmma * (DMMA_884_FRACTION if op == "fp64_m8n8k4" else 1.0)


def _compute_tensor_units(ctx, op):
    samples = _rates(tensor_unit_per_clk(op), "op" if op.startswith("int8") else "FLOP")
    return samples + [Sample("blocks_per_sm", 3, "1", 0, None, "config")]


#: Power model of dense tensor work: the board draws IDLE_W plus an energy per FLOP times the FLOP rate.  Past
#: POWER_LIMIT_W the driver lowers the clock until the draw is the limit, POWER_LAG_S after the load starts.
#: A faster limiter holds the draw of any launch, however short, to BURST_LIMIT_W: a burst runs at the clock
#: that draws that (the full clock if it draws less).  Energy per FLOP falls with narrower operands, and with
#: fewer operand bits toggling between products: OPERAND_ACTIVITY of the signed set's (random signs, exponents
#: and mantissas) for the unit set (non-negative, exponents within a few octaves below 1).
IDLE_W, POWER_LIMIT_W, BURST_LIMIT_W, POWER_LAG_S = 80.0, 700.0, 850.0, 0.12
JOULE_PER_FLOP = {"bf16": 0.7e-12, "fp16": 0.7e-12, "tf32": 1.4e-12, "e4m3": 0.4e-12}
OPERAND_ACTIVITY = {"signed": 1.0, "unit": 0.8}
#: wgmma's burst launches and back-to-back run, as the probe's full profile makes them (probes/families/compute/wgmma.py).
WGMMA_BURSTS, SUSTAINED_S, SUSTAINED_SAMPLE_S = 5, 1.5, 0.05


def _clock_at_power_hz(dtype, n, limit_w, operands="signed"):
    """The clock at which the tensor work draws exactly ``limit_w`` (the full clock if it draws less)."""
    joule_per_cycle = JOULE_PER_FLOP[dtype] * OPERAND_ACTIVITY[operands] * wgmma_per_clk(dtype, n) * DEVICE["sm_count"]
    return min(CLOCK_HZ, (limit_w - IDLE_W) / joule_per_cycle)


def power_limited_clock_hz(dtype, n):
    """The sustained clock: signed operands at the power limit."""
    return _clock_at_power_hz(dtype, n, POWER_LIMIT_W)


def burst_clock_hz(dtype, n, operands):
    """A burst's clock: ``operands`` at the fast limiter's power."""
    return _clock_at_power_hz(dtype, n, BURST_LIMIT_W, operands)


def _wgmma_samples(prefix, dtype, n, repeat, hz):
    per_clk = wgmma_per_clk(dtype, n)
    rate = per_clk * DEVICE["sm_count"] * hz
    return [Sample(f"{prefix}throughput", rate, "FLOP/s", repeat, hz, "cuda_event"),
            Sample(f"{prefix}per_clk_sm", per_clk, "FLOP/cycle", repeat, hz, "cuda_event")]


def _compute_wgmma(ctx, dtype, n):
    """Repeat-timed launches run at the power-limited clock; at N=256 also bursts on both operand sets (each at
    its fast-limited clock) and a back-to-back run whose clock drops to the power-limited one after the lag."""
    capped = power_limited_clock_hz(dtype, n)
    samples = [s for r in range(5) for s in _wgmma_samples("", dtype, n, r, capped)]
    if int(n) == 256:
        for prefix, operands in (("burst_", "signed"), ("burst_unit_", "unit")):
            hz = burst_clock_hz(dtype, n, operands)
            samples += [s for r in range(WGMMA_BURSTS) for s in _wgmma_samples(prefix, dtype, n, r, hz)]
        for r in range(round(SUSTAINED_S / SUSTAINED_SAMPLE_S)):
            t = (r + 1) * SUSTAINED_SAMPLE_S
            hz = burst_clock_hz(dtype, n, "signed") if t <= POWER_LAG_S else capped
            samples += _wgmma_samples("sustained_", dtype, n, r, hz)
            samples.append(Sample("sustained_t_s", t, "s", r, None, "monotonic"))
    return samples


def _flops(rate):
    return [s for r in range(5) for s in (Sample("flop_rate", rate, "FLOP/s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("seconds", 1.0 / rate, "s", r, CLOCK_HZ, "cuda_event"))]


def _matmul_library(ctx, impl, matrix_side):
    return _flops(LIBRARY_FRACTION[impl] * TC_PEAK)


def _matmul_roofline(ctx, block, matrix_side):
    """Exactly the roofline: min(peak, BLOCK/2 x HBM bandwidth)."""
    return _flops(min(TC_PEAK, block / 2 * HBM_READ))


def _lecture_tile(ctx, matrix_side):
    """The roofline at BLOCK 256: min(peak, 128 FLOP/B x HBM bandwidth)."""
    return _flops(min(TC_PEAK, 256 / 2 * HBM_READ))


def _naive(ctx, matrix_side):
    """The lecture's zero-reuse accounting: 4 n^3 bytes at the HBM read bandwidth."""
    seconds = 4.0 * matrix_side ** 3 / HBM_READ
    return [s for r in range(5) for s in (Sample("seconds", seconds, "s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("flop_rate", 2.0 * matrix_side ** 3 / seconds, "FLOP/s", r,
                                                  CLOCK_HZ, "cuda_event"))]


def _decode(ctx, batch):
    """Bandwidth-bound: A, the weights (4x the L2, 4096 rows) and C at the HBM read bandwidth."""
    k = 4096
    n = -(-4 * DEVICE["l2_bytes"] // (2 * k * 128)) * 128
    moved, flops = 2 * (batch * k + k * n + batch * n), 2.0 * batch * n * k
    seconds = moved / HBM_READ
    return [s for r in range(5) for s in (Sample("seconds", seconds, "s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("bandwidth", moved / seconds, "B/s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("flop_rate", flops / seconds, "FLOP/s", r, CLOCK_HZ, "cuda_event"))]


def _decode_chain(ctx, mode):
    """490 launches at the simulated per-launch interval of launch.overhead."""
    per = 2e-6 if mode == "plain" else 7e-7
    return [s for r in range(5) for s in (Sample("chain_seconds", 490 * per, "s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("launch_interval", per, "s", r, CLOCK_HZ, "cuda_event"))]


def _waves(ctx, tiles):
    """One BLOCK 128 program per SM at a time, each as long as its 2 x 128^2 x 4096 FLOPs at the SM's share of
    the tensor peak: the time steps at every multiple of the SM count."""
    per_wave = 2 * 128 * 128 * 4096 / (TC_PEAK / DEVICE["sm_count"])
    seconds = -(-tiles // DEVICE["sm_count"]) * per_wave + 3e-6
    return [Sample("seconds", seconds, "s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


def _softmax(ctx, launch, variant, matrix_side):
    """Bandwidth-bound: the bytes the kernels move at the HBM read bandwidth.  On a bf16 matrix with fp32
    per-row statistics, unfused: the row max reads x and writes the max; exp reads x and the max, writes e
    and the row sum; normalize reads e and the sum, writes y.  Fused: read x, write y."""
    matrix, stats = matrix_side * matrix_side * 2, matrix_side * 4
    moved = {"unfused": (matrix + stats) + (matrix + stats + matrix + stats) + (matrix + stats + matrix),
             "fused": matrix + matrix}[variant]
    seconds = moved / HBM_READ
    return [Sample("seconds", seconds, "s", r, CLOCK_HZ, "cuda_event") for r in range(5)]
#: Hopper units: remote shared memory between shared memory and L2; cluster size 16 refused by the driver.
DSMEM = {"local": LEVELS["smem"], "self": 35.0, "remote": 190.0}
REFUSED_CLUSTER, REFUSED_STATUS = 16, 912  # CUDA_ERROR_INVALID_CLUSTER_SIZE
DSMEM_BYTES_PER_CLK_SM = {"local": 125.0, "pair": 28.0, "ring": 24.0}
TMA_LATENCY = {"l2": 480.0, "dram": 900.0}  # plus one cycle per 64 bytes copied
COPY_BANDWIDTH = {"tma": 3.6e12, "cp_async": 3.4e12, "ldg": 3.0e12}  # HBM; L2 twice these
DPX_LATENCY = {("viaddmax", "dpx"): 4.0, ("viaddmax", "emu"): 8.0, ("vimax3", "dpx"): 4.0}
DPX_OPS_PER_CLK_SM = {("viaddmax", "dpx"): 64.0, ("viaddmax", "emu"): 32.0, ("vimax3", "dpx"): 64.0}


def _refused():
    return [Sample("cluster_refused", float(REFUSED_STATUS), "CUresult", 0, None, "driver", "invalid")]


def _dsmem_latency(ctx, cluster_size, mode):
    if cluster_size == REFUSED_CLUSTER:
        return _refused()
    return [s for s in _samples(DSMEM[mode], cluster_size) if s.metric == "latency"]


def _dsmem_bandwidth(ctx, cluster_size, pattern):
    if cluster_size == REFUSED_CLUSTER:
        return _refused()
    per_clk = DSMEM_BYTES_PER_CLK_SM[pattern]
    return [s for r in range(5) for s in (
        Sample("bandwidth", per_clk * DEVICE["sm_count"] * CLOCK_HZ, "B/s", r, CLOCK_HZ, "cuda_event"),
        Sample("bytes_per_clk_sm", per_clk, "B/cycle", r, CLOCK_HZ, "cuda_event"))]


def _tma_latency(ctx, copy_bytes, level):
    return [s for s in _samples(TMA_LATENCY[level] + copy_bytes / 64, copy_bytes) if s.metric == "latency"]


def _tma_tensor(ctx, box_cols, box_rows, level):
    return _tma_latency(ctx, box_cols * box_rows * 4, level)


def _copy_bandwidth(ctx, path, chunk_bytes, level):
    value = COPY_BANDWIDTH[path] * (2 if level == "l2" else 1) * min(1.0, chunk_bytes / 16384)
    return [Sample("bandwidth", value, "B/s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


def _dpx(ctx, op, impl):
    return [s for r in range(5) for s in (
        Sample("latency", DPX_LATENCY[(op, impl)], "cycles", r, CLOCK_HZ, "clock64"),
        Sample("ops_per_clk_sm", DPX_OPS_PER_CLK_SM[(op, impl)], "1/cycle", r, CLOCK_HZ, "cuda_event"))]


#: The execution chapter's simulated SM: SCHEDULERS sub-partitions, each issuing one warp instruction a clock
#: to 32 lanes; an op's latency is its pipeline's depth, and a unit with fewer lanes than 32 per sub-partition
#: takes 32 / lanes clocks per warp instruction.  (depth, lanes per sub-partition) by the op's name prefix.
SCHEDULERS, FFMA_DEPTH = 4, 4.0
PIPES = (("mufu", 23.0, 4), ("d", 8.0, 16), ("shfl", 24.0, 16), ("vote", 12.0, 16), ("redux", 30.0, 16),
         ("match", 40.0, 8), ("ld", 33.0, 8), ("sts", 0.0, 8), ("f2", 6.0, 16), ("i2f", 6.0, 16),
         ("", FFMA_DEPTH, 32))


def _pipe(op):
    return next((depth, lanes) for prefix, depth, lanes in PIPES if op.startswith(prefix))


def _exec_inst(ctx, op):
    depth, lanes = _pipe(op)
    out = [Sample("ops_per_clk_sm", float(SCHEDULERS * lanes), "1/cycle", r, CLOCK_HZ, "cuda_event")
           for r in range(5)]
    return out + ([Sample("latency", depth, "cycles", r, CLOCK_HZ, "clock64") for r in range(5)] if depth else [])


def _exec_schedule(ctx, resident_warps_per_sm, ilp):
    """Warp w sits on scheduler w mod SCHEDULERS; a warp issues one FFMA per FFMA_DEPTH clocks per chain."""
    per_scheduler = np.bincount(np.arange(resident_warps_per_sm) % SCHEDULERS, minlength=SCHEDULERS)
    ipc = float(sum(min(1.0, n * ilp / FFMA_DEPTH) for n in per_scheduler))
    return [Sample("warp_ipc_sm", ipc, "1/cycle", r, CLOCK_HZ, "clock64") for r in range(5)]


def _exec_diverge(ctx, ways):
    """The branches of a split warp run one after another: each lane's work takes ``ways`` times the issue."""
    return [Sample("lane_ffma_per_clk_sm", SCHEDULERS * 32.0 / ways, "1/cycle", r, CLOCK_HZ, "clock64")
            for r in range(5)]


#: mma.sync latency of the simulated tensor core: a pipeline of this many clocks per K step of a 16-bit shape.
MMA_CYCLES_PER_K = 2.0
MMA_K = {"bf16": 16, "fp16": 16, "tf32": 8, "int8": 32, "fp64": 4}


def _exec_mma_latency(ctx, dtype):
    return [Sample("latency", MMA_CYCLES_PER_K * MMA_K[dtype], "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]


#: Global atomics of the simulated GPU: a round trip to the L2 per dependent atomic; the L2 applies one add
#: per address per clock and ATOMIC_UNITS adds per clock over distinct addresses.
ATOMIC_LATENCY, ATOMIC_UNITS = 600.0, 64


#: What an address homed across the chip adds to a one-thread atomic's or fence's wait: the far partition's
#: L2 hit over the near one's.
CROSSING = FAR_L2 - LEVELS["l2"]


def placed(ctx, near: float, salt: int) -> list[Sample]:
    """One sample per random line (as the probe draws them): ``near`` where the line is homed near, plus
    CROSSING where it is homed far (the simulated L2's partition hash)."""
    from probes.kit.samplers import PLACEMENTS, random_lines

    offsets = random_lines(ctx, PLACEMENTS, salt)
    cycles = np.where(far_homed(offsets), near + CROSSING, near)
    return [s for r, (o, c) in enumerate(zip(offsets, cycles))
            for s in (Sample("latency", float(c), "cycles", r, CLOCK_HZ, "clock64"),
                      Sample("address_offset", float(o), "B", r, None, "config"))]


def _exec_atomics(ctx, dtype, mode):
    if mode == "latency":
        return placed(ctx, ATOMIC_LATENCY, 1)
    per_clk = {"same": 1.0, "warp": float(ATOMIC_UNITS), "distinct": float(ATOMIC_UNITS)}[mode]
    return [s for r in range(5) for s in (Sample("ops_per_s", per_clk * CLOCK_HZ, "1/s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("ops_per_clk", per_clk, "1/cycle", r, CLOCK_HZ, "cuda_event"))]


#: A barrier of the simulated SM: a fixed cost plus one clock per warp to collect.
BARRIER_BASE = 20.0


def _exec_sync(ctx, threads):
    return [Sample("latency", BARRIER_BASE + threads / 32, "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]
#: Shared-memory atomics of the simulated SM: a native int32 add is one trip through the shared array's atomic
#: unit; an fp32 add is the compare-and-swap loop (LDS, FADD, CAS), so its latency is the three in a row.  The
#: unit applies one add per word per clock and SMEM_ATOMIC_LANES adds a clock over distinct words; the fp32 loop
#: costs two shared accesses (the load and the CAS) per add, and a contended word one loop per add.
SMEM_ATOMIC_LATENCY, SMEM_ATOMIC_LANES = 40.0, 16


def _smem_atomic_latency(dtype):
    return SMEM_ATOMIC_LATENCY + (LEVELS["smem"] + FFMA_DEPTH if dtype == "f32" else 0.0)


def _exec_smem_atomics(ctx, dtype, mode):
    if mode == "latency":
        return [Sample("latency", _smem_atomic_latency(dtype), "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]
    if mode == "same":
        per_clk = 1.0 if dtype == "i32" else 1.0 / _smem_atomic_latency(dtype)
    else:
        per_clk = SMEM_ATOMIC_LANES / (1.0 if dtype == "i32" else 2.0)
    return [s for r in range(5) for s in (
        Sample("ops_per_clk_sm", per_clk, "1/cycle", r, CLOCK_HZ, "clock64"),
        Sample("ops_per_s_sm", per_clk * CLOCK_HZ, "1/s", r, CLOCK_HZ, "globaltimer"))]


#: Barriers of the simulated GPU: a named barrier or an mbarrier phase costs BARRIER_BASE / MBARRIER_BASE plus
#: one clock per warp it collects; a store issues in STORE_ISSUE clocks and a fence waits for the store to
#: reach its scope (nothing, the SM, the L2, the system past HBM); a grid barrier is two block barriers and a
#: global atomic round trip, plus one clock per block at the counter (one add per address per clock); a relaxed
#: cluster barrier is a block barrier and a round trip across the SM-to-SM network, plus one clock per block,
#: and the default one adds its release fence (a GPU-scope fence's wait).
MBARRIER_BASE, STORE_ISSUE = 12.0, 1.0
FENCE_WAIT = {"none": 0.0, "cta": 4.0, "gpu": LEVELS["l2"], "sys": LEVELS["dram"]}


def barrier_cycles(kind, n, device=DEVICE):
    """The simulated cycles per barrier of (kind, n)."""
    warps = min(device["max_threads_per_block"], 1024) // 32
    if kind == "named_partial":
        return BARRIER_BASE + n
    if kind == "named_ids":
        return BARRIER_BASE + warps / n
    if kind.startswith("fence_"):
        return STORE_ISSUE + FENCE_WAIT[kind.removeprefix("fence_")]
    if kind == "grid":
        return 2 * (BARRIER_BASE + 128 / 32) + ATOMIC_LATENCY + n * device["sm_count"]
    if kind == "mbarrier":
        return MBARRIER_BASE + n
    relaxed = BARRIER_BASE + DSMEM["remote"] + n
    return relaxed if kind == "cluster_relaxed" else relaxed + FENCE_WAIT["gpu"]  # a release fence before arriving


def _exec_barriers(ctx, kind, n):
    if kind in ("fence_gpu", "fence_sys"):  # the wait for the store's home partition
        return placed(ctx, barrier_cycles(kind, int(n), ctx.device), 2)
    return [Sample("latency", barrier_cycles(kind, int(n), ctx.device), "cycles", r, CLOCK_HZ, "clock64")
            for r in range(5)]


#: wgmma latency of the simulated tensor cores: a pipeline fill plus the instruction's FLOPs at the SM's dense
#: wgmma rate (WGMMA_PER_CLK), one warpgroup's wgmma spread over all four tensor cores.
WGMMA_FILL = 16.0
WGMMA_K = {"bf16": 16, "fp16": 16, "tf32": 8, "e4m3": 32}


def wgmma_latency(dtype, n):
    return WGMMA_FILL + 2 * 64 * n * WGMMA_K[dtype] / WGMMA_PER_CLK[dtype]


def _exec_wgmma_latency(ctx, dtype, n):
    return [Sample("latency", wgmma_latency(dtype, int(n)), "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]


#: A node of simulated GPUs: NVLinks per GPU at a one-way rate each; copies and kernels reach a fraction of
#: their sum, a copy of LINK_HALF_BYTES half of its plateau; remote loads cross the link both ways.
NVLINKS, NVLINK_BYTES_PER_S, NVLINK_VERSION = 18, 25e9, 4
LINK_PEAK = NVLINKS * NVLINK_BYTES_PER_S
COPY_FRACTION, KERNEL_FRACTION = {"one_way": 0.8, "both_ways": 1.5}, {"read": 0.85, "write": 0.9}
LINK_HALF_BYTES = 1 << 20
REMOTE = {"hbm": 1500.0, "l2": 1100.0}  # cycles


def _topology(ctx, src, dst):
    return [Sample(m, v, u, 0, None, "nvml") for m, v, u in (
        ("nvlink_active_links", NVLINKS, "1"), ("nvlink_links_to_peer", 0, "1"),
        ("nvlink_links_to_switch", NVLINKS, "1"), ("nvlink_version", NVLINK_VERSION, "1"),
        ("nvlink_link_bytes_per_s", NVLINK_BYTES_PER_S, "B/s"), ("pcie_common_ancestor_level", 60, "1"),
        ("p2p_read_supported", 1, "1"))]


def _memcpy(ctx, src, dst, direction, message_bytes):
    """A copy costs a fixed overhead plus its bytes at the plateau: half the plateau at LINK_HALF_BYTES."""
    plateau = COPY_FRACTION[direction] * LINK_PEAK
    value = plateau * message_bytes / (message_bytes + LINK_HALF_BYTES)
    return [Sample("bandwidth", value, "B/s", r, None, "cuda_event") for r in range(5)]


def _p2p_bandwidth(ctx, src, dst, op):
    return [Sample("bandwidth", KERNEL_FRACTION[op] * LINK_PEAK, "B/s", r, None, "cuda_event") for r in range(5)]


def _p2p_latency(ctx, src, dst, footprint_bytes):
    cycles = REMOTE["l2"] if footprint_bytes <= DEVICE["l2_bytes"] else REMOTE["hbm"]
    return _samples(cycles, footprint_bytes)


def _collectives(ctx, collective, message_bytes):
    """A ring: all-reduce sends 2(n-1) chunks of S/n per rank, all-gather and reduce-scatter n-1, broadcast
    pipelines S once; each rank's link carries them at LINK_PEAK one way."""
    n = ctx.device["gpu_count"]
    sent = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "broadcast": 1.0}[collective] * message_bytes
    seconds = sent / LINK_PEAK
    return [s for r in range(5) for s in (Sample("busbw", sent / seconds, "B/s", r, None, "cuda_event"),
                                           Sample("algbw", message_bytes / seconds, "B/s", r, None, "cuda_event"),
                                           Sample("seconds", seconds, "s", r, None, "cuda_event"))]


#: The simulated L1: a unified array of UNIFIED_BYTES holds the shared carve (the allocation plus a reserved
#: KiB per block, in CARVE_STEP steps) and the L1 the rest, in sets of L1_WAYS 128-byte lines whose index is
#: hashed (set_index), replaced LRU.
UNIFIED_BYTES, CARVE_STEP, L1_WAYS = 256 << 10, 8 << 10, 4


def l1_bytes_beside(smem_bytes: int) -> int:
    carve = -(-(smem_bytes + 1024) // CARVE_STEP) * CARVE_STEP
    return UNIFIED_BYTES - carve


def set_index(blocks: np.ndarray, sets: int, hashed: bool = False) -> np.ndarray:
    """The set of each line number: its lowest base-``sets`` digit, or with ``hashed`` that digit combined with
    every upper one (XOR where ``sets`` is a power of two, else their sum mod ``sets``).  Either way an aligned
    run of ``sets`` lines puts one line in each set; hashed, no power-of-two stride falls into one set."""
    blocks = np.asarray(blocks, dtype=np.int64)
    index = blocks % sets
    if not hashed or sets == 1:
        return index
    upper = blocks // sets
    while upper.any():
        index = index ^ (upper % sets) if sets & (sets - 1) == 0 else (index + upper) % sets
        upper //= sets
    return index


class SetCache:
    """A set-associative cache of known geometry, access by access: ``sets`` sets of ``ways`` lines of
    ``line`` bytes, replaced ``lru``, ``fifo``, ``plru`` (a binary tree, ways a power of two) or ``random``;
    with ``hashed`` the set index is XORed with the next bits up of the address (a hashed index)."""

    def __init__(self, sets: int, ways: int, line: int = LINE_BYTES, policy: str = "lru", hashed: bool = False,
                 seed: int = 0):
        self.sets_n, self.ways, self.line, self.policy, self.hashed = sets, ways, line, policy, hashed
        self.tags = [dict() for _ in range(sets)]  # tag -> way
        self.order = [[] for _ in range(sets)]  # ways by age (lru, fifo)
        self.tree = [[0] * max(ways - 1, 1) for _ in range(sets)]
        self.rng = np.random.default_rng(seed)

    def set_of(self, address: int) -> int:
        return int(set_index(np.array([address // self.line]), self.sets_n, self.hashed)[0])

    def _touch(self, s: int, way: int) -> None:
        if self.policy == "plru":
            node, span = 0, self.ways
            while span > 1:
                span //= 2
                right = (way // span) % 2
                self.tree[s][node] = 1 - right  # point away from the way just used
                node = 2 * node + 1 + right
        elif self.policy == "lru":
            self.order[s].remove(way)
            self.order[s].append(way)

    def _victim(self, s: int) -> int:
        if self.policy == "plru":
            node, way, span = 0, 0, self.ways
            while span > 1:
                span //= 2
                right = self.tree[s][node]
                way += right * span
                node = 2 * node + 1 + right
            return way
        if self.policy == "random":
            return int(self.rng.integers(self.ways))
        return self.order[s][0]

    def access(self, address: int) -> bool:
        """True on a hit; a miss fills the line, evicting the policy's victim."""
        s, tag = self.set_of(address), address // self.line
        table = self.tags[s]
        if tag in table:
            self._touch(s, table[tag])
            return True
        if len(table) < self.ways:
            way = len(table)
            self.order[s].append(way)
        else:
            way = self._victim(s)
            del table[next(t for t, w in table.items() if w == way)]
            if self.policy in ("lru", "fifo"):
                self.order[s].remove(way)
                self.order[s].append(way)
        table[tag] = way
        if self.policy == "plru":
            self._touch(s, way)
        return False


def cache_walk(make_cache, stride_bytes: int, recorded: int, blocks=None, hit: float = LEVELS["l1"],
               miss: float = LEVELS["l2"]):
    """``walk(lines) -> intervals``: a fresh cache, a cyclic walk of that many lines (``blocks[:lines]`` x the
    stride; no ``blocks``: 0, 1, 2, ...), two passes warm, then ``recorded`` accesses timed: ``hit`` or
    ``miss`` cycles plus the recording's cost."""
    def walk(lines: int) -> np.ndarray:
        at = (np.arange(lines) if blocks is None else blocks[:lines]) * stride_bytes
        cache = make_cache()
        for i in range(2 * lines):
            cache.access(int(at[i % lines]))
        start = 2 * lines
        return np.array([(hit if cache.access(int(at[(start + k) % lines])) else miss) + RECORD_COST
                         for k in range(recorded)])

    return walk


def lru_cyclic_walk(sets: int, ways: int, stride_bytes: int, recorded: int, blocks: np.ndarray,
                    hashed: bool = False):
    """The same walk on an LRU cache (set index by set_index), in closed form: a cyclic walk keeps every line
    of a set holding at most ``ways`` of them and misses every access to a set holding more."""
    def walk(lines: int) -> np.ndarray:
        index = set_index(blocks[:lines] * stride_bytes // LINE_BYTES, sets, hashed)
        overfull = np.bincount(index, minlength=sets)[index] > ways
        visits = (2 * lines + np.arange(recorded)) % lines
        return np.where(overfull[visits], LEVELS["l2"], LEVELS["l1"]) + RECORD_COST

    return walk


def _geometry_l1(ctx, stride_bytes, smem_bytes, placement):
    from probes.families.geometry import RECORDED, chain_blocks, max_lines, sweep_lines

    sets = l1_bytes_beside(smem_bytes) // LINE_BYTES // L1_WAYS
    n_max = max_lines(ctx.device, stride_bytes)
    blocks = chain_blocks(placement, n_max, np.random.default_rng([stride_bytes, smem_bytes]))
    return sweep_lines(lru_cyclic_walk(sets, L1_WAYS, stride_bytes, RECORDED, blocks, hashed=True), n_max,
                       CLOCK_HZ)


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


def partition_walks(stride_bytes, lines, walks, interleave=PARTITION_INTERLEAVE, seed=0):
    """Cold misses in address order, ``walks`` times: near- or far-homed miss latency, noise, the record's
    cost; ``interleave`` None: every line homed by the near partition."""
    rng = np.random.default_rng(seed)
    far = np.zeros(lines, dtype=bool) if interleave is None else far_homed(np.arange(lines) * stride_bytes,
                                                                           interleave)
    cycles = np.where(far, FAR_MISS, NEAR_MISS)
    return np.concatenate([np.round(cycles + rng.normal(0, 6, lines) + RECORD_COST) for _ in range(walks)])


def _l2_partition(ctx, stride_bytes):
    from probes.families.geometry.l2_partition import PARTITION_LINES, PARTITION_WALKS

    values = partition_walks(stride_bytes, PARTITION_LINES, PARTITION_WALKS, seed=stride_bytes)
    return ([Sample("access", float(v), "cycles", i, CLOCK_HZ, "clock") for i, v in enumerate(values)]
            + [Sample("walk_lines", float(PARTITION_LINES), "1", 0, CLOCK_HZ, "config")])


#: The simulated GPU's SM ids are not dense (as %smid need not be): every SM_ID_GAP-th id is missing.  SMs
#: alternate between the two sides by id; an SM on side 1 sees every line's home the other way round.
SM_ID_GAP = 7


def sm_map_walks(lines, sm_ids, sides, seed=0):
    """Each SM's cold misses over the same lines in address order: near-homed for its side or far."""
    rng = np.random.default_rng(seed)
    far = far_homed(np.arange(lines) * 128, PARTITION_INTERLEAVE)
    rows = [np.where(far ^ bool(side), FAR_MISS, NEAR_MISS) + rng.normal(0, 6, lines) + RECORD_COST
            for side in sides]
    return np.round(np.concatenate(rows))


def _l2_sm_map(ctx, sm_stride):
    from probes.families.geometry.l2_partition import SM_MAP_LINES

    ids = [i for i in range(2 * DEVICE["sm_count"]) if i % SM_ID_GAP != 3][:DEVICE["sm_count"]:int(sm_stride)]
    values = sm_map_walks(SM_MAP_LINES, ids, [i % 2 for i in ids], seed=sm_stride)
    return ([Sample("access", float(v), "cycles", i, CLOCK_HZ, "clock") for i, v in enumerate(values)]
            + [Sample("smid", float(sm), "1", rank, CLOCK_HZ, "config") for rank, sm in enumerate(ids)]
            + [Sample("walk_lines", float(SM_MAP_LINES), "1", 0, CLOCK_HZ, "config")])


#: The simulated L2 of geometry.l2_sets: two partitions of L2_SET_WAYS-way LRU sets, half the L2 each, indexed
#: by a hash that spreads any aligned run of `sets` consecutive lines over every set once (a rotation chosen by a
#: seeded hash of the run's number), so contiguous lines fill the sets evenly and random ones unevenly.  A line
#: homed by the far partition (far_homed) and read from the far side is held twice: at home and in the reader's
#: near partition.  An access is a near-partition hit (L2_SET_HIT cycles) or not (L2_SET_MISS).
L2_SET_WAYS, L2_SET_HIT, L2_SET_MISS = 16, 350.0, 700.0


def l2_set_of(blocks: np.ndarray, sets: int) -> np.ndarray:
    run = np.asarray(blocks, dtype=np.uint64) // np.uint64(sets)
    rotation = (run * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)) >> np.uint64(40)
    return ((np.asarray(blocks, dtype=np.uint64) + rotation) % np.uint64(sets)).astype(np.int64)


def l2_set_hits(blocks: np.ndarray, walkers: int, ways: int = L2_SET_WAYS,
                partition_bytes: int = DEVICE["l2_bytes"] // 2) -> np.ndarray:
    """Which lines of a cyclic chain (blocks of LINE_BYTES, in walk order) hit in steady state: under LRU a
    line stays iff its set in the reader's near partition holds at most ``ways`` of the chain's lines.  One
    walker: one partition holds every line.  Several: walker w reads the w-th stretch from side w % 2; each line
    sits in its home partition, and a far-homed one also in the reader's."""
    sets = partition_bytes // (ways * LINE_BYTES)
    index = l2_set_of(blocks, sets)
    if walkers == 1:
        return np.bincount(index, minlength=sets)[index] <= ways
    side = (np.arange(blocks.size) // (blocks.size // walkers)) % 2
    home = far_homed(np.asarray(blocks) * LINE_BYTES).astype(np.int64)
    held = np.bincount(home * sets + index, minlength=2 * sets)
    held += np.bincount((side * sets + index)[home != side], minlength=2 * sets)
    return held[side * sets + index] <= ways


def _l2_sets(ctx, walkers, placement, lengths=12, ways=L2_SET_WAYS):
    from probes.families.l2_sets import LINE_BYTES as LINE, TIMED_PASSES, chain_blocks, chain_lengths, walker_count

    count = walker_count(DEVICE, walkers)
    rng = np.random.default_rng(count)
    samples = [Sample("line_bytes", float(LINE), "1", 0, CLOCK_HZ, "config"),
               Sample("hit_cycles", L2_SET_HIT, "cycles", 0, CLOCK_HZ, "clock"),
               Sample("hit_threshold_cycles", (L2_SET_HIT + L2_SET_MISS) / 2, "cycles", 0, CLOCK_HZ, "clock")]
    for k, lines in enumerate(chain_lengths(DEVICE, walkers, placement, lengths)):
        hit = float(l2_set_hits(chain_blocks(DEVICE, placement, lines, rng), count, ways).mean())
        for p in range(TIMED_PASSES):
            repeat = k * TIMED_PASSES + p
            samples += [Sample("lines", float(lines), "1", repeat, CLOCK_HZ, "config"),
                        Sample("hit_fraction", hit, "1", repeat, CLOCK_HZ, "clock"),
                        Sample("cycles_per_access", hit * L2_SET_HIT + (1 - hit) * L2_SET_MISS, "cycles", repeat,
                               CLOCK_HZ, "clock")]
    return samples


#: The simulated constant caches: (capacity bytes, hit cycles) of each level, LRU, and the cycles beyond them.
CONST_LEVELS, CONST_BEYOND = ((2 << 10, 24.0), (32 << 10, 80.0)), 240.0


def _const(ctx, footprint_bytes):
    """A random cycle through more lines than an LRU level holds misses it at every step; the first level
    that holds the footprint serves it."""
    cycles = next((hit for capacity, hit in CONST_LEVELS if footprint_bytes <= capacity), CONST_BEYOND)
    return _samples(cycles, footprint_bytes)


def _l2_persist(ctx, hint):
    """Each round re-reads the hot set after an L2-sized stream: under LRU the stream evicts it (read from HBM)
    unless its lines persist (evict_last: read from the L2); the stream always comes from HBM."""
    from probes.families.geometry import PERSIST_ROUNDS, persist_hot_bytes

    hot, stream = persist_hot_bytes(DEVICE), DEVICE["l2_bytes"]
    seconds = PERSIST_ROUNDS * (hot / (L2_READ if hint == "evict_last" else HBM_READ) + stream / HBM_READ)
    return ([Sample("seconds", seconds * (1 + 0.001 * r), "s", r, None, "cuda_event") for r in range(5)]
            + [Sample("hot_bytes", float(hot), "B", 0, None, "config"),
               Sample("stream_bytes_per_round", float(stream), "B", 0, None, "config")])


#: The simulated read-only path: ld.global.nc hits the same L1 array as ld.global (READONLY_SHARES_L1) at
#: NC_L1_CYCLES, and past the L1 costs what a plain load does.  Read bandwidth per SM of every SM re-reading
#: an L1-resident region, per path; an L2-resident region reads at the L2's rate whichever the path.
READONLY_SHARES_L1, NC_L1_CYCLES = True, 30.0
#: A texture fetch goes through the same L1 array and costs the texture unit's TEX_EXTRA cycles more than a
#: plain load at every level.
TEX_EXTRA = 8.0
L1_READ_PER_CLK = {"plain": 96.0, "nc": 120.0}


def readonly_latency(footprint_bytes: int, path: str, shares_l1: bool = READONLY_SHARES_L1) -> float:
    """Cycles per step of a random cyclic chase at one element per 128-B line through an LRU L1 of L1_BYTES:
    every step hits while the lines a path's array must hold fit it, every step misses past that.  The mixed
    chase puts half its lines through each path: one array holds all of them, two arrays half each; its
    steps cost the two paths' latencies by turns."""
    def cost(one_path: str, lines_held: float) -> float:
        if lines_held * LINE_BYTES <= L1_BYTES:
            return NC_L1_CYCLES if one_path == "nc" else LEVELS["l1"]
        return LEVELS["l2"] if footprint_bytes <= DEVICE["l2_bytes"] else LEVELS["dram"]

    lines = footprint_bytes / LINE_BYTES
    if path == "tex":
        return cost("plain", lines) + TEX_EXTRA
    if path != "mixed":
        return cost(path, lines)
    held = lines if shares_l1 else lines / 2
    return (cost("plain", held) + cost("nc", held)) / 2


def readonly_read_per_clk(path: str, footprint_bytes: int) -> float:
    if footprint_bytes < DEVICE["smem_per_sm_bytes"]:
        return L1_READ_PER_CLK[path]
    return L2_READ / DEVICE["sm_count"] / CLOCK_HZ


def _readonly(ctx, measure, load, footprint_bytes, shares_l1=READONLY_SHARES_L1):
    if measure == "chase":
        return _samples(readonly_latency(footprint_bytes, load, shares_l1), footprint_bytes)
    per_clk = readonly_read_per_clk(load, footprint_bytes)
    return [s for r in range(5) for s in (
        Sample("bytes_per_clk_sm", per_clk, "B/cycle", r, CLOCK_HZ, "cuda_event"),
        Sample("bandwidth", per_clk * DEVICE["sm_count"] * CLOCK_HZ, "B/s", r, CLOCK_HZ, "cuda_event"))]


#: The simulated write policies: the L1 is write-through and a store evicts the line it writes into
#: (L1_KEEPS_STORES False), the L2 allocates the lines a kernel writes, and the HBM merges a partial sector by
#: reading it first (PARTIAL_RMW: a sector written in part costs a read and a write).
L1_KEEPS_STORES, L2_WRITE_ALLOCATES, PARTIAL_RMW = False, True, True


def write_chase_cycles(access: str, keeps: bool = L1_KEEPS_STORES) -> float:
    """A chain inside the L1: loads hit it; L2-only loads hit the L2; a stored line hits the L1 again only if the
    store kept it there."""
    if access == "cg" or (access == "store" and not keeps):
        return LEVELS["l2"]
    return LEVELS["l1"]


def allocate_cycles(device: dict, allocates: bool = L2_WRITE_ALLOCATES) -> tuple[float, float, float]:
    """Per-block cycles of the first, second and cold reads: each block's share of the L2's read rate, or of
    the HBM's, over the bytes it reads."""
    from probes.families.write_policy import ALLOCATE_BLOCKS_PER_SM, ALLOCATE_ROUNDS, allocate_slice_bytes

    blocks = ALLOCATE_BLOCKS_PER_SM * device["sm_count"]
    per_block = ALLOCATE_ROUNDS * allocate_slice_bytes(device)
    hit, miss = (per_block / (rate / blocks) * CLOCK_HZ for rate in (L2_READ, HBM_READ))
    return (hit if allocates else miss), hit, miss


def written_bytes(device: dict) -> float:
    from probes.families.write_policy import ALLOCATE_BLOCKS_PER_SM, ALLOCATE_ROUNDS, allocate_slice_bytes

    return float(ALLOCATE_ROUNDS * ALLOCATE_BLOCKS_PER_SM * device["sm_count"] * allocate_slice_bytes(device))


def partial_write_bandwidth(stride_words: int, rmw: bool = PARTIAL_RMW) -> float:
    """Useful bytes/s of 4-byte stores every ``stride_words`` words: whole sectors write at HBM_WRITE; a sector
    holding fewer written words is written whole, after being read if the memory merges by read-modify-write."""
    words_per_sector = SECTOR_BYTES // 4
    if stride_words == 1:
        return HBM_WRITE
    sector_rate = 1 / (1 / HBM_WRITE + 1 / HBM_READ) if rmw else HBM_WRITE
    return sector_rate / min(stride_words, words_per_sector)


def _write_policy(ctx, measure, access, keeps=L1_KEEPS_STORES, allocates=L2_WRITE_ALLOCATES, rmw=PARTIAL_RMW):
    if measure == "store_reload":
        return _samples(write_chase_cycles(access, keeps), 1)
    if measure == "write_allocate":
        first, second, cold = allocate_cycles(ctx.device, allocates)
        return [s for r in range(5) for s in (
            Sample("first_read_cycles", first, "cycles", r, CLOCK_HZ, "clock64"),
            Sample("second_read_cycles", second, "cycles", r, CLOCK_HZ, "clock64"),
            Sample("cold_read_cycles", cold, "cycles", r, CLOCK_HZ, "clock64"),
            Sample("written_hit_fraction", (cold - first) / (cold - second), "1", r, CLOCK_HZ, "clock64"),
            Sample("written_bytes", written_bytes(ctx.device), "B", r, CLOCK_HZ, "config"))]
    stride = {"full": 1, "word_per_sector": SECTOR_BYTES // 4}[access]
    return [s for r in range(5) for s in (
        Sample("bandwidth", partial_write_bandwidth(stride, rmw), "B/s", r, CLOCK_HZ, "cuda_event"),
        Sample("stride_words", float(stride), "1", r, CLOCK_HZ, "config"))]


#: The simulated instruction caches: an L0 and an L1 of these capacities, LRU, with 128-byte lines of 8
#: instructions; a line that misses the L0 comes from the L1 in ICACHE_L1_FETCH cycles, one that misses both from
#: beyond in ICACHE_BEYOND_FETCH.  A warp issues one instruction per cycle from the L0.
ICACHE_L0_BYTES, ICACHE_L1_BYTES, ICACHE_LINE = 32 << 10, 128 << 10, 128
ICACHE_L1_FETCH, ICACHE_BEYOND_FETCH = 8.0, 96.0


def icache_cycles_per_instruction(code_bytes: int) -> float:
    """A loop of ``code_bytes`` (and the loop's own instructions) walked cyclically: under LRU it hits the
    smallest level that holds it on every line and misses every smaller level on every line."""
    from probes.families.icache import INSTRUCTION_BYTES, LOOP_INSTRUCTIONS

    size = code_bytes + LOOP_INSTRUCTIONS * INSTRUCTION_BYTES
    per_line = ICACHE_LINE // INSTRUCTION_BYTES
    if size <= ICACHE_L0_BYTES:
        return 1.0
    return 1.0 + (ICACHE_L1_FETCH if size <= ICACHE_L1_BYTES else ICACHE_BEYOND_FETCH) / per_line


def _icache(ctx, code_bytes):
    rng = np.random.default_rng(code_bytes)
    cpi = icache_cycles_per_instruction(code_bytes)
    return [Sample("cycles_per_instruction", cpi * (1 + 0.002 * rng.standard_normal()), "cycles", r, CLOCK_HZ,
                   "clock64") for r in range(5)]


#: The simulated SM's misses in flight: MSHRS[load] distinct-line requests held at once, each answered after the
#: level's latency (times a per-SM factor: SMs sit at different distances from the L2), the answers sharing a
#: port of SM_PORT_BYTES per cycle; SOFTNESS rounds the corner where one limit hands over to the next.
MSHRS = {"plain": 256, "cg": 384}
SM_PORT_BYTES, SOFTNESS = 100.0, 4.0
SM_LATENCY_FACTORS = (0.94, 1.0, 1.03, 1.08)


def mshr_lines_per_clk(n: float, latency: float, bytes_per_line: float, registers: float = MSHRS["plain"],
                       port_bytes: float = SM_PORT_BYTES, line_rate: float = float("inf")) -> float:
    """Lines per cycle of n lines kept in flight: each limit alone -- n / latency (Little), registers /
    latency, the port's bytes, a per-line processing rate -- and together a soft minimum (a queue's corner
    is round, never the fit's sharp one)."""
    limits = np.array([n / latency, registers / latency, port_bytes / bytes_per_line, line_rate])
    return float(np.sum(limits ** -SOFTNESS) ** (-1 / SOFTNESS))


def _mshr(ctx, load, source, sectors_per_line, warps, registers=None, port_bytes=SM_PORT_BYTES,
          line_rate=float("inf"), per_sector=False, warp_limit=float("inf"), loads=(1, 2, 4, 8)):
    """``per_sector``: each register holds one 32-byte sector, so a 4-sector line takes four; ``warp_limit``:
    lines one warp may have in flight (a scoreboard's), the rest of its loads waiting."""
    rng = np.random.default_rng([int(warps), int(sectors_per_line), len(load), len(source)])
    per_warp = 32 if int(sectors_per_line) == 1 else 4
    bytes_per_line = 32.0 * int(sectors_per_line)
    registers = MSHRS[load] if registers is None else registers
    registers = registers / int(sectors_per_line) if per_sector else registers
    out, repeat = [], 0
    for per_thread in loads:
        n = int(warps) * per_thread * per_warp
        for _ in range(3):
            for sm, factor in enumerate(SM_LATENCY_FACTORS):
                held = int(warps) * min(per_thread * per_warp, warp_limit)
                rate = mshr_lines_per_clk(held, LEVELS[source] * factor, bytes_per_line, registers, port_bytes,
                                          line_rate) * rng.lognormal(0, 0.02)
                out += [Sample("lines_per_clk", rate, "lines/cycle", repeat, CLOCK_HZ, "clock64"),
                        Sample("pass_cycles", n / rate, "cycles", repeat, CLOCK_HZ, "clock64")]
                out += [Sample(m, float(v), "1", repeat, CLOCK_HZ, "config")
                        for m, v in (("lines_in_flight", n), ("loads_per_thread", per_thread), ("smid", 2 * sm))]
                repeat += 1
    return out + [Sample("bytes_per_line", bytes_per_line, "B", 0, CLOCK_HZ, "config")]


#: energy.per_operation: a board drawing ENERGY_IDLE_W at rest, plus each op's energy per unit of work at its
#: rate while its kernel runs.  NVML's counter integrates the true power, is updated every COUNTER_PERIOD_S (at
#: a random phase) to the energy up to COUNTER_DELAY_S before the update, in whole mJ; the host reads it every
#: ENERGY_POLL_S.  Tensor work runs at the power cap (its readings carry the SW power cap reason).
ENERGY_IDLE_W, COUNTER_PERIOD_S, COUNTER_DELAY_S, ENERGY_POLL_S = 85.0, 0.02, 0.005, 1.05e-3
ENERGY_OPS = {"fp32": (5e13, 6e-12, "FLOP"), "bf16": (7e14, 0.6e-12, "FLOP"), "fp8": (1.3e15, 0.35e-12, "FLOP"),
              "hbm": (4e12, 60e-12, "B"), "l2": (1e13, 15e-12, "B"), "smem": (3e13, 4e-12, "B")}
ENERGY_WINDOW_S, ENERGY_LAUNCH_S = 1.1, 0.02


def energy_window(op, period_s=COUNTER_PERIOD_S, stuck=False, seed=0):
    """One energy.per_operation window of ``op`` (``idle``: no kernel) on the simulated board."""
    rng = np.random.default_rng([seed, list(("idle", *ENERGY_OPS)).index(op)])
    rate, joule, unit = ENERGY_OPS.get(op, (0.0, 0.0, ""))
    launches = 0 if op == "idle" else int(np.ceil(ENERGY_WINDOW_S / ENERGY_LAUNCH_S))
    start = 20e-6
    end = start + launches * ENERGY_LAUNCH_S if launches else ENERGY_WINDOW_S
    busy_w = joule * rate

    def energy_j(t):  # since the window's start; the counter's origin is far in the past
        return 5e4 + ENERGY_IDLE_W * t + busy_w * np.clip(np.minimum(t, end) - start, 0, None)

    phase = rng.uniform(0, period_s)
    polls = np.arange(0.0, end + ENERGY_POLL_S, ENERGY_POLL_S) + rng.uniform(0, 2e-4)
    last_update = np.floor((polls - phase) / period_s) * period_s + phase
    counter = np.floor(energy_j(last_update - COUNTER_DELAY_S) * 1e3)
    if stuck:
        counter[:] = counter[0]
    keep = sorted({0, polls.size - 1} | {j for i in np.flatnonzero(np.diff(counter)) for j in (i, i + 1)})
    samples = [Sample("energy_before_mj", counter[0], "mJ", 0, None, "nvml"),
               Sample("energy_after_mj", counter[-1], "mJ", 0, None, "nvml"),
               Sample("host_window_s", polls[-1], "s", 0, None, "monotonic"),
               Sample("energy_poll_s", ENERGY_POLL_S, "s", 0, None, "monotonic")]
    for r, i in enumerate(keep):
        samples += [Sample("energy_t_s", polls[i], "s", r, None, "monotonic"),
                    Sample("energy_mj", counter[i], "mJ", r, None, "nvml")]
    capped = op in ("bf16", "fp8")
    hz = 0.8 * CLOCK_HZ if capped else CLOCK_HZ
    if launches:
        per_launch = rate * ENERGY_LAUNCH_S
        samples += [Sample("launch_end_s", (i + 1) * ENERGY_LAUNCH_S, "s", i, hz, "cuda_event")
                    for i in range(launches)]
        samples += [Sample("work_per_launch", per_launch, unit, 0, hz, "config"),
                    Sample("rate", rate, f"{unit}/s", 0, hz, "cuda_event"),
                    Sample("per_clk_sm", rate / DEVICE["sm_count"] / hz, f"{unit}/cycle", 0, hz, "cuda_event")]
    for i, t in enumerate(np.arange(0.005, polls[-1], 0.01)):
        power = ENERGY_IDLE_W + (busy_w if start <= t <= end else 0.0)
        samples += [Sample("trace_t_s", t, "s", i, None, "nvml"),
                    Sample("trace_power_w", power * (1 + 0.01 * rng.standard_normal()), "W", i, None, "nvml"),
                    Sample("trace_sm_clock_hz", hz if launches else 0.5 * CLOCK_HZ, "Hz", i, None, "nvml"),
                    Sample("trace_clock_event_reasons", 0x4 if capped and start <= t <= end else 0, "1", i, None,
                           "nvml"),
                    Sample("trace_temperature_c", 50.0, "C", i, None, "nvml")]
    return samples


def _energy(ctx, op):
    return energy_window(op)


FAKES = {"clock.sm": _clock, "launch.overhead": _launch, "chase.latency": _chase, "chase.latency_numba": _chase,
         "chase.access": _access, "chase.miss": _miss, "chase.every_sm": _every_sm,
         "chase.line": _line, "chase.tlb": _tlb, "chase.smem": _smem, "chase.smem_index": _smem_index, "matmul.lecture_tile": _lecture_tile, "matmul.naive": _naive, "matmul.decode": _decode, "launch.decode_chain": _decode_chain, "matmul.waves": _waves, "smem.banks": _banks,
         "smem.banks_fix": _banks, "smem.banks_numba": _banks, "smem.column_read": _column,
         "bw.stride": _bw_stride, "bw.l2": _bw_l2, "bw.dram": _bw_dram, "bw.onchip": _bw_onchip,
         "bw.dram_footprint": _bw_dram_footprint,
         "occupancy.throughput": _occupancy,
         "compute.vector": _compute_vector, "compute.latency": _compute_latency,
         "compute.mma_sync": _compute_mma_sync, "compute.wgmma": _compute_wgmma,
         "compute.tensor_units": _compute_tensor_units, "energy.per_operation": _energy,
         "matmul.library": _matmul_library, "matmul.roofline": _matmul_roofline, "fusion.softmax": _softmax,
         "hopper.dsmem_latency": _dsmem_latency, "hopper.dsmem_bandwidth": _dsmem_bandwidth,
         "hopper.tma_latency": _tma_latency, "hopper.tma_tensor": _tma_tensor, "hopper.copy_bandwidth": _copy_bandwidth,
         "hopper.dpx": _dpx, "geometry.l1": _geometry_l1,
         "geometry.l2_partition": _l2_partition, "geometry.l2_sm_map": _l2_sm_map,
         "geometry.l2_sets": _l2_sets, "geometry.const": _const,
         "geometry.l2_persist": _l2_persist,
         "geometry.readonly": _readonly, "geometry.write_policy": _write_policy,
         "geometry.icache": _icache, "geometry.mshr": _mshr, "exec.inst": _exec_inst, "exec.schedule": _exec_schedule,
         "exec.diverge": _exec_diverge, "exec.mma_latency": _exec_mma_latency,
         "exec.atomics": _exec_atomics, "exec.sync": _exec_sync,
         "exec.smem_atomics": _exec_smem_atomics, "exec.barriers": _exec_barriers,
         "exec.wgmma_latency": _exec_wgmma_latency,
         "link.topology": _topology, "link.memcpy": _memcpy,
         "link.p2p_bandwidth": _p2p_bandwidth, "link.p2p_latency": _p2p_latency, "nccl.collectives": _collectives,
         "numerics.mma_sync": _numerics, "numerics.wgmma": _numerics}


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
    return [dataclasses.replace(p, func=FAKES[p.id], backend="simulated") for p in all_probes().values()]


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

    recorded = json.loads((Path(__file__).parent / "fixtures/devices.json").read_text())[key]
    return {**{k: v for k, v in recorded.items() if not k.startswith("_")}, "uuid": f"GPU-sim-{key}"}


def part_probes(key: str) -> list:
    """PART_PROBES with the part's physics: its clock, memory read rate, FP32 and mma.sync widths, and a
    roofline matmul at exactly min(its mma.sync BF16 peak, BLOCK/2 x its read rate)."""
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
    return [dataclasses.replace(p, func=physics.get(p.id, FAKES[p.id]), backend="simulated")
            for p in all_probes().values() if p.id in PART_PROBES]
