"""What the tensor cores compute: crafted dot products through mma.sync and wgmma (CuPy RawModules,
numerics_mma.cu and numerics_wgmma.cu).

``numerics.mma_sync`` (m16n8k16 fp16/bf16, m16n8k8 tf32, m16n8k32 e4m3/e5m2/int8; FP8 from compute capability
8.9, emulated by ptxas on 9.0, which has no FP8 mma.sync unit) and ``numerics.wgmma`` (m64n8k16/k8/k32, sm_90a
only) evaluate, per input type, every case of the exact host model's crafted set (gpuatlas.analysis.numerics, through
gpuatlas.analysis.tensor_numerics.cases) in one launch: one warp (mma.sync) or one warpgroup (wgmma) per case, its
operands at row 0 of A and column 0 of B, the rest zero, C(0, 0) set; D(0, 0) is recorded as the FP32 value it
is (``d_<case>``: a float64 holds every FP32 value exactly, so the sample is the output bit for bit).

The launch proves itself on the GPU: a control case of small integers in every element of A, B and C, whose
sums are exact in every model, must come back exact in every element of D (a misread fragment or descriptor
layout would not), every other element of every crafted case must come back zero, and three launches must
agree bit for bit; else the probe raises.  INT8 (integer accumulation, exact by definition) records the
elements off the exact integer sum per case (``mismatches_<case>``): full-range random operands, and sums that
reach the int32 limits.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from gpuatlas.analysis.numerics import FORMATS, FP32, encode, round_to
from gpuatlas.analysis.tensor_numerics import DEPTH, FLOAT_DTYPES, cases, quantity_ids
from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.registry import probe

#: numerics_*.cu's shapes: rows of A (M) per instruction, N, and 8 words (32 bytes) of K per operand row.
ROWS = {"mma_sync": 16, "wgmma": 64}
N, ROW_WORDS = 8, 8
THREADS = {"mma_sync": 32, "wgmma": 128}
#: Bytes per element of each input type (tf32 in a 32-bit container: an FP32 pattern whose low 13 bits are 0).
ELEMENT = {"fp16": np.uint16, "bf16": np.uint16, "tf32": np.uint32, "e4m3": np.uint8, "e5m2": np.uint8,
           "int8": np.uint8}
DTYPES = (*FLOAT_DTYPES, "int8")
#: FP8 mma.sync exists from compute capability 8.9 on.
FP8_MMA_CC = (8, 9)
#: Identical launches whose outputs must agree bit for bit.
LAUNCHES = 3


def pattern(value, dtype: str) -> int:
    """The bit pattern of a value the input type holds exactly (tf32: its FP32 container's)."""
    if dtype == "tf32":
        if round_to(Fraction(value), FORMATS["tf32"]) != value:
            raise ValueError(f"{value} is not a tf32 value")
        return encode(value, FP32)
    return encode(value, FORMATS[dtype])


class Batch:
    """Every case's A (cases x rows x K), B (cases x N x K, B's columns) and C (cases x rows x N), built on the
    host; ``exact`` holds each case's exact D where the host computes it (the control, the int8 cases)."""

    def __init__(self, dtype: str, rows: int, count: int):
        self.dtype, self.rows, self.k = dtype, rows, DEPTH[dtype]
        self.a = np.zeros((count, rows, self.k), ELEMENT[dtype])
        self.b = np.zeros((count, N, self.k), ELEMENT[dtype])
        self.c = np.zeros((count, rows, N), np.int32 if dtype == "int8" else np.float32)

    def words(self, operand: np.ndarray) -> np.ndarray:
        """An operand as the kernels read it: 8 words per row, elements little-endian in K order."""
        return np.ascontiguousarray(operand).view(np.uint32).reshape(len(operand), -1, ROW_WORDS)

    def set_full(self, index: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Case ``index`` with every element given (small integers: values of every input type); returns its
        exact D = C + A B^T."""
        if self.dtype == "int8":
            self.a[index], self.b[index] = a.astype(np.int8).view(np.uint8), b.astype(np.int8).view(np.uint8)
        else:
            table = {v: pattern(Fraction(int(v)), self.dtype) for v in np.unique(np.concatenate([a.ravel(),
                                                                                                  b.ravel()]))}
            self.a[index] = np.vectorize(table.get)(a)
            self.b[index] = np.vectorize(table.get)(b)
        self.c[index] = c
        return c.astype(np.int64) + a.astype(np.int64) @ b.astype(np.int64).T

    def set_case(self, index: int, case) -> None:
        """A crafted case: its operands at row 0 of A and column 0 of B, its c at C(0, 0)."""
        self.a[index, 0] = [pattern(v, self.dtype) for v in case.a]
        self.b[index, 0] = [pattern(v, self.dtype) for v in case.b]
        self.c[index, 0, 0] = float(case.c)


def _control(rng: np.random.Generator, rows: int, k: int) -> tuple:
    """Small integers everywhere: every product and sum is exact in every input type and every model."""
    return rng.integers(-3, 4, (rows, k)), rng.integers(-3, 4, (N, k)), rng.integers(-8, 9, (rows, N))


def _int8_cases(rng: np.random.Generator, rows: int, k: int) -> dict:
    """name -> (A, B, C) of the int8 cases: full-range random, and sums reaching int32's largest and smallest."""
    def at_row_0(a0: int, b0: int, c00: int) -> tuple:
        a, b, c = np.zeros((rows, k), np.int64), np.zeros((N, k), np.int64), np.zeros((rows, N), np.int64)
        a[0], b[0], c[0, 0] = a0, b0, c00
        return a, b, c

    full = (rng.integers(-128, 128, (rows, k)), rng.integers(-128, 128, (N, k)),
            rng.integers(-2**24, 2**24, (rows, N)))
    return {"random_full": full, "int32_max": at_row_0(-128, -128, 2**31 - 1 - k * 128 * 128),
            "int32_min": at_row_0(-128, 127, -2**31 + k * 128 * 127)}


def measure(ctx, func, instruction: str, dtype: str) -> list[Sample]:
    """Build every case, launch the batch LAUNCHES times, check on the host (module docstring), and record D(0, 0)
    of every crafted case (or the int8 cases' elements off their exact sums)."""
    import cupy

    rows, rng = ROWS[instruction], ctx.rng(17, DTYPES.index(dtype), list(ROWS).index(instruction))
    crafted = cases(dtype) if dtype != "int8" else []
    extra = _int8_cases(rng, rows, DEPTH[dtype]) if dtype == "int8" else {}
    batch = Batch(dtype, rows, 1 + len(crafted) + len(extra))
    exact = {0: batch.set_full(0, *_control(rng, rows, DEPTH[dtype]))}
    for i, case in enumerate(crafted, 1):
        batch.set_case(i, case)
    for i, operands in enumerate(extra.values(), 1):
        exact[i] = batch.set_full(i, *operands)
    args = [cupy.asarray(batch.words(batch.a)), cupy.asarray(batch.words(batch.b)), cupy.asarray(batch.c),
            cupy.zeros_like(cupy.asarray(batch.c))]
    outputs = []
    for _ in range(LAUNCHES):
        args[3].fill(0)
        func((len(batch.c),), (THREADS[instruction],), tuple(args))
        outputs.append(args[3].get())
    what = f"numerics.{instruction} {dtype}"
    if any(not np.array_equal(o.view(np.uint32), outputs[0].view(np.uint32)) for o in outputs[1:]):
        raise RuntimeError(f"{what}: identical launches gave different bits")
    d = outputs[0]
    if not np.array_equal(d[0], exact[0]):
        raise RuntimeError(f"{what}: the control case (small integers, exact in every model) came back off its "
                           "exact sum: the fragment or descriptor layout is misread")
    rest = d[1:1 + len(crafted)].copy()
    rest[:, 0, 0] = 0
    if np.any(rest):
        raise RuntimeError(f"{what}: a crafted case's D is nonzero outside (0, 0), where C and the products are 0")
    samples = [Sample(f"d_{case.name}", float(d[i, 0, 0]), "1", 0, None, "none")
               for i, case in enumerate(crafted, 1)]
    samples += [Sample(f"mismatches_{name}", float(np.count_nonzero(d[i].astype(np.int64) != exact[i])), "1", 0,
                       None, "none") for i, name in enumerate(extra, 1)]
    return samples


def _mma_sweep(device: dict) -> dict:
    cc = tuple(int(x) for x in str(device["compute_capability"]).split("."))
    return {"dtype": [d for d in DTYPES if d not in ("e4m3", "e5m2") or cc >= FP8_MMA_CC]}


def _wgmma_sweep(device: dict) -> dict:
    return {"dtype": list(DTYPES)}


_AXES = "fp16, bf16 (k16), tf32 (k8), e4m3, e5m2, int8 (k32); fp32 (int32) accumulation"


@probe("numerics.mma_sync", sweeps={"quick": _mma_sweep, "full": _mma_sweep}, axes={"dtype": _AXES},
       quantities=quantity_ids("mma_sync"), kernels=("numerics_mma.cu",), min_cc=(8, 0))
def numerics_mma_sync(ctx, dtype: str) -> list[Sample]:
    """What mma.sync m16n8k* computes: D(0, 0) of every crafted dot product, one warp per case."""
    from gpuatlas.probes.kit.cuda import kernel

    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    return measure(ctx, kernel("numerics_mma.cu", f"numerics_mma_{dtype}"), "mma_sync", dtype)


@probe("numerics.wgmma", sweeps={"quick": _wgmma_sweep, "full": _wgmma_sweep}, axes={"dtype": _AXES},
       quantities=quantity_ids("wgmma"), kernels=("numerics_wgmma.cu",), min_cc=(9, 0), max_cc=(9, 0))
def numerics_wgmma(ctx, dtype: str) -> list[Sample]:
    """What wgmma m64n8k* computes: D(0, 0) of every crafted dot product, one warpgroup per case."""
    from gpuatlas.probes.kit.cuda import kernel

    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    if ctx.device["compute_capability"] != "9.0":
        raise RuntimeError(f"numerics_wgmma.cu is built for sm_90a, which runs on compute capability 9.0 only; "
                           f"this GPU is {ctx.device['compute_capability']}")
    return measure(ctx, kernel("numerics_wgmma.cu", f"numerics_wgmma_{dtype}", "sm_90a"), "wgmma", dtype)
