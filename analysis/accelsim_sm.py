"""The SM's part of an Accel-Sim config: compute capability, SMs, schedulers and their units, and the opcode
latencies and initiation intervals (``-ptx_opcode_*``, trace.config's ``-trace_opcode_latency_initiation_*``)
from exec.inst's instruction table and the mma.sync measurements.  An initiation interval is 32 lanes / the
instruction's lanes per clock per scheduler."""
from __future__ import annotations

import re

from gpuatlas.analysis.accelsim_run import Option, Run, measured, missing, whole

#: The simulator's defaults for the opcode-list positions no probe measures (MAX of floats, DIV), from
#: GPGPU-Sim's option registration of ``-ptx_opcode_latency_*`` / ``-ptx_opcode_initiation_*``.
PTX_DEFAULTS = {"latency": {"int": (1, 1, 19, 25, 145, 32), "fp": (1, 1, 1, 1, 30), "dp": (8, 8, 8, 8, 335)},
                "initiation": {"int": (1, 1, 4, 4, 32, 4), "fp": (1, 1, 1, 1, 5), "dp": (8, 8, 8, 8, 130)}}
#: The instruction (exec.inst's op) measured for each position of the simulator's opcode lists:
#: int <ADD,MAX,MUL,MAD,DIV,SHFL>, fp and dp <ADD,MAX,MUL,MAD,DIV>; None: not measured.
PTX_OPS = {"int": ("iadd3", "imnmx", "imad", "imad", None, "shfl_idx"),
           "fp": ("fadd", None, "fmul", "ffma", None), "dp": ("dadd", None, "dmul", "dfma", None)}
#: trace.config's unit -> the instruction whose latency and initiation interval it takes.
TRACE_OPS = {"int": "imad", "sp": "ffma", "dp": "dfma", "sfu": "mufu_ex2"}
SFU_OP = "mufu_ex2"
#: One mma.sync m16n8k16 (HMMA.16816): 2 x 16 x 8 x 16 FLOP.
MMA_FLOP = 2 * 16 * 8 * 16
LANES = 32

def core_options(run: Run) -> list[Option]:
    """The SMs, their schedulers and units, and the compute capability."""
    d = run.device
    major, minor = run.cc()
    arch = str(10 * major + minor)
    out = [Option("-gpgpu_compute_capability_major", str(major), "driver", "compute_capability"),
           Option("-gpgpu_compute_capability_minor", str(minor), "driver", "compute_capability"),
           Option("-gpgpu_ptx_force_max_capability", arch, "driver", "compute_capability as major x 10 + minor"),
           Option("-gpgpu_occupancy_sm_number", arch, "driver", "compute_capability as major x 10 + minor"),
           Option("-gpgpu_coalesce_arch", arch, "driver", "compute_capability as major x 10 + minor"),
           Option("-gpgpu_n_clusters", str(d["sm_count"]), "driver", "sm_count"),
           Option("-gpgpu_n_cores_per_cluster", "1", "default", "one SM per cluster: gpgpu_n_clusters counts SMs"),
           Option("-gpgpu_shader_core_pipeline", f"{d['max_threads_per_sm']}:{d['warp_size']}", "driver",
                  "max_threads_per_sm:warp_size"),
           Option("-gpgpu_shader_cta", str(d["max_blocks_per_sm"]), "driver", "max_blocks_per_sm"),
           Option("-gpgpu_shader_registers", str(d["regs_per_sm"]), "driver", "regs_per_sm"),
           Option("-gpgpu_registers_per_block", str(d.get("regs_per_block", d["regs_per_sm"])), "driver",
                  "regs_per_block")]
    if not run.has("sm.schedulers"):
        names = ("-gpgpu_num_sched_per_core", "-gpgpu_sub_core_model", "-gpgpu_num_sp_units", "-gpgpu_num_dp_units",
                 "-gpgpu_num_int_units", "-gpgpu_num_sfu_units", "-gpgpu_num_tensor_core_units")
        out += [missing(name, "sm.schedulers") for name in names]
    else:
        sched = whole(run.value("sm.schedulers"))
        cite = run.cite("sm.schedulers")
        out += [Option("-gpgpu_num_sched_per_core", str(sched), "measured", f"{cite}; rounded"),
                Option("-gpgpu_sub_core_model", str(int(sched > 1)), "measured",
                       f"{cite}: each scheduler owns its units (the sub-core model) where there is more than one")]
        for unit in ("sp", "dp", "int", "sfu", "tensor_core"):
            out.append(Option(f"-gpgpu_num_{unit}_units", str(sched), "measured",
                              f"one unit per scheduler ({cite}); its width is the initiation interval's"))
    out.append(measured(run, "-gpgpu_max_insn_issue_per_warp", ("sm.issue_per_clk_per_scheduler",),
                         lambda x: whole(x), "warp instructions a scheduler issues per clock, rounded"))
    if run.has("sm.issue_per_clk_per_scheduler") and whole(run.value("sm.issue_per_clk_per_scheduler")) == 1:
        out.append(Option("-gpgpu_dual_issue_diff_exec_units", None, "not set",
                          "applies only to dual issue; one instruction per clock measured"))
    else:
        out.append(Option("-gpgpu_dual_issue_diff_exec_units", None, "not set", "not measured"))
    tc = "tc.fp16.mma_sync_peak_flops"
    out.append(measured(run, "-gpgpu_tensor_core_avail", (tc,), lambda _: 1, "1: mma.sync ran"))
    return out


