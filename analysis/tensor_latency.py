"""wgmma latency (``exec.wgmma_latency``): one warpgroup's dependent chain of wgmma.mma_async m64nNk, each
step waited for (wait_group 0): clock64 cycles of a chain twice as long less one as long, per wgmma."""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select

WGMMA_LATENCY_PROBE = "exec.wgmma_latency"
#: dtype -> (the quantities' name for it, K of m64nNk, the SASS each step is on sm_90a).
WGMMA_LATENCY = {"bf16": ("bf16", 16, "HGMMA.64xNx16.F32.BF16"), "fp16": ("fp16", 16, "HGMMA.64xNx16.F32"),
                 "tf32": ("tf32", 8, "HGMMA.64xNx8.F32.TF32"), "e4m3": ("fp8", 32, "QGMMA.64xNx32.F32.E4M3.E4M3")}


def wgmma_latency_rows(measurements: pd.DataFrame) -> list[dict]:
    if "probe" not in measurements:
        return []
    rows = []
    for dtype, (name, k, sass) in WGMMA_LATENCY.items():
        for n in (64, 256):
            frame = select(measurements, WGMMA_LATENCY_PROBE, "latency", dtype=dtype, n=n)
            if len(frame):
                rows.append(derived_row(f"tc.{name}.wgmma_latency_cycles_n{n}", *median_ci(frame["value"]),
                                        f"one warpgroup's chain of wgmma m64n{n}k{k} ({sass.replace('N', str(n))}), "
                                        "each step fenced, committed and waited for (wait_group 0): clock64 "
                                        "cycles of a chain twice as long less one as long, per wgmma (median, "
                                        "bootstrap 95% CI)", WGMMA_LATENCY_PROBE, f"{len(frame)} samples"))
    return rows


_QUANTITIES: dict[str, tuple[str, str]] = {}
for _dtype, _k in (("bf16", 16), ("fp16", 16), ("tf32", 8), ("fp8", 32)):
    for _n in (64, 256):
        _QUANTITIES[f"tc.{_dtype}.wgmma_latency_cycles_n{_n}"] = ("cycles", f"wgmma m64n{_n}k{_k} {_dtype} latency: "
                                                                            "one warpgroup's dependent accumulator "
                                                                            "chain, each step waited for")
FAMILY = Family(order=140, probe_modules=("compute.wgmma_latency",),
                rows=lambda m, device: wgmma_latency_rows(m), quantities=_QUANTITIES)
