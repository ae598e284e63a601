"""Coalescing, the bandwidth of every level and the L2's capacity (where the L2 sweep falls to HBM), from the
``bw.*`` probes (HBM's read, write and copy rows in gpuatlas.analysis.hbm_bandwidth).

Byte accounting (the lecture's §7.6 rule, with the block size left open): one warp-wide load whose 32 lanes
read one ``e``-byte element each, ``s`` elements apart, moves every distinct ``B``-byte block it touches,
whole.  Useful bytes are the distinct bytes asked for; efficiency = useful / moved.  The lecture assumes
128-byte segments (fp32 at stride 32: 32 segments, 4096 B moved for 128 B, 1/32); a memory system that
moves 32-byte sectors moves 1024 B for the same access (1/8).

The stride sweep measures useful bandwidth at each stride; divided by the same element size's stride-1
bandwidth it is the measured efficiency relative to a coalesced read.  Each candidate block size predicts
that curve with no free parameter (its efficiency at s over its efficiency at 1), and the candidate with the
smallest RMS error in log2 (octaves: a factor of 2 off is an error of 1) wins.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from gpuatlas.analysis.capacity import fit_capacity
from gpuatlas.analysis.family import Family
from gpuatlas.analysis.hbm_bandwidth import config_median, dram_rows
from gpuatlas.analysis.quantities import derived_row, structure_row
from gpuatlas.analysis.stats import median_ci, ratio_ci, select
from gpuatlas.analysis.units import fmt_bytes, fmt_value

LANES = 32
#: Block sizes the fit compares: the sector, a sector pair (a DRAM burst), the lecture's segment.
CANDIDATE_BLOCKS = (32, 64, 128)
SECTOR_BYTES, SEGMENT_BYTES = 32, 128
#: Largest RMS error (octaves) of the best block model for the L2 sweep to name the L2's sector: a model
#: further off than that does not explain the sweep.
MAX_SECTOR_FIT_OCTAVES = 0.2
STRIDE_PROBE, L2_PROBE, ONCHIP_PROBE = "bw.stride", "bw.l2", "bw.onchip"

# -- byte accounting ----------------------------------------------------------------------------------------

def lane_addresses(stride_elements: int, element_bytes: int, misaligned_bytes: int = 0,
                   lanes: int = LANES) -> np.ndarray:
    """Byte address of each lane's element, relative to an aligned base."""
    return misaligned_bytes + np.arange(lanes, dtype=np.int64) * stride_elements * element_bytes


@functools.lru_cache(maxsize=None)  # asked for every config and candidate block by each fit
def touched_blocks(stride_elements: int, element_bytes: int, block_bytes: int, misaligned_bytes: int = 0,
                   lanes: int = LANES) -> int:
    """Distinct ``block_bytes`` blocks that one warp-wide access touches (an element may straddle two)."""
    start = lane_addresses(stride_elements, element_bytes, misaligned_bytes, lanes)
    first, last = start // block_bytes, (start + element_bytes - 1) // block_bytes
    blocks = np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last)]))
    return int(blocks.size)


def moved_bytes(stride_elements: int, element_bytes: int, block_bytes: int, misaligned_bytes: int = 0,
                lanes: int = LANES) -> int:
    """Bytes moved for one warp-wide access: distinct blocks touched x block size."""
    return touched_blocks(stride_elements, element_bytes, block_bytes, misaligned_bytes, lanes) * block_bytes


def useful_bytes(stride_elements: int, element_bytes: int, lanes: int = LANES) -> int:
    """Distinct bytes the warp asks for (stride 0: every lane reads the same element)."""
    return element_bytes * (lanes if stride_elements else 1)


def predicted_efficiency(stride_elements: int, element_bytes: int, block_bytes: int, misaligned_bytes: int = 0,
                         lanes: int = LANES) -> float:
    """useful / moved for one warp-wide access."""
    return useful_bytes(stride_elements, element_bytes, lanes) / moved_bytes(
        stride_elements, element_bytes, block_bytes, misaligned_bytes, lanes)


