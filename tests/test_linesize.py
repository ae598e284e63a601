"""The line/sector hinge fit and the staircase-based derivation, on synthetic data with known answers."""
import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.latency import hierarchy_rows
from gpuatlas.analysis.linesize import fit_line_by_capacity, fit_line_size
from gpuatlas.analysis.translation import tlb_rows


@pytest.mark.parametrize("block", [32, 64, 128])
def test_hinge_fit_recovers_the_block_size(block):
    rng = np.random.default_rng(block)
    strides = np.repeat([8, 16, 32, 48, 64, 96, 128, 192, 256, 512], 7)
    latency = 40 + (280 - 40) * np.minimum(strides / block, 1) + rng.normal(0, 2, strides.size)
    fit = fit_line_size(strides, latency)
    assert fit["block_bytes"] == block
    assert fit["hit"] == pytest.approx(40, abs=3) and fit["miss"] == pytest.approx(280, abs=3)
    assert fit["r2"] > 0.99 and fit["ci"][0] <= block <= fit["ci"][1]


def test_hinge_fit_needs_strides_to_work_with():
    with pytest.raises(ValueError):
        fit_line_size([128, 128], [1.0, 2.0])


def synthetic_chase(device, levels, knees, flavour, per_octave=8):
    """A through-L1 or L2-only staircase: latency levels[i] below knees[i] (bytes)."""
    rng = np.random.default_rng(len(levels))
    rows = []
    for f in np.unique(np.round(2 ** np.arange(10, 28.01, 1 / per_octave) / 128) * 128):
        level = levels[np.searchsorted(knees, f)]
        for r in range(5):
            v = level * (1 + 0.003 * rng.standard_normal())
            rows += [dict(probe="chase.latency", metric="latency", value=v, footprint_bytes=f, flavour=flavour,
                          stride_bytes=128, flag=""),
                     dict(probe="chase.latency", metric="latency_time", value=v / 2e9, footprint_bytes=f,
                          flavour=flavour, stride_bytes=128, flag="")]
    return rows


def test_dense_sweeps_are_fitted_level_by_level():
    device = {"smem_per_sm_bytes": 228 << 10, "l2_bytes": 60 << 20}
    rows = synthetic_chase(device, [33, 280, 700], [230 << 10, 64 << 20], "default")
    rows += synthetic_chase(device, [270, 480, 620], [30 << 20, 58 << 20], "cg")
    derived = pd.DataFrame(hierarchy_rows(pd.DataFrame(rows), device)).set_index("quantity")["value"]
    assert derived["l1.latency_cycles"] == pytest.approx(33, rel=0.02)
    assert derived["l1.capacity_bytes"] == pytest.approx(230 << 10, rel=2 ** (1 / 8) - 1)
    assert derived["l2.latency_cycles"] == pytest.approx(270, rel=0.02)
    assert derived["l2.partition_bytes"] == pytest.approx(30 << 20, rel=2 ** (1 / 8) - 1)
    assert "l2.far_latency_cycles" not in derived  # a mixed average: the far latency is chase.access's
    assert derived["l2.far_plateau_cycles"] == pytest.approx(480, rel=0.02)
    assert derived["l2.far_reach_bytes"] == pytest.approx(58 << 20, rel=2 ** (1 / 8) - 1)
    assert "l2.capacity_bytes" not in derived  # the L2's capacity is fitted to the all-SM bandwidth sweep, not a chase's
    # the staircase's last plateau is a warm chain, partly L2-resident: the HBM latency is chase.miss's cold path
    assert "dram.latency_cycles" not in derived and "dram.latency_ns" not in derived


def test_a_flat_page_stride_chase_reports_only_a_lower_bound_on_reach():
    rows = [dict(probe="chase.tlb", metric="latency", value=280 + (i % 3), footprint_bytes=f, flavour="cg",
                 stride_bytes=2 << 20, flag="") for i, f in enumerate(2 ** np.arange(22, 34, 0.25))]
    assert {r["quantity"]: r["value"] for r in hierarchy_rows(pd.DataFrame(rows), {})} == {}, "the TLB's own family"
    derived = {r["quantity"]: r["value"] for r in tlb_rows(pd.DataFrame(rows))}
    assert derived == {"tlb.reach_lower_bound_bytes": 2 ** 33.75}


def test_a_ramp_cut_into_several_steps_names_no_far_reach():
    """Past one partition an H200's chase ramps to HBM; a fit that cuts the ramp into two middle steps has no
    one far plateau, so no knee is reported as the far partition's reach (its place moved 65% run to run)."""
    device = {"smem_per_sm_bytes": 228 << 10, "l2_bytes": 60 << 20}
    rows = synthetic_chase(device, [270, 450, 530, 620], [30 << 20, 48 << 20, 80 << 20], "cg")
    derived = pd.DataFrame(hierarchy_rows(pd.DataFrame(rows), device)).set_index("quantity")["value"]
    assert derived["l2.latency_cycles"] == pytest.approx(270, rel=0.02)
    assert "dram.latency_cycles" not in derived  # the staircase names no HBM latency (chase.miss does)
    assert "l2.far_reach_bytes" not in derived and "l2.far_plateau_cycles" not in derived


# -- the line (tag) size by capacity counted in distinct lines -------------------------------------------------

SMEM = 228 << 10


