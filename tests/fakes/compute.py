"""Compute (probes/families/compute/): vector and tensor-core widths per clock, the power model of dense
tensor work, the tensor units and wgmma's latency."""
from __future__ import annotations

from fakes import CLOCK_HZ, DEVICE
from gpuatlas.probes.kit.harness import Sample

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
#: wgmma's burst launches and back-to-back run, as the probe's full profile makes them
#: (probes/families/compute/wgmma.py).
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


#: wgmma latency of the simulated tensor cores: a pipeline fill plus the instruction's FLOPs at the SM's dense
#: wgmma rate (WGMMA_PER_CLK), one warpgroup's wgmma spread over all four tensor cores.
WGMMA_FILL = 16.0
WGMMA_K = {"bf16": 16, "fp16": 16, "tf32": 8, "e4m3": 32}


def wgmma_latency(dtype, n):
    return WGMMA_FILL + 2 * 64 * n * WGMMA_K[dtype] / WGMMA_PER_CLK[dtype]


def _exec_wgmma_latency(ctx, dtype, n):
    return [Sample("latency", wgmma_latency(dtype, int(n)), "cycles", r, CLOCK_HZ, "clock64") for r in range(5)]


#: probe id -> its fake.
FAKES = {"compute.vector": _compute_vector, "compute.latency": _compute_latency,
         "compute.mma_sync": _compute_mma_sync, "compute.wgmma": _compute_wgmma,
         "compute.tensor_units": _compute_tensor_units, "exec.wgmma_latency": _exec_wgmma_latency}
