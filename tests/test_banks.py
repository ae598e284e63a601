"""The bank-conflict model and fit (analysis/banks.py): degrees checked by hand, structures recovered from
synthetic curves with noise."""
import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.banks import CANDIDATES, conflict_degree, degree_of, fit_banks
import importlib

smem_banks = importlib.import_module("gpuatlas.probes.families.smem_banks")
ACCESS_BYTES = smem_banks.ACCESS_BYTES


@pytest.mark.parametrize("stride, access, banks, width, expected", [
    (1, 4, 32, 4, 1), (2, 4, 32, 4, 2), (3, 4, 32, 4, 1), (4, 4, 32, 4, 4), (16, 4, 32, 4, 16),
    (32, 4, 32, 4, 32), (64, 4, 32, 4, 32), (33, 4, 32, 4, 1), (0, 4, 32, 4, 1),
    # 8-byte loads in half-warp phases: 16 lanes x 8 B fill the 32 x 4 B row once
    (1, 8, 32, 4, 1), (2, 8, 32, 4, 2), (16, 8, 32, 4, 16), (32, 8, 32, 4, 16), (0, 8, 32, 4, 1),
    # 16-byte loads in quarter-warp phases of 8 lanes
    (1, 16, 32, 4, 1), (2, 16, 32, 4, 2), (8, 16, 32, 4, 8), (32, 16, 32, 4, 8), (0, 16, 32, 4, 1),
    # other structures: 64 banks halve even strides' conflicts; 16 x 8 B pairs 4-byte lanes in a bank word
    (2, 4, 64, 4, 1), (32, 4, 64, 4, 16), (64, 4, 64, 4, 32), (32, 4, 16, 4, 16),
    (1, 4, 16, 8, 1), (2, 4, 16, 8, 2), (3, 4, 16, 8, 2), (2, 4, 32, 8, 1), (4, 4, 32, 8, 2),
])
def test_conflict_degree_by_hand(stride, access, banks, width, expected):
    assert conflict_degree(stride, access, banks, width) == expected


def test_two_lanes_on_one_bank_at_different_words_conflict_and_on_one_word_broadcast():
    assert degree_of([0, 128] + [4 * i for i in range(2, 32)], 4, 32, 4) == 2
    assert degree_of([0, 0] + [4 * i for i in range(2, 32)], 4, 32, 4) == 1


@pytest.mark.parametrize("banks, width", CANDIDATES)
def test_broadcast_and_unit_stride_are_conflict_free_on_every_structure(banks, width):
    for access in ACCESS_BYTES:
        assert conflict_degree(0, access, banks, width) == 1
        assert conflict_degree(1, access, banks, width) == 1


def test_an_offset_moves_every_lane_alike_and_no_conflict_with_it():
    for access in ACCESS_BYTES:
        for stride in range(65):
            degrees = {conflict_degree(stride, access, 32, 4, offset) for offset in range(6)}
            assert len(degrees) == 1, (access, stride, degrees)


@pytest.mark.parametrize("access", ACCESS_BYTES)
@pytest.mark.parametrize("stride", [32, 64])
def test_padding_and_xor_swizzle_make_a_tile_column_conflict_free(access, stride):
    """The fixes smem.banks_fix measures, on the 32 x 4 B structure: the plain column read conflicts fully."""
    degree = {}
    for layout in ("plain", "pad1", "xor"):
        pitch, mask = smem_banks.layout_params(stride, layout, 0)
        degree[layout] = degree_of(smem_banks.lane_elements(pitch, 0, mask) * access, access, 32, 4)
    assert degree == {"plain": 128 // access, "pad1": 1, "xor": 1}


INTERCEPTS = {4: 30.0, 8: 33.0, 16: 38.0}
SLOPES = {4: 2.0, 8: 4.0, 16: 8.0}  # a pass per way, once per phase


def synthetic(banks, width, access=ACCESS_BYTES, noise=0.4, repeats=5, seed=0, strides=range(65)):
    """Median-level curves of a known structure: cycles = intercept + slope x degree, plus noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for a in access:
        for s in strides:
            truth = INTERCEPTS[a] + SLOPES[a] * conflict_degree(s, a, banks, width)
            for r in range(repeats):
                rows.append({"probe": "smem.banks", "form": "latency", "access_bytes": a, "stride_words": s,
                             "offset_words": 0, "metric": "cycles_per_access",
                             "value": truth + noise * rng.standard_normal(), "flag": "", "repeat": r})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("banks, width", CANDIDATES)
def test_fit_recovers_the_structure_that_made_the_curves(banks, width):
    fit = fit_banks(synthetic(banks, width, seed=banks + width))
    assert (fit["banks"], fit["width_bytes"]) == (banks, width)
    assert fit["r2"] > 0.99
    runner_up = fit["candidates"].iloc[1]["r2"]
    assert fit["r2"] - runner_up > 1e-3, "the truth wins by more than a tie"
    lo, hi = fit["slope_ci"]
    assert fit["access_bytes"] == 4 and lo < SLOPES[4] < hi and hi - lo < 0.2
    assert fit["intercept"] == pytest.approx(INTERCEPTS[4], abs=0.3)
    for a in ACCESS_BYTES:
        assert fit["per_access"][a]["slope"] == pytest.approx(SLOPES[a], rel=0.03)


def test_fit_reports_conflict_free_strides_as_one_way():
    points = fit_banks(synthetic(32, 4))["points"].set_index(["access_bytes", "stride_words"])
    for a in ACCESS_BYTES:
        assert points.loc[(a, 0), "ways"] == pytest.approx(1, abs=0.3)
        assert points.loc[(a, 1), "ways"] == pytest.approx(1, abs=0.3)
    assert points.loc[(4, 32), "ways"] == pytest.approx(32, rel=0.03)


def test_indistinguishable_structures_resolve_to_the_simpler():
    """8-byte loads alone cannot tell 16 x 8 B from 32 x 4 B (same 128-B row): the tie goes to 4-B banks."""
    fit = fit_banks(synthetic(16, 8, access=(8,)))
    r2 = fit["candidates"].set_index(["banks", "width_bytes"])["r2"]
    assert r2[(16, 8)] == pytest.approx(r2[(32, 4)], abs=1e-12)
    assert (fit["banks"], fit["width_bytes"]) == (32, 4)


def test_a_wrong_structure_fits_badly():
    fit = fit_banks(synthetic(32, 4))
    r2 = fit["candidates"].set_index(["banks", "width_bytes"])["r2"]
    assert r2[(64, 4)] < 0.95 and r2[(32, 8)] < 0.95


def test_flagged_samples_other_layouts_and_metrics_are_left_out():
    frame = synthetic(32, 4)
    junk = frame.sample(40, random_state=1).assign(value=1e4)
    polluted = pd.concat([frame, junk.assign(flag="throttled"), junk.assign(metric="other"),
                          junk.assign(layout="pad1")], ignore_index=True)
    polluted["layout"] = polluted["layout"].fillna("plain")
    assert fit_banks(polluted)["r2"] == pytest.approx(fit_banks(frame)["r2"])


def test_one_form_at_a_time():
    frame = synthetic(32, 4)
    with pytest.raises(ValueError, match="form"):
        fit_banks(pd.concat([frame, frame.assign(form="throughput")]))
