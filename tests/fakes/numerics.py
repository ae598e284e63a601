"""The simulated GPU's tensor cores, computed from first principles (not with gpuatlas.analysis.numerics' models): each
input type's products are exact (float64 holds every product of two such operands), the accumulator and a group
of products are aligned to the largest exponent among them and each truncated to a fixed count of significant
bits, the truncated parts summed exactly (Python integers) and rounded to FP32; the next group starts from that
result.  The operands are the probe's own crafted cases (its inputs, not a model of the hardware)."""
from __future__ import annotations

import math

from gpuatlas.probes.families.numerics import cases
from gpuatlas.probes.kit.harness import Sample

#: Per input type: (significant bits kept, products per group or None for all of k, the FP32 rounding
#: ("trunc" or "even"), subnormal inputs flushed, subnormal results flushed).  FP8 keeps 14 significant bits
#: (13 explicit: the e8m13 claim holds on this GPU).
TRUTH = {"fp16": (25, None, "trunc", False, False), "bf16": (24, 8, "even", True, False),
         "tf32": (24, 4, "trunc", False, True), "e4m3": (14, 4, "trunc", False, False),
         "e5m2": (14, 16, "trunc", False, False)}
#: The smallest normal magnitude of each input type, 2^(1 - bias): below it an operand is subnormal.
SMALLEST_NORMAL = {"fp16": 2.0 ** -14, "bf16": 2.0 ** -126, "tf32": 2.0 ** -126, "e4m3": 2.0 ** -6,
                   "e5m2": 2.0 ** -14}
FP32_SMALLEST_NORMAL = 2.0 ** -126


def to_fp32(x: float, rounding: str, flush: bool) -> float:
    """x (a float64 multiple of a power of two) to FP32: 24 significant bits, fewer below 2^-126."""
    if x == 0 or (flush and abs(x) < FP32_SMALLEST_NORMAL):
        return 0.0
    quantum = 2.0 ** (max(math.frexp(x)[1] - 1, -126) - 23)
    steps = x / quantum
    out = (math.trunc(steps) if rounding == "trunc" else round(steps)) * quantum  # round(): ties to even
    return 0.0 if flush and abs(out) < FP32_SMALLEST_NORMAL else out


def tensor_core(dtype: str, a, b, c) -> float:
    """c + a . b as this GPU's tensor core computes it (TRUTH)."""
    bits, group, rounding, flush_in, flush_out = TRUTH[dtype]

    def kept(v: float) -> float:
        return 0.0 if flush_in and abs(v) < SMALLEST_NORMAL[dtype] else v

    acc = 0.0 if flush_in and abs(float(c)) < FP32_SMALLEST_NORMAL else float(c)
    products = [kept(float(x)) * kept(float(y)) for x, y in zip(a, b)]
    size = group or len(products)
    for start in range(0, len(products), size):
        part = [p for p in products[start:start + size] if p]
        if not part:  # nothing to add: the accumulator passes as it is (a subnormal one through the output)
            acc = to_fp32(acc, rounding, flush_out) if abs(acc) < FP32_SMALLEST_NORMAL else acc
            continue
        terms = [acc, *part]
        top = max(math.frexp(t)[1] for t in terms if t)  # the largest exponent + 1
        quantum = 2.0 ** (top - bits)
        acc = to_fp32(sum(math.trunc(t / quantum) for t in terms) * quantum, rounding, flush_out)
    return acc


def numerics(ctx, dtype, broken: bool = False):
    """The probe's samples: D(0, 0) of every crafted case, or every int8 case exact.  ``broken``: a tensor core
    no model describes (every output off by a quarter of its last FP32 place, so no FP32 value at all)."""
    if dtype == "int8":
        return [Sample(f"mismatches_{name}", 0.0, "1", 0, None, "none")
                for name in ("random_full", "int32_max", "int32_min")]
    samples = []
    for case in cases(dtype):
        value = tensor_core(dtype, case.a, case.b, case.c)
        if broken:
            value += 2.0 ** (math.frexp(value)[1] - 26) if value else 2.0 ** -160
        samples.append(Sample(f"d_{case.name}", value, "1", 0, None, "none"))
    return samples


#: probe id -> its fake.
FAKES = {"numerics.mma_sync": numerics, "numerics.wgmma": numerics}
