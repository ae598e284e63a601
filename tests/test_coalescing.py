"""analysis/coalescing.py: byte accounting against hand-computed answers, the block-model fit on synthetic
curves, and the derived rows of the bw.* probes from a synthetic measurements frame."""
import json
import re

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.capacity import bandwidth_model
from gpuatlas.analysis.coalescing import (CANDIDATE_BLOCKS, bandwidth_rows, fit_models, moved_bytes,
                                          predicted_efficiency, relative_efficiency, stride_table, touched_blocks,
                                          useful_bytes)
from gpuatlas.analysis.hbm_bandwidth import footprint_table, l2_share_bound, write_variants
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.stats import ratio_ci
from tests.conftest import COMMITTED_RUN

DEVICE = json.loads((COMMITTED_RUN / "run.json").read_text())["device"]


# -- byte accounting, by hand ------------------------------------------------------------------------------

def test_fp32_stride1_is_four_sectors_or_one_segment():
    # 32 lanes x 4 B = 128 contiguous bytes from an aligned base
    assert touched_blocks(1, 4, 32) == 4 and moved_bytes(1, 4, 32) == 128
    assert touched_blocks(1, 4, 128) == 1 and moved_bytes(1, 4, 128) == 128
    assert useful_bytes(1, 4) == 128
    assert predicted_efficiency(1, 4, 32) == predicted_efficiency(1, 4, 128) == 1.0


def test_fp32_stride32_is_one_eighth_with_sectors_and_the_lectures_one_32nd_with_segments():
    # lanes 128 B apart: every lane in its own sector and its own segment
    assert touched_blocks(32, 4, 32) == 32
    assert moved_bytes(32, 4, 32) == 32 * 32 == 1024
    assert useful_bytes(32, 4) == 128
    assert predicted_efficiency(32, 4, 32) == pytest.approx(1 / 8)
    assert moved_bytes(32, 4, 128) == 4096
    assert predicted_efficiency(32, 4, 128) == pytest.approx(1 / 32)
    assert moved_bytes(32, 4, 64) == 2048


def test_fp16_strides():
    # stride 2: 32 lanes x 4 B apart = 128-byte span, 2 useful bytes in every 4
    assert moved_bytes(2, 2, 32) == 128 and touched_blocks(2, 2, 32) == 4
    assert moved_bytes(2, 2, 128) == 128
    assert useful_bytes(2, 2) == 64 and predicted_efficiency(2, 2, 32) == pytest.approx(1 / 2)
    # stride 1: 64 bytes, two sectors, but a whole 128-byte segment
    assert moved_bytes(1, 2, 32) == 64 and moved_bytes(1, 2, 128) == 128
    # the lecture's stride-64 fp16 row: 32 segments x 128 B for 64 B (1/64); sectors: 1024 B (1/16)
    assert moved_bytes(64, 2, 128) == 4096 and predicted_efficiency(64, 2, 128) == pytest.approx(1 / 64)
    assert moved_bytes(64, 2, 32) == 1024 and predicted_efficiency(64, 2, 32) == pytest.approx(1 / 16)
    # stride 16 = 32 B apart: one element per sector
    assert moved_bytes(16, 2, 32) == 1024 and moved_bytes(16, 2, 128) == 1024


def test_16_byte_elements():
    assert moved_bytes(1, 16, 32) == 512 and touched_blocks(1, 16, 32) == 16
    assert moved_bytes(1, 16, 128) == 512 and touched_blocks(1, 16, 128) == 4
    assert moved_bytes(2, 16, 32) == 1024 and moved_bytes(2, 16, 128) == 1024  # half of every block
    assert moved_bytes(8, 16, 32) == 1024 and moved_bytes(8, 16, 128) == 4096  # 128 B apart
    assert useful_bytes(8, 16) == 512
    assert predicted_efficiency(8, 16, 32) == pytest.approx(1 / 2)
    assert predicted_efficiency(8, 16, 128) == pytest.approx(1 / 8)


