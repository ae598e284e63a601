"""Derived rows of the lecture's own configurations (probes/lecture.py): §7.8's naive matmul and its BLOCK 256 /
BLOCK_K 64 tile and its wave quantization, §7.11's decode GEMM, §7.10's chain of 490 launches."""
from __future__ import annotations

import collections
import math

import numpy as np

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row, structure_row
from gpuatlas.analysis.stats import median_ci, select

TILE_PROBE, NAIVE_PROBE, DECODE_PROBE, CHAIN_PROBE = ("matmul.lecture_tile", "matmul.naive", "matmul.decode",
                                                      "launch.decode_chain")


def lecture_rows(measurements, rows=(), device: dict | None = None) -> list[dict]:
    """The lecture tile's FLOP/s and, with the run's BF16 burst peak among ``rows``, its fraction of it."""
    out = _naive_rows(measurements) + _decode_rows(measurements, rows) + _chain_rows(measurements)
    out += wave_rows(measurements, device)
    frame = select(measurements, TILE_PROBE, "flop_rate")
    if frame.empty:
        return out
    side = int(frame["matrix_side"].max())
    med, lo, hi = median_ci(frame[frame["matrix_side"] == side]["value"])
    out += [derived_row("matmul.lecture_tile_bf16_flops", med, lo, hi,
                       f"Triton matmul in BLOCK 256 x 256 tiles, BLOCK_K 64, 2 stages, {side}^3 bf16, 2·n^3 FLOP per "
                       "CUDA-event-timed launch (median, bootstrap 95% CI)", TILE_PROBE)]
    peak = next((r for r in rows if r["quantity"] == "tc.bf16.peak_flops"), None)
    if peak is not None:
        out.append(derived_row("roofline.lecture_tile_fraction_of_peak", med / peak["value"],
                               lo / peak["ci_high"], hi / peak["ci_low"],
                               "the lecture tile's FLOP/s over the run's tc.bf16.peak_flops (CI: measured CI over the "
                               "peak's CI)", TILE_PROBE))
    return out


def _naive_rows(measurements) -> list[dict]:
    frame = select(measurements, NAIVE_PROBE, "seconds")
    if frame.empty:
        return []
    side = int(frame["matrix_side"].max())
    med, lo, hi = median_ci(frame[frame["matrix_side"] == side]["value"])
    return [derived_row("matmul.naive_seconds", med, lo, hi,
                        f"one thread per element of C, no tiling, {side}^3 bf16 with fp32 accumulation, CUDA-event "
                        "time per launch (median, bootstrap 95% CI)", NAIVE_PROBE)]


def _decode_rows(measurements, rows) -> list[dict]:
    """The decode GEMM's bytes/s at M = 1, and its FLOP/s at M = 16 per byte/s of the run's HBM read bandwidth
    (the intensity it attains against HBM: about M while it streams the weights at full bandwidth)."""
    out = []
    one = select(measurements, DECODE_PROBE, "bandwidth", batch=1)["value"]
    if len(one):
        out.append(derived_row("decode.m1_bandwidth_bytes_per_s", *median_ci(one),
                               "bytes a batch-1 decode GEMM must move (A, the weights past the L2, C) over its "
                               "CUDA-event time, cuBLAS (median, bootstrap 95% CI)", DECODE_PROBE))
    sixteen = select(measurements, DECODE_PROBE, "flop_rate", batch=16)["value"]
    hbm = next((r for r in rows if r["quantity"] == "dram.read_bandwidth_bytes_per_s"), None)
    if len(sixteen) and hbm is not None:
        med, lo, hi = median_ci(sixteen)
        out.append(derived_row("decode.m16_flop_per_hbm_byte", med / hbm["value"], lo / hbm["ci_high"],
                               hi / hbm["ci_low"], "FLOP/s of the M = 16 decode GEMM over the run's HBM read "
                               "bandwidth (CI: its CI over the bandwidth's)", DECODE_PROBE))
    return out


def _chain_rows(measurements) -> list[dict]:
    out = []
    for mode, quantity in (("plain", "launch.chain_490_s"), ("graph", "launch.chain_490_graph_s")):
        values = select(measurements, CHAIN_PROBE, "chain_seconds", mode=mode)["value"]
        if len(values):
            out.append(derived_row(quantity, *median_ci(values),
                                   f"CUDA events around 490 small kernels ({mode}: "
                                   + ("launched back to back" if mode == "plain" else "one CUDA graph replayed")
                                   + "), median, bootstrap 95% CI", CHAIN_PROBE))
    return out


