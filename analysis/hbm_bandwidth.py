"""HBM's bandwidth from bw.dram and bw.dram_footprint: read (the fastest kernel, named by the pattern it
recorded), write (the fastest store variant, with what each pair of variants that differ in one thing says)
and copy, each against the interface peak; and the read bandwidth at the footprint sweep's largest footprint.
The coalescing family declares the rows (gpuatlas.analysis.coalescing's FAMILY)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.stats import median_ci, select
from gpuatlas.analysis.units import fmt_bytes, fmt_value

DRAM_PROBE, FOOTPRINT_PROBE = "bw.dram", "bw.dram_footprint"


def dram_peak(device: dict) -> float | None:
    """memory clock x bus width / 8 x 2 (double data rate), from the device's properties."""
    clock, bits = device.get("memory_clock_hz"), device.get("memory_bus_bits")
    return float(clock) * bits / 8 * 2 if clock and bits else None


def _faster_copy(measurements) -> tuple[str, float | None]:
    """``copy`` (gpuatlas's kernels) or ``memcpy`` (the driver's), whichever has the higher median, and the
    other's median (None if it was not measured)."""
    medians = {op: select(measurements, DRAM_PROBE, "bandwidth", op=op)["value"].median()
               for op in ("copy", "memcpy")}
    measured = {op: m for op, m in medians.items() if m == m}  # NaN: not measured
    if len(measured) < 2:
        return next(iter(measured), "copy"), None
    best = max(measured, key=measured.get)
    return best, measured["memcpy" if best == "copy" else "copy"]


#: Write variants (bw.dram's ``variant`` axis): what each stores.  Runs before the axis wrote with the first.
WRITE_VARIANTS = {"grid_stride_16": "16-byte stores, grid-stride", "grid_stride_16_cs": "16-byte streaming "
                  "stores (st.global.cs), grid-stride", "once_8": "one 8-byte store per thread, no loop",
                  "once_16": "one 16-byte store per thread, no loop", "once_16_cs": "one 16-byte streaming store "
                  "per thread, no loop"}
LEGACY_WRITE = "grid_stride_16"
#: Pairs of write variants that differ in one thing: (what differs, faster-if-it-helps, baseline).
WRITE_CONTRASTS = (("16- over 8-byte stores", "once_16", "once_8"),
                   ("streaming hint, grid-stride", "grid_stride_16_cs", "grid_stride_16"),
                   ("streaming hint, one store per thread", "once_16_cs", "once_16"),
                   ("one store per thread over grid-stride", "once_16", "grid_stride_16"))


def write_variants(measurements) -> dict[str, pd.Series]:
    """Usable bw.dram write bandwidth samples per variant (runs without the axis: ``LEGACY_WRITE``)."""
    frame = select(measurements, DRAM_PROBE, "bandwidth", op="write")
    if frame.empty:
        return {}
    names = frame["variant"] if "variant" in frame else pd.Series(np.nan, index=frame.index)
    names = names.where(names.notna() & names.isin(list(WRITE_VARIANTS)), LEGACY_WRITE)
    return {v: frame.loc[names == v, "value"] for v in WRITE_VARIANTS if (names == v).any()}


def _write_row(measurements, peak) -> list[dict]:
    """The fastest write variant is the headline; the note gives every variant's median and the ratio of each
    pair that differs in one thing (store width, cache hint, grid), which says what limits the slower ones."""
    variants = write_variants(measurements)
    if not variants:
        return []
    frame = select(measurements, DRAM_PROBE, "bandwidth", op="write")
    if "variant" not in frame or frame["variant"].isna().all():  # a run before the variants: one kernel
        med, lo, hi = median_ci(frame["value"])
        note = f"{len(frame)} samples"
        if peak:
            note += f"; {med / peak:.1%} of the interface peak {fmt_value(peak, 'B/s')} (memory clock x bus x 2)"
        return [derived_row("dram.write_bandwidth_bytes_per_s", med, lo, hi, "16-byte stores over buffers of 32x "
                            "the L2 or more, grid-stride, every SM full (median, bootstrap 95% CI)", DRAM_PROBE, note)]
    medians = {v: float(samples.median()) for v, samples in variants.items()}
    best = max(medians, key=medians.get)
    med, lo, hi = median_ci(variants[best])
    note = f"fastest: {best} ({WRITE_VARIANTS[best]}), {len(variants[best])} samples"
    if peak:
        note += f"; {med / peak:.1%} of the interface peak {fmt_value(peak, 'B/s')} (memory clock x bus x 2)"
    note += "; every variant: " + ", ".join(f"{v} {fmt_value(m, 'B/s')}" for v, m in medians.items())
    contrasts = [f"{what} {medians[a] / medians[b] - 1:+.1%}" for what, a, b in WRITE_CONTRASTS
                 if a in medians and b in medians]
    if contrasts:
        note += "; " + ", ".join(contrasts)
    return [derived_row("dram.write_bandwidth_bytes_per_s", med, lo, hi,
                        "the fastest of the write variants over a buffer of 32x the L2 or more, every word checked "
                        "after each sample (median, bootstrap 95% CI); every warp store covers whole 32-byte "
                        "sectors (256 or 512 aligned contiguous bytes), so no sector is fetched to merge a "
                        "partial write: the variants differ in store width, grid and cache hint only",
                        DRAM_PROBE, note)]


