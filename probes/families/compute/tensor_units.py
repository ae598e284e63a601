"""Tensor-core units beside compute.wgmma (CuPy RawModule of tensor_units.cu, sm_90a): ``compute.tensor_units``.

* ``bf16_ss_nN`` / ``bf16_rs_nN`` -- wgmma.mma_async bf16 m64nNk16 into fp32, B from shared memory, A from
  shared memory (SS, through a descriptor) or from registers (RS); N = 128 and 256.
* ``int8_n256`` -- wgmma s8 x s8 -> s32 m64n256k32, dense; a multiply-add counts as 2 integer ops.
* ``bf16_sparse_n256`` -- wgmma.mma_async.sp bf16 m64n256k32 into fp32, 2:4 structured sparsity: A holds 2 of
  every 4 values of K (every group keeps the positions SPARSE_KEPT, one metadata word for every thread);
  counted dense-equivalent (2 x 64 x 256 x 32), as NVIDIA counts its sparse rates.
* ``bf16_sparse_rs_n256`` -- the same with A's 64 x 16 kept values from registers (the PTX ISA's sparse
  m64nNk32 register A is the dense m64nNk16 fragment over the kept values): only B is read from shared memory.
* ``fp64_m8n8k4`` / ``fp64_m16n8k16`` -- mma.sync f64 (the DMMA unit), 8 independent accumulators per warp.

Every SM is filled with the blocks the driver grants.  A dense M x N x K product is 2 M N K operations; the
operations of a launch over its CUDA-event time, over SMs and over the clock the launch ran at (clock64 over
%globaltimer in thread 0 of every block, the median over blocks) is the unit's width in operations per clock
per SM.  Results are checked on the host: one wgmma commit group against numpy's matmul (descriptors and
fragment layouts read as assumed), every CTA (warp) identical, and the integer-valued int8 and fp64 chains
exactly (every accumulator is steps x the product).  A rate above the bound below is flagged ``invalid``;
tensor work runs at the clock the power limit allows, which is recorded, not flagged.
"""
from __future__ import annotations

import numpy as np

from gpuatlas.probes.families.compute import check_identical, measure_rate, occupancy_sample
from gpuatlas.probes.families.compute.wgmma import wgmma_fragment_to_matrix
from gpuatlas.probes.kit.cuda import blocks_per_sm
from gpuatlas.probes.kit.harness import Sample, calibrate
from gpuatlas.probes.registry import probe

LANES = 32
#: tensor_units.cu's constants.
WG_THREADS, STEPS, ROW_BYTES, WGMMA_M = 128, 4, 32, 64
#: Words of a_frag per thread: A's 4 register words (``_rs_`` units), then the sparsity metadata (sparse units).
FRAG_WORDS = 5
DMMA_THREADS, DMMA_ACC, DMMA_N = 256, 8, 8
#: unit -> (kernel, N, K, element bytes) for wgmma; the A operand's source is in the name (ss / rs).
WGMMA_UNITS = {"bf16_ss_n128": ("tu_ss_n128", 128, 16, 2), "bf16_rs_n128": ("tu_rs_n128", 128, 16, 2),
               "bf16_ss_n256": ("tu_ss_n256", 256, 16, 2), "bf16_rs_n256": ("tu_rs_n256", 256, 16, 2),
               "int8_n256": ("tu_s8_n256", 256, 32, 1), "bf16_sparse_n256": ("tu_sp_n256", 256, 32, 2),
               "bf16_sparse_rs_n256": ("tu_sprs_n256", 256, 32, 2)}
#: unit -> (kernel, M, K) of mma.sync f64 m{M}n8k{K}; (A, B, C) doubles per lane follow from the shape.
DMMA_UNITS = {"fp64_m8n8k4": ("dmma_m8n8k4", 8, 4), "fp64_m16n8k16": ("dmma_m16n8k16", 16, 16)}
UNITS = (*WGMMA_UNITS, *DMMA_UNITS)
#: Validity.  No NVIDIA tensor core so far completes more than 1024 dense 16-bit FMAs per clock per
#: sub-partition (4 per SM); 8-bit inputs at most twice that, 64-bit at most a quarter.  CLOCK_SLACK covers
#: the measured clock's jitter.
SUBPARTITIONS, TC_FMA_PER_CLK_SUBPARTITION_16BIT, CLOCK_SLACK = 4, 1024, 1.05
#: A launch lasts about LAUNCH_S (a sample, several launches, compute.measure_rate's SAMPLE_S).
LAUNCH_S = 2e-3
MAX_TRIPS = 2**31 - 1
#: One bf16 commit group against the host's matmul, relative to the result's largest magnitude (fp32
#: accumulation rounds; a misread layout is off by O(1)).
WGMMA_RTOL = 1e-2
#: Integer-valued operands: |element| <= INT_MAX_ABS, so every product and sum stays exact.
INT_MAX_ABS = 4
#: The two positions of every group of 4 K values the sparse A keeps (its metadata: 2-bit indices, ascending).
SPARSE_KEPT = (1, 3)


