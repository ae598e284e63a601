"""Compute peaks from the compute.* probes: vector units, FP32 latency, mma.sync and wgmma tensor cores.

Each peak is the median of a config's samples (FLOP/s from CUDA events) with a bootstrap 95% CI; a wgmma
peak is the best N's (the N whose median is highest: larger N reuses A over more columns).  Per-clock forms
divide by SMs and the clock each launch ran at (measured in-kernel), so they are the hardware's width
whatever the clock did.
"""
from __future__ import annotations

import pandas as pd

from analysis.quantities import derived_row
from analysis.stats import median_ci, select
from analysis.units import fmt_value

VECTOR_PROBE, LATENCY_PROBE, MMA_PROBE, WGMMA_PROBE = ("compute.vector", "compute.latency", "compute.mma_sync",
                                                       "compute.wgmma")
#: compute.vector op -> (peak quantity, instruction, per-clock quantity or None)
VECTOR_QUANTITIES = {"fp32": ("fp32.peak_flops", "FFMA", "fp32.flop_per_clk_sm"),
                     "fp64": ("fp64.peak_flops", "DFMA", None),
                     "fp16x2": ("fp16.peak_flops", "HFMA2", None),
                     "int32": ("int32.peak_ops", "IMAD (2 ops)", None)}
#: tensor dtype -> the quantities' name for it
TC_NAMES = {"bf16": "bf16", "fp16": "fp16", "tf32": "tf32", "e4m3": "fp8"}
MMA_SHAPES = {"bf16": "m16n8k16", "fp16": "m16n8k16", "tf32": "m16n8k8", "e4m3": "m16n8k32"}
WGMMA_K = {"bf16": 16, "fp16": 16, "tf32": 8, "e4m3": 32}
#: bar label -> derived quantity, in the order the figure draws them
PEAK_BARS = {"FP64 DFMA": "fp64.peak_flops", "FP32 FFMA": "fp32.peak_flops", "FP16x2 HFMA2": "fp16.peak_flops",
             "INT32 IMAD": "int32.peak_ops",
             "mma.sync TF32": "tc.tf32.mma_sync_peak_flops", "mma.sync BF16": "tc.bf16.mma_sync_peak_flops",
             "mma.sync FP16": "tc.fp16.mma_sync_peak_flops", "mma.sync FP8": "tc.fp8.mma_sync_peak_flops",
             "wgmma TF32": "tc.tf32.peak_flops", "wgmma BF16": "tc.bf16.peak_flops",
             "wgmma FP16": "tc.fp16.peak_flops", "wgmma FP8": "tc.fp8.peak_flops",
             "cuBLAS BF16 8192³": "matmul.cublas_bf16_flops", "Triton BF16 8192³": "matmul.triton_bf16_flops"}


def _note(frame: pd.DataFrame) -> str:
    return f"{len(frame)} samples at {fmt_value(frame['sm_clock_hz'].median(), 'Hz')}"


def _vector_rows(measurements) -> list[dict]:
    rows = []
    for op, (quantity, instruction, per_clk_quantity) in VECTOR_QUANTITIES.items():
        frame = select(measurements, VECTOR_PROBE, "throughput", op=op)
        if frame.empty:
            continue
        method = (f"{instruction}: 8 independent chains per thread, every SM full; work / CUDA-event time "
                  "(median, bootstrap 95% CI)")
        rows.append(derived_row(quantity, *median_ci(frame["value"]), method, VECTOR_PROBE, _note(frame)))
        per_clk = select(measurements, VECTOR_PROBE, "per_clk_sm", op=op)
        if per_clk_quantity and not per_clk.empty:
            rows.append(derived_row(per_clk_quantity, *median_ci(per_clk["value"]),
                                    f"{instruction} FLOP/s / SMs / the clock each launch ran at (in-kernel "
                                    "clock64 over globaltimer)", VECTOR_PROBE, _note(per_clk)))
    return rows


def _latency_rows(measurements) -> list[dict]:
    frame = select(measurements, LATENCY_PROBE, "latency", op="fp32")
    if frame.empty:
        return []
    return [derived_row("fp32.latency_cycles", *median_ci(frame["value"]),
                        "one warp, one dependent FFMA chain: clock64 cycles / FMAs (median, bootstrap 95% CI)",
                        LATENCY_PROBE, f"{len(frame)} samples")]


