"""Compute peaks from the compute.* probes: vector units, FP32 latency, mma.sync and wgmma tensor cores.

Each peak is the median of a config's samples (FLOP/s from CUDA events) with a bootstrap 95% CI.  A wgmma
peak is the burst rate: single short launches from a rested GPU, before the power limiter lowers the clock,
on the faster of two operand sets (the power drawn, so the clock allowed, depends on the operand bits; runs
without bursts: the best N's repeat-timed median; larger N reuses A over more columns).  The sustained
rate is the steady part of a second of back-to-back launches, noted with the clock-event reasons NVML set.  Per-clock forms
divide by SMs and the clock each launch ran at (measured in-kernel), so they are the hardware's width
whatever the clock did.
"""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select
from gpuatlas.analysis.units import fmt_value

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
    """wgmma samples on random operands.  Runs measured at commit 9339e15 (session 3) also hold samples on
    power-of-two operands, an experiment since removed (its clock gain did not repeat): they are left out."""
    frame = select(measurements, WGMMA_PROBE, metric, dtype=dtype)
    return frame[frame["operands"].fillna("random") == "random"] if "operands" in frame else frame


#: Burst operand sets -> their throughput metric, and what they are.  Runs before the unit set hold signed only.
BURST_SETS = {"signed": "burst_throughput", "unit": "burst_unit_throughput"}
BURST_SET_NAMES = {"signed": "random signs, exponents and mantissas",
                   "unit": "uniform [0, 1) rounded to the dtype, no sign bit set"}
#: The sustained rate is the median over the steady part: samples ending after this fraction of the run.
STEADY_FROM = 1 / 3
#: NVML clock-event reason bits (nvml.h) and their names.
REASON_NAMES = {0x1: "GPU idle", 0x2: "applications clocks setting", 0x4: "SW power cap", 0x8: "HW slowdown",
                0x10: "sync boost", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown",
                0x80: "HW power brake", 0x100: "display clock setting"}


def telemetry_note(frame: pd.DataFrame, peak: bool = False) -> str:
    """What NVML reported over ``frame``'s samples: the share of samples with each clock-event reason set, and
    the mean board power (``peak``: the highest reading, for samples whose windows include a rest)."""
    if "power_w" not in frame or frame["power_w"].isna().all():
        return "no NVML telemetry recorded"
    masks = frame["clock_event_reasons"].fillna(0).astype("int64")
    parts = [f"{name} set in {share:.0%} of samples" for bit, name in REASON_NAMES.items()
             if (share := float(((masks & bit) != 0).mean()))]
    power = (f"max {frame['power_max_w'].max():.0f} W (each window includes the rest before the launch)" if peak
             else f"mean {frame['power_w'].mean():.0f} W")
    return f"{', '.join(parts) or 'no clock-event reason set'}, {power}"


def steady_part(rates: pd.DataFrame, times: pd.DataFrame) -> pd.DataFrame:
    """The sustained samples (``rates``) whose end (``times``, matched by config and repeat) is past
    STEADY_FROM of their config's run: the ramp from a rested clock to the power-limited one is left out."""
    if rates.empty or times.empty:
        return rates.iloc[:0]
    t = times[["config", "repeat", "value"]].rename(columns={"value": "t_s"})
    frame = rates.merge(t, on=["config", "repeat"])
    span = frame.groupby("config")["t_s"].transform("max")
    return frame[frame["t_s"] >= STEADY_FROM * span]