# -- accounting and bounds (pure: the CPU tests check them) ----------------------------------------------------

def unit_ops(unit: str) -> int:
    """Operations of one instruction (per warpgroup for wgmma, per warp for mma.sync): 2 M N K."""
    if unit in WGMMA_UNITS:
        _, n, k, _ = WGMMA_UNITS[unit]
        return 2 * WGMMA_M * n * k
    _, m, k = DMMA_UNITS[unit]
    return 2 * m * DMMA_N * k


def element_bytes(unit: str) -> int:
    return WGMMA_UNITS[unit][3] if unit in WGMMA_UNITS else 8


def bound_per_clk_sm(unit: str) -> float:
    """Largest operations per clock per SM any tensor core could reach (see the constant's note); a 2:4
    sparse product counted dense-equivalent at most twice the dense one."""
    sparse = 2 if "sparse" in unit else 1
    return sparse * SUBPARTITIONS * TC_FMA_PER_CLK_SUBPARTITION_16BIT * 2 * 2 / element_bytes(unit) * CLOCK_SLACK


def sparse_meta_word(kept: tuple[int, int]) -> int:
    """The 32-bit metadata word of 16-bit 2:4 sparsity keeping positions ``kept`` in each of its 8 groups of 4:
    per group a nibble, the first kept index in its low 2 bits."""
    nibble = kept[0] | kept[1] << 2
    return sum(nibble << (4 * g) for g in range(8))


def sparse_expand(values: np.ndarray, kept: tuple[int, int]) -> np.ndarray:
    """The dense M x 2C matrix of a 2:4 sparse A given as its M x C kept values (pairs in group order)."""
    dense = np.zeros((values.shape[0], 2 * values.shape[1]), dtype=values.dtype)
    dense[:, kept[0]::4], dense[:, kept[1]::4] = values[:, 0::2], values[:, 1::2]
    return dense


def dmma_regs(m: int, k: int) -> tuple[int, int, int]:
    """(A, B, C) doubles per lane of mma.sync f64 m{m}n8k{k}: 32 lanes share m k, k 8 and m 8 elements."""
    return m * k // LANES, k * DMMA_N // LANES, m * DMMA_N // LANES


# -- fragment layouts (PTX ISA: groupID g = lane / 4, threadID_in_group c = lane % 4) ----------------------------