#: Programs resident per SM tried by the wave model (a wave is that many programs on every SM).
RESIDENT = (1, 2, 3, 4)
#: Resamples of the program counts that decide the wave size.
WAVE_RESAMPLES = 400


def wave_model_errors(tiles, seconds, sm_count: int) -> dict[int, float]:
    """For each wave size W = r x SMs: the RMS relative error of the best fit time = a x ceil(T / W) + c (least
    squares over the measured (T, seconds))."""
    tiles, seconds = np.asarray(tiles, float), np.asarray(seconds, float)
    errors = {}
    for r in RESIDENT:
        waves = np.ceil(tiles / (r * sm_count))
        design = np.column_stack([waves, np.ones_like(waves)])
        coef, *_ = np.linalg.lstsq(design, seconds, rcond=None)
        errors[r * sm_count] = float(np.sqrt(np.mean(((design @ coef) - seconds) ** 2)) / np.mean(seconds))
    return errors


def wave_rows(measurements, device: dict | None) -> list[dict]:
    """``waves.programs_per_wave``: the wave size whose step model best explains time against program count,
    decided only where it wins in 95% of resamples of the program counts (a pairs bootstrap: a size that wins on
    a few counts, or by a model that fits neither size well, does not); where another size wins the rest,
    undecided between them."""
    frame = select(measurements, "matmul.waves", "seconds")
    if frame.empty or not device or frame["tiles"].nunique() < 4:
        return []
    sms = int(device["sm_count"])
    medians = frame.groupby("tiles")["value"].median()
    tiles, seconds = medians.index.to_numpy(float), medians.to_numpy(float)
    errors = wave_model_errors(tiles, seconds, sms)
    best = min(errors, key=errors.get)
    if not math.isfinite(errors[best]):
        return []
    rng = np.random.default_rng(0)
    wins = collections.Counter()
    for _ in range(WAVE_RESAMPLES):
        drawn = rng.integers(0, tiles.size, tiles.size)
        if np.unique(drawn).size >= 4:
            resampled = wave_model_errors(tiles[drawn], seconds[drawn], sms)
            wins[min(resampled, key=resampled.get)] += 1
    kept, share = [], 0
    for size, count in wins.most_common():  # the sizes that win 95% of the resamples, most often first
        kept.append(size)
        share += count
        if share >= 0.95 * sum(wins.values()):
            break
    shown = ", ".join(f"{w}: {e:.3f}" for w, e in errors.items())
    won = ", ".join(f"{w}: {wins[w]}" for w in sorted(wins))
    return [structure_row("waves.programs_per_wave", best, (min(kept), max(kept)),
                          "wave size W (programs per SM x SMs) whose step model a x ceil(T/W) + c best fits the "
                          "median time of BLOCK 128 matmuls of T programs; bootstrap over the program counts",
                          "matmul.waves", f"RMS relative error per W: {shown}; wins in {sum(wins.values())} "
                          f"resamples: {won}")]


FAMILY = Family(order=180, probe_modules=("lecture",),
                rows=lambda m, device, rows: lecture_rows(m, rows, device), reads_rows=True, quantities={
    "matmul.lecture_tile_bf16_flops": ("FLOP/s", "Triton BF16 matmul in the lecture's BLOCK 256 x 256 tiles with "
                                                 "BLOCK_K 64, 4096^3"),
    "roofline.lecture_tile_fraction_of_peak": ("1", "the lecture-tile matmul over the BF16 burst peak"),
    "decode.m1_bandwidth_bytes_per_s": ("B/s", "bytes a batch-1 decode GEMM (1 x 4096 by 4096 x N bf16, weights "
                                               "past the L2) moves per second"),
    "decode.m16_flop_per_hbm_byte": ("1", "FLOP/s of the batch-16 decode GEMM over the HBM read bandwidth: the "
                                          "intensity it attains against HBM"),
    "launch.chain_490_s": ("s", "GPU time of 490 small kernels launched back to back (a decode step's dispatch)"),
    "launch.chain_490_graph_s": ("s", "GPU time of the same 490 kernels replayed as one CUDA graph"),
    "waves.programs_per_wave": ("1", "programs of a BLOCK 128 matmul that run at once (a wave): the step size of "
                                     "its time against the program count"),
    "matmul.naive_seconds": ("s", "time of the lecture's naive matmul (one thread per output, no tiling), 4096^3 "
                                  "bf16"),
})