def capacity_chase(capacity, line, strides, flavour="default", noise=0.003, seed=0, levels=(33.0, 280.0)):
    """Random chases at each stride over 1/8..4x shared memory, 8 jittered footprints per octave: the cache holds
    capacity / line lines and each element of an s-byte stride takes its own line once s >= line, so latency
    steps from levels[0] to levels[1] at the footprint capacity * max(1, s / line)."""
    rng = np.random.default_rng(seed)
    rows = []
    for stride in strides:
        knee = capacity * max(1.0, stride / line)
        exponents = np.arange(np.log2(SMEM / 8), np.log2(4 * SMEM), 1 / 8)
        exponents = exponents + rng.uniform(0, 1 / 16, exponents.size)
        for f in np.unique(np.round(2 ** exponents / stride) * stride):
            for r in range(5):
                value = levels[int(f > knee)] * (1 + noise * rng.standard_normal())
                rows.append(dict(probe="chase.latency", metric="latency", value=value, footprint_bytes=f,
                                 flavour=flavour, stride_bytes=stride, flag=""))
    return pd.DataFrame(rows)


def line_rows(frame, device=None):
    rows = hierarchy_rows(frame, device or {"smem_per_sm_bytes": SMEM, "l2_bytes": 60 << 20})
    return {r["quantity"]: r for r in rows if "line" in r["quantity"]}


@pytest.mark.parametrize("line", [128, 64])
def test_the_line_is_the_largest_stride_that_leaves_the_capacity_knee_in_place(line):
    got = line_rows(capacity_chase(64 << 10, line, [32, 64, 128, 256]))
    assert got["l1.line_bytes"]["value"] == line
    assert got["l1.line_bytes"]["ci_low"] <= line <= got["l1.line_bytes"]["ci_high"]
    assert "l1.line_lower_bound_bytes" not in got
    assert "stride 256 B" in got["l1.line_bytes"]["note"]  # the knees are in the note


def test_a_knee_that_moves_from_the_smallest_stride_names_no_line():
    """A line no larger than the smallest stride cannot be told from a smaller one: no line size, and the
    knees go into the capacity row's note (negative control to the test above: the same cache at line 64 B
    is named when the sweep has a stride below it)."""
    frame = capacity_chase(64 << 10, 32, [32, 64, 128, 256])
    got = line_rows(frame)
    assert "l1.line_bytes" not in got and "l1.line_lower_bound_bytes" not in got
    rows = {r["quantity"]: r for r in hierarchy_rows(frame, {"smem_per_sm_bytes": SMEM, "l2_bytes": 60 << 20})}
    assert "counts blocks no larger than the smallest stride" in rows["l1.capacity_bytes"]["note"]
    assert line_rows(capacity_chase(64 << 10, 64, [32, 64, 128, 256]))["l1.line_bytes"]["value"] == 64


def test_the_line_survives_noisy_samples():
    got = line_rows(capacity_chase(96 << 10, 128, [32, 64, 128, 256], noise=0.03, seed=3))
    assert got["l1.line_bytes"]["value"] == 128


def test_a_knee_that_does_not_move_with_the_stride_gives_only_a_lower_bound():
    """Negative control: a cache whose capacity knee is the same at every stride (a line of 256 B or more, or
    no line at all) must not get a line size, only 'at least the largest stride'."""
    got = line_rows(capacity_chase(64 << 10, 1 << 20, [32, 64, 128, 256]))
    assert "l1.line_bytes" not in got
    assert got["l1.line_lower_bound_bytes"]["value"] == 256


def test_the_l2_line_is_counted_from_the_l2_only_chase_and_knees_off_the_model_give_nothing():
    device = {"smem_per_sm_bytes": SMEM, "l2_bytes": 60 << 20}
    got = line_rows(capacity_chase(48 << 10, 128, [64, 128, 256, 512], flavour="cg", levels=(270.0, 600.0)), device)
    assert got["l2.line_bytes"]["value"] == 128
    # knees that grow by 3x where the line count allows only 1x or 2x are not a line count: no row
    rows = [capacity_chase(48 << 10, 1 << 20, [s], flavour="cg", levels=(270.0, 600.0)) for s in (128,)]
    rows.append(capacity_chase(3 * (48 << 10), 1 << 20, [256], flavour="cg", levels=(270.0, 600.0)))
    assert not line_rows(pd.concat(rows, ignore_index=True), device)


def test_fit_line_by_capacity_reads_knees_and_refuses_too_few():
    knees = {32: (100e3, 99e3, 101e3), 64: (101e3, 100e3, 102e3), 128: (203e3, 200e3, 205e3)}
    fit = fit_line_by_capacity(knees)
    assert fit["line_bytes"] == 64 and not fit["lower_bound"] and not fit["upper_bound"]
    assert fit["ratios"][128] == pytest.approx(2.03) and fit["model_octaves"] < 0.05
    smallest = fit_line_by_capacity({32: (100e3, 99e3, 101e3), 64: (200e3, 198e3, 202e3)})
    assert smallest["line_bytes"] == 32 and smallest["upper_bound"]
    with pytest.raises(ValueError):
        fit_line_by_capacity({128: (1e5, 1e5, 1e5)})


def test_the_fill_blocks_get_their_own_names_and_the_l1_fill_gives_the_sector():
    rows = []
    for flavour, block, hit, miss in (("default", 32, 33.0, 280.0), ("cg", 64, 280.0, 650.0)):
        for s in [8, 16, 32, 48, 64, 96, 128, 192, 256, 512]:
            rows += [dict(probe="chase.line", metric="latency", value=hit + (miss - hit) * min(s / block, 1),
                          footprint_bytes=1 << 20, flavour=flavour, stride_bytes=s, flag="")] * 3
    got = {r["quantity"]: r for r in hierarchy_rows(pd.DataFrame(rows), {})}
    assert got["l1.fill_bytes"]["value"] == 32 and got["l2.dram_fetch_bytes"]["value"] == 64
    assert got["l1.sector_bytes"]["value"] == 32 and "sector" in got["l1.sector_bytes"]["method"]
    assert "l1.line_bytes" not in got and "mem.sector_bytes" not in got  # a fill block is never a line