def rs_a_fragment(a: np.ndarray) -> np.ndarray:
    """wgmma's register A (m64k16, 16-bit elements) from the 64 x 16 matrix ``a`` (uint16 codes): per thread
    4 words, warp w holding rows 16 w..16 w + 15 as mma m16n8k16's A fragment -- word j covers row
    16 w + g + 8 (j mod 2), columns 2 c + 8 (j / 2) and the next (low half first)."""
    t = np.arange(WG_THREADS)[:, None]
    j = np.arange(4)[None, :]
    lane = t % LANES
    rows = 16 * (t // LANES) + lane // 4 + 8 * (j % 2)
    cols = 2 * (lane % 4) + 8 * (j // 2)
    low, high = a[rows, cols].astype(np.uint32), a[rows, cols + 1].astype(np.uint32)
    return (low | high << 16).reshape(-1)


def dmma_a_fragment(a: np.ndarray) -> np.ndarray:
    """Per lane, A's doubles of mma.sync f64 (``a``: M x K, row-major): a_i = A[g + 8 (i mod 2), c + 4 (i / 2)]."""
    lane = np.arange(LANES)[:, None]
    i = np.arange(a.size // LANES)[None, :]
    return a[lane // 4 + 8 * (i % 2), lane % 4 + 4 * (i // 2)]


def dmma_b_fragment(b: np.ndarray) -> np.ndarray:
    """Per lane, B's doubles (``b``: K x 8): b_i = B[c + 4 i, g]."""
    lane = np.arange(LANES)[:, None]
    i = np.arange(b.size // LANES)[None, :]
    return b[lane % 4 + 4 * i, lane // 4]


def dmma_c_matrix(frag: np.ndarray, m: int) -> np.ndarray:
    """The M x 8 accumulator from one warp's lanes (``frag``: 32 x M/4): c_i = C[g + 8 (i / 2), 2 c + (i mod 2)]."""
    lane = np.arange(LANES)[:, None]
    i = np.arange(m * DMMA_N // LANES)[None, :]
    c = np.empty((m, DMMA_N), dtype=frag.dtype)
    c[lane // 4 + 8 * (i // 2), 2 * (lane % 4) + i % 2] = frag.reshape(LANES, -1)
    return c


# -- operands -----------------------------------------------------------------------------------------------

def bf16_operand(rng: np.random.Generator, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, values)``: random non-zero bf16 (uint16 codes, the top half of a float32) and their values."""
    floats = (rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(np.float32)
    codes = (floats.view(np.uint32) >> 16).astype(np.uint16)
    return codes, (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def int_operand(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Random non-zero integers in [-INT_MAX_ABS, INT_MAX_ABS]."""
    return rng.integers(1, INT_MAX_ABS + 1, shape) * rng.choice([-1, 1], shape)


# -- the GPU side ---------------------------------------------------------------------------------------------

def _kernel(name: str):
    from gpuatlas.probes.kit.cuda import kernel

    return kernel("tensor_units.cu", name, arch="sm_90a")


def _rates(ctx, unit: str, launch, clocks, check, ops_per_launch: float, blocks: int) -> list[Sample]:
    """compute.measure_rate's samples (ops per clock per SM at the launch's own clock, ops per second) and
    the blocks per SM the grid ran with."""
    return (measure_rate(ctx, launch, clocks, check, ops_per_launch, "op" if unit.startswith("int8") else "FLOP",
                         bound_per_clk_sm(unit), power_limited=True)
            + [occupancy_sample(blocks, ctx, "blocks_per_sm", 1)])


def _wgmma(ctx, unit: str) -> list[Sample]:
    import cupy

    name, n, k, _ = WGMMA_UNITS[unit]
    func = _kernel(name)
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, WG_THREADS)
    rng = ctx.rng(11, UNITS.index(unit))
    integer = unit.startswith("int8")
    if integer:
        a_val, b_val = int_operand(rng, (WGMMA_M, k)), int_operand(rng, (n, k))
        a_raw, b_raw = a_val.astype(np.int8), b_val.astype(np.int8)
        out = cupy.empty(blocks * WG_THREADS * n // 2, dtype=cupy.int32)
    else:
        sparse = "sparse" in unit
        a_raw, a_val = bf16_operand(rng, (WGMMA_M, k // 2 if sparse else k))
        b_raw, b_val = bf16_operand(rng, (n, k))
        out = cupy.empty(blocks * WG_THREADS * n // 2, dtype=cupy.float32)
        if sparse:
            a_val = sparse_expand(a_val, SPARSE_KEPT)
    a_rows = cupy.asarray(a_raw.reshape(-1).view(np.uint8))
    b_rows = cupy.asarray(b_raw.reshape(-1).view(np.uint8))
    frag = np.zeros((WG_THREADS, FRAG_WORDS), np.uint32)
    if "_rs_" in unit:  # a sparse A's kept values (64 x 16) sit in registers as a dense m64k16 A would
        frag[:, :4] = rs_a_fragment(a_raw).reshape(WG_THREADS, 4)
    if "sparse" in unit:
        frag[:, 4] = sparse_meta_word(SPARSE_KEPT)
    a_frag = cupy.asarray(frag.reshape(-1))
    clocks = cupy.zeros(2 * blocks, dtype=cupy.uint64)
    product = a_val.astype(np.float64) @ b_val.T.astype(np.float64)  # one wgmma's result

    def run(groups: int):
        return lambda: func((blocks,), (WG_THREADS,), (a_rows, a_frag, b_rows, np.int64(groups), out, clocks))

    # One commit group (STEPS wgmmas) against the host's matmul: the layouts are the ones the host assumes.
    run(1)()
    per_cta = out.get().reshape(blocks, -1)
    check_identical(per_cta, name, "blocks")
    got = wgmma_fragment_to_matrix(per_cta[0], n).astype(np.float64)
    error = np.abs(got - STEPS * product).max() / np.abs(STEPS * product).max()
    if error > (0 if integer else WGMMA_RTOL):
        raise RuntimeError(f"{name}: one group's result is off the host matmul by {error:.3g} of its largest "
                           f"value (descriptor or fragment layout misread)")

    # int8: the s32 accumulators stay exact (no overflow) for at most this many groups.
    limit = MAX_TRIPS // (STEPS * max(1, int(np.abs(product).max()))) if integer else MAX_TRIPS
    groups, _ = calibrate(run, 1, LAUNCH_S, max_count=limit)
    cta_values = WG_THREADS * n // 2
    run(groups)()
    first = out[:cta_values].get()
    if integer and not np.array_equal(wgmma_fragment_to_matrix(first, n), groups * STEPS * product):
        raise RuntimeError(f"{name}: CTA 0's accumulators after {groups} groups are not groups x the product")

    def check() -> None:
        if not np.array_equal(out[:cta_values].get(), first):
            raise RuntimeError(f"{name}: CTA 0's accumulators changed between identical launches")

    samples = _rates(ctx, unit, run(groups), clocks, check, float(blocks) * groups * STEPS * unit_ops(unit), blocks)
    check_identical(out.get().reshape(blocks, -1), name, "blocks")
    return samples


def _dmma(ctx, unit: str) -> list[Sample]:
    import cupy

    name, m, k = DMMA_UNITS[unit]
    func = _kernel(name)
    blocks = ctx.device["sm_count"] * blocks_per_sm(func, DMMA_THREADS)
    warps = blocks * DMMA_THREADS // LANES
    rng = ctx.rng(12, UNITS.index(unit))
    a = int_operand(rng, (m, k)).astype(np.float64)
    bs = int_operand(rng, (DMMA_ACC, k, DMMA_N)).astype(np.float64)  # each accumulator its own B
    b_frag = np.stack([dmma_b_fragment(b) for b in bs], axis=1)  # lane x accumulator x B doubles
    a_in, b_in = cupy.asarray(dmma_a_fragment(a).reshape(-1)), cupy.asarray(b_frag.reshape(-1))
    c_regs = dmma_regs(m, k)[2]
    out = cupy.empty(blocks * DMMA_THREADS * DMMA_ACC * c_regs, dtype=cupy.float64)
    clocks = cupy.zeros(2 * blocks, dtype=cupy.uint64)
    products = np.stack([a @ b for b in bs])  # accumulator j: trips x A B_j, exact in fp64

    def run(trips: int):
        return lambda: func((blocks,), (DMMA_THREADS,), (a_in, b_in, np.int32(trips), out, clocks))

    def warp0(trips: int) -> None:
        lanes = out[:LANES * DMMA_ACC * c_regs].get().reshape(LANES, DMMA_ACC, c_regs)
        got = np.stack([dmma_c_matrix(lanes[:, j], m) for j in range(DMMA_ACC)])
        if not np.array_equal(got, trips * products):
            raise RuntimeError(f"{name}: warp 0's accumulators after {trips} steps are not steps x A B "
                               f"({np.count_nonzero(got != trips * products)} of {got.size} differ)")

    run(1)()
    warp0(1)
    trips, _ = calibrate(run, 1, LAUNCH_S, max_count=MAX_TRIPS)
    run(trips)()
    warp0(trips)
    samples = _rates(ctx, unit, run(trips), clocks, lambda: warp0(trips),
                       float(warps) * trips * DMMA_ACC * unit_ops(unit), blocks)
    check_identical(out.get().reshape(warps, -1), name, "warps")
    return samples


def _sweep(device):
    return {"op": list(UNITS)}


@probe("compute.tensor_units", sweeps={"quick": _sweep, "full": _sweep},
       axes={"op": "bf16_ss_nN / bf16_rs_nN (wgmma m64nNk16, A from shared memory / registers, N 128, 256), "
                     "int8_n256 (wgmma s8 m64n256k32 -> s32), bf16_sparse_n256 / bf16_sparse_rs_n256 "
                     "(wgmma.sp m64n256k32, 2:4, A from shared memory / registers), "
                     "fp64_m8n8k4 / fp64_m16n8k16 (mma.sync f64, DMMA)"},
       quantities=("tc.bf16.ss_flop_per_clk_sm", "tc.bf16.rs_flop_per_clk_sm", "tc.bf16.rs_over_ss",
                   "tc.int8.ops_per_clk_sm", "tc.bf16.sparse_flop_per_clk_sm", "tc.bf16.sparse_rs_flop_per_clk_sm",
                   "tc.bf16.sparse_rs_over_ss", "tc.fp64.flop_per_clk_sm",
                   "tc.fp64.m8n8k4_flop_per_clk_sm", "tc.fp64.m16n8k16_flop_per_clk_sm"),
       kernels=("tensor_units.cu",), min_cc=(9, 0), max_cc=(9, 0))
def compute_tensor_units(ctx, op: str) -> list[Sample]:
    """Tensor-core width (operations per clock per SM) of bf16 wgmma with A from registers or shared memory,
    int8 wgmma, 2:4 sparse bf16 wgmma with A from shared memory or registers (dense-equivalent) and fp64
    mma.sync, every SM full."""
    if op not in UNITS:
        raise ValueError(f"unknown tensor op {op!r}: choose one of {', '.join(UNITS)}")
    if ctx.device["compute_capability"] != "9.0":
        raise RuntimeError("tensor_units.cu is built for sm_90a, which runs on compute capability 9.0 only; "
                           f"this GPU is {ctx.device['compute_capability']}")
    return _wgmma(ctx, op) if op in WGMMA_UNITS else _dmma(ctx, op)
