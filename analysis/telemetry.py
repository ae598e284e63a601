"""NVML telemetry in the report: board power and the SM clock NVML read while each probe ran, and the trace
of one long run of back-to-back tensor-core launches.

Each measurement row carries the NVML readings over its sample's window (results schema 2).  The strip draws
one small panel per probe: power (left axis) and NVML's SM clock (right axis) against when each sample was
made, with the samples whose window had the SW power cap or HW power brake set (``power_capped``) or a
thermal slowdown (``thermal``) marked along the top.
"""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

TRACE_PROBE = "compute.wgmma"
#: SW power cap (0x4) or HW power brake (0x80); SW or HW thermal slowdown (0x20, 0x40).
POWER_BITS, THERMAL_BITS = 0x4 | 0x80, 0x20 | 0x40
MARKS = {"power_capped": ("tab:red", "v"), "thermal": ("tab:purple", "x")}


def has_telemetry(measurements: pd.DataFrame) -> bool:
    """Whether any row carries an NVML power reading (never, for a schema-1 run)."""
    return "power_w" in measurements and bool(measurements["power_w"].notna().any())


def _samples(measurements: pd.DataFrame) -> pd.DataFrame:
    """One row per sample moment (the metrics of one sample share its window), telemetry present."""
    frame = measurements[measurements["power_w"].notna() & measurements["elapsed_s"].notna()]
    frame = frame[~frame["metric"].astype(str).str.startswith("trace_")]
    return frame.drop_duplicates(subset=["probe", "elapsed_s"]).sort_values(["probe", "elapsed_s"])


#: Points drawn per panel of the strip: a probe's samples are binned in time to at most this many.
STRIP_POINTS = 150


def _binned(group: pd.DataFrame) -> pd.DataFrame:
    """The probe's samples in at most STRIP_POINTS time bins: median power and clock, and each flag if any
    sample of the bin carries it."""
    if len(group) <= STRIP_POINTS:
        return group
    bins = pd.cut(group["elapsed_s"], STRIP_POINTS, labels=False)
    flags = group["telemetry"].astype(str)
    return pd.DataFrame({
        "elapsed_s": group.groupby(bins)["elapsed_s"].median(),
        "power_w": group.groupby(bins)["power_w"].median(),
        "nvml_sm_clock_hz": group.groupby(bins)["nvml_sm_clock_hz"].median(),
        "telemetry": flags.groupby(bins).agg(lambda f: "+".join(sorted({x for v in f for x in v.split("+") if x}))),
    })


def clock_power_strip(measurements: pd.DataFrame):
    """Power and NVML SM clock against sample time, one panel per probe; power-capped and thermal samples
    marked along the top of their panel.  Returns the first panel's axes (None without telemetry)."""
    frame = _samples(measurements) if has_telemetry(measurements) else pd.DataFrame()
    if frame.empty:
        return None
    probes = list(dict.fromkeys(frame["probe"]))
    columns = min(3, len(probes))
    rows = math.ceil(len(probes) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.1 * rows), squeeze=False)
    top_w = float(frame["power_max_w"].max())
    for ax, probe in zip(axes.flat, probes):
        group = _binned(frame[frame["probe"] == probe])
        ax.plot(group["elapsed_s"], group["power_w"], ".", color="tab:orange", markersize=2)
        ax.set_ylim(0, top_w * 1.15)
        ax.set_title(probe, fontsize=8)
        ax.tick_params(labelsize=7)
        clock = ax.twinx()
        clock.plot(group["elapsed_s"], group["nvml_sm_clock_hz"] / 1e9, ".", color="tab:blue", markersize=2)
        clock.tick_params(labelsize=7, colors="tab:blue")
        for flag, (color, marker) in MARKS.items():
            hit = group[group["telemetry"].astype(str).str.contains(flag)]
            ax.plot(hit["elapsed_s"], np.full(len(hit), top_w * 1.08), marker, color=color, markersize=3,
                    linestyle="none", label=flag.replace("_", " "))
    for ax in axes.flat[len(probes):]:
        ax.axis("off")
    first = axes.flat[0]
    first.set_ylabel("power (W)", fontsize=7, color="tab:orange")
    first.set_xlabel("s since the probe began", fontsize=7)
    first.legend(fontsize=6, loc="lower right")
    fig.suptitle("NVML board power (orange, left) and SM clock (blue, GHz, right) per probe", fontsize=9)
    return first


def traces(measurements: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The NVML trace of each back-to-back run: config -> a frame with t_s, power_w, sm_clock_hz, reasons."""
    frame = measurements[(measurements["probe"] == TRACE_PROBE)
                         & measurements["metric"].astype(str).str.startswith("trace_")]
    out = {}
    for config, group in frame.groupby("config"):
        wide = group.pivot_table(index="repeat", columns="metric", values="value", aggfunc="first")
        if {"trace_t_s", "trace_power_w", "trace_sm_clock_hz"} <= set(wide.columns):
            out[config] = wide.rename(columns=lambda c: c.removeprefix("trace_")).sort_values("t_s")
    return out


def power_trace(measurements: pd.DataFrame):
    """Power and SM clock against time over each long run of back-to-back wgmma launches, one panel per
    dtype; the stretches with the SW power cap (or HW power brake) set are shaded.  None without a trace."""
    found = traces(measurements)
    if not found:
        return None
    fig, axes = plt.subplots(len(found), 1, figsize=(8, 2.4 * len(found)), squeeze=False, sharex=True)
    for ax, (config, trace) in zip(axes[:, 0], found.items()):
        t = trace["t_s"].to_numpy()
        ax.plot(t, trace["power_w"], color="tab:orange", linewidth=1)
        ax.set_ylabel("power (W)", color="tab:orange", fontsize=8)
        clock = ax.twinx()
        clock.plot(t, trace["sm_clock_hz"] / 1e9, color="tab:blue", linewidth=1)
        clock.set_ylabel("SM clock (GHz)", color="tab:blue", fontsize=8)
        if "clock_event_reasons" in trace:
            reasons = trace["clock_event_reasons"].fillna(0).astype("int64").to_numpy()
            for bits, color in ((POWER_BITS, "tab:red"), (THERMAL_BITS, "tab:purple")):
                ax.fill_between(t, 0, 1, where=(reasons & bits) != 0, color=color, alpha=0.12, step="post",
                                transform=ax.get_xaxis_transform(), linewidth=0)
        ax.set_title(f"{TRACE_PROBE} {config}: back-to-back launches (shaded: SW power cap / power brake set)",
                     fontsize=8)
    axes[-1, 0].set_xlabel("s since the first launch")
    return axes[0, 0]
