"""The numerics table: what the tensor cores compute, per input type and instruction, from the crafted dot
products of ``numerics.mma_sync`` and ``numerics.wgmma`` held against the exact host model (gpuatlas.analysis.numerics).

Each probe records, per dtype, D(0, 0) of every case of ``cases(dtype)`` (metric ``d_<case>``, the FP32 value
exactly).  The models of ``hypotheses(k)`` that reproduce every output are kept; each property of the table
(the accumulator's mantissa bits, the alignment's and the output's rounding, the group of products aligned
together, subnormal inputs and outputs) is the value all kept models share, or undecided between the values
they hold (no value, the range in the CI, as ``structure_row`` reports an undecided structure), or no value
where no model fits.  Text-valued properties are numbers: 1 for truncation (toward zero) or kept subnormals, 0
for rounding to nearest even or flushed ones.  FP8 also gets the verdict on the "e8m13" claim (the
accumulation keeps only 13 explicit mantissa bits).  INT8 accumulation is integer: the probe counts the
elements off the exact sum per case (metric ``mismatches_<case>``), and the table says whether all were exact.
"""
from __future__ import annotations

import functools

from fractions import Fraction

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.numerics import FORMATS, consistent, crafted_cases, hypotheses, summary, verdict
from gpuatlas.analysis.quantities import derived_row, structure_row
from gpuatlas.analysis.stats import of_probe