def test_a_misaligned_start_adds_a_block():
    assert touched_blocks(1, 4, 32, misaligned_bytes=4) == 5 and moved_bytes(1, 4, 32, 4) == 160
    assert touched_blocks(1, 4, 128, misaligned_bytes=4) == 2 and moved_bytes(1, 4, 128, 4) == 256
    assert touched_blocks(1, 16, 32, misaligned_bytes=16) == 17
    assert touched_blocks(1, 16, 128, misaligned_bytes=16) == 5
    assert touched_blocks(1, 2, 32, misaligned_bytes=2) == 3  # bytes 2..65
    assert touched_blocks(2, 2, 32, misaligned_bytes=2) == 4  # bytes 2..127: the shift fills the gap
    # every lane already has a block of its own: shifting the start changes nothing
    assert moved_bytes(32, 4, 32, misaligned_bytes=4) == moved_bytes(32, 4, 32) == 1024
    # an element straddling a block boundary touches both blocks
    assert touched_blocks(1, 16, 32, misaligned_bytes=24) == 17
    assert touched_blocks(0, 16, 32, misaligned_bytes=24) == 2 and useful_bytes(0, 16) == 16


@pytest.mark.parametrize("block", CANDIDATE_BLOCKS)
@pytest.mark.parametrize("element", [2, 4, 16])
def test_byte_accounting_matches_counting_every_byte(block, element):
    """Against a brute-force count: mark every byte each lane reads, count the blocks that hold one."""
    for stride in [*range(1, 40), 64, 128, 256]:
        for offset in (0, element):
            touched = set()
            for lane in range(32):
                start = offset + lane * stride * element
                touched |= {b // block for b in range(start, start + element)}
            assert moved_bytes(stride, element, block, offset) == len(touched) * block, (stride, offset)


def test_relative_efficiency_is_normalised_to_the_aligned_stride_1_read():
    assert relative_efficiency(1, 2, 128) == 1.0
    assert relative_efficiency(64, 2, 128) == pytest.approx((1 / 64) / (1 / 2))
    assert relative_efficiency(1, 4, 32, misaligned_bytes=4) == pytest.approx(128 / 160)


# -- the model fit ------------------------------------------------------------------------------------------

def synthetic_curve(block: int, noise: float = 0.03, seed: int = 1, strides=(*range(1, 65), 128, 256)):
    """Measured efficiencies a memory system moving ``block``-byte blocks would give, with noise."""
    rng = np.random.default_rng(seed)
    rows = [{"stride_elements": s, "element_bytes": e, "misaligned_bytes": 0,
             "efficiency": relative_efficiency(s, e, block) * float(np.exp(noise * rng.standard_normal()))}
            for e in (2, 4, 16) for s in strides]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("block", CANDIDATE_BLOCKS)
def test_fit_recovers_the_block_size_of_a_synthetic_curve(block):
    fit = fit_models(synthetic_curve(block))
    assert fit["block_bytes"] == block
    assert fit["ci"] == (block, block)
    assert fit["errors"][block] < 0.1 < min(e for b, e in fit["errors"].items() if b != block)
    assert set(fit["errors"]) == set(CANDIDATE_BLOCKS)


def test_fit_recovers_the_block_from_the_quick_strides_too():
    fit = fit_models(synthetic_curve(32, strides=(1, 2, 4, 8, 16, 32, 64)))
    assert fit["block_bytes"] == 32 and fit["errors"][128] > 1  # more than an octave off on average


def test_fit_refuses_a_curve_that_cannot_tell_blocks_apart():
    with pytest.raises(ValueError):
        fit_models(synthetic_curve(32, strides=(1,)))


def test_ratio_ci_brackets_the_ratio_of_medians():
    value, lo, hi = ratio_ci([1.0, 1.1, 0.9, 1.0, 1.05], [8.0, 8.1, 7.9, 8.0, 8.05])
    assert value == pytest.approx(1 / 8)
    assert lo <= value <= hi and hi - lo < 0.03


# -- derived rows from a synthetic run ----------------------------------------------------------------------

CLOCK = 1.98e9
PEAK = 3.3e12  # the synthetic GPU's useful HBM rate at stride 1 (bytes moved at this rate)
L2_RATE = 10e12


def _samples(probe, metric, unit, values, flag="", **params):
    return [{"probe": probe, "metric": metric, "unit": unit, "value": v, "repeat": i, "sm_clock_hz": CLOCK,
             "timer": "cuda_event", "flag": flag, **params} for i, v in enumerate(values)]


def _noisy(value, n=5, seed=0):
    return list(value * (1 + 0.002 * np.random.default_rng(seed).standard_normal(n)))


def synthetic_measurements(block: int = 32, strides=(1, 2, 4, 8, 16, 32, 64), l2_flat: bool = False) -> pd.DataFrame:
    """Every bandwidth probe's samples; the stride sweep moves ``block``-byte blocks at each level's rate (with
    ``l2_flat``, L2-resident loads run at one rate whatever their stride: no block accounting explains them)."""
    rows = []
    sms = DEVICE["sm_count"]
    for level, per_clk in (("smem", 127.5), ("l1", 125.0)):
        for i, v in enumerate(_noisy(per_clk, seed=len(level))):
            rows += _samples("bw.onchip", "bytes_per_clk_sm", "B/cycle", [v], level=level)
            rows += _samples("bw.onchip", "bandwidth", "B/s", [v * sms * CLOCK], level=level)
    # flagged samples outnumber the good ones: a fit that used them would move
    rows += _samples("bw.onchip", "bytes_per_clk_sm", "B/cycle", [999.0] * 7, flag="invalid", level="smem")
    rows += _samples("bw.onchip", "bytes_per_clk_sm", "B/cycle", [60.0] * 7, flag="throttled", level="l1")
    # a small footprint runs faster and needed more repeats: it must count once, like every footprint
    rows += _samples("bw.l2", "bandwidth", "B/s", _noisy(1.35 * L2_RATE, n=21), footprint_bytes=1 << 20)
    for footprint in (2 << 20, 8 << 20, 16 << 20, 24 << 20):
        rows += _samples("bw.l2", "bandwidth", "B/s", _noisy(L2_RATE, seed=footprint), footprint_bytes=footprint)
    # beyond half the L2: left out of the plateau; the sweep stops at the L2 and sags there as the committed
    # H200 runs' do (8.3 of ~9.7 TB/s at 60 MiB), too little for a capacity
    for footprint in (40 << 20, 50 << 20, DEVICE["l2_bytes"]):
        rows += _samples("bw.l2", "bandwidth", "B/s", _noisy(0.85 * L2_RATE, seed=footprint),
                         footprint_bytes=footprint)
    for op, rate in (("read", 4.6e12), ("write", 4.4e12), ("copy", 4.3e12)):
        rows += _samples("bw.dram", "bandwidth", "B/s", _noisy(rate, seed=len(op)), op=op)
    rows += _samples("bw.dram", "bandwidth", "B/s", [9e12] * 7, flag="invalid", op="read")
    for level, rate in (("dram", PEAK), ("l2", L2_RATE)):
        for e in (2, 4, 16):
            for s in strides:
                for aligned, offset in (("aligned", 0), ("misaligned", e)):
                    # moved bytes go at the level's rate, useful = moved x efficiency; fp16 at stride 1
                    # already wastes half a 128-byte segment, so scale by the stride-1 efficiency too
                    eff = predicted_efficiency(s, e, block, offset) / predicted_efficiency(1, 4, block)
                    if l2_flat and level == "l2":
                        eff = predicted_efficiency(1, e, block) / predicted_efficiency(1, 4, block)
                    rows += _samples("bw.stride", "bandwidth", "B/s", _noisy(rate * eff, seed=s * e),
                                     element_bytes=e, stride_elements=s, aligned=aligned, level=level)
    for e in (2, 4, 16):  # throttled samples at the coalesced rate: the table and fit must ignore them
        rows += _samples("bw.stride", "bandwidth", "B/s", [PEAK] * 7, flag="throttled", element_bytes=e,
                         stride_elements=32, aligned="aligned", level="dram")
    return pd.DataFrame(rows)


EXPECTED = {"smem.bandwidth_bytes_per_clk_sm", "l1.bandwidth_bytes_per_clk_sm", "l2.bandwidth_bytes_per_s",
            "dram.read_bandwidth_bytes_per_s", "dram.write_bandwidth_bytes_per_s",
            "dram.copy_bandwidth_bytes_per_s", "dram.read_bytes_per_clk_sm",
            "coalescing.efficiency_stride32_fp32", "coalescing.block_bytes", "l2.sector_bytes",
            "coalescing.efficiency_stride2_fp32", "coalescing.efficiency_misaligned_fp32",
            "coalescing.efficiency_stride64_fp16"}


def test_bandwidth_rows_give_every_quantity_with_its_unit():
    rows = bandwidth_rows(synthetic_measurements(), DEVICE)
    by = {r["quantity"]: r for r in rows}
    assert set(by) == EXPECTED and len(rows) == len(EXPECTED)
    units = QUANTITIES
    for r in rows:
        assert r["unit"] == units[r["quantity"]][0]
        assert r["ci_low"] <= r["value"] <= r["ci_high"], r
        assert set(r) == {"quantity", "value", "unit", "ci_low", "ci_high", "method", "probe", "note"}
    assert {by[q]["unit"] for q in ("smem.bandwidth_bytes_per_clk_sm", "l1.bandwidth_bytes_per_clk_sm")} == {"B/cycle"}
    assert by["coalescing.efficiency_stride32_fp32"]["unit"] == "1"
    assert by["coalescing.block_bytes"]["unit"] == "B"


def test_bandwidth_rows_values_leave_flagged_samples_out():
    by = {r["quantity"]: r for r in bandwidth_rows(synthetic_measurements(), DEVICE)}
    assert by["smem.bandwidth_bytes_per_clk_sm"]["value"] == pytest.approx(127.5, rel=0.01)
    assert by["l1.bandwidth_bytes_per_clk_sm"]["value"] == pytest.approx(125.0, rel=0.01)
    assert by["l2.bandwidth_bytes_per_s"]["value"] == pytest.approx(L2_RATE, rel=0.01)  # not the full-L2 point
    assert by["dram.read_bandwidth_bytes_per_s"]["value"] == pytest.approx(4.6e12, rel=0.01)
    assert by["dram.write_bandwidth_bytes_per_s"]["value"] == pytest.approx(4.4e12, rel=0.01)
    assert by["dram.copy_bandwidth_bytes_per_s"]["value"] == pytest.approx(4.3e12, rel=0.01)
    fair = 4.6e12 / DEVICE["sm_count"] / CLOCK
    assert by["dram.read_bytes_per_clk_sm"]["value"] == pytest.approx(fair, rel=0.01)


@pytest.mark.parametrize("block, efficiency", [(32, 1 / 8), (128, 1 / 32)])
def test_coalescing_rows_reconstruct_the_synthetic_memory_system(block, efficiency):
    by = {r["quantity"]: r for r in bandwidth_rows(synthetic_measurements(block), DEVICE)}
    assert by["coalescing.efficiency_stride32_fp32"]["value"] == pytest.approx(efficiency, rel=0.01)
    assert by["coalescing.block_bytes"]["value"] == block
    note = by["coalescing.block_bytes"]["note"]
    assert "32 B:" in note and "128 B:" in note  # both models' errors


@pytest.mark.parametrize("block", [32, 128])
def test_the_lectures_milder_patterns_are_rows_of_their_own(block):
    """Stride 2, a misaligned stream and fp16 at stride 64, each over the stride-1 stream of its element size;
    the 128-byte-segment world gives the lecture's 1/2, 1/2 per warp and 1/64, a 32-byte one does not."""
    by = {r["quantity"]: r["value"] for r in bandwidth_rows(synthetic_measurements(block), DEVICE)}
    assert by["coalescing.efficiency_stride2_fp32"] == pytest.approx(1 / 2, rel=0.02)
    assert by["coalescing.efficiency_misaligned_fp32"] == pytest.approx(128 / (128 + block), rel=0.02)
    assert by["coalescing.efficiency_stride64_fp16"] == pytest.approx(2 / min(block, 128), rel=0.02)
    assert (by["coalescing.efficiency_stride64_fp16"] == pytest.approx(1 / 64, rel=0.02)) == (block == 128)


@pytest.mark.parametrize("block", [32, 64])
def test_the_l2_sector_is_the_block_that_explains_the_l2_resident_sweep(block):
    by = {r["quantity"]: r for r in bandwidth_rows(synthetic_measurements(block), DEVICE)}
    assert by["l2.sector_bytes"]["value"] == block and by["l2.sector_bytes"]["probe"] == "bw.stride"


def test_an_l2_sweep_no_block_model_explains_names_no_sector_and_says_why():
    by = {r["quantity"]: r for r in bandwidth_rows(synthetic_measurements(32, l2_flat=True), DEVICE)}
    assert "l2.sector_bytes" not in by
    assert "no l2.sector_bytes" in by["coalescing.block_bytes"]["note"]
    assert by["coalescing.block_bytes"]["value"] == 32  # the HBM sweep's fit is unaffected


def test_stride_table_efficiency_and_bytes_moved_per_useful_byte():
    table = stride_table(synthetic_measurements(32))
    row = table[(table["level"] == "dram") & (table["element_bytes"] == 4) & (table["stride_elements"] == 32)
                & (table["aligned"] == "aligned")].iloc[0]
    assert row["efficiency"] == pytest.approx(1 / 8, rel=0.01)
    assert row["moved_per_useful"] == pytest.approx(8, rel=0.01)
    assert row["pred_32"] == pytest.approx(1 / 8) and row["pred_128"] == pytest.approx(1 / 32)
    mis = table[(table["level"] == "l2") & (table["element_bytes"] == 4) & (table["stride_elements"] == 1)
                & (table["aligned"] == "misaligned")].iloc[0]
    assert mis["misaligned_bytes"] == 4 and mis["efficiency"] == pytest.approx(0.8, rel=0.01)


def test_no_bandwidth_probe_no_rows():
    frame = pd.DataFrame(_samples("chase.latency", "latency", "cycles", [30.0], footprint_bytes=1024))
    assert bandwidth_rows(frame, DEVICE) == []


@pytest.mark.parametrize("memcpy_rate, chosen", [(4.5e12, "memcpy"), (4.0e12, "copy")])
def test_copy_bandwidth_is_the_faster_of_the_kernels_and_the_driver_copy_and_says_which(memcpy_rate, chosen):
    rows = synthetic_measurements()
    rows = pd.concat([rows, pd.DataFrame(_samples("bw.dram", "bandwidth", "B/s", _noisy(memcpy_rate, seed=3),
                                                  op="memcpy"))], ignore_index=True)
    by = {r["quantity"]: r for r in bandwidth_rows(rows, DEVICE)}
    copy = by["dram.copy_bandwidth_bytes_per_s"]
    assert copy["value"] == pytest.approx(max(memcpy_rate, 4.3e12), rel=0.01)
    assert ("cudaMemcpyAsync" in copy["method"]) == (chosen == "memcpy")
    label, other = ("the copy kernels", 4.3) if chosen == "memcpy" else ("the driver copy", memcpy_rate / 1e12)
    named = re.search(label + r": ([\d.]+) TB/s", copy["note"])
    assert named and float(named.group(1)) == pytest.approx(other, rel=0.01), copy["note"]


# -- the L2 capacity: the miss model fitted to the all-SM read sweep --------------------------------------

MiB = 2**20
L2 = 60 * MiB
L2_DEVICE = {**DEVICE, "l2_bytes": L2}


def l2_sweep_footprints(l2_bytes, top=4):
    """The bw.l2 sweep's shape: 1 MiB..top x L2, 4 points per octave, 8 per octave from L2/2 to 2x L2."""
    coarse = 2 ** np.arange(20, np.log2(top * l2_bytes) + 1e-9, 1 / 4)
    fine = l2_bytes * 2 ** np.arange(-1, np.log2(min(top, 2)) + 1e-9, 1 / 8)
    return np.unique(np.round(np.concatenate([coarse, fine]) / 4096) * 4096)


def l2_sweep(capacity, l2_rate=9e12, ratio=2.0, noise=0.01, repeats=5, seed=0, top=4, fast_small=1.35,
             throttled=(), hbm_step_at=None):
    """bw.l2 samples of a GPU whose L2 keeps min(1, capacity / F) of a footprint F resident and reads
    ``ratio`` times faster than its HBM (the miss model). Footprints below L2/8 run ``fast_small`` times
    faster (as the H200's do: a level in front of the L2 still serves part of them); ``throttled``:
    footprints that also get seven samples flagged "throttled" at half speed; ``hbm_step_at``: an 8% step
    inside HBM (pages), as the A100 curve has."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in l2_sweep_footprints(L2, top):
        rate = bandwidth_model(f, capacity, l2_rate, l2_rate / ratio)
        if f < L2 / 8:
            rate *= fast_small
        if hbm_step_at and f >= hbm_step_at:
            rate /= 1.08
        rows += _samples("bw.l2", "bandwidth", "B/s", rate * (1 + noise * rng.standard_normal(repeats)),
                         footprint_bytes=f)
        if f in throttled:
            rows += _samples("bw.l2", "bandwidth", "B/s", [rate / 2] * 7, flag="throttled", footprint_bytes=f)
    return pd.DataFrame(rows)


def capacity_row(frame, device=L2_DEVICE):
    rows = {r["quantity"]: r for r in bandwidth_rows(frame, device)}
    return rows.get("l2.capacity_bytes")


@pytest.mark.parametrize("capacity, ratio, noise", [(53 * MiB, 2.0, 0.01), (40 * MiB, 3.5, 0.02),
                                                     (58 * MiB, 1.8, 0.01), (53 * MiB, 2.0, 0.05)])
def test_the_capacity_row_recovers_a_known_capacity_and_both_bandwidths(capacity, ratio, noise):
    row = capacity_row(l2_sweep(capacity, ratio=ratio, noise=noise, seed=int(ratio * 10)))
    assert row["value"] == pytest.approx(capacity, rel=0.05)
    assert row["ci_low"] <= row["value"] <= row["ci_high"]
    assert row["ci_high"] - row["ci_low"] < 0.3 * capacity
    assert row["unit"] == "B" and row["probe"] == "bw.l2"
    assert "min(1, C/F)" in row["method"] and "CI" in row["method"]
    fitted = dict(re.findall(r"(L2|HBM\)) bandwidth ([\d.]+) TB/s", row["note"]))
    assert float(fitted["L2"]) == pytest.approx(9, rel=0.03)
    assert float(fitted["HBM)"]) == pytest.approx(9 / ratio, rel=0.05)
    assert "sweep 1 MiB.." in row["note"] and "driver L2 60 MiB" in row["note"]


def test_footprints_below_an_eighth_of_the_l2_are_left_out():
    """The H200 reads 1-4 MiB faster than its L2 plateau; fitted, those footprints would raise the cache
    bandwidth and drag C away."""
    row = capacity_row(l2_sweep(53 * MiB, fast_small=1.35))
    assert row["value"] == pytest.approx(53 * MiB, rel=0.05)
    assert row["value"] == pytest.approx(capacity_row(l2_sweep(53 * MiB, fast_small=1.0))["value"], rel=0.01)
    assert "from L2/8 (8 MiB.." in row["note"], row["note"]  # the first footprint at or above 7.5 MiB


def test_throttled_samples_stay_out_and_a_step_inside_hbm_barely_moves_the_capacity():
    feet = l2_sweep_footprints(L2)
    throttled = tuple(feet[(feet > 40 * MiB) & (feet < 120 * MiB)])  # flagged half-speed samples, 7 a footprint
    clean = capacity_row(l2_sweep(53 * MiB))
    assert capacity_row(l2_sweep(53 * MiB, throttled=throttled)) == clean  # they outnumber the good ones
    stepped = capacity_row(l2_sweep(53 * MiB, hbm_step_at=3 * L2))
    assert stepped["value"] == pytest.approx(53 * MiB, rel=0.05)


def test_no_capacity_from_a_sweep_that_stops_at_the_l2_or_never_falls():
    assert capacity_row(l2_sweep(53 * MiB, top=1)) is None  # the committed runs' bw.l2 sweeps stop at the L2
    assert capacity_row(l2_sweep(53 * MiB, ratio=1.0)) is None  # flat: no level behind the cache
    assert capacity_row(l2_sweep(4 * L2, ratio=2.0)) is None  # the cache holds the whole sweep


def test_bandwidth_rows_give_the_l2_capacity_only_from_a_sweep_past_the_l2():
    rows = {r["quantity"]: r for r in bandwidth_rows(l2_sweep(53 * MiB), L2_DEVICE)}
    assert set(rows) == {"l2.bandwidth_bytes_per_s", "l2.capacity_bytes"}
    short = bandwidth_rows(l2_sweep(53 * MiB, top=1), L2_DEVICE)
    assert [r["quantity"] for r in short] == ["l2.bandwidth_bytes_per_s"]


# -- HBM write variants, the read's L2 bound, and the footprint sweep -------------------------------------

WRITE_RATES = {"grid_stride_16": 4.30e12, "grid_stride_16_cs": 4.35e12, "once_8": 4.40e12, "once_16": 4.50e12,
               "once_16_cs": 4.45e12}


def write_variant_measurements(rates=WRITE_RATES) -> pd.DataFrame:
    rows = []
    for i, (variant, rate) in enumerate(rates.items()):
        rows += _samples("bw.dram", "bandwidth", "B/s", _noisy(rate, seed=i), op="write", variant=variant)
    # a flagged sample above every variant: the headline must not come from it
    rows += _samples("bw.dram", "bandwidth", "B/s", [9e12] * 7, flag="invalid", op="write", variant="once_8")
    return pd.DataFrame(rows)


def test_write_headline_is_the_fastest_variant_named_with_every_variant_and_contrast():
    by = {r["quantity"]: r for r in bandwidth_rows(write_variant_measurements(), DEVICE)}
    row = by["dram.write_bandwidth_bytes_per_s"]
    assert row["value"] == pytest.approx(4.50e12, rel=0.01)
    assert row["note"].startswith("fastest: once_16 ")
    for variant in WRITE_RATES:
        assert variant in row["note"]
    width = re.search(r"16- over 8-byte stores ([+-][\d.]+)%", row["note"])
    assert width and float(width.group(1)) == pytest.approx((4.50 / 4.40 - 1) * 100, abs=0.2), row["note"]
    grid = re.search(r"one store per thread over grid-stride ([+-][\d.]+)%", row["note"])
    assert grid and float(grid.group(1)) == pytest.approx((4.50 / 4.30 - 1) * 100, abs=0.2)
    assert "partial write" in row["method"]


def test_write_headline_follows_the_samples_not_the_variant_order():
    """Negative control: with the grid-stride kernel fastest, the headline and its name move with it."""
    rates = {**WRITE_RATES, "grid_stride_16": 4.6e12}
    row = {r["quantity"]: r for r in bandwidth_rows(write_variant_measurements(rates), DEVICE)}[
        "dram.write_bandwidth_bytes_per_s"]
    assert row["value"] == pytest.approx(4.6e12, rel=0.01) and row["note"].startswith("fastest: grid_stride_16 ")


def test_runs_before_the_variant_axis_read_as_the_grid_stride_kernel():
    frame = pd.DataFrame(_samples("bw.dram", "bandwidth", "B/s", _noisy(4.3e12), op="write"))
    assert list(write_variants(frame)) == ["grid_stride_16"]
    row = {r["quantity"]: r for r in bandwidth_rows(frame, DEVICE)}["dram.write_bandwidth_bytes_per_s"]
    assert row["value"] == pytest.approx(4.3e12, rel=0.01)
    assert row["method"].startswith("16-byte stores") and "fastest" not in row["note"]  # derived as it was


def test_l2_share_bound_is_the_l2_over_the_bytes_a_pass_reads():
    assert l2_share_bound(60 * MiB, 32 * 60 * MiB) == pytest.approx(1 / 32)
    assert l2_share_bound(60 * MiB, 240 * MiB) == pytest.approx(0.25)
    assert l2_share_bound(60 * MiB, 30 * MiB) == 1.0  # a buffer inside the L2 may hit entirely


def test_read_note_states_the_buffer_and_the_l2_bound():
    buffer = 32 * DEVICE["l2_bytes"]
    frame = pd.DataFrame(_samples("bw.dram", "bandwidth", "B/s", _noisy(4.6e12), op="read", variant="fastest")
                         + _samples("bw.dram", "buffer_bytes", "B", [float(buffer)] * 5, op="read",
                                    variant="fastest"))
    row = {r["quantity"]: r for r in bandwidth_rows(frame, DEVICE)}["dram.read_bandwidth_bytes_per_s"]
    assert "serves at most 3.1% of the bytes" in row["note"], row["note"]
    older = pd.DataFrame(_samples("bw.dram", "bandwidth", "B/s", _noisy(4.6e12), op="read"))
    assert "serves at most" not in {r["quantity"]: r for r in bandwidth_rows(older, DEVICE)}[
        "dram.read_bandwidth_bytes_per_s"]["note"]  # a run that did not record its buffer claims no bound


def read_variant_measurements(unroll, warp_bytes, block_bytes, buffer, threads=256, blocks=4,
                              once_rate=4.2e12) -> pd.DataFrame:
    """bw.dram's read: the fastest kernel's samples with its recorded layout, and once_64 (slower unless told)
    over a buffer of 4x the size."""
    config = {"loads_in_flight_per_thread": unroll, "contiguous_bytes_per_warp_trip": warp_bytes,
              "contiguous_bytes_per_block_trip": block_bytes, "threads_per_block": threads,
              "blocks_per_sm": blocks, "buffer_bytes": buffer}
    rows = _samples("bw.dram", "bandwidth", "B/s", _noisy(4.66e12), op="read", variant="fastest")
    for metric, value in config.items():
        rows += _samples("bw.dram", metric, "1", [float(value)] * 5, op="read", variant="fastest")
    rows += _samples("bw.dram", "bandwidth", "B/s", _noisy(once_rate, seed=3), op="read", variant="once_64")
    rows += _samples("bw.dram", "buffer_bytes", "B", [float(4 * buffer)] * 5, op="read", variant="once_64")
    return pd.DataFrame(rows)


def read_note(frame) -> str:
    return {r["quantity"]: r for r in bandwidth_rows(frame, DEVICE)}["dram.read_bandwidth_bytes_per_s"]["note"]


def test_read_note_names_the_fastest_kernels_pattern_from_its_recorded_layout():
    buffer = 32 * DEVICE["l2_bytes"]
    # a block's trip: 256 threads x 8 loads x 16 B = 32 KiB, all contiguous, each warp load 512 B
    note = read_note(read_variant_measurements(8, 512, 32768, buffer, blocks=5))
    assert note.startswith("fastest: block-contiguous chunks (32 KiB contiguous per block trip"), note
    assert "8 16-byte loads per thread in flight, 5 blocks of 256 threads per SM" in note
    # negative controls: the same trip as 8 grid-wide rows of 4 KiB, or as per-warp chunks of 4 KiB
    assert read_note(read_variant_measurements(8, 512, 4096, buffer)).startswith("fastest: grid-wide rows (4 KiB")
    assert read_note(read_variant_measurements(8, 4096, 32768, buffer)).startswith("fastest: per-warp chunks (4 KiB")
    # a run before the block contiguity was recorded keeps the old wording
    older = read_variant_measurements(8, 512, 32768, buffer)
    older = older[older["metric"] != "contiguous_bytes_per_block_trip"]
    assert read_note(older).startswith("fastest: the fastest grid-stride kernel and occupancy")


def test_read_l2_bound_is_the_headline_variants_buffer_over_the_devices_l2():
    """The bound is L2 / buffer of the winning variant's buffer, not of another variant's (4x larger here), nor
    a median over both."""
    l2 = DEVICE["l2_bytes"]
    note = read_note(read_variant_measurements(8, 512, 32768, 32 * l2))
    assert f"serves at most {1 / 32:.1%} of the bytes (L2 / buffer)" in note and "(32.0x the L2)" in note, note
    small = read_note(read_variant_measurements(8, 512, 32768, 8 * l2))
    assert f"serves at most {1 / 8:.1%} of the bytes" in small and "(8.0x the L2)" in small, small
    assert f"serves at most {1 / 80:.1%}" not in note  # the median over both variants' buffers
    once = read_note(read_variant_measurements(8, 512, 32768, 32 * l2, once_rate=4.7e12))
    assert once.startswith("fastest: one trip") and f"serves at most {1 / 128:.1%} of the bytes" in once, once


def footprint_measurements(rates: dict) -> pd.DataFrame:
    rows = []
    for i, (footprint, rate) in enumerate(rates.items()):
        rows += _samples("bw.dram_footprint", "bandwidth", "B/s", _noisy(rate, seed=i), footprint_bytes=footprint)
    rows += _samples("bw.dram", "bandwidth", "B/s", _noisy(4.6e12, seed=9), op="read", variant="fastest")
    return pd.DataFrame(rows)


def test_large_footprint_read_is_the_sweeps_largest_footprint():
    l2 = DEVICE["l2_bytes"]
    rates = {4 * l2: 4.9e12, 16 * l2: 4.65e12, 64 * l2: 4.5e12, 128 * l2: 4.4e12}
    table = footprint_table(footprint_measurements(rates))
    assert list(table["footprint_bytes"]) == sorted(rates)
    row = {r["quantity"]: r for r in bandwidth_rows(footprint_measurements(rates), DEVICE)}[
        "dram.read_bandwidth_large_footprint_bytes_per_s"]
    assert row["value"] == pytest.approx(4.4e12, rel=0.01) and row["unit"] == "B/s"
    assert "L2 share at most 0.8%" in row["note"] and "L2 share at most 25.0%" in row["note"], row["note"]
    change = re.search(r"([+-][\d.]+)% against bw.dram's read", row["note"])
    assert change and float(change.group(1)) == pytest.approx((4.4 / 4.6 - 1) * 100, abs=0.2)
    # negative control: a sweep whose largest footprint is the fastest reports that, not the first point
    rates[256 * l2] = 5.0e12
    row = {r["quantity"]: r for r in bandwidth_rows(footprint_measurements(rates), DEVICE)}[
        "dram.read_bandwidth_large_footprint_bytes_per_s"]
    assert row["value"] == pytest.approx(5.0e12, rel=0.01)