def _wgmma_rows(measurements) -> list[dict]:
    rows = []
    for dtype, name in TC_NAMES.items():
        shape = f"wgmma m64nNk{WGMMA_K[dtype]} {dtype} -> fp32 from shared memory, several warpgroups per SM"
        frame = _wgmma(measurements, "throughput", dtype)
        if frame.empty:
            continue
        n = best_n(frame)
        by_n = ", ".join(f"N={int(k)}: {fmt_value(v, 'FLOP/s')}"
                         for k, v in frame.groupby("n")["value"].median().sort_index().items())
        burst = _wgmma(measurements, "burst_throughput", dtype)
        if burst.empty:  # a run from before the burst launches: repeat-timed launches, as it measured them
            best = frame[frame["n"] == n]
            rows.append(derived_row(f"tc.{name}.peak_flops", *median_ci(best["value"]),
                                    f"{shape}; the best N's median (bootstrap 95% CI)", WGMMA_PROBE,
                                    f"{_note(best)}; {by_n}"))
        else:
            burst_n = int(burst["n"].max())
            sets = {name: _wgmma(measurements, metric, dtype) for name, metric in BURST_SETS.items()}
            sets = {name: part[part["n"] == burst_n] for name, part in sets.items() if not part.empty}
            best = max(sets, key=lambda name: sets[name]["value"].median())
            burst = sets[best]
            others = "".join(f"; {name} operands: {fmt_value(other['value'].median(), 'FLOP/s')} at "
                             f"{other['sm_clock_hz'].median() / 1e9:.3f} GHz"
                             for name, other in sets.items() if name != best)
            short = _wgmma(measurements, "burst_short_throughput", dtype)
            if not short.empty:
                by_n += (f"; launches of about half a millisecond from rest: {fmt_value(short['value'].median(), 'FLOP/s')} "
                         f"at {short['sm_clock_hz'].median() / 1e9:.3f} GHz")
            rows.append(derived_row(
                f"tc.{name}.peak_flops", *median_ci(burst["value"]),
                f"{shape}, N={burst_n}: single launches of a few milliseconds, each from a rested GPU (power back "
                "near idle), CUDA-event timed, on the operand set whose median is higher (median, bootstrap 95% "
                "CI)", WGMMA_PROBE,
                f"{best} operands ({BURST_SET_NAMES[best]}): {len(burst)} samples at "
                f"{burst['sm_clock_hz'].median() / 1e9:.3f} GHz (in-kernel clock){others}; NVML: "
                f"{telemetry_note(burst, peak=True)}; repeat-timed launches: {by_n}"))
        steady = steady_part(_wgmma(measurements, "sustained_throughput", dtype),
                             _wgmma(measurements, "sustained_t_s", dtype))
        if not steady.empty:
            rows.append(derived_row(
                f"tc.{name}.sustained_flops", *median_ci(steady["value"]),
                f"{shape}, N={int(steady['n'].max())}: launches back to back for {steady['t_s'].max():.1f} s, the "
                f"samples after the first {STEADY_FROM:.0%} of it (median, bootstrap 95% CI)", WGMMA_PROBE,
                f"{_note(steady)} (in-kernel clock); NVML: {telemetry_note(steady)}"))
        # The width at the bursts' N (under the power cap FLOP/s hardly depends on N, so the best N by
        # throughput is noise); runs without bursts: at the best N, as they were derived.
        width_n = n if burst.empty else burst_n
        per_clk = _wgmma(measurements, "per_clk_sm", dtype)
        per_clk = per_clk[per_clk["n"] == width_n]
        if not per_clk.empty:
            rows.append(derived_row(f"tc.{name}.flop_per_clk_sm", *median_ci(per_clk["value"]),
                                    f"wgmma {dtype} at N={width_n}: FLOP/s / SMs / the clock each launch ran at",
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


#: The compute capability whose GPUs have wgmma (sm_90a only: Blackwell and later have other instructions).
WGMMA_CC = (9, 0)


def has_wgmma(measurements: pd.DataFrame, device: dict | None) -> bool:
    """Whether this GPU has wgmma: by its compute capability, or without a device, by its run having wgmma
    samples."""
    if device and device.get("compute_capability"):
        return tuple(int(x) for x in str(device["compute_capability"]).split(".")) == WGMMA_CC
    return bool((measurements["probe"] == WGMMA_PROBE).any())


def _tensor_peak_rows(rows: list[dict]) -> list[dict]:
    """``tc.<dtype>.peak_flops`` on a GPU without wgmma: the best tensor path that ran there, mma.sync's, so the
    roofline and the lecture's claims have a tensor peak on every tensor-core GPU; the method says so.  (Where
    the GPU has wgmma, that peak is wgmma's, or none if wgmma did not run.)"""
    have = {r["quantity"] for r in rows}
    out = []
    for name in TC_NAMES.values():
        mma = next((r for r in rows if r["quantity"] == f"tc.{name}.mma_sync_peak_flops"), None)
        if mma is None or f"tc.{name}.peak_flops" in have:
            continue
        out.append(derived_row(f"tc.{name}.peak_flops", mma["value"], mma["ci_low"], mma["ci_high"],
                               f"the best tensor path that ran: mma.sync (no wgmma on this GPU); {mma['method']}",
                               MMA_PROBE, mma["note"]))
    return out


def compute_rows(measurements: pd.DataFrame, device: dict | None = None) -> list[dict]:
    """Derived rows of every ``compute.*`` probe present in ``measurements`` (of ``device``, if given)."""
    if "probe" not in measurements or not measurements["probe"].astype(str).str.startswith("compute.").any():
        return []
    rows = _vector_rows(measurements) + _latency_rows(measurements) + _mma_rows(measurements)
    rows += _wgmma_rows(measurements)
    if not has_wgmma(measurements, device):
        rows += _tensor_peak_rows(rows)
    return rows + _ratio_row(rows)


FAMILY = Family(order=70, probe_modules=("compute", "compute.wgmma", "compute.tensor_units"),
                rows=lambda m, device: compute_rows(m, device), quantities={
    "fp32.peak_flops": ("FLOP/s", "FP32 FMA peak"),
    "fp64.peak_flops": ("FLOP/s", "FP64 FMA peak"),
    "fp16.peak_flops": ("FLOP/s", "FP16x2 (HFMA2) peak"),
    "fp32.latency_cycles": ("cycles", "dependent FP32 FMA latency"),
    "tc.bf16.peak_flops": ("FLOP/s", "dense BF16 tensor-core peak, the best tensor path that ran: wgmma's "
                                     "burst rate (a short launch from a rested GPU), else mma.sync's"),
    "tc.fp16.peak_flops": ("FLOP/s", "dense FP16 tensor-core peak, the best tensor path that ran: wgmma's "
                                     "burst rate (a short launch from a rested GPU), else mma.sync's"),
    "tc.tf32.peak_flops": ("FLOP/s", "dense TF32 tensor-core peak, the best tensor path that ran: wgmma's "
                                     "burst rate (a short launch from a rested GPU), else mma.sync's"),
    "tc.fp8.peak_flops": ("FLOP/s", "dense FP8 E4M3 tensor-core peak, the best tensor path that ran: wgmma's "
                                    "burst rate (a short launch from a rested GPU), else mma.sync's"),
    "tc.bf16.sustained_flops": ("FLOP/s", "dense BF16 wgmma rate held over a second of back-to-back launches "
                                          "(the clock the power limit allows)"),
    "tc.fp16.sustained_flops": ("FLOP/s", "dense FP16 wgmma rate held over a second of back-to-back launches "
                                          "(the clock the power limit allows)"),
    "tc.tf32.sustained_flops": ("FLOP/s", "dense TF32 wgmma rate held over a second of back-to-back launches "
                                          "(the clock the power limit allows)"),
    "tc.fp8.sustained_flops": ("FLOP/s", "dense FP8 E4M3 wgmma rate held over a second of back-to-back "
                                         "launches (the clock the power limit allows)"),
    "tc.bf16.mma_sync_peak_flops": ("FLOP/s", "dense BF16 tensor-core peak through mma.sync"),
    "tc.fp16.mma_sync_peak_flops": ("FLOP/s", "dense FP16 tensor-core peak through mma.sync"),
    "tc.tf32.mma_sync_peak_flops": ("FLOP/s", "dense TF32 tensor-core peak through mma.sync"),
    "tc.fp8.mma_sync_peak_flops": ("FLOP/s", "dense FP8 E4M3 peak through mma.sync (m16n8k32; SASS shows how the "
                                             "GPU runs it)"),
    "int32.peak_ops": ("op/s", "INT32 multiply-add (IMAD) peak, an IMAD counted as 2 integer ops"),
    "fp32.flop_per_clk_sm": ("FLOP/cycle", "FP32 FMA FLOP per clock per SM (2 x the FMA lanes)"),
    "tc.bf16.flop_per_clk_sm": ("FLOP/cycle", "dense BF16 wgmma FLOP per clock per SM"),
    "tc.fp16.flop_per_clk_sm": ("FLOP/cycle", "dense FP16 wgmma FLOP per clock per SM"),
    "tc.tf32.flop_per_clk_sm": ("FLOP/cycle", "dense TF32 wgmma FLOP per clock per SM"),
    "tc.fp8.flop_per_clk_sm": ("FLOP/cycle", "dense FP8 E4M3 wgmma FLOP per clock per SM"),
    "tc.bf16_over_fp32": ("1", "dense BF16 tensor-core peak (the best tensor path that ran) over the FP32 FMA "
                               "peak"),
})