def config_median(measurements, metric, **params) -> float:
    frame = select(measurements, DRAM_PROBE, metric, **params)
    return float(frame["value"].median()) if not frame.empty else float("nan")


#: bw.dram's read variants, as the derived row names the fastest.
READ_VARIANTS = {"fastest": "the fastest grid-stride kernel and occupancy",
                 "once_64": "one trip of four 16-byte loads per thread, no loop"}


def read_pattern(unroll: float, warp_bytes: float, block_bytes: float, threads: float) -> str:
    """The access pattern of a bw.dram read kernel from what it recorded: a block's trip reads ``unroll`` x
    ``threads`` x 16 bytes; contiguous as a whole (a chunk) or as ``unroll`` grid-wide rows, and within a
    chunk each warp's ``unroll`` loads contiguous (per-warp chunks) or one 512-byte piece per load."""
    trip = unroll * threads * 16
    if block_bytes < trip:
        return (f"grid-wide rows ({fmt_bytes(block_bytes)} contiguous per block load, "
                f"{fmt_bytes(warp_bytes)} per warp load)")
    if warp_bytes > 32 * 16:
        return (f"per-warp chunks ({fmt_bytes(warp_bytes)} contiguous per warp trip, {fmt_bytes(block_bytes)} per "
                "block trip, 256-byte L2 fetches)")
    return (f"block-contiguous chunks ({fmt_bytes(block_bytes)} contiguous per block trip, chunks dealt to blocks "
            f"in turn, {fmt_bytes(warp_bytes)} per warp load)")


def _fastest_read(measurements) -> str:
    """The fastest read variant's kernel as the samples recorded it: pattern, loads in flight, occupancy
    (runs before the block-contiguous kernels recorded no block contiguity: the grid-stride wording)."""
    config = {m: config_median(measurements, m, op="read", variant="fastest")
              for m in ("loads_in_flight_per_thread", "contiguous_bytes_per_warp_trip",
                        "contiguous_bytes_per_block_trip", "threads_per_block", "blocks_per_sm")}
    if any(v != v for v in config.values()):
        return READ_VARIANTS["fastest"]
    unroll, warp, block, threads, blocks = config.values()
    barrier = config_median(measurements, "block_barrier_per_trip", op="read", variant="fastest")
    return (f"{read_pattern(unroll, warp, block, threads)}, {unroll:g} 16-byte loads per thread in flight, "
            f"{blocks:g} blocks of {threads:g} threads per SM" + (", a block barrier after every trip"
                                                                  if barrier == 1 else ""))