def relative_efficiency(stride_elements: int, element_bytes: int, block_bytes: int,
                        misaligned_bytes: int = 0) -> float:
    """A block model's prediction of bandwidth(s) / bandwidth(1, aligned), same element size."""
    return (predicted_efficiency(stride_elements, element_bytes, block_bytes, misaligned_bytes)
            / predicted_efficiency(1, element_bytes, block_bytes, 0))


# -- the stride sweep ---------------------------------------------------------------------------------------

def _misaligned(frame: pd.DataFrame) -> pd.Series:
    return np.where(frame["aligned"].astype(str).isin(["aligned", "True"]), 0, frame["element_bytes"])


def stride_table(measurements: pd.DataFrame) -> pd.DataFrame:
    """Per level, element size, alignment and stride: median useful bandwidth (B/s), samples, measured
    efficiency (bandwidth / the same level's and element size's aligned stride-1 bandwidth), bytes moved
    per useful byte (its inverse), and each candidate block's predicted efficiency (``pred_<B>``)."""
    keys = ["level", "element_bytes", "aligned", "stride_elements"]
    columns = keys + ["misaligned_bytes", "bandwidth", "n", "efficiency", "moved_per_useful",
                      *[f"pred_{b}" for b in CANDIDATE_BLOCKS]]
    if "stride_elements" not in measurements:
        return pd.DataFrame(columns=columns)
    data = select(measurements, STRIDE_PROBE, "bandwidth")
    if data.empty:
        return pd.DataFrame(columns=columns)
    table = data.groupby(keys)["value"].agg(bandwidth="median", n="size").reset_index()
    table["element_bytes"] = table["element_bytes"].astype(int)
    table["stride_elements"] = table["stride_elements"].astype(int)
    table["aligned"] = table["aligned"].astype(str)
    table["misaligned_bytes"] = _misaligned(table).astype(int)
    base = table[(table["stride_elements"] == 1) & (table["misaligned_bytes"] == 0)]
    base = base.set_index(["level", "element_bytes"])["bandwidth"]
    ref = [base.get((lvl, e), np.nan) for lvl, e in zip(table["level"], table["element_bytes"])]
    table["efficiency"] = table["bandwidth"] / np.asarray(ref, dtype=float)
    table["moved_per_useful"] = 1 / table["efficiency"]
    for b in CANDIDATE_BLOCKS:
        table[f"pred_{b}"] = [relative_efficiency(s, e, b, m) for s, e, m in
                              zip(table["stride_elements"], table["element_bytes"], table["misaligned_bytes"])]
    return table[columns].sort_values(keys).reset_index(drop=True)


def _log_predictions(frame: pd.DataFrame, blocks) -> dict[int, np.ndarray]:
    """log2 of each block model's predicted efficiency, per row of ``frame``."""
    configs = list(zip(frame["stride_elements"].astype(int), frame["element_bytes"].astype(int),
                       frame["misaligned_bytes"].astype(int)))
    return {b: np.log2([relative_efficiency(s, e, b, m) for s, e, m in configs]) for b in blocks}


def _rms(measured: np.ndarray, predictions: dict, rows=slice(None)) -> dict[int, float]:
    """RMS of log2(measured / predicted) per block: the model's typical error in octaves."""
    return {b: float(np.sqrt(np.mean((measured[rows] - p[rows]) ** 2))) for b, p in predictions.items()}


def fit_models(frame: pd.DataFrame, blocks=CANDIDATE_BLOCKS, resamples: int = 500, seed: int = 0) -> dict:
    """Compare block models against a measured efficiency curve.

    ``frame`` has ``stride_elements``, ``element_bytes``, ``efficiency`` (bandwidth(s) / bandwidth(1) of the
    same element size) and optionally ``misaligned_bytes``.  Stride-1 aligned rows (the normaliser, equal
    to 1 under every model) are left out.  Returns the winning ``block_bytes``, every candidate's
    ``errors`` (RMS log2 error: a model a factor of 2 off everywhere scores 1), a bootstrap 95% ``ci`` of
    the winner (resampling configs) and the number of configs ``n``."""
    frame = frame.copy()
    if "misaligned_bytes" not in frame:
        frame["misaligned_bytes"] = 0
    frame = frame[~((frame["stride_elements"] == 1) & (frame["misaligned_bytes"] == 0))]
    frame = frame[np.isfinite(frame["efficiency"].astype(float)) & (frame["efficiency"] > 0)]
    if len(frame) < 2 or frame["stride_elements"].nunique() < 2:
        raise ValueError("a block-model fit needs measured efficiencies at two or more strides beyond 1")
    measured = np.log2(frame["efficiency"].to_numpy(dtype=float))
    predictions = _log_predictions(frame, blocks)
    errors = _rms(measured, predictions)
    best = min(errors, key=errors.get)
    rng = np.random.default_rng(seed)
    picks = []
    for rows in rng.integers(0, len(frame), (resamples, len(frame))):
        e = _rms(measured, predictions, rows)
        picks.append(min(e, key=e.get))
    return {"block_bytes": int(best), "errors": errors, "n": int(len(frame)),
            "ci": (float(np.percentile(picks, 2.5)), float(np.percentile(picks, 97.5)))}


