"""The execution chapter: the instruction table, warp-scheduler issue and branch divergence.

* ``exec.inst`` -- per op, the dependent-chain latency (cycles per instruction, one thread's chain, clock64,
  the difference of two chain lengths) and the full-SM throughput (instructions per clock per SM: every SM
  full of independent chains, CUDA events over the launch's own clock).  ``OPS`` says what SASS one step of
  each chain is (the CPU tests assert it); a step of several instructions is reported as that pair.
* ``exec.schedule`` -- FFMA issue against resident warps per SM and ILP.  A warp issues at most one
  instruction per clock, so with enough ILP the rate grows by one warp's rate per warp until every
  scheduler has a warp: the plateau over the one-warp rate is the number of schedulers, and the plateau
  over that number each scheduler's issue rate.  At ILP 1 a warp waits the FFMA latency between issues,
  so issue saturates only at schedulers x latency warps.
* ``exec.diverge`` -- a warp split 2..32 ways over branches of one body each: the useful FFMA rate over the
  unsplit warp's is the throughput fraction (the lecture: 1/32 at 32 ways).
* ``exec.mma_latency`` -- mma.sync latency per dtype; ``exec.atomics`` -- global atomic add latency and
  throughput against contention; ``exec.sync`` -- __syncthreads latency against block size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row, home_partition_rows
from gpuatlas.analysis.stats import median_ci, ratio_ci, select

INST_PROBE, SCHEDULE_PROBE, DIVERGE_PROBE = "exec.inst", "exec.schedule", "exec.diverge"


@dataclass(frozen=True)
class Op:
    unit: str
    sass: tuple  # one step of the chain: each position a regex of the exact opcodes that may fill it
    dtype: str  # the chain's register type: u32, u64, f32, f64
    per_step: int = 1  # named instructions per step (latency and throughput are per instruction)
    latency: bool = True  # STS has no result to chain
    what: str = ""


def _op(unit, sass, dtype, what, **kw) -> Op:
    return Op(unit, tuple(sass), dtype, what=what, **kw)


#: The instruction table, grouped by unit.  ptxas issues half of a chain of 16-bit ops on the FMA pipe's
#: HFMA2.MMA variant (it alternates them), so those steps name both.
OPS: dict[str, Op] = {
    "fadd": _op("FP32", [r"FADD"], "f32", "x + a"),
    "fmul": _op("FP32", [r"FMUL"], "f32", "x a"),
    "ffma": _op("FP32", [r"FFMA"], "f32", "x a + b"),
    "hadd2": _op("FP16/BF16", [r"HADD2|HFMA2\.MMA"], "u32", "fp16x2 x + a"),
    "hmul2": _op("FP16/BF16", [r"HMUL2|HFMA2\.MMA"], "u32", "fp16x2 x a"),
    "hfma2": _op("FP16/BF16", [r"HFMA2|HFMA2\.MMA"], "u32", "fp16x2 x a + b"),
    "hfma2_bf16": _op("FP16/BF16", [r"HFMA2\.BF16_V2|HFMA2\.MMA\.BF16_V2"], "u32", "bf16x2 x a + b"),
    "dadd": _op("FP64", [r"DADD"], "f64", "x + a"),
    "dmul": _op("FP64", [r"DMUL"], "f64", "x a"),
    "dfma": _op("FP64", [r"DFMA"], "f64", "x a + b"),
    "iadd3": _op("INT", [r"IADD3"], "u64", "z1 + z2 + a (the last two values)"),
    "imad": _op("INT", [r"IMAD"], "u32", "x a + b"),
    "imad_wide": _op("INT", [r"IMAD\.WIDE\.U32"], "u64", "hi(x) a, 32x32 -> 64 bits"),
    "lop3": _op("INT", [r"LOP3\.LUT"], "u32", "x ^ a ^ b"),
    "shf": _op("INT", [r"SHF\.L\.W\.U32\.HI"], "u32", "funnel rotate x by a"),
    "imnmx": _op("INT", [r"VIMNMX", r"VIMNMX"], "u32", "min then max (sm_90: VIMNMX)", per_step=2),
    "popc": _op("INT", [r"POPC"], "u32", "population count"),
    "flo": _op("INT", [r"FLO\.U32"], "u32", "find leading one"),
    "brev": _op("INT", [r"BREV"], "u32", "bit reverse"),
    "add64": _op("INT", [r"IADD3"], "u64", "64-bit x + a: the low words' IADD3 chain with carry out (ptxas adds "
                 "the high words with one IADD3.X per two steps)"),
    "mul64": _op("INT", [r"IMAD\.WIDE\.U32", r"IMAD", r"IMAD", r"IADD3"], "u64", "64-bit x a (low 64 bits)"),
    "mufu_ex2": _op("SFU", [r"MUFU\.EX2"], "f32", "2^x"),
    "mufu_lg2": _op("SFU", [r"MUFU\.LG2"], "f32", "log2 x"),
    "mufu_rcp": _op("SFU", [r"MUFU\.RCP"], "f32", "1 / -x"),
    "mufu_rsq": _op("SFU", [r"MUFU\.RSQ"], "f32", "1 / sqrt x"),
    "mufu_sin": _op("SFU", [r"FMUL\.RZ", r"MUFU\.SIN"], "f32", "sin x (argument scaled by 1/2pi first)"),
    "mufu_cos": _op("SFU", [r"FMUL\.RZ", r"MUFU\.COS"], "f32", "cos x (argument scaled by 1/2pi first)"),
    "mufu_sqrt": _op("SFU", [r"MUFU\.SQRT"], "f32", "sqrt x"),
    "f2f_f32_f16": _op("CONV", [r"F2FP\.F16\.F32\.PACK_AB"], "u32", "fp32 -> fp16"),
    "f2f_f32_bf16": _op("CONV", [r"F2FP\.BF16\.F32\.PACK_AB"], "u32", "fp32 -> bf16"),
    "f2f_f16_f32": _op("CONV", [r"HADD2\.F32"], "u32", "fp16 -> fp32"),
    "f2i": _op("CONV", [r"F2I\.TRUNC\.NTZ"], "u32", "fp32 -> int32"),
    "i2f": _op("CONV", [r"I2FP\.F32\.S32"], "u32", "int32 -> fp32"),
    "shfl_idx": _op("WARP", [r"SHFL\.IDX"], "u32", "shuffle from the lane x names"),
    "shfl_up": _op("WARP", [r"SHFL\.UP"], "u32", "shuffle up 1"),
    "shfl_down": _op("WARP", [r"SHFL\.DOWN"], "u32", "shuffle down 1"),
    "shfl_bfly": _op("WARP", [r"SHFL\.BFLY"], "u32", "butterfly shuffle, lane ^ 1"),
    "vote": _op("WARP", [r"ISETP\.NE\.U32\.AND", r"VOTE\.ANY"], "u32", "ballot of x != a"),
    "redux": _op("WARP", [r"REDUX\.SUM", r"IMAD\.U32|MOV"], "u32", "warp sum (to a uniform register, moved back)"),
    "match": _op("WARP", [r"MATCH\.ANY"], "u32", "lanes holding the same value"),
    "lds": _op("MEM", [r"LDS"], "u32", "shared load of a self-pointer"),
    "ldg": _op("MEM", [r"LDG\.E\.64"], "u64", "global load of a self-pointer (L1 hit)"),
    "sts": _op("MEM", [r"STS"], "u32", "shared store", latency=False),
}
UNITS = ("FP32", "FP16/BF16", "FP64", "INT", "SFU", "CONV", "WARP", "MEM")


def sass_step(op: str) -> str:
    """The SASS of one chain step, as the report names it."""
    return " + ".join(p.replace("\\", "").replace("|", " / ") for p in OPS[op].sass)


# -- instruction table ------------------------------------------------------------------------------------

def inst_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    for op in OPS:
        lat = select(measurements, INST_PROBE, "latency", op=op)
        if len(lat):
            rows.append(derived_row(f"inst.{op}.latency_cycles", *median_ci(lat["value"]),
                                    f"one thread's dependent chain of {sass_step(op)}: clock64 cycles of a "
                                    "chain twice as long less one as long, per instruction (median, bootstrap "
                                    "95% CI)", INST_PROBE, f"{len(lat)} samples; {OPS[op].what}"))
        thr = select(measurements, INST_PROBE, "ops_per_clk_sm", op=op)
        if len(thr):
            rows.append(derived_row(f"inst.{op}.ops_per_clk_sm", *median_ci(thr["value"]),
                                    f"{sass_step(op)}: 8 independent chains per thread, every SM full; thread "
                                    "instructions / CUDA-event time / SMs / the launch's clock (median, "
                                    "bootstrap 95% CI)", INST_PROBE,
                                    f"{len(thr)} samples at {thr['sm_clock_hz'].median() / 1e9:.3f} GHz"))
    return rows


def inst_table(derived: pd.DataFrame) -> pd.DataFrame:
    """One row per op with both figures, grouped by unit in UNITS order."""
    d = derived.set_index("quantity")
    rows = []
    for unit in UNITS:
        for op, spec in OPS.items():
            if spec.unit != unit:
                continue
            cells = []
            for q, fmt in ((f"inst.{op}.latency_cycles", "{:.1f}"), (f"inst.{op}.ops_per_clk_sm", "{:.1f}")):
                cells.append(f"{fmt.format(d.at[q, 'value'])} [{fmt.format(d.at[q, 'ci_low'])}, "
                             f"{fmt.format(d.at[q, 'ci_high'])}]" if q in d.index else "-")
            if cells != ["-", "-"]:
                rows.append((unit, op, sass_step(op), spec.what, *cells))
    return pd.DataFrame(rows, columns=["unit", "op", "SASS of one step", "chain step", "latency (cycles, 95% CI)",
                                       "throughput (instr/clk/SM, 95% CI)"])


# -- warp scheduling --------------------------------------------------------------------------------------

def schedule_curve(measurements: pd.DataFrame) -> pd.DataFrame:
    """Median warp instructions per clock per SM at each (ilp, warps)."""
    frame = select(measurements, SCHEDULE_PROBE, "warp_ipc_sm")
    if frame.empty:
        return pd.DataFrame(columns=["ilp", "warps", "ipc"])
    return (frame.groupby(["ilp", "resident_warps_per_sm"])["value"].median().rename("ipc").reset_index()
            .rename(columns={"resident_warps_per_sm": "warps"}))


def schedule_rows(measurements: pd.DataFrame, saturation: float = 0.97) -> list[dict]:
    """sm.schedulers = plateau / one warp's rate at the largest ILP; sm.issue_per_clk_per_scheduler =
    plateau / that number (taken as the nearest integer, as a count of units must be)."""
    frame = select(measurements, SCHEDULE_PROBE, "warp_ipc_sm")
    if frame.empty:
        return []
    ilp = int(frame["ilp"].max())
    top = frame[frame["ilp"] == ilp]
    one = top[top["resident_warps_per_sm"] == top["resident_warps_per_sm"].min()]["value"]
    curve = top.groupby("resident_warps_per_sm")["value"].median()
    plateau_warps = curve.index[curve.index >= curve.index.max() / 2]
    plateau = top[top["resident_warps_per_sm"].isin(plateau_warps)]["value"]
    schedulers = ratio_ci(plateau, one)
    knee = int(curve.index[np.argmax(curve.values >= saturation * curve.loc[plateau_warps].median())])
    curves = schedule_curve(measurements)
    knees = []
    for k, g in curves.groupby("ilp"):
        g = g.set_index("warps")["ipc"]
        knees.append(f"ILP {int(k)}: {int(g.index[np.argmax(g.values >= saturation * g.max())])}")
    note = (f"ILP {ilp}: one warp {np.median(one):.3f} instr/clk, plateau {np.median(plateau):.3f} instr/clk/SM "
            f"(warps {int(plateau_warps.min())}..{int(plateau_warps.max())}); first reaching {saturation:.0%} of "
            f"the plateau, by ILP: {', '.join(knees)}")
    n = max(1, round(schedulers[0]))
    issue = median_ci(plateau / n)
    ratio_method = (f"FFMA warp instructions per clock per SM at ILP {ilp}: plateau over one resident warp's "
                    "rate (bootstrap 95% CI of the ratio of medians)")
    return [derived_row("sm.schedulers", n, *(max(1, round(end)) for end in schedulers[1:]),
                        ratio_method + ", the nearest count (sm.schedulers_ratio); the count holds if one warp with "
                        "that ILP issues at its scheduler's full rate (else it counts warps of that rate the "
                        "plateau holds)", SCHEDULE_PROBE, note),
            derived_row("sm.schedulers_ratio", *schedulers, ratio_method, SCHEDULE_PROBE, note),
            derived_row("sm.issue_per_clk_per_scheduler", *issue,
                        f"plateau / {n} schedulers (sm.schedulers rounded), warp instructions per clock",
                        SCHEDULE_PROBE, f"knee at {knee} warps for ILP {ilp}")]


# -- divergence --------------------------------------------------------------------------------------------

def diverge_rows(measurements: pd.DataFrame) -> list[dict]:
    frame = select(measurements, DIVERGE_PROBE, "lane_ffma_per_clk_sm")
    if frame.empty or not (frame["ways"] == 1).any() or not (frame["ways"] == 32).any():
        return []
    base = frame[frame["ways"] == 1]["value"]
    fractions = {int(w): ratio_ci(g["value"], base) for w, g in frame.groupby("ways")}
    note = "; ".join(f"{w} ways: {f[0]:.4f} (1/{1 / f[0]:.2f})" for w, f in sorted(fractions.items()))
    return [derived_row("divergence.throughput_fraction_32way", *fractions[32],
                        "useful FFMA lane-operations per clock per SM of warps split 32 ways over branches of one "
                        "body each, over unsplit warps' (ratio of medians, bootstrap 95% CI)", DIVERGE_PROBE, note)]


#: exec.mma_latency's dtypes: (shape, the SASS each mma.sync is on sm_90).
MMA_LATENCY = {"bf16": ("m16n8k16", "HMMA.16816.F32.BF16"), "fp16": ("m16n8k16", "HMMA.16816.F32"),
               "tf32": ("m16n8k8", "HMMA.1688.F32.TF32"), "int8": ("m16n8k32", "IMMA.16832.S8.S8"),
               "fp64": ("m8n8k4", "DMMA.8x8x4")}
MMA_LATENCY_PROBE = "exec.mma_latency"


def mma_latency_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    for dtype, (shape, sass) in MMA_LATENCY.items():
        frame = select(measurements, MMA_LATENCY_PROBE, "latency", dtype=dtype)
        if len(frame):
            rows.append(derived_row(f"tc.{dtype}.mma_sync_latency_cycles", *median_ci(frame["value"]),
                                    f"one warp's chain of mma.sync {shape} ({sass}), each accumulating into the "
                                    "previous one's result: clock64 cycles of a chain twice as long less one as "
                                    "long, per mma (median, bootstrap 95% CI)", MMA_LATENCY_PROBE,
                                    f"{len(frame)} samples"))
    return rows


ATOMICS_PROBE = "exec.atomics"


def atomics_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    for dtype in ("i32", "f32", "f64"):
        lat = select(measurements, ATOMICS_PROBE, "latency", dtype=dtype, mode="latency")
        placed = select(measurements, ATOMICS_PROBE, "address_offset", dtype=dtype, mode="latency")
        if len(lat) and len(placed):  # one sample per random address
            rows += home_partition_rows(f"atomic.global.add_{dtype}_latency", lat,
                                        "one thread's chain of atom.global.add, each operand the previous return, "
                                        "at random lines of an L2-sized span, one per sample: clock64 cycles of a "
                                        "chain twice as long less one as long, per atomic (mean over the "
                                        "addresses, bootstrap 95% CI)", ATOMICS_PROBE)
        elif len(lat):  # a run older than the placements: one address
            rows.append(derived_row(f"atomic.global.add_{dtype}_latency_cycles", *median_ci(lat["value"]),
                                    "one thread's chain of atom.global.add, each operand the previous return, "
                                    "at one address: clock64 cycles of a chain twice as long less one as long, "
                                    "per atomic (median, bootstrap 95% CI)", ATOMICS_PROBE, f"{len(lat)} samples"))
        for mode in ("same", "warp", "distinct"):
            thr = select(measurements, ATOMICS_PROBE, "ops_per_s", dtype=dtype, mode=mode)
            if len(thr):
                rows.append(derived_row(f"atomic.global.add_{dtype}_ops_per_s_{mode}", *median_ci(thr["value"]),
                                        f"red.global.add.{dtype} from every thread of a full grid ({mode}): adds "
                                        "/ CUDA-event time (median, bootstrap 95% CI)", ATOMICS_PROBE,
                                        f"{len(thr)} samples at {thr['sm_clock_hz'].median() / 1e9:.3f} GHz"))
    return rows


SYNC_PROBE = "exec.sync"


def sync_rows(measurements: pd.DataFrame) -> list[dict]:
    frame = select(measurements, SYNC_PROBE, "latency")
    if frame.empty:
        return []
    by = frame.groupby("threads")["value"].median()
    note = "by block size: " + ", ".join(f"{int(k)}: {v:.1f}" for k, v in by.items())
    method = ("one block's chain of __syncthreads (BAR.SYNC), thread 0's clock64 over a chain twice as long "
              "less one as long, per barrier (median, bootstrap 95% CI), block of {} threads")
    rows = []
    for quantity, size in (("sync.syncthreads_cycles_one_warp", by.index.min()),
                           ("sync.syncthreads_cycles", by.index.max())):
        values = frame[frame["threads"] == size]["value"]
        rows.append(derived_row(quantity, *median_ci(values), method.format(int(size)), SYNC_PROBE, note))
    return rows


def _ffma_cross_check(rows: list[dict], measurements: pd.DataFrame) -> None:
    """The FFMA row's note sets it beside compute.latency's fp32.latency_cycles, the same chain built
    separately, when the run has both."""
    other = select(measurements, "compute.latency", "latency", op="fp32")
    for row in rows:
        if row["quantity"] == "inst.ffma.latency_cycles" and len(other):
            value, low, high = median_ci(other["value"])
            row["note"] += (f"; compute.latency's fp32.latency_cycles {value:.2f} [{low:.2f}, {high:.2f}], "
                            f"ratio {row['value'] / value:.3f}")


def execution_rows(measurements: pd.DataFrame) -> list[dict]:
    """Derived rows of every ``exec.*`` probe present in ``measurements``."""
    if "probe" not in measurements or not measurements["probe"].astype(str).str.startswith("exec.").any():
        return []
    rows = inst_rows(measurements)
    _ffma_cross_check(rows, measurements)
    return (rows + schedule_rows(measurements) + diverge_rows(measurements) + mma_latency_rows(measurements)
            + atomics_rows(measurements) + sync_rows(measurements))


_QUANTITIES: dict[str, tuple[str, str]] = {
    "sm.schedulers_ratio": ("1", "FFMA issue's plateau over one warp's rate with enough ILP: the measured ratio "
                                 "that sm.schedulers rounds to a count"),
    "sm.schedulers": ("1", "warp schedulers per SM: FFMA issue's plateau over one warp's rate, with enough ILP "
                           "that a warp issues whenever its scheduler can"),
    "sm.issue_per_clk_per_scheduler": ("1/cycle", "warp instructions each scheduler issues per clock (the plateau over "
                                                  "the schedulers)"),
    "divergence.throughput_fraction_32way": ("1", "useful FFMA throughput of warps split 32 ways over branches over "
                                                  "unsplit warps'"),
}
for _dtype, _shape in (("bf16", "m16n8k16"), ("fp16", "m16n8k16"), ("tf32", "m16n8k8"), ("int8", "m16n8k32"),
                       ("fp64", "m8n8k4")):
    _QUANTITIES[f"tc.{_dtype}.mma_sync_latency_cycles"] = ("cycles", f"mma.sync {_shape} {_dtype} latency: one "
                                                                     "warp's dependent accumulator chain")
for _type in ("i32", "f32", "f64"):
    _QUANTITIES[f"atomic.global.add_{_type}_latency_cycles"] = ("cycles", f"global atom.add.{_type} latency: one "
                                                                          "thread's chain, each add's operand the "
                                                                          "previous one's return, one address")
    for _side, _where in (("near", "homed in the SM's near L2 partition"), ("far", "homed across the chip")):
        _QUANTITIES[f"atomic.global.add_{_type}_latency_{_side}_cycles"] = (
            "cycles", f"global atom.add.{_type} latency at addresses {_where}: one thread's chain, each add's "
                      "operand the previous one's return")
    for _mode, _what in (("same", "every thread of a full grid on one address"),
                         ("warp", "one address per warp (32 threads adding to it)"),
                         ("distinct", "every thread on its own address")):
        _QUANTITIES[f"atomic.global.add_{_type}_ops_per_s_{_mode}"] = ("1/s", f"global red.add.{_type} per second, "
                                                                              f"{_what}")
_QUANTITIES["sync.syncthreads_cycles_one_warp"] = ("cycles", "one __syncthreads (BAR.SYNC) of a one-warp block")
_QUANTITIES["sync.syncthreads_cycles"] = ("cycles", "one __syncthreads (BAR.SYNC) of the largest block")
for _op, _spec in OPS.items():  # the instruction table: each op's chain latency (where it has one), its throughput
    if _spec.latency:
        _QUANTITIES[f"inst.{_op}.latency_cycles"] = ("cycles", f"dependent-chain latency of {_op} (one thread's "
                                                               "chain, per instruction)")
    _QUANTITIES[f"inst.{_op}.ops_per_clk_sm"] = ("1/cycle", f"{_op} thread instructions per clock per SM, every SM "
                                                            "full of independent chains")
FAMILY = Family(order=120, probe_modules=("execution", "execution.exec_chains"),
                rows=lambda m, device: execution_rows(m), quantities=_QUANTITIES)
