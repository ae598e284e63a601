"""Figures of the execution chapter: each instruction's latency against its throughput, warp scheduling and
divergence."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from gpuatlas.analysis.execution import DIVERGE_PROBE, OPS, UNITS, schedule_curve  # noqa: E402
from gpuatlas.analysis.report_figures import FigureSpec  # noqa: E402
from gpuatlas.analysis.stats import select  # noqa: E402
from gpuatlas.analysis.units import plain_log_axis  # noqa: E402


def latency_throughput_figure(derived: pd.DataFrame):
    """Per unit, each op's latency (cycles) against its throughput (instructions/clock/SM), CIs as bars."""
    d = derived.set_index("quantity")
    units = [u for u in UNITS if any(f"inst.{op}.ops_per_clk_sm" in d.index for op, s in OPS.items() if s.unit == u)]
    cols = 4
    rows = max(1, -(-len(units) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat[len(units):]:
        ax.set_axis_off()
    for ax, unit in zip(axes.flat, units):
        for op, spec in OPS.items():
            lat, thr = f"inst.{op}.latency_cycles", f"inst.{op}.ops_per_clk_sm"
            if spec.unit != unit or thr not in d.index:
                continue
            y = d.loc[thr]
            x = d.loc[lat] if lat in d.index else None
            xv = x["value"] if x is not None else 0.0
            marker = "osD^v<>ph*X"[sum(OPS[o].unit == unit for o in list(OPS)[:list(OPS).index(op)]) % 11]
            ax.errorbar(xv, y["value"], yerr=[[y["value"] - y["ci_low"]], [y["ci_high"] - y["value"]]],
                        xerr=None if x is None else [[xv - x["ci_low"]], [x["ci_high"] - xv]], fmt=marker, ms=5,
                        label=op)
        ax.legend(fontsize=6, ncol=2, loc="best")  # ops of one unit often share a point: named in the legend
        ax.set_title(unit, fontsize=9)
        ax.set_xlabel("latency (cycles)", fontsize=8)
        ax.set_ylabel("instructions / clock / SM", fontsize=8)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    return axes.flat[0]


def schedule_figure(measurements: pd.DataFrame, derived: pd.DataFrame):
    """FFMA warp instructions per clock per SM against resident warps, one line per ILP, with the fitted
    scheduler count."""
    ax = plt.figure(figsize=(8, 4.5)).gca()
    curve = schedule_curve(measurements)
    for ilp, g in curve.groupby("ilp"):
        g = g.sort_values("warps")
        ax.plot(g["warps"], g["ipc"], "o-", ms=4, label=f"ILP {int(ilp)}")
    d = derived.set_index("quantity")
    if "sm.schedulers" in d.index and "sm.issue_per_clk_per_scheduler" in d.index:
        n, issue = d.at["sm.schedulers", "value"], d.at["sm.issue_per_clk_per_scheduler", "value"]
        ax.axhline(round(n) * issue, color="black", ls=":", lw=0.8,
                   label=f"plateau: {n:.2f} schedulers x {issue:.3f} instr/clk")
        ax.axvline(round(n), color="grey", ls="--", lw=0.8)
    ax.set_xscale("log", base=2)
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("resident warps per SM")
    ax.set_ylabel("FFMA warp instructions / clock / SM")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return ax


def divergence_figure(measurements: pd.DataFrame):
    """Useful FFMA throughput of a split warp over the unsplit warp's, against the ways, beside 1/ways."""
    ax = plt.figure(figsize=(6, 4)).gca()
    frame = select(measurements, DIVERGE_PROBE, "lane_ffma_per_clk_sm")
    med = frame.groupby("ways")["value"].median()
    if 1 in med.index:
        ways = med.index.to_numpy(dtype=float)
        ax.plot(ways, med.values / med.loc[1], "o-", label="measured")
        ax.plot(ways, 1 / ways, "k:", lw=0.8, label="1 / ways")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    plain_log_axis(ax.xaxis)
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("ways the warp is split")
    ax.set_ylabel("useful FFMA throughput / unsplit (ratio)")
    ax.legend(fontsize=8)
    return ax


#: The execution chapter's own figures.
FIGURES = (
    FigureSpec("instruction-latency-throughput", "exec.inst", "Instruction latency against throughput",
               "Per unit, each instruction's dependent-chain latency (cycles, one thread's chain) against its "
               "full-SM throughput (thread instructions per clock per SM), 95% CI bars; STS, with no result to "
               "chain, is drawn at latency 0.", lambda meta, m, d: latency_throughput_figure(d),
               chapter="Execution"),
    FigureSpec("warp-scheduling", "exec.schedule", "Warp scheduling",
               "FFMA warp instructions per clock per SM against resident warps per SM, one line per ILP; dotted, "
               "the plateau as the fitted schedulers times each one's issue rate; dashed, the scheduler count.",
               lambda meta, m, d: schedule_figure(m, d),
               chapter="Execution", after="instruction-latency-throughput"),
    FigureSpec("divergence", "exec.diverge", "Branch divergence",
               "Useful FFMA throughput of warps split over 2 to 32 branches of one body each, over the unsplit "
               "warps', beside 1 / ways.", lambda meta, m, d: divergence_figure(m),
               chapter="Execution", after="warp-scheduling"),
)
