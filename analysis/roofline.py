"""The lecture's §7.8 tiling arithmetic, and the matmul probes' derived rows (``matmul.library``,
``matmul.roofline``).

A square-tiled matmul C = A·B (M x K by K x N, b bytes per element) whose programs each own one
BLOCK_M x BLOCK_N tile of C reads A once per column of tiles and B once per row of tiles:
HBM bytes = b·M·N·K·(1/BLOCK_M + 1/BLOCK_N) (the C writes, b·M·N, are left out as in the lecture).  FLOPs are
2·M·N·K, so the intensity is 2 / (b·(1/BLOCK_M + 1/BLOCK_N)) -- BLOCK/2 FLOP/byte for square bf16 tiles --
and the roofline predicts min(peak, intensity x bandwidth) before the kernel runs.  The prediction here takes
its two ceilings from the same run's measured BF16 tensor peak and HBM read bandwidth.

The formula assumes no reuse beyond one program's tiles.  Programs running at the same time share A row-strips
and B column-strips, and the L2 keeps what they share: a measured point above its prediction is that L2 reuse
(the lecture's third rung); one below it is what the formula does not count (latency, pipelining, the tensor
cores' own efficiency at small tiles).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select
from gpuatlas.analysis.units import fmt_value

LIBRARY_PROBE, ROOFLINE_PROBE = "matmul.library", "matmul.roofline"
BF16_BYTES = 2
#: Square tile edges the roofline probe may sweep; tl.dot needs at least 16.
CANDIDATE_BLOCKS = (16, 32, 64, 128, 256)
#: Double buffering (the lecture's feasibility check): two stages of A and B tiles in shared memory.
PIPELINE_STAGES = 2
#: The lecture's claim is about BLOCK 128..256.
FRACTION_BLOCKS = (128, 256)
#: A measured point within this relative distance of its prediction is "on the prediction".
ON_PREDICTION = 0.10
PEAK_QUANTITY, BANDWIDTH_QUANTITY = "tc.bf16.peak_flops", "dram.read_bandwidth_bytes_per_s"


# -- the arithmetic ------------------------------------------------------------------------------------------

def matmul_flops(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k


def tiled_hbm_bytes(m: int, n: int, k: int, block_m: int, block_n: int, element_bytes: int = BF16_BYTES) -> float:
    """b·M·N·K·(1/BLOCK_M + 1/BLOCK_N): A re-read once per column of tiles, B once per row."""
    return element_bytes * m * n * k * (1 / block_m + 1 / block_n)


def tile_intensity(block_m: int, block_n: int | None = None, element_bytes: int = BF16_BYTES) -> float:
    """FLOP per HBM byte of a tiled matmul; BLOCK/2 for square bf16 tiles, whatever the problem size."""
    block_n = block_m if block_n is None else block_n
    return 2.0 / (element_bytes * (1 / block_m + 1 / block_n))


def attainable(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """The roofline: min(peak, intensity x bandwidth)."""
    return min(peak_flops, intensity * bandwidth)


def tile_smem_bytes(block: int, block_k: int | None = None, stages: int = PIPELINE_STAGES,
                    element_bytes: int = BF16_BYTES) -> int:
    """Shared memory of ``stages`` buffered A (BLOCK x BLOCK_K) and B (BLOCK_K x BLOCK) tiles."""
    block_k = block if block_k is None else block_k
    return stages * 2 * block * block_k * element_bytes


def smem_budget(device: dict) -> int:
    """Shared memory one block may use: the opt-in maximum where the driver reports it."""
    return int(device.get("smem_per_block_optin_bytes") or device["smem_per_block_bytes"])


def feasible_blocks(device: dict, candidates=CANDIDATE_BLOCKS) -> list[int]:
    """Square BLOCK (= BLOCK_K) whose double-buffered tiles fit one block's shared memory on this device."""
    budget = smem_budget(device)
    return [b for b in candidates if tile_smem_bytes(b) <= budget]


# -- derived rows --------------------------------------------------------------------------------------------

def _known(derived) -> dict:
    """{quantity: (value, low, high)} of derived rows given as a list of dicts or a DataFrame."""
    frame = pd.DataFrame(derived) if not isinstance(derived, pd.DataFrame) else derived
    if frame.empty:
        return {}
    return {q: (v, lo, hi) for q, v, lo, hi in frame[["quantity", "value", "ci_low", "ci_high"]].itertuples(index=False)}


def roofline_table(measurements: pd.DataFrame, derived=()) -> pd.DataFrame:
    """Per (size, BLOCK): intensity, predicted attainable FLOP/s (when the run measured both ceilings),
    measured FLOP/s (median, CI) and measured / predicted."""
    frame = select(measurements, ROOFLINE_PROBE, "flop_rate")
    columns = ["matrix_side", "block", "intensity", "predicted_flops", "bound", "measured_flops", "ci_low", "ci_high",
               "n", "measured_over_predicted"]
    if frame.empty or "block" not in frame:
        return pd.DataFrame(columns=columns)
    known = _known(derived)
    peak = known.get(PEAK_QUANTITY, (math.nan,))[0]
    bandwidth = known.get(BANDWIDTH_QUANTITY, (math.nan,))[0]
    rows = []
    for (size, block), group in frame.groupby(["matrix_side", "block"]):
        size, block = int(size), int(block)
        intensity = tile_intensity(block)
        predicted, bound = math.nan, ""
        if np.isfinite(peak) and np.isfinite(bandwidth):
            predicted = attainable(intensity, peak, bandwidth)
            bound = "compute (peak)" if predicted >= peak else "memory (HBM)"
        med, lo, hi = median_ci(group["value"])
        rows.append((size, block, intensity, predicted, bound, med, lo, hi, len(group), med / predicted))
    return pd.DataFrame(rows, columns=columns).sort_values(["matrix_side", "block"]).reset_index(drop=True)


