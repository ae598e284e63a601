"""The lecture's quantitative claims (../shared/lecture/gpu-hardware-lecture.txt), judged against a run.

Each claim names the quantity that tests it.  Claims resting on a datasheet figure of the lecture's H100 SXM
are judged as mechanisms: a latency in cycles is compared as is, because cycles do not depend on the part.
A claim whose quantity this run did not measure says so, and which issue's probe will.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from analysis.units import fmt_value


@dataclass(frozen=True)
class Claim:
    section: str
    text: str
    value: float
    unit: str
    quantity: str
    tolerance: float  # relative deviation still judged "holds"
    pending: str = ""  # the issue whose probe measures the quantity


CLAIMS = (
    Claim("Numbers worth memorizing; §7.3", "HBM latency ~500 cycles", 500, "cycles", "dram.latency_cycles", 0.2),
    Claim("§7.3", "shared memory ~30 cycles", 30, "cycles", "smem.latency_cycles", 0.2, "#3"),
    Claim("§7.3", "L2 \"a few hundred cycles\" (taken as 200-400)", 300, "cycles", "l2.latency_cycles", 1 / 3),
    Claim("§7.1; §7.10", "a kernel launch costs ~5 us", 5e-6, "s", "launch.overhead_s", 0.5),
    Claim("Numbers worth memorizing; §7.6", "fp32 at stride >= 32 moves 1/32 useful bytes", 1 / 32, "1",
          "coalescing.efficiency_stride32_fp32", 0.2, "#4"),
    Claim("§7.3", "shared memory moves ~128 B/cycle/SM", 128, "B/cycle", "smem.bandwidth_bytes_per_clk_sm",
          0.1, "#4"),
    Claim("Numbers worth memorizing; §7.7", "dense BF16 tensor cores ~989 TFLOP/s", 989e12, "FLOP/s",
          "tc.bf16.peak_flops", 0.1, "#7"),
)


def judge(derived: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: lecture value, measured value with CI, ratio and verdict with a reason."""
    measured = derived.set_index("quantity")
    rows = []
    for claim in CLAIMS:
        row = {"section": claim.section, "claim": claim.text, "quantity": claim.quantity,
               "lecture": fmt_value(claim.value, claim.unit)}
        if claim.quantity not in measured.index:
            where = f"the probe of issue {claim.pending}" if claim.pending else "its probe (not in this run)"
            rows.append({**row, "measured": "-", "ratio": None, "verdict": "not measured",
                         "reason": f"not measured yet: {where} will measure {claim.quantity}"})
            continue
        m = measured.loc[claim.quantity]
        ratio = m["value"] / claim.value
        holds = abs(ratio - 1) <= claim.tolerance
        ci = f" [{fmt_value(m['ci_low'], m['unit'])}, {fmt_value(m['ci_high'], m['unit'])}]"
        reason = (f"within {claim.tolerance:.0%} of the lecture's figure" if holds else
                  f"{ratio:.2f}x the lecture's figure (tolerance {claim.tolerance:.0%})")
        rows.append({**row, "measured": fmt_value(m["value"], m["unit"]) + ci, "ratio": f"{ratio:.3g}",
                     "verdict": "holds" if holds else "deviates", "reason": reason})
    return pd.DataFrame(rows)