def _mma_rows(measurements) -> list[dict]:
    rows = []
    for dtype, name in TC_NAMES.items():
        frame = select(measurements, MMA_PROBE, "throughput", dtype=dtype)
        if frame.empty:
            continue
        note = _note(frame)
        wgmma = _wgmma(measurements, "throughput", dtype)
        if not wgmma.empty:  # the comparison: what Hopper's warpgroup instruction adds
            best = wgmma[wgmma["n"] == best_n(wgmma)]["value"].median()
            note += f"; {frame['value'].median() / best:.2f} of wgmma {dtype}'s peak"
        rows.append(derived_row(f"tc.{name}.mma_sync_peak_flops", *median_ci(frame["value"]),
                                f"mma.sync {MMA_SHAPES[dtype]} {dtype} -> fp32, operands in registers, 8 "
                                "accumulators per warp, every SM full (median, bootstrap 95% CI)", MMA_PROBE,
                                note))
    return rows


def best_n(frame: pd.DataFrame) -> int:
    """The N whose median throughput is highest."""
    return int(frame.groupby("n")["value"].median().idxmax())


def _wgmma(measurements, metric: str, dtype: str) -> pd.DataFrame:
    """wgmma samples on random operands.  The runs in reports/h200-board2 (commit 9339e15) also hold samples on
    power-of-two operands, an experiment since removed (its clock gain did not repeat): they are left out."""
    frame = select(measurements, WGMMA_PROBE, metric, dtype=dtype)
    return frame[frame["operands"].fillna("random") == "random"] if "operands" in frame else frame


def _wgmma_rows(measurements) -> list[dict]:
    rows = []
    for dtype, name in TC_NAMES.items():
        frame = _wgmma(measurements, "throughput", dtype)
        if frame.empty:
            continue
        n = best_n(frame)
        best = frame[frame["n"] == n]
        by_n = ", ".join(f"N={int(k)}: {fmt_value(v, 'FLOP/s')}"
                         for k, v in frame.groupby("n")["value"].median().sort_index().items())
        method = (f"wgmma m64nNk{WGMMA_K[dtype]} {dtype} -> fp32 from shared memory, several warpgroups per SM; "
                  f"the best N's median (bootstrap 95% CI)")
        rows.append(derived_row(f"tc.{name}.peak_flops", *median_ci(best["value"]), method, WGMMA_PROBE,
                                f"{_note(best)}; {by_n}"))
        per_clk = _wgmma(measurements, "per_clk_sm", dtype)
        per_clk = per_clk[per_clk["n"] == n]
        if not per_clk.empty:
            rows.append(derived_row(f"tc.{name}.flop_per_clk_sm", *median_ci(per_clk["value"]),
                                    f"wgmma {dtype} at N={n}: FLOP/s / SMs / the clock each launch ran at",
                                    WGMMA_PROBE, _note(per_clk)))
    return rows


def _ratio_row(rows: list[dict]) -> list[dict]:
    """BF16 tensor peak over FP32 vector peak; the CI spans the ratios of the two CIs' ends."""
    by = {r["quantity"]: r for r in rows}
    tensor, vector = by.get("tc.bf16.peak_flops"), by.get("fp32.peak_flops")
    if not tensor or not vector:
        return []
    return [derived_row("tc.bf16_over_fp32", tensor["value"] / vector["value"], tensor["ci_low"] / vector["ci_high"],
                        tensor["ci_high"] / vector["ci_low"], "tc.bf16.peak_flops / fp32.peak_flops; CI from the "
                        "ends of both CIs", WGMMA_PROBE)]


def compute_rows(measurements: pd.DataFrame) -> list[dict]:
    """Derived rows of every ``compute.*`` probe present in ``measurements``."""
    if "probe" not in measurements or not measurements["probe"].astype(str).str.startswith("compute.").any():
        return []
    rows = _vector_rows(measurements) + _latency_rows(measurements) + _mma_rows(measurements)
    rows += _wgmma_rows(measurements)
    return rows + _ratio_row(rows)