def gap_explanation(table: pd.DataFrame, device: dict) -> list[str]:
    """One line per measured BLOCK: measured against predicted, and which mechanism the gap points to."""
    if table.empty:
        return []
    if table["predicted_flops"].isna().all():
        return [f"No prediction: this run lacks the measured {PEAK_QUANTITY} or {BANDWIDTH_QUANTITY} "
                "(run the tensor-core and bw.dram probes with matmul.roofline)."]
    lines = []
    for row in table.itertuples(index=False):
        ratio = row.measured_over_predicted
        head = (f"{row.matrix_side}^3, BLOCK {row.block} (intensity {row.intensity:g} FLOP/B, {row.bound}-bound): "
                f"measured {fmt_value(row.measured_flops, 'FLOP/s')} = {ratio:.2f}x the predicted "
                f"{fmt_value(row.predicted_flops, 'FLOP/s')}")
        if abs(ratio - 1) <= ON_PREDICTION:
            why = f"on the prediction (within {ON_PREDICTION:.0%}): the formula's bound is what limits it"
        elif row.bound.startswith("memory") and ratio > 1:
            why = (f"above the HBM diagonal: concurrently running programs share A and B strips, which the "
                   f"{fmt_value(device.get('l2_bytes'), 'B')} L2 serves, so HBM moves fewer bytes than the "
                   "per-program formula counts (the lecture's L2 rung)")
        elif row.bound.startswith("memory"):
            why = ("below the HBM diagonal: the formula counts bytes only, not the latency of each K-step's loads "
                   "that too few warps per SM hide" + (", nor the small mma.sync MMAs a tile under 64 rows gets "
                                                      "instead of wgmma" if row.block < 64 else ""))
        elif ratio < 1:
            why = ("under the compute roof: one square tile per program leaves the tensor cores waiting on "
                   "shared-memory pipelining and wave quantization that tuned rectangular tiles avoid")
        else:
            why = "above the measured tensor peak: the peak probe under-measures, or this sample's timer is off"
        lines.append(f"{head}: {why}.")
    return lines


def matmul_rows(measurements: pd.DataFrame, derived=()) -> list[dict]:
    """Library FLOP/s at 8192^3 and ``roofline.tiled_fraction_of_peak`` (needs the run's measured BF16 peak)."""
    rows = []
    for impl, quantity, what in (("cublas", "matmul.cublas_bf16_flops", "torch.matmul (cuBLAS)"),
                                 ("triton", "matmul.triton_bf16_flops", "Triton tl.dot, best of its configs")):
        frame = select(measurements, LIBRARY_PROBE, "flop_rate", impl=impl)
        if frame.empty:
            continue
        size = int(frame["matrix_side"].max())
        frame = frame[frame["matrix_side"] == size]
        med, lo, hi = median_ci(frame["value"])
        rows.append(derived_row(quantity, med, lo, hi,
                                f"{what}, {size}^3 bf16, random operands, 2·n^3 FLOP per CUDA-event-timed launch "
                                "(median, bootstrap 95% CI)", LIBRARY_PROBE,
                                f"{len(frame)} samples at {fmt_value(frame['sm_clock_hz'].median(), 'Hz')}"))
    table = roofline_table(measurements, derived)
    known = _known(derived)
    window = table[table["block"].between(*FRACTION_BLOCKS)] if not table.empty else table
    if window.empty or PEAK_QUANTITY not in known:
        return rows
    best = window.loc[window["measured_flops"].idxmax()]
    peak, peak_lo, peak_hi = known[PEAK_QUANTITY]
    note = (f"best: BLOCK {int(best['block'])} at {int(best['matrix_side'])}^3, {fmt_value(best['measured_flops'], 'FLOP/s')} "
            f"over the measured BF16 peak {fmt_value(peak, 'FLOP/s')}")
    if BANDWIDTH_QUANTITY in known:
        bw = known[BANDWIDTH_QUANTITY][0]
        predicted = attainable(tile_intensity(int(best["block"])), peak, bw)
        note += (f"; predicted min(peak, {tile_intensity(int(best['block'])):g} FLOP/B x measured HBM read "
                 f"{fmt_value(bw, 'B/s')}) = {fmt_value(predicted, 'FLOP/s')} = {predicted / peak:.1%} of peak")
    rows.append(derived_row("roofline.tiled_fraction_of_peak", best["measured_flops"] / peak,
                            best["ci_low"] / peak_hi, best["ci_high"] / peak_lo,
                            "best Triton square-tiled matmul (BLOCK_M = BLOCK_N = BLOCK_K, BLOCK 128-256) over the "
                            "run's tc.bf16.peak_flops (CI: measured CI over the peak's CI)", ROOFLINE_PROBE, note))
    return rows


FAMILY = Family(order=170, probe_modules=("matmul",),
                rows=lambda m, device, rows: matmul_rows(m, rows), reads_rows=True, quantities={
    "matmul.cublas_bf16_flops": ("FLOP/s", "cuBLAS (torch.matmul) BF16 matmul throughput, 8192^3"),
    "matmul.triton_bf16_flops": ("FLOP/s", "Triton tl.dot BF16 matmul throughput, 8192^3, best of a few configs"),
    "roofline.tiled_fraction_of_peak": ("1", "best square-tile Triton matmul (BLOCK 128-256) over the BF16 peak"),
})