# -- derived rows -------------------------------------------------------------------------------------------

def _stride_samples(measurements, level, element_bytes, stride, aligned="aligned") -> pd.Series:
    frame = select(measurements, STRIDE_PROBE, "bandwidth", level=level)
    if frame.empty:
        return frame["value"]
    frame = frame[(frame["element_bytes"].astype(int) == element_bytes)
                  & (frame["stride_elements"].astype(int) == stride)
                  & (frame["aligned"].astype(str).isin([aligned, str(aligned == "aligned")]))]
    return frame["value"]


def bandwidth_rows(measurements: pd.DataFrame, device: dict) -> list[dict]:
    """Derived rows of every ``bw.*`` probe present in ``measurements``."""
    rows = []
    if "probe" not in measurements or not measurements["probe"].astype(str).str.startswith("bw.").any():
        return rows
    rows += _onchip_rows(measurements)
    rows += _l2_rows(measurements, device)
    rows += dram_rows(measurements, device)
    rows += _coalescing_rows(measurements)
    return rows


def _onchip_rows(measurements) -> list[dict]:
    rows = []
    for level, quantity, what in (("smem", "smem.bandwidth_bytes_per_clk_sm", "LDS.128"),
                                  ("l1", "l1.bandwidth_bytes_per_clk_sm", "LDG.E.128 L1 hits")):
        frame = select(measurements, ONCHIP_PROBE, "bytes_per_clk_sm", level=level)
        if frame.empty:
            continue
        med, lo, hi = median_ci(frame["value"])
        clock = frame["sm_clock_hz"].median()
        rows.append(derived_row(quantity, med, lo, hi,
                         f"{what} from a 16 KiB buffer per block, every SM full: bytes / s / SMs / the SM clock "
                         "read after each sample (median, bootstrap 95% CI)", ONCHIP_PROBE,
                         f"{len(frame)} samples at {fmt_value(clock, 'Hz')}"))
    return rows


def _l2_rows(measurements, device) -> list[dict]:
    """The L2 plateau: the median over footprints up to half the L2 of each footprint's median (every
    footprint counts once, however many repeats it took), with a bootstrap CI over those footprints; and the
    L2's capacity where the sweep extends past the L2 (``_capacity_row``)."""
    frame = select(measurements, L2_PROBE, "bandwidth")
    if frame.empty:
        return []
    per = frame.groupby("footprint_bytes")["value"].median().sort_index()
    window = per[per.index <= device["l2_bytes"] / 2]
    if window.empty:
        return []
    med, lo, hi = median_ci(window.to_numpy())
    note = (f"{len(window)} footprints {fmt_bytes(window.index.min())}..{fmt_bytes(window.index.max())}: "
            f"medians {fmt_value(window.min(), 'B/s')}..{fmt_value(window.max(), 'B/s')}; "
            f"at {fmt_bytes(per.index.max())}: {fmt_value(per.iloc[-1], 'B/s')}")
    return [derived_row("l2.bandwidth_bytes_per_s", med, lo, hi,
                 "16-byte ld.global.cg loads re-reading footprints up to half the L2, every SM full: median over "
                 "footprints of each footprint's median (bootstrap 95% CI over footprints)", L2_PROBE, note),
            *_capacity_row(frame, device, med,
                           config_median(measurements, "bandwidth", op="read", variant="fastest"))]