def _schedulers(run: Run) -> float:
    return float(whole(run.value("sm.schedulers")))


def _initiation(run: Run, op: str) -> tuple[int, str]:
    """32 lanes / (an instruction's lanes per clock per SM / schedulers), rounded; and its citation."""
    q = f"inst.{op}.ops_per_clk_sm"
    return (whole(LANES / (run.value(q) / _schedulers(run))),
            f"initiation 32 / ({run.cite(q)} / {int(_schedulers(run))} schedulers)")


def _mma(run: Run) -> tuple[int, int, str] | None:
    """HMMA.16816 latency and initiation interval (FLOP per instruction / FLOP per clock per scheduler), the
    rate at the clock its samples ran at (their note) or else clock.sm_hz; None without the quantities."""
    rate, lat = "tc.fp16.mma_sync_peak_flops", "tc.fp16.mma_sync_latency_cycles"
    if not run.has(rate, lat, "sm.schedulers"):
        return None
    at = re.search(r"at (\d+\.\d+) GHz", str(run.rows[rate].note))
    if at:
        hz, where = float(at.group(1)) * 1e9, f"at its samples' {at.group(1)} GHz (its note)"
    elif run.has("clock.sm_hz"):
        hz, where = run.value("clock.sm_hz"), run.cite("clock.sm_hz")
    else:
        return None
    per_sched = run.value(rate) / run.device["sm_count"] / hz / _schedulers(run)
    why = (f"{run.cite(lat)}; {run.cite(rate)} {where}: {MMA_FLOP} FLOP per mma.sync m16n8k16 / "
           f"{per_sched:.4g} FLOP per clock per scheduler")
    return whole(run.value(lat)), whole(MMA_FLOP / per_sched), why


def opcode_options(run: Run) -> list[Option]:
    """``-ptx_opcode_latency_*`` and ``-ptx_opcode_initiation_*`` from exec.inst's instruction table."""
    out = []
    for unit, ops in PTX_OPS.items():
        for kind in ("latency", "initiation"):
            name = f"-ptx_opcode_{kind}_{unit}"
            values, why = [], []
            for position, (op, default) in enumerate(zip(ops, PTX_DEFAULTS[kind][unit])):
                need = f"inst.{op}.latency_cycles" if kind == "latency" else f"inst.{op}.ops_per_clk_sm"
                if op is None or not run.has(need, "sm.schedulers"):
                    values.append(default)
                    why.append(f"[{position}] default {default} (not measured)")
                elif kind == "latency":
                    values.append(whole(run.value(need)))
                    why.append(f"[{position}] {run.cite(need)}")
                else:
                    value, cite = _initiation(run, op)
                    values.append(value)
                    why.append(f"[{position}] {cite}")
            from_run = any("default" not in w for w in why)
            out.append(Option(name, ",".join(map(str, values)), "measured" if from_run else "default",
                              "; ".join(why)))
    sfu_lat, sfu_rate = f"inst.{SFU_OP}.latency_cycles", f"inst.{SFU_OP}.ops_per_clk_sm"
    out.append(measured(run, "-ptx_opcode_latency_sfu", (sfu_lat,), lambda x: whole(x), "rounded"))
    if run.has(sfu_rate, "sm.schedulers"):
        value, cite = _initiation(run, SFU_OP)
        out.append(Option("-ptx_opcode_initiation_sfu", str(value), "measured", cite))
    else:
        out.append(missing("-ptx_opcode_initiation_sfu", sfu_rate, "sm.schedulers"))
    mma = _mma(run)
    for name, i in (("-ptx_opcode_latency_tesnor", 0), ("-ptx_opcode_initiation_tensor", 1)):
        out.append(Option(name, str(mma[i]), "measured", mma[2]) if mma else
                   missing(name, "tc.fp16.mma_sync_peak_flops", "tc.fp16.mma_sync_latency_cycles"))
    return out


def trace_options(run: Run) -> list[Option]:
    """trace.config: ``<latency>,<initiation interval>`` per unit, from the same instruction table."""
    out = []
    for unit, op in TRACE_OPS.items():
        name, lat, rate = f"-trace_opcode_latency_initiation_{unit}", f"inst.{op}.latency_cycles", \
            f"inst.{op}.ops_per_clk_sm"
        if run.has(lat, rate, "sm.schedulers"):
            value, cite = _initiation(run, op)
            out.append(Option(name, f"{whole(run.value(lat))},{value}", "measured",
                              f"{op.upper()}: latency {run.cite(lat)}; {cite}"))
        else:
            out.append(missing(name, lat, rate, "sm.schedulers"))
    mma = _mma(run)
    out.append(Option("-trace_opcode_latency_initiation_tensor", f"{mma[0]},{mma[1]}", "measured", mma[2]) if mma
               else missing("-trace_opcode_latency_initiation_tensor", "tc.fp16.mma_sync_peak_flops"))
    return out