def dram_rows(measurements, device) -> list[dict]:
    rows = []
    peak = dram_peak(device)
    copy_op, other = _faster_copy(measurements)
    copy_what = ("16-byte loads and stores" if copy_op == "copy" else "the driver's cudaMemcpyAsync (device to "
                 "device), faster here than gpuatlas's copy kernels") + ", bytes read plus written"
    for op, quantity, what in (("read", "dram.read_bandwidth_bytes_per_s", "16-byte loads"),
                               ("write", "dram.write_bandwidth_bytes_per_s", None),
                               (copy_op, "dram.copy_bandwidth_bytes_per_s", copy_what)):
        if op == "write":
            rows += _write_row(measurements, peak)
            continue
        frame = select(measurements, DRAM_PROBE, "bandwidth", op=op)
        if frame.empty:
            continue
        note, best = "", None
        if op == "read" and "variant" in frame and frame["variant"].notna().any():
            medians = frame.groupby("variant")["value"].median()
            best = medians.idxmax()
            frame = frame[frame["variant"] == best]
            named = _fastest_read(measurements) if best == "fastest" else READ_VARIANTS.get(best, best)
            note = f"fastest: {named}; "
            if len(medians) > 1:
                note += "every variant: " + ", ".join(f"{v} {fmt_value(m, 'B/s')}" for v, m in medians.items()) + "; "
        med, lo, hi = median_ci(frame["value"])
        note += f"{len(frame)} samples"
        if quantity.startswith("dram.copy") and other is not None:
            note += f"; the {'driver copy' if copy_op == 'copy' else 'copy kernels'}: {fmt_value(other, 'B/s')}"
        if peak:
            note += f"; {med / peak:.1%} of the interface peak {fmt_value(peak, 'B/s')} (memory clock x bus x 2)"
        if op == "read":
            note += _read_bound_note(measurements, device, best)
        rows.append(derived_row(quantity, med, lo, hi, f"{what} over buffers of 32x the L2 or more, grid-stride, every "
                         "SM full (median, bootstrap 95% CI)", DRAM_PROBE, note))
        if op == "read":
            per_clk = frame["value"] / device["sm_count"] / frame["sm_clock_hz"]
            pmed, plo, phi = median_ci(per_clk)
            rows.append(derived_row("dram.read_bytes_per_clk_sm", pmed, plo, phi,
                             "HBM read bandwidth / (SMs x the SM clock read after each sample)", DRAM_PROBE,
                             f"{device['sm_count']} SMs at {fmt_value(frame['sm_clock_hz'].median(), 'Hz')}"))
    rows += _footprint_rows(measurements, device)
    return rows


def l2_share_bound(l2_bytes: float, buffer_bytes: float) -> float:
    """Largest fraction of a pass's bytes the L2 can serve when each pass reads every line of the buffer once:
    a line hits only if it stayed resident for a whole pass, and the L2 holds at most ``l2_bytes``."""
    return min(1.0, l2_bytes / buffer_bytes)


def _read_bound_note(measurements, device, variant=None) -> str:
    """The headline variant's read buffer and the L2's largest share of its bytes, L2 / buffer per pass, from
    the run's device properties and the recorded buffer (runs that recorded it)."""
    params = {"op": "read"} if variant is None else {"op": "read", "variant": variant}
    buffer = config_median(measurements, "buffer_bytes", **params)
    if buffer != buffer:
        return ""
    return (f"; one buffer of {fmt_bytes(buffer)} ({buffer / device['l2_bytes']:.1f}x the L2) read pass after "
            f"pass, each line once a pass: the L2 ({fmt_bytes(device['l2_bytes'])}) serves at most "
            f"{l2_share_bound(device['l2_bytes'], buffer):.1%} of the bytes (L2 / buffer)")


def footprint_table(measurements) -> pd.DataFrame:
    """bw.dram_footprint: median read bandwidth and samples per footprint, smallest first."""
    frame = select(measurements, FOOTPRINT_PROBE, "bandwidth")
    if frame.empty or "footprint_bytes" not in frame:
        return pd.DataFrame(columns=["footprint_bytes", "bandwidth", "n"])
    return (frame.groupby("footprint_bytes")["value"].agg(bandwidth="median", n="size").reset_index()
            .sort_values("footprint_bytes").reset_index(drop=True))


def _footprint_rows(measurements, device) -> list[dict]:
    """``dram.read_bandwidth_large_footprint_bytes_per_s``: the read bandwidth at the sweep's largest
    footprint, with the curve's ends and the L2's largest share at each in the note."""
    table = footprint_table(measurements)
    if table.empty:
        return []
    top = table["footprint_bytes"].iloc[-1]
    samples = select(measurements, FOOTPRINT_PROBE, "bandwidth")
    samples = samples[samples["footprint_bytes"] == top]["value"]
    med, lo, hi = median_ci(samples)
    l2 = device["l2_bytes"]
    first = table.iloc[0]
    note = (f"footprint {fmt_bytes(top)} (L2 share at most {l2_share_bound(l2, top):.1%}), {len(samples)} samples; "
            f"{len(table)} footprints from {fmt_bytes(first['footprint_bytes'])} ({fmt_value(first['bandwidth'], 'B/s')}, "
            f"L2 share at most {l2_share_bound(l2, first['footprint_bytes']):.1%}): "
            f"{med / first['bandwidth'] - 1:+.1%} from the smallest to the largest")
    read = config_median(measurements, "bandwidth", op="read", variant="fastest")
    if read == read:
        note += f"; {med / read - 1:+.1%} against bw.dram's read"
    return [derived_row("dram.read_bandwidth_large_footprint_bytes_per_s", med, lo, hi,
                        "bw.dram's read kernels (the fastest) re-reading one buffer of the sweep's largest "
                        "footprint pass after pass (median, bootstrap 95% CI)", FOOTPRINT_PROBE, note)]
