"""Tensor-core widths beside compute.wgmma (``compute.tensor_units``): bf16 wgmma with A from registers (RS)
and from shared memory (SS), int8 wgmma, 2:4 sparse bf16 wgmma (dense-equivalent, as NVIDIA counts it; A from
shared memory or registers) and FP64 mma.sync (DMMA), in operations per clock per SM.

Each width is the median of a config's ``per_clk_sm`` samples (a launch's operations over its CUDA-event
time, over SMs and the clock it ran at, measured in-kernel) with a bootstrap 95% CI, and is set beside the
width NVIDIA documents for the H100 SXM: its datasheet rate over 132 SMs and the clock the datasheet's peaks
assume.  The H200 is the same GH100 (PUBLISHED.md §5).
"""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select
from gpuatlas.analysis.units import fmt_value

TENSOR_UNITS_PROBE = "compute.tensor_units"
#: H100 SXM datasheet figures (../shared/reference/PUBLISHED.md §2a, glennklockwood.com/garden/processors/h100
#: citing NVIDIA's datasheet): dense rate, and the SM clock NVIDIA's peaks assume there (1.83 GHz for the
#: tensor peaks, per NVIDIA/cudnn-frontend PR#650's 989.5 = 132 SM x 1.83 GHz x 4096; 1.98 GHz for FP32/FP64,
#: the FP64 tensor figure being twice the FP64 vector one).
DATASHEET_SMS = 132
DATASHEET = {"bf16": (989.4e12, 1.83e9, "BF16 dense 989.4 TFLOP/s"),
             "bf16_sparse": (1978.9e12, 1.83e9, "BF16 sparse 1978.9 TFLOP/s"),
             "int8": (1978.9e12, 1.83e9, "INT8 dense 1978.9 TOP/s"),
             "fp64": (66.9e12, 1.98e9, "FP64 tensor 66.9 TFLOP/s")}
#: quantity -> (op of the probe, what it measures, datasheet key).
WIDTHS = {"tc.bf16.ss_flop_per_clk_sm": ("bf16_ss_n256", "wgmma bf16 m64n256k16, A and B from shared memory "
                                                          "(HGMMA, descriptors)", "bf16"),
          "tc.bf16.rs_flop_per_clk_sm": ("bf16_rs_n256", "wgmma bf16 m64n256k16, A from registers, B from shared "
                                                          "memory (HGMMA register-A form)", "bf16"),
          "tc.bf16.sparse_flop_per_clk_sm": ("bf16_sparse_n256", "wgmma.mma_async.sp bf16 m64n256k32, 2:4 "
                                                                 "structured sparsity (HGMMA.SP), dense-equivalent "
                                                                 "FLOP", "bf16_sparse"),
          "tc.bf16.sparse_rs_flop_per_clk_sm": ("bf16_sparse_rs_n256", "wgmma.mma_async.sp bf16 m64n256k32, 2:4 "
                                                                       "structured sparsity, A's kept values from "
                                                                       "registers (HGMMA.SP register-A form), "
                                                                       "dense-equivalent FLOP", "bf16_sparse"),
          "tc.int8.ops_per_clk_sm": ("int8_n256", "wgmma s8 x s8 -> s32 m64n256k32 (IGMMA), 2 ops a multiply-add",
                                     "int8"),
          "tc.fp64.m8n8k4_flop_per_clk_sm": ("fp64_m8n8k4", "mma.sync f64 m8n8k4 (DMMA.8x8x4)", "fp64"),
          "tc.fp64.m16n8k16_flop_per_clk_sm": ("fp64_m16n8k16", "mma.sync f64 m16n8k16 (DMMA.16x8x16)", "fp64")}
METHOD = ("every SM full; operations per launch / CUDA-event time / SMs / the clock each launch ran at "
          "(clock64 over %globaltimer in-kernel); median, bootstrap 95% CI")


def documented_per_clk_sm(key: str) -> float:
    """NVIDIA's documented width of the H100 SXM: datasheet rate / SMs / the clock it assumes."""
    rate, hz, _ = DATASHEET[key]
    return rate / DATASHEET_SMS / hz


def _judged(value: float, key: str) -> str:
    rate, hz, text = DATASHEET[key]
    documented = documented_per_clk_sm(key)
    return (f"{value / documented:.3f} of NVIDIA's documented {documented:.0f} per clock per SM (H100 SXM "
            f"datasheet {text} / {DATASHEET_SMS} SMs / {fmt_value(hz, 'Hz')})")


def _note(frame: pd.DataFrame) -> str:
    return f"{len(frame)} samples at {fmt_value(frame['sm_clock_hz'].median(), 'Hz')}"