#: Footprints below this fraction of the driver's L2 are left out of the capacity fit: there the sweep runs
#: faster than the L2's own plateau (an H200 reads 1-4 MiB at 10-13 TB/s against ~9 TB/s over most of the L2).
CAPACITY_FLOOR = 1 / 8


def l2_capacity_fit(frame, device):
    """The miss model (``gpuatlas.analysis.capacity.fit_capacity``) fitted to usable bw.l2 samples at footprints from
    L2 / 8 up; None when the sweep does not fall clearly below the L2 plateau (a sweep that stops at the L2).
    A report fits each run once: the figure gets the fit derive made (the same samples give the same fit)."""
    return _capacity_fit(frame["footprint_bytes"].to_numpy(dtype=float).tobytes(),
                         frame["value"].to_numpy(dtype=float).tobytes(), float(device["l2_bytes"]))


@functools.lru_cache(maxsize=8)
def _capacity_fit(footprints: bytes, values: bytes, l2_bytes: float):
    return fit_capacity(np.frombuffer(footprints), np.frombuffer(values),
                        min_footprint_bytes=l2_bytes * CAPACITY_FLOOR)


def resident_bytes(per_footprint, hit_bytes_per_s: float, miss_bytes_per_s: float) -> dict[float, float]:
    """Bytes the L2 kept at each footprint, as the miss model reads them off one footprint's bandwidth B with
    the measured endpoints: B = 1 / (h / hit + (1 - h) / miss) gives the resident fraction h, and h x F the
    bytes.  Under the model they are one constant C at every footprint past it; how far they drift from each
    other is how far the model is from this cache's replacement."""
    out = {}
    for footprint, bandwidth in per_footprint.items():
        h = (1 / miss_bytes_per_s - 1 / bandwidth) / (1 / miss_bytes_per_s - 1 / hit_bytes_per_s)
        out[float(footprint)] = float(np.clip(h, 0.0, 1.0)) * float(footprint)
    return out


def _capacity_row(frame, device, hit_bytes_per_s: float, miss_bytes_per_s: float) -> list[dict]:
    """``l2.capacity_bytes`` from ``l2_capacity_fit``; its note gives the bytes the model reads off each
    footprint past the driver's L2 with the measured L2 plateau and HBM read as its rates."""
    floor = device["l2_bytes"] * CAPACITY_FLOOR
    fit = l2_capacity_fit(frame, device)
    if fit is None:
        return []
    footprints = np.unique(frame["footprint_bytes"].to_numpy(dtype=float))
    used = footprints[footprints >= floor]
    note = (f"fitted L2 bandwidth {fmt_value(fit.cache_bytes_per_s, 'B/s')}, miss (HBM) bandwidth "
            f"{fmt_value(fit.miss_bytes_per_s, 'B/s')}; sweep {fmt_bytes(footprints[0])}..{fmt_bytes(footprints[-1])}, "
            f"fitted over its {used.size} footprints from L2/8 ({fmt_bytes(used[0])}..{fmt_bytes(used[-1])}); "
            f"driver L2 {fmt_bytes(device['l2_bytes'])}")
    if miss_bytes_per_s == miss_bytes_per_s:  # HBM's read rate measured in the same run
        per = frame.groupby("footprint_bytes")["value"].median().sort_index()
        kept = resident_bytes(per[per.index > device["l2_bytes"]], hit_bytes_per_s, miss_bytes_per_s)
        note += ("; bytes resident by the model at each footprint past the driver's L2, from the L2 plateau "
                 f"({fmt_value(hit_bytes_per_s, 'B/s')}) and bw.dram's read ({fmt_value(miss_bytes_per_s, 'B/s')}): "
                 + ", ".join(f"{fmt_bytes(f)}: {fmt_bytes(c)}" for f, c in kept.items())
                 + " (one C under the model: where they drift, the fitted C is not a capacity)")
    return [derived_row("l2.capacity_bytes", fit.capacity_bytes, *fit.ci,
                        "miss model fitted to the all-SM read sweep "
                        "(gpuatlas.analysis.capacity.fit_capacity): an L2 of C "
                        "bytes re-read cyclically over a footprint F keeps a fraction h = min(1, C/F) resident, "
                        "bandwidth(F) = 1 / (h / B_L2 + (1 - h) / B_HBM), scanned over C (global least "
                        "squares); 95% CI the wider of a bootstrap over repeats and the profile interval",
                        L2_PROBE, note)]