#: k of the instruction shapes per input type (mma.sync m16n8k, wgmma m64n8k): 32 bytes of K per operand row.
DEPTH = {"fp16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "int8": 32}
FLOAT_DTYPES = ("fp16", "bf16", "tf32", "e4m3", "e5m2")
FP8 = ("e4m3", "e5m2")
INSTRUCTIONS = {"mma_sync": "numerics.mma_sync", "wgmma": "numerics.wgmma"}
#: The claim judged for FP8: the accumulation keeps 13 explicit mantissa bits ("e8m13").
E8M13_BITS = 13

#: Each property of the table: (id suffix, unit, meaning, the model's value as the row holds it).
PROPERTIES = (
    ("accumulator_mantissa_bits", "bit", "explicit mantissa bits the accumulator keeps from the largest exponent "
     "among it and the products aligned with it (significant bits less the leading one; FP32 has 23)",
     lambda m, k: m.mantissa_bits),
    ("alignment_rounding", "1", "1 when the products and the accumulator, aligned to their largest exponent, are "
     "truncated (toward zero) to the kept bits, 0 when rounded to nearest even", lambda m, k: int(m.align == "rz")),
    ("output_rounding", "1", "1 when the aligned sum is rounded to FP32 toward zero, 0 when to nearest even",
     lambda m, k: int(m.out == "rz")),
    ("group", "1", "products aligned and summed together before the next group starts from their rounded sum "
     "(the dot product's grouping of its additions; k: all at once)", lambda m, k: m.group or k),
    ("subnormal_inputs", "1", "1 when subnormal inputs (operands and the FP32 accumulator) are kept, 0 when "
     "flushed to zero", lambda m, k: int(not m.flush_in)),
    ("subnormal_outputs", "1", "1 when a subnormal FP32 result is kept, 0 when flushed to zero",
     lambda m, k: int(not m.flush_out)),
)
METHOD = ("crafted dot products (operands at row 0 of A and column 0 of B, C(0, 0) set, D(0, 0) read), every "
          "output held against the exact host model's accumulators (gpuatlas.analysis.numerics)")


def cases(dtype: str) -> list:
    """The crafted cases of a floating-point input type at its instruction depth."""
    return crafted_cases(FORMATS[dtype], DEPTH[dtype])


def quantity_ids(instruction: str) -> tuple[str, ...]:
    """Every id one instruction's probe may give."""
    ids = [f"numerics.{d}.{instruction}.{name}" for d in FLOAT_DTYPES for name, *_ in PROPERTIES]
    ids += [f"numerics.{d}.{instruction}.e8m13_claim" for d in FP8]
    return (*ids, f"numerics.int8.{instruction}.accumulation_exact")


def _quantities() -> dict:
    out = {}
    for instruction in INSTRUCTIONS:
        what = "mma.sync" if instruction == "mma_sync" else "wgmma"
        for dtype in FLOAT_DTYPES:
            for name, unit, meaning, _ in PROPERTIES:
                out[f"numerics.{dtype}.{instruction}.{name}"] = (unit, f"{meaning}; {dtype} through {what}")
        for dtype in FP8:
            out[f"numerics.{dtype}.{instruction}.e8m13_claim"] = (
                "1", f"1 when every accumulator model the outputs leave keeps 13 explicit mantissa bits (the e8m13 "
                f"claim holds), 0 when none does; undecided or no model fits: no value, the note says which; "
                f"{dtype} through {what}")
        out[f"numerics.int8.{instruction}.accumulation_exact"] = (
            "1", f"1 when every int8 case came back as the exact integer sum, else 0; int8 through {what}")
    return out


def observed(frame: pd.DataFrame, prefix: str) -> dict:
    """metric suffix -> value of one config's samples whose metric starts with ``prefix`` (repeat 0)."""
    part = frame[frame["metric"].str.startswith(prefix) & (frame["repeat"] == 0)]
    return {m[len(prefix):]: v for m, v in zip(part["metric"], part["value"])}


@functools.lru_cache(maxsize=64)
def kept_models(dtype: str, outputs: tuple) -> tuple:
    """The grid's models consistent with one input type's outputs (sorted (case name, value) pairs): a pure
    function of them, kept for the process, since one GPU's boards and runs give the same outputs."""
    return tuple(consistent(dict(outputs), cases(dtype), FORMATS[dtype], hypotheses(DEPTH[dtype])))


def float_rows(instruction: str, dtype: str, values: dict, device: dict) -> list[dict]:
    """The table's rows of one input type through one instruction from its outputs (case name -> value)."""
    probe, k = INSTRUCTIONS[instruction], DEPTH[dtype]
    names = {c.name for c in cases(dtype)}
    outputs = {name: Fraction(v) for name, v in values.items() if name in names}
    grid = hypotheses(k)
    top = max(m.mantissa_bits for m in grid)
    models = kept_models(dtype, tuple(sorted(outputs.items())))
    note = f"{len(outputs)} cases, {len(models)} of {len(grid)} models kept"
    if models:
        note += ": " + ", ".join(f"{name} {value}" for name, value in summary(models).items())
    if dtype in FP8 and instruction == "mma_sync" and str(device.get("compute_capability", "")).startswith("9."):
        note += "; compute capability 9.x has no FP8 mma.sync unit: ptxas emulates it, so these are the emulation's"
    rows = []
    for name, _, _, get in PROPERTIES:
        quantity = f"numerics.{dtype}.{instruction}.{name}"
        held = sorted({get(m, k) for m in models})
        if not held:
            rows.append(derived_row(quantity, float("nan"), float("nan"), float("nan"), METHOD, probe,
                                    f"no model fits: {note}"))
        elif name == "accumulator_mantissa_bits" and held[-1] == top:  # more bits than the cases reach
            rows.append(derived_row(quantity, float("nan"), held[0], float("inf"), METHOD, probe,
                                    f"at least {held[0]}: the cases tell no count past {top} from {top} "
                                    f"(their sums need at most {top + 1} significant bits); {note}"))
        elif len(held) == 1:
            rows.append(derived_row(quantity, held[0], held[0], held[0], METHOD, probe, note))
        else:
            rows.append(structure_row(quantity, float("nan"), (held[0], held[-1]), METHOD, probe, note,
                                      why=f"the kept models hold {', '.join(map(str, held))}"))
    if dtype in FP8:
        judged = verdict(models, E8M13_BITS)
        value = {"holds": 1.0, "refuted": 0.0}.get(judged, float("nan"))
        rows.append(derived_row(f"numerics.{dtype}.{instruction}.e8m13_claim", value, value, value, METHOD, probe,
                                f"the e8m13 claim {judged}; {note}"))
    return rows


def int8_row(instruction: str, mismatches: dict) -> dict:
    """Whether every int8 case (case name -> elements off the exact sum) was exact."""
    off = {name: int(v) for name, v in mismatches.items() if v}
    value = 0.0 if off else 1.0
    note = (f"{len(mismatches)} cases ({', '.join(sorted(mismatches))}); "
            + (f"off the exact sum: {off}" if off else "every element exact"))
    return derived_row(f"numerics.int8.{instruction}.accumulation_exact", value, value, value,
                       "int8 operands, int32 accumulation, every element of D against the exact integer sum",
                       INSTRUCTIONS[instruction], note)


def numerics_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """The numerics table: every (dtype, instruction) the run measured."""
    rows = []
    for instruction, probe in INSTRUCTIONS.items():
        frame = of_probe(measurements, probe)
        if frame.empty or "dtype" not in frame:
            continue
        for dtype, part in frame.groupby("dtype", sort=False):
            if dtype in FLOAT_DTYPES:
                rows += float_rows(instruction, dtype, observed(part, "d_"), device)
            elif dtype == "int8":
                rows.append(int8_row(instruction, observed(part, "mismatches_")))
    return rows


def numerics_table(derived: pd.DataFrame) -> pd.DataFrame:
    """The report's numerics table: one line per input type and instruction, each property as measured
    (a value, "a..b" where undecided, "-" where no model fits)."""
    d = derived.set_index("quantity")
    lines = []
    for instruction in INSTRUCTIONS:
        for dtype in FLOAT_DTYPES:
            base = f"numerics.{dtype}.{instruction}."
            if base + PROPERTIES[0][0] not in d.index:
                continue
            line = {"input": dtype, "instruction": instruction.replace("_", ".")}
            for name, *_ in PROPERTIES:
                row = d.loc[base + name]
                line[name.replace("_", " ")] = _shown(row["value"], row["ci_low"], row["ci_high"], name)
            claim = d["note"].get(base + "e8m13_claim", "")
            line["e8m13 claim"] = claim.split(";")[0].removeprefix("the e8m13 claim ") if claim else ""
            lines.append(line)
    return pd.DataFrame(lines)


_WORDS = {"alignment_rounding": ("nearest even", "truncated"), "output_rounding": ("nearest even", "toward zero"),
          "subnormal_inputs": ("flushed", "kept"), "subnormal_outputs": ("flushed", "kept")}


def _shown(value, low, high, name: str) -> str:
    def word(v):
        return _WORDS[name][int(v)] if name in _WORDS else f"{v:g}"

    if value == value:
        return word(value)
    if low != low:
        return "-"
    if high == float("inf"):
        return f"at least {low:g}"
    return f"{word(low)} or {word(high)}" if name in _WORDS else f"{low:g}..{high:g}"


FAMILY = Family(order=85, probe_modules=("numerics",), rows=numerics_rows, quantities=_quantities())
