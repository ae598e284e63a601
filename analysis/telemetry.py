"""NVML telemetry in the report: board power and the SM clock NVML read while each probe ran, and the trace
of one long run of back-to-back tensor-core launches.

Each measurement row carries the NVML readings over its sample's window (results schema 2).  The strip draws
power and NVML's SM clock on two shared-time panels, one slot per probe in run order, each sample placed by
when it was made within its probe, with the bins whose window had the SW power cap or HW power brake set
(``power_capped``) or a thermal slowdown (``thermal``) marked along the top.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from gpuatlas.analysis.report_figures import FigureSpec  # noqa: E402

TRACE_PROBE = "compute.wgmma"
#: SW power cap (0x4) or HW power brake (0x80); SW or HW thermal slowdown (0x20, 0x40).
POWER_BITS, THERMAL_BITS = 0x4 | 0x80, 0x20 | 0x40
MARKS = {"power_capped": ("tab:red", "v"), "thermal": ("tab:purple", "x")}


def has_telemetry(measurements: pd.DataFrame) -> bool:
    """Whether any row carries an NVML power reading (never, for a schema-1 run)."""
    return "power_w" in measurements and bool(measurements["power_w"].notna().any())


def _samples(measurements: pd.DataFrame) -> pd.DataFrame:
    """One row per sample moment (the metrics of one sample share its window), telemetry present: the probe and
    its readings only."""
    keep = (measurements["power_w"].notna() & measurements["elapsed_s"].notna()
            & ~measurements["metric"].astype(str).str.startswith("trace_"))
    frame = measurements.loc[keep, ["probe", "elapsed_s", "power_w", "power_max_w", "nvml_sm_clock_hz", "telemetry"]]
    frame = frame.astype({"probe": "category"})
    return frame.drop_duplicates(subset=["probe", "elapsed_s"])


#: Time bins per probe: each probe's samples are binned in time to at most this many points.
STRIP_BINS = 60


def _binned(frame: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """Every probe's samples in at most STRIP_BINS equal bins of the time since it began: the bin's median, min
    and max power and clock, each flag if any sample of the bin carries it, ``slot`` (the probe's place in
    ``order``) and ``at`` (the bin's median time as a fraction of the probe's last sample time)."""
    slot = frame["probe"].map({probe: i for i, probe in enumerate(order)}).to_numpy()
    t = frame["elapsed_s"].to_numpy(dtype=float)
    last = frame.groupby("probe")["elapsed_s"].transform("max").to_numpy(dtype=float)
    at = np.divide(t, last, out=np.full_like(t, 0.5), where=last > 0)
    flags = frame["telemetry"].astype(str)
    samples = pd.DataFrame({"slot": slot, "bin": np.minimum(at * STRIP_BINS, STRIP_BINS - 1).astype(int), "at": at,
                            "power_w": frame["power_w"].to_numpy(dtype=float),
                            "clock_ghz": frame["nvml_sm_clock_hz"].to_numpy(dtype=float) / 1e9,
                            **{flag: flags.str.contains(flag).to_numpy() for flag in MARKS}})
    bins = samples.groupby(["slot", "bin"], sort=True)
    out = bins[["at", "power_w", "clock_ghz"]].median()
    for column in ("power_w", "clock_ghz"):
        out[f"{column}_min"], out[f"{column}_max"] = bins[column].min(), bins[column].max()
    out[list(MARKS)] = bins[list(MARKS)].any()
    return out.reset_index()


#: Width of a probe's slot that its samples span; the rest parts it from its neighbours.
SLOT_FILL = 0.9


def clock_power_strip(measurements: pd.DataFrame, order=()):
    """Board power and NVML SM clock over the run, probe by probe: each probe has an equal slot of the shared
    time axis (in ``order``, the run's, then any other), its samples placed by their time since it began over its
    last sample's time (named under the slot), binned; a point is a bin's median, its bar the bin's min to max.
    Power-capped and thermal bins are marked along the top.  Returns the power axes (None without telemetry)."""
    frame = _samples(measurements) if has_telemetry(measurements) else pd.DataFrame()
    if frame.empty:
        return None
    present = set(frame["probe"])
    probes = [p for p in order if p in present] + sorted(present.difference(order))
    seconds = frame.groupby("probe")["elapsed_s"].max()
    data = _binned(frame, probes)
    x = data["slot"] + (1 - SLOT_FILL) / 2 + SLOT_FILL * data["at"]
    fig, (power, clock) = plt.subplots(2, 1, figsize=(12, 6.8), sharex=True, height_ratios=(3, 2))
    top_w = float(frame["power_max_w"].max())
    for ax, column, colour, label in ((power, "power_w", "tab:orange", "board power (W)"),
                                      (clock, "clock_ghz", "tab:blue", "SM clock (GHz)")):
        ax.vlines(x, data[f"{column}_min"], data[f"{column}_max"], color=colour, alpha=0.35, linewidth=0.6)
        ax.plot(x, data[column], ".", color=colour, markersize=1.8)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        for i in range(1, len(probes), 2):
            ax.axvspan(i, i + 1, color="0.93", linewidth=0, zorder=0)
    power.set_ylim(0, top_w * 1.15)
    for flag, (colour, marker) in MARKS.items():
        hit = data[flag].to_numpy()
        power.plot(x[hit], np.full(int(hit.sum()), top_w * 1.08), marker, color=colour, markersize=3,
                   linestyle="none", label=f"{flag.replace('_', ' ')} (a sample in the bin)")
    power.plot([], [], ".", color="tab:orange", label="median of a time bin; bar: its min to max")
    power.legend(fontsize=7, loc="lower right", ncols=3)
    power.set_title("NVML board power and SM clock per probe, in run order", fontsize=9)
    clock.set_xlim(0, len(probes))
    clock.set_xticks(np.arange(len(probes)) + 0.5, [f"{p} ({seconds[p]:.3g} s)" for p in probes], rotation=90,
                     fontsize=6.5)
    clock.tick_params(axis="x", length=0)
    return power


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


#: NVML's clock and power, drawn when the run recorded telemetry (results schema 2).
FIGURES = (
    FigureSpec("clock-power", None, "Clock and power per probe (NVML)",
               "NVML's board power and SM clock over the run, one slot per probe in run order: within its slot, a "
               "probe's samples lie by the time since it began, over its last sample's time (in brackets under "
               "it), in 60 time bins (point: the bin's median; bar: its min to max); bins with a sample taken "
               "while the SW power cap or a thermal slowdown was set are marked along the top.",
               lambda meta, m, d: clock_power_strip(m, list(meta.get("probes", ()))),
               chapter="Execution", after="launch-overhead", shown=has_telemetry),
    FigureSpec("power-trace", "compute.wgmma", "Clock and power over back-to-back tensor-core launches (NVML)",
               "Board power and SM clock read by NVML every 10 ms over a second and a half of back-to-back wgmma "
               "launches per data type: the clock the power limit allows once the board reaches its cap.",
               lambda meta, m, d: power_trace(m),
               chapter="Execution", after="clock-power", shown=has_telemetry),
)