#: The lecture's milder coalescing cases: (quantity, element bytes, stride, alignment, in words).
PATTERNS = (("coalescing.efficiency_stride2_fp32", 4, 2, "aligned", "fp32 loads at element stride 2"),
            ("coalescing.efficiency_misaligned_fp32", 4, 1, "misaligned", "consecutive fp32 loads one element "
                                                                          "off a 128-byte boundary"),
            ("coalescing.efficiency_stride64_fp16", 2, 64, "aligned", "fp16 loads at element stride 64"))


def _pattern_rows(measurements) -> list[dict]:
    """Each pattern's useful HBM bandwidth over the aligned, consecutive fp32 stream's (the pattern the quoted
    bandwidth is for), as the lecture's table counts useful bytes against moved ones."""
    rows = []
    den = _stride_samples(measurements, "dram", 4, 1)
    for quantity, size, stride, aligned, words in PATTERNS:
        num = _stride_samples(measurements, "dram", size, stride, aligned)
        if len(num) and len(den):
            value, lo, hi = ratio_ci(num, den)
            rows.append(derived_row(quantity, value, lo, hi,
                                    f"useful HBM bandwidth of {words} / of aligned consecutive fp32 loads, "
                                    f"ld.global.cg (ratio of medians, bootstrap 95% CI)", STRIDE_PROBE,
                                    f"{len(num)} and {len(den)} samples; bytes moved per useful byte "
                                    f"{1 / value:.2f}"))
    return rows


def _coalescing_rows(measurements) -> list[dict]:
    rows = []
    table = stride_table(measurements)
    if table.empty:
        return rows
    num = _stride_samples(measurements, "dram", 4, 32)
    den = _stride_samples(measurements, "dram", 4, 1)
    if len(num) and len(den):
        value, lo, hi = ratio_ci(num, den)
        l2 = ratio_ci(_stride_samples(measurements, "l2", 4, 32), _stride_samples(measurements, "l2", 4, 1))[0]
        note = (f"bytes moved per useful byte {1 / value:.1f}; byte accounting predicts "
                f"{predicted_efficiency(32, 4, SECTOR_BYTES):.4g} (1/8) with 32-byte sectors, "
                f"{predicted_efficiency(32, 4, 64):.4g} with 64-byte blocks, "
                f"{predicted_efficiency(32, 4, SEGMENT_BYTES):.4g} (1/32, the lecture) with 128-byte segments")
        if math.isfinite(l2):
            note += f"; from L2 (same kernel, L2-resident): {l2:.4g}"
        rows.append(derived_row("coalescing.efficiency_stride32_fp32", value, lo, hi,
                         "useful HBM bandwidth of fp32 loads at element stride 32 / at stride 1, aligned, "
                         "ld.global.cg (ratio of medians, bootstrap 95% CI)", STRIDE_PROBE, note))
    rows += _pattern_rows(measurements)
    dram = table[(table["level"] == "dram") & (table["misaligned_bytes"] == 0)]
    try:
        fit = fit_models(dram)
    except ValueError:
        return rows
    errors = ", ".join(f"{b} B: {err:.3f}" for b, err in fit["errors"].items())
    note = (f"RMS log2 error (octaves) over {fit['n']} aligned configs of 2-, 4- and 16-byte elements: {errors}; "
            f"32-byte sector model {fit['errors'][SECTOR_BYTES]:.3f} vs 128-byte segment model "
            f"{fit['errors'][SEGMENT_BYTES]:.3f}")
    l2 = table[(table["level"] == "l2") & (table["misaligned_bytes"] == 0)]
    try:
        l2_fit = fit_models(l2)
    except ValueError:
        l2_fit = None
    if l2_fit is not None:
        l2_errors = ", ".join(f"{b} B: {err:.3f}" for b, err in l2_fit["errors"].items())
        note += f"; from L2 the winner is {l2_fit['block_bytes']} B ({l2_errors})"
        if l2_fit["errors"][l2_fit["block_bytes"]] <= MAX_SECTOR_FIT_OCTAVES:
            rows.append(structure_row(
                "l2.sector_bytes", l2_fit["block_bytes"], l2_fit["ci"],
                "block size B in {32, 64, 128} whose byte accounting best predicts bandwidth(s)/bandwidth(1) of "
                "the L2-resident stride sweep: the block the L2 moves per access (bootstrap over configs)",
                STRIDE_PROBE, f"RMS log2 error (octaves) over {l2_fit['n']} aligned configs: {l2_errors}"))
        else:
            note += (f"; no l2.sector_bytes: even the best block model misses the L2 sweep by "
                     f"{l2_fit['errors'][l2_fit['block_bytes']]:.2f} octaves RMS (over "
                     f"{MAX_SECTOR_FIT_OCTAVES}), so the L2's bandwidth is not set by its block accounting alone")
    mis = table[(table["stride_elements"] == 1) & (table["element_bytes"] == 4) & (table["misaligned_bytes"] > 0)]
    for level, eff in zip(mis["level"], mis["efficiency"]):
        note += f"; fp32 stride 1 one element off, {level}: {eff:.3f} of aligned"
    # a block model that misses the sweep by more than a sector fit may decides nothing: the two best are
    # then undecided between, whatever the bootstrap picked
    error = fit["errors"][fit["block_bytes"]]
    runners = sorted(fit["errors"], key=fit["errors"].get)[:2]
    decided = error <= MAX_SECTOR_FIT_OCTAVES
    rows.append(structure_row(
        "coalescing.block_bytes", fit["block_bytes"], fit["ci"] if decided else (min(runners), max(runners)),
        "block size B in {32, 64, 128} whose byte accounting (distinct B-byte blocks per warp load x B) best "
        "predicts bandwidth(s)/bandwidth(1) of the HBM stride sweep (bootstrap over configs)", STRIDE_PROBE, note,
        why="" if decided else f"even the best block model misses the HBM sweep by {error:.2f} octaves RMS, over "
                               f"{MAX_SECTOR_FIT_OCTAVES}"))
    return rows