def tensor_unit_rows(measurements: pd.DataFrame) -> list[dict]:
    rows, by = [], {}
    for quantity, (op, what, key) in WIDTHS.items():
        frame = select(measurements, TENSOR_UNITS_PROBE, "per_clk_sm", op=op)
        if frame.empty:
            continue
        value, low, high = median_ci(frame["value"])
        by[quantity] = (value, low, high, what)
        bound = _shared_memory_bound(measurements, value, "_rs_" not in op) if key == "bf16_sparse" else ""
        rows.append(derived_row(quantity, value, low, high, f"{what}: {METHOD}", TENSOR_UNITS_PROBE,
                                f"{_note(frame)}; {_judged(value, key)}{bound}"))
    rs, ss = by.get("tc.bf16.rs_flop_per_clk_sm"), by.get("tc.bf16.ss_flop_per_clk_sm")
    if rs and ss:
        n128 = [select(measurements, TENSOR_UNITS_PROBE, "per_clk_sm", op=f"bf16_{a}_n128")["value"].median()
                for a in ("rs", "ss")]
        note = f"at N=128: {n128[0] / n128[1]:.3f}" if all(pd.notna(n128)) else ""
        rows.append(derived_row("tc.bf16.rs_over_ss", rs[0] / ss[0], rs[1] / ss[2], rs[2] / ss[1],
                                "tc.bf16.rs_flop_per_clk_sm / tc.bf16.ss_flop_per_clk_sm (m64n256k16); CI from "
                                "the ends of both CIs", TENSOR_UNITS_PROBE, note))
    sp_rs, sp_ss = by.get("tc.bf16.sparse_rs_flop_per_clk_sm"), by.get("tc.bf16.sparse_flop_per_clk_sm")
    if sp_rs and sp_ss:
        rows.append(derived_row("tc.bf16.sparse_rs_over_ss", sp_rs[0] / sp_ss[0], sp_rs[1] / sp_ss[2],
                                sp_rs[2] / sp_ss[1], "tc.bf16.sparse_rs_flop_per_clk_sm / "
                                "tc.bf16.sparse_flop_per_clk_sm (2:4 sparse m64n256k32); CI from the ends of both "
                                "CIs", TENSOR_UNITS_PROBE, ""))
    shapes = [q for q in ("tc.fp64.m8n8k4_flop_per_clk_sm", "tc.fp64.m16n8k16_flop_per_clk_sm") if q in by]
    if shapes:
        best = max(shapes, key=lambda q: by[q][0])
        value, low, high, what = by[best]
        rows.append(derived_row("tc.fp64.flop_per_clk_sm", value, low, high,
                                f"the faster FP64 mma.sync shape: {what}", TENSOR_UNITS_PROBE,
                                _judged(value, "fp64")))
    return rows


#: Shared-memory bytes per dense-equivalent FLOP of the sparse wgmma m64nNk32 (bf16), 2 x 64 x N x 32 FLOP an
#: instruction: B's N x 32 two-byte elements, whatever N; with A from shared memory (the SS form) also A's
#: 64 x 16 kept two-byte values, per FLOP a share falling with N (the probe's N = SPARSE_N).
SPARSE_N = 256
SPARSE_B_BYTES_PER_FLOP = 32 * 2 / (2 * 64 * 32)
SPARSE_A_BYTES_PER_FLOP = 64 * 16 * 2 / (2 * 64 * SPARSE_N * 32)


def _shared_memory_bound(measurements: pd.DataFrame, per_clk: float, a_from_smem: bool) -> str:
    """The sparse rate's operand traffic from shared memory (B, and A's kept values unless A comes from
    registers) beside the LDS bandwidth bw.onchip measured: a rate whose reads come near that bandwidth may be
    bound by shared memory rather than by the tensor core."""
    lds = select(measurements, "bw.onchip", "bytes_per_clk_sm", level="smem")
    if lds.empty:
        return ""
    per_flop = SPARSE_B_BYTES_PER_FLOP + (SPARSE_A_BYTES_PER_FLOP if a_from_smem else 0.0)
    need, have = per_clk * per_flop, float(lds["value"].median())
    operands = "B and A's kept values" if a_from_smem else "B (A from registers)"
    return (f"; {operands} read from shared memory at {need:.1f} B per clock per SM, {need / have:.2f} of the LDS "
            f"bandwidth measured ({have:.1f}): the documented width would need "
            f"{documented_per_clk_sm('bf16_sparse') * per_flop:.0f}")


FAMILY = Family(order=80, rows=lambda m, device: tensor_unit_rows(m), quantities={
    "tc.bf16.ss_flop_per_clk_sm": ("FLOP/cycle", "dense BF16 wgmma m64n256k16 FLOP per clock per SM, A and B "
                                                 "from shared memory (SS)"),
    "tc.bf16.rs_flop_per_clk_sm": ("FLOP/cycle", "dense BF16 wgmma m64n256k16 FLOP per clock per SM, A from "
                                                 "registers (RS)"),
    "tc.bf16.rs_over_ss": ("1", "BF16 wgmma width with A from registers over A from shared memory (m64n256k16)"),
    "tc.bf16.sparse_flop_per_clk_sm": ("FLOP/cycle", "2:4 sparse BF16 wgmma (m64n256k32) FLOP per clock per SM, "
                                                     "counted dense-equivalent (2 x 64 x 256 x 32 a wgmma)"),
    "tc.bf16.sparse_rs_flop_per_clk_sm": ("FLOP/cycle", "2:4 sparse BF16 wgmma (m64n256k32) FLOP per clock per "
                                                        "SM with A's kept values from registers (RS), counted "
                                                        "dense-equivalent"),
    "tc.bf16.sparse_rs_over_ss": ("1", "2:4 sparse BF16 wgmma width with A from registers over A from shared "
                                       "memory (m64n256k32)"),
    "tc.int8.ops_per_clk_sm": ("op/cycle", "dense INT8 wgmma (s8 x s8 -> s32) integer ops per clock per SM, a "
                                           "multiply-add counted as 2"),
    "tc.fp64.flop_per_clk_sm": ("FLOP/cycle", "FP64 tensor (DMMA) FLOP per clock per SM: the faster mma.sync f64 "
                                              "shape"),
    "tc.fp64.m8n8k4_flop_per_clk_sm": ("FLOP/cycle", "FP64 mma.sync m8n8k4 (DMMA) FLOP per clock per SM"),
    "tc.fp64.m16n8k16_flop_per_clk_sm": ("FLOP/cycle", "FP64 mma.sync m16n8k16 (DMMA) FLOP per clock per SM"),
})
