"""The lecture's §7.10 fused softmax: bytes each form moves, and the ``fusion.softmax`` probe's derived row.

Row softmax of a rows x cols matrix, one traversal = rows·cols·b bytes.  Unfused (three kernels):
row max (read x), exp(x - max) and row sum (read x, write the intermediate e), normalize (read e, write y):
five traversals, plus the per-row statistics (max and sum, fp32) each written once and read once.  Fused
(one program per row, the row held on chip): read x, write y -- two traversals.  5/2 = 2.5x fewer bytes,
whatever the size; softmax is bandwidth-bound (~1.25 FLOP/byte), so the lecture predicts 2.5x in time too.
"""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import ratio_ci, select
from gpuatlas.analysis.units import fmt_value

PROBE = "fusion.softmax"
VARIANTS = ("unfused", "fused")
#: Launch modes, preferred first: a CUDA graph replays the launches with no host gap between kernels.
LAUNCHES = ("graph", "plain")
BF16_BYTES, STAT_BYTES = 2, 4
LECTURE_RATIO = 2.5


def softmax_bytes(rows: int, cols: int, element_bytes: int = BF16_BYTES, stat_bytes: int = STAT_BYTES) -> dict:
    """{variant: [(kernel, bytes read, bytes written), ...]} as the probe's kernels move them."""
    matrix, stats = rows * cols * element_bytes, rows * stat_bytes
    return {"unfused": [("row max", matrix, stats),
                        ("exp(x - max) and row sum", matrix + stats, matrix + stats),
                        ("normalize", matrix + stats, matrix)],
            "fused": [("fused softmax", matrix, matrix)]}


def total_bytes(rows: int, cols: int, variant: str, **kw) -> int:
    return sum(r + w for _, r, w in softmax_bytes(rows, cols, **kw)[variant])


def traversals(rows: int, cols: int, variant: str, element_bytes: int = BF16_BYTES) -> float:
    """Bytes moved in units of one pass over the matrix (5 unfused, 2 fused, plus the small statistics)."""
    return total_bytes(rows, cols, variant, element_bytes=element_bytes) / (rows * cols * element_bytes)


def _seconds(measurements: pd.DataFrame, variant: str, launch: str) -> pd.Series:
    return select(measurements, PROBE, "seconds", variant=variant, launch=launch)["value"]


def fusion_table(measurements: pd.DataFrame) -> pd.DataFrame:
    """Per (launch, variant): median seconds, bytes moved and the bandwidth they imply."""
    frame = select(measurements, PROBE, "seconds")
    if frame.empty or "variant" not in frame:
        return pd.DataFrame(columns=["launch", "variant", "seconds", "bytes", "bandwidth"])
    out = []
    for (launch, variant), group in frame.groupby(["launch", "variant"]):
        side = int(group["matrix_side"].iloc[0])
        moved = total_bytes(side, side, variant)
        seconds = group["value"].median()
        out.append((launch, variant, seconds, moved, moved / seconds))
    return pd.DataFrame(out, columns=["launch", "variant", "seconds", "bytes", "bandwidth"])


def fusion_rows(measurements: pd.DataFrame) -> list[dict]:
    """``fusion.softmax_speedup``: unfused time over fused time, from graph launches where the run has them."""
    for launch in LAUNCHES:
        unfused, fused = _seconds(measurements, "unfused", launch), _seconds(measurements, "fused", launch)
        if len(unfused) and len(fused):
            break
    else:
        return []
    side = int(select(measurements, PROBE, "seconds", launch=launch)["matrix_side"].iloc[0])
    value, lo, hi = ratio_ci(unfused, fused)
    moved = {v: total_bytes(side, side, v) for v in VARIANTS}
    note = (f"{side} x {side} bf16, {launch} launches; bytes moved (counted): unfused {moved['unfused'] / 1e6:.1f} MB "
            f"({traversals(side, side, 'unfused'):.3f} traversals) in {fmt_value(unfused.median(), 's')} = "
            f"{fmt_value(moved['unfused'] / unfused.median(), 'B/s')}, fused {moved['fused'] / 1e6:.1f} MB "
            f"({traversals(side, side, 'fused'):.0f}) in {fmt_value(fused.median(), 's')} = "
            f"{fmt_value(moved['fused'] / fused.median(), 'B/s')}; byte ratio {moved['unfused'] / moved['fused']:.3f} "
            f"(lecture {LECTURE_RATIO})")
    return [derived_row("fusion.softmax_speedup", value, lo, hi,
                        "time of three unfused Triton kernels (row max; exp and row sum, writing the intermediate; "
                        "normalize) over one fused Triton kernel, inputs rotated through buffers of several times "
                        "the L2 so every pass reaches HBM (ratio of medians, bootstrap 95% CI)", PROBE, note)]


FAMILY = Family(order=90, probe_modules=("fusion",), rows=lambda m, device: fusion_rows(m), quantities={
    "fusion.softmax_speedup": ("1", "three unfused softmax kernels' time over one fused kernel's time, 4096 x 4096 bf16"),
})