FAMILY = Family(order=50, probe_modules=("bandwidth", "bandwidth.dram"), rows=bandwidth_rows, quantities={
    "l2.capacity_bytes": ("B", "L2 capacity C of a miss model fitted to every SM's read bandwidth (a footprint F "
                               "keeps min(1, C/F) of itself resident)"),
    "l2.sector_bytes": ("B", "L2 sector: the smallest block the L2 moves per access, the best-fitting block of "
                             "the L2-level stride bandwidth sweep's useful/moved ratio"),
    "coalescing.efficiency_stride32_fp32": ("1", "useful/moved bytes for fp32 at element stride 32"),
    "coalescing.efficiency_stride2_fp32": ("1", "useful/moved bytes for fp32 at element stride 2"),
    "coalescing.efficiency_misaligned_fp32": ("1", "useful/moved bytes for consecutive fp32 one element off a "
                                                   "128-byte boundary"),
    "coalescing.efficiency_stride64_fp16": ("1", "useful/moved bytes for fp16 at element stride 64"),
    "smem.bandwidth_bytes_per_clk_sm": ("B/cycle", "shared-memory bandwidth per SM"),
    "l1.bandwidth_bytes_per_clk_sm": ("B/cycle", "L1 bandwidth per SM"),
    "l2.bandwidth_bytes_per_s": ("B/s", "L2 bandwidth"),
    "dram.read_bandwidth_bytes_per_s": ("B/s", "device-memory read bandwidth"),
    "dram.write_bandwidth_bytes_per_s": ("B/s", "device-memory write bandwidth"),
    "dram.read_bandwidth_large_footprint_bytes_per_s": ("B/s", "device-memory read bandwidth re-reading the largest "
                                                               "footprint of the footprint sweep (several GiB)"),
    "dram.copy_bandwidth_bytes_per_s": ("B/s", "device-memory copy bandwidth, bytes read plus written"),
    "coalescing.block_bytes": ("B", "bytes moved per block touched, the block size whose byte accounting best "
                                    "predicts the HBM stride sweep"),
    "dram.read_bytes_per_clk_sm": ("B/cycle", "one SM's fair share of HBM read bandwidth: bandwidth / (SMs x "
                                              "measured SM clock)"),
})
