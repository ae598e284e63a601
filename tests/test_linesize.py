"""The line/sector hinge fit and the staircase-based derivation, on synthetic data with known answers."""
import numpy as np
import pandas as pd
import pytest

from analysis.latency import hierarchy_rows
from analysis.linesize import fit_line_size


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
    assert derived["dram.latency_cycles"] == pytest.approx(620, rel=0.02)
    assert derived["dram.latency_ns"] == pytest.approx(620 / 2e9, rel=0.02)


def test_a_flat_page_stride_chase_reports_only_a_lower_bound_on_reach():
    rows = [dict(probe="chase.tlb", metric="latency", value=280 + (i % 3), footprint_bytes=f, flavour="cg",
                 stride_bytes=2 << 20, flag="") for i, f in enumerate(2 ** np.arange(22, 34, 0.25))]
    derived = {r["quantity"]: r["value"] for r in hierarchy_rows(pd.DataFrame(rows), {})}
    assert derived == {"tlb.reach_lower_bound_bytes": 2 ** 33.75}


def test_a_ramp_cut_into_several_steps_names_no_far_reach():
    """Past one partition an H200's chase ramps to HBM; a fit that cuts the ramp into two middle steps has no
    one far plateau, so no knee is reported as the far partition's reach (its place moved 65% run to run)."""
    device = {"smem_per_sm_bytes": 228 << 10, "l2_bytes": 60 << 20}
    rows = synthetic_chase(device, [270, 450, 530, 620], [30 << 20, 48 << 20, 80 << 20], "cg")
    derived = pd.DataFrame(hierarchy_rows(pd.DataFrame(rows), device)).set_index("quantity")["value"]
    assert derived["l2.latency_cycles"] == pytest.approx(270, rel=0.02)
    assert derived["dram.latency_cycles"] == pytest.approx(620, rel=0.02)
    assert "l2.far_reach_bytes" not in derived and "l2.far_plateau_cycles" not in derived
