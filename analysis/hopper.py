"""Hopper's new units from the hopper.* probes: distributed shared memory, TMA and cp.async, DPX.

* DSMEM latency: the remote chase's cycles per load, pooled over every cluster size the driver allowed
  (the per-size medians go in the note, with any size it refused); the same generic-address chase through
  the block's own shared memory beside it.
* Bandwidths: per path and level the best chunk size (or, for DSMEM, the best remote pattern and cluster
  size), with the median CI of that config's samples.
* DPX: latencies and throughputs per op and implementation, and the DPX/emulation ratios with a bootstrap
  CI of the ratio of medians.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, of_probe, ratio_ci, select

DSMEM_LATENCY, DSMEM_BANDWIDTH = "hopper.dsmem_latency", "hopper.dsmem_bandwidth"
TMA_LATENCY, COPY_BANDWIDTH, DPX = "hopper.tma_latency", "hopper.copy_bandwidth", "hopper.dpx"
TMA_TENSOR = "hopper.tma_tensor"
#: copy_bandwidth's path -> the quantity prefix it reports under
PATH_PREFIX = {"tma": "tma", "cp_async": "cp_async", "ldg": "ldg_smem"}


def refused_cluster_sizes(measurements: pd.DataFrame, probe: str) -> dict[int, int]:
    """Cluster sizes the driver would not launch, each with its CUresult (the ``cluster_refused`` records)."""
    frame = of_probe(measurements, probe)
    frame = frame[frame["metric"] == "cluster_refused"]
    if "cluster_size" not in frame:
        return {}
    return {int(size): int(status) for size, status in sorted(zip(frame["cluster_size"], frame["value"]))}


def _per_size(frame: pd.DataFrame) -> str:
    return ", ".join(f"{int(size)}: {group['value'].median():.1f}"
                     for size, group in frame.groupby("cluster_size"))


def _best(frame: pd.DataFrame, keys: list[str]) -> tuple[tuple, pd.DataFrame]:
    """The config (values of ``keys``) with the highest median, and its samples."""
    medians = frame.groupby(keys)["value"].median()
    best = medians.idxmax()
    best = best if isinstance(best, tuple) else (best,)
    mask = np.logical_and.reduce([frame[k] == v for k, v in zip(keys, best)])
    return best, frame[mask]


def dsmem_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    refused = refused_cluster_sizes(measurements, DSMEM_LATENCY)
    refused_note = ("; refused by the driver: " + ", ".join(f"cluster size {size} (CUresult {status})"
                                                              for size, status in refused.items())) if refused else ""
    for mode, quantity, what in (("remote", "dsmem.latency_cycles", "the next rank's block"),
                                 ("self", "dsmem.self_latency_cycles", "its own block")):
        frame = select(measurements, DSMEM_LATENCY, "latency", mode=mode)
        if len(frame):
            rows.append(derived_row(quantity, *median_ci(frame["value"]),
                                    f"median over repeats and cluster sizes of a mapa + LD.E.64 chase through "
                                    f"{what}'s shared memory (bootstrap 95% CI)", DSMEM_LATENCY,
                                    f"median per cluster size: {_per_size(frame)}{refused_note}"))
    for metric, quantity in (("bandwidth", "dsmem.bandwidth_bytes_per_s"),
                             ("bytes_per_clk_sm", "dsmem.bandwidth_bytes_per_clk_sm")):
        frame = select(measurements, DSMEM_BANDWIDTH, metric)
        if "pattern" not in frame:
            continue
        frame = frame[frame["pattern"] != "local"]
        if len(frame):
            (size, pattern), best = _best(frame, ["cluster_size", "pattern"])
            rows.append(derived_row(quantity, *median_ci(best["value"]),
                                    "best remote pattern and cluster size: every block reads another block's "
                                    "32 KiB with 16-byte ld.shared::cluster (median, bootstrap 95% CI)",
                                    DSMEM_BANDWIDTH, f"{pattern}, cluster size {int(size)}"))
    return rows


def tma_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    for level, quantity in (("l2", "tma.latency_cycles"), ("dram", "tma.dram_latency_cycles")):
        frame = select(measurements, TMA_LATENCY, "latency", level=level)
        if len(frame):
            smallest = frame["copy_bytes"].min()
            rows.append(derived_row(quantity, *median_ci(frame[frame["copy_bytes"] == smallest]["value"]),
                                    f"one cp.async.bulk of {int(smallest)} B at a time, clock64 from issue to the "
                                    f"mbarrier's completion (median, bootstrap 95% CI)", TMA_LATENCY,
                                    "median per copy size: " + ", ".join(
                                        f"{int(b)} B: {g['value'].median():.0f}"
                                        for b, g in frame.groupby("copy_bytes"))))
    frame = select(measurements, TMA_TENSOR, "latency", level="l2")
    if len(frame):
        area = frame["box_cols"] * frame["box_rows"]
        rows.append(derived_row("tma.tensor_latency_cycles", *median_ci(frame[area == area.min()]["value"]),
                                "one 2-D box (cp.async.bulk.tensor) at a time, clock64 from issue to the mbarrier's "
                                "completion, smallest box (median, bootstrap 95% CI)", TMA_TENSOR,
                                "median per box: " + ", ".join(f"{int(c)}x{int(r)}: {g['value'].median():.0f}"
                                                               for (c, r), g in frame.groupby(["box_cols", "box_rows"]))))
    frame = select(measurements, COPY_BANDWIDTH, "bandwidth")
    if "path" not in frame:
        return rows
    for (path, level), group in frame.groupby(["path", "level"]):
        (chunk,), best = _best(group, ["chunk_bytes"])
        quantity = f"{PATH_PREFIX[path]}.{'l2_' if level == 'l2' else ''}bandwidth_bytes_per_s"
        rows.append(derived_row(quantity, *median_ci(best["value"]),
                                "global->shared streaming, summed in shared memory; best chunk size "
                                "(median, bootstrap 95% CI)", COPY_BANDWIDTH, f"{int(chunk)} B chunks"))
    return rows


def dpx_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    samples = {}
    for op, impl in (("viaddmax", "dpx"), ("viaddmax", "emu"), ("vimax3", "dpx")):
        name = op if impl == "dpx" else f"{op}_emulated"
        for metric, suffix, method in (("latency", "latency_cycles", "dependent chain, clock64"),
                                       ("ops_per_clk_sm", "ops_per_clk_sm",
                                        "full grid, 8 independent chains per thread, CUDA events")):
            frame = select(measurements, DPX, metric, op=op, impl=impl)
            if len(frame):
                samples[(name, metric)] = frame["value"]
                rows.append(derived_row(f"dpx.{name}_{suffix}", *median_ci(frame["value"]),
                                        f"{method} (median, bootstrap 95% CI)", DPX))
    if ("viaddmax", "ops_per_clk_sm") in samples and ("viaddmax_emulated", "ops_per_clk_sm") in samples:
        rows.append(derived_row("dpx.viaddmax_speedup",
                                *ratio_ci(samples[("viaddmax", "ops_per_clk_sm")],
                                          samples[("viaddmax_emulated", "ops_per_clk_sm")]),
                                "throughput of VIADDMNMX over IMAD + VIMNMX (ratio of medians, bootstrap 95% CI)",
                                DPX))
    if ("viaddmax", "latency") in samples and ("viaddmax_emulated", "latency") in samples:
        rows.append(derived_row("dpx.viaddmax_latency_speedup",
                                *ratio_ci(samples[("viaddmax_emulated", "latency")], samples[("viaddmax", "latency")]),
                                "emulated chain's cycles per step over VIADDMNMX's (ratio of medians, bootstrap "
                                "95% CI)", DPX))
    return rows


def hopper_rows(measurements: pd.DataFrame) -> list[dict]:
    """Derived rows of every hopper.* probe present in ``measurements``."""
    return dsmem_rows(measurements) + tma_rows(measurements) + dpx_rows(measurements)


#: The Hopper units beside their classic paths: (unit, its quantity, [(classic path, its quantity)]).
COMPARISONS = (
    ("DSMEM latency (another block's shared memory)", "dsmem.latency_cycles",
     [("own shared memory (LDS)", "smem.latency_cycles"), ("L2 hit (ld.global)", "l2.latency_cycles")]),
    ("DSMEM read bandwidth per SM", "dsmem.bandwidth_bytes_per_clk_sm",
     [("own shared memory (LDS.128)", "smem.bandwidth_bytes_per_clk_sm")]),
    ("TMA bulk copy latency from L2", "tma.latency_cycles", [("L2 hit (ld.global)", "l2.latency_cycles")]),
    ("TMA 2-D box latency from L2", "tma.tensor_latency_cycles", [("L2 hit (ld.global)", "l2.latency_cycles")]),
    ("TMA bulk copy latency from HBM", "tma.dram_latency_cycles", [("HBM (ld.global)", "dram.latency_cycles")]),
    ("TMA HBM -> shared", "tma.bandwidth_bytes_per_s",
     [("cp.async", "cp_async.bandwidth_bytes_per_s"), ("ld.global via registers", "ldg_smem.bandwidth_bytes_per_s"),
      ("HBM read into registers (bw.dram)", "dram.read_bandwidth_bytes_per_s")]),
    ("TMA L2 -> shared", "tma.l2_bandwidth_bytes_per_s",
     [("cp.async", "cp_async.l2_bandwidth_bytes_per_s"), ("ld.global via registers", "ldg_smem.l2_bandwidth_bytes_per_s"),
      ("L2 read into registers (bw.l2)", "l2.bandwidth_bytes_per_s")]),
    ("DPX max(a + b, c) latency", "dpx.viaddmax_latency_cycles",
     [("IMAD + VIMNMX", "dpx.viaddmax_emulated_latency_cycles")]),
    ("DPX max(a + b, c) throughput", "dpx.viaddmax_ops_per_clk_sm",
     [("IMAD + VIMNMX", "dpx.viaddmax_emulated_ops_per_clk_sm")]),
)


def comparison_rows(derived: pd.DataFrame) -> list[tuple[str, str, float, str, str, float, float]]:
    """(unit, quantity, value, unit of measure, classic path, its value, unit / classic) for every pair the
    run measured both sides of."""
    d = derived.set_index("quantity")
    rows = []
    for name, quantity, classics in COMPARISONS:
        if quantity not in d.index:
            continue
        for classic, other in classics:
            if other in d.index:
                value, base = float(d.loc[quantity, "value"]), float(d.loc[other, "value"])
                rows.append((name, quantity, value, d.loc[quantity, "unit"], classic, base, value / base))
    return rows


FAMILY = Family(order=100, probe_modules=("hopper.dsmem", "hopper.tma", "hopper.dpx"),
                rows=lambda m, device: hopper_rows(m), quantities={
    "dsmem.latency_cycles": ("cycles", "load-to-use latency of another cluster block's shared memory (distributed "
                                       "shared memory, mapa + generic load over the SM-to-SM network), pooled over "
                                       "cluster sizes"),
    "dsmem.self_latency_cycles": ("cycles", "the same generic-address chase through the block's own shared memory"),
    "dsmem.bandwidth_bytes_per_s": ("B/s", "distributed shared-memory read bandwidth, every block of a full grid "
                                           "reading another cluster block's shared memory"),
    "dsmem.bandwidth_bytes_per_clk_sm": ("B/cycle", "distributed shared-memory read bandwidth per SM per clock"),
    "tma.latency_cycles": ("cycles", "one TMA bulk copy (cp.async.bulk, smallest size) from L2, issue to mbarrier "
                                     "completion"),
    "tma.tensor_latency_cycles": ("cycles", "one TMA 2-D box copy (cp.async.bulk.tensor, smallest box) from L2, "
                                            "issue to mbarrier completion"),
    "tma.dram_latency_cycles": ("cycles", "one TMA bulk copy (smallest size) from HBM, issue to mbarrier completion"),
    "tma.bandwidth_bytes_per_s": ("B/s", "HBM -> shared memory by TMA bulk copies (best chunk size)"),
    "tma.l2_bandwidth_bytes_per_s": ("B/s", "L2 -> shared memory by TMA bulk copies (best chunk size)"),
    "cp_async.bandwidth_bytes_per_s": ("B/s", "HBM -> shared memory by Ampere cp.async (16 B per thread)"),
    "cp_async.l2_bandwidth_bytes_per_s": ("B/s", "L2 -> shared memory by Ampere cp.async (16 B per thread)"),
    "ldg_smem.bandwidth_bytes_per_s": ("B/s", "HBM -> shared memory by plain 16-byte loads through registers"),
    "ldg_smem.l2_bandwidth_bytes_per_s": ("B/s", "L2 -> shared memory by plain 16-byte loads through registers"),
    "dpx.viaddmax_latency_cycles": ("cycles", "dependent __viaddmax_s32 (VIADDMNMX) latency"),
    "dpx.viaddmax_emulated_latency_cycles": ("cycles", "dependent max(a + b, c) latency without DPX (IMAD + VIMNMX)"),
    "dpx.vimax3_latency_cycles": ("cycles", "dependent __vimax3_s32 (VIMNMX3) latency"),
    "dpx.viaddmax_ops_per_clk_sm": ("1/cycle", "__viaddmax_s32 operations per clock per SM"),
    "dpx.viaddmax_emulated_ops_per_clk_sm": ("1/cycle", "max(a + b, c) without DPX, operations per clock per SM"),
    "dpx.vimax3_ops_per_clk_sm": ("1/cycle", "__vimax3_s32 operations per clock per SM"),
    "dpx.viaddmax_speedup": ("1", "throughput of DPX max(a + b, c) over its two-instruction emulation"),
    "dpx.viaddmax_latency_speedup": ("1", "latency of the two-instruction emulation over DPX's"),
})
