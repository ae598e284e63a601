"""§7.8's tiling arithmetic and §7.10's softmax byte count, the probes' sizing, and the derived rows on
synthetic measurements (no GPU)."""
import math

import pandas as pd
import pytest

from gpuatlas.analysis import claims, compute_figures
from gpuatlas.analysis.fusion import fusion_rows, softmax_bytes, total_bytes, traversals
from gpuatlas.analysis.quantities import QUANTITIES, derived_row
from gpuatlas.analysis.roofline import (attainable, feasible_blocks, gap_explanation, matmul_flops, matmul_rows,
                                        roofline_table, tile_intensity, tile_smem_bytes, tiled_hbm_bytes)
from fakes import DEVICE
from gpuatlas.probes.families.fusion import ring_slots
from gpuatlas.probes.registry import all_probes

H100_HBM, H100_PEAK = 3.35e12, 989e12


# -- §7.8 ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("block, gb, intensity, tflops", [(32, 8.59, 16, 53.6), (64, 4.29, 32, 107),
                                                          (128, 2.15, 64, 214), (256, 1.07, 128, 429)])
def test_the_lectures_tiling_table_at_4096(block, gb, intensity, tflops):
    assert tiled_hbm_bytes(4096, 4096, 4096, block, block) / 1e9 == pytest.approx(gb, abs=0.005)
    assert tile_intensity(block) == intensity == block / 2
    assert attainable(tile_intensity(block), H100_PEAK, H100_HBM) / 1e12 == pytest.approx(tflops, rel=0.005)


@pytest.mark.parametrize("m, n, k, bm, bn", [(4096, 4096, 4096, 128, 128), (8192, 4096, 2048, 128, 256),
                                             (1024, 2048, 512, 64, 16)])
def test_two_routes_to_the_traffic_agree(m, n, k, bm, bn):
    """Per program: K·(BM + BN) elements; there are (M/BM)(N/BN) programs."""
    per_program = (m // bm) * (n // bn) * k * (bm + bn) * 2
    assert tiled_hbm_bytes(m, n, k, bm, bn) == pytest.approx(per_program)
    assert matmul_flops(m, n, k) / tiled_hbm_bytes(m, n, k, bm, bn) == pytest.approx(tile_intensity(bm, bn))


def test_naive_is_the_degenerate_tiling():
    assert tile_intensity(1) == 0.5


def test_feasibility_is_decided_by_the_devices_shared_memory():
    assert tile_smem_bytes(128) == 2 * 2 * 128 * 128 * 2 == 128 << 10  # the lecture's 64 KB, double-buffered
    assert feasible_blocks({"smem_per_block_optin_bytes": 232448}) == [16, 32, 64, 128]
    assert feasible_blocks({"smem_per_block_bytes": 48 << 10}) == [16, 32, 64]
    assert feasible_blocks({"smem_per_block_optin_bytes": 1 << 20}) == [16, 32, 64, 128, 256]


def test_sweeps_are_sized_from_the_device(committed_run):
    device = committed_run[0]["device"]
    probes = all_probes()
    roof = probes["matmul.roofline"]
    assert {c["block"] for c in roof.configs(device, "quick")} == set(feasible_blocks(device))
    assert {c["matrix_side"] for c in roof.configs(device, "full")} == {4096, 8192}
    small = {**device, "smem_per_block_optin_bytes": 48 << 10}
    assert max(c["block"] for c in roof.configs(small, "quick")) == 64
    assert len(probes["fusion.softmax"].configs(device, "quick")) == 4
    slots = ring_slots(device, 4096 * 4096 * 2, 3)
    assert slots * 4096 * 4096 * 2 >= 4 * device["l2_bytes"] and slots >= 2
    assert ring_slots({**device, "l2_bytes": 1 << 20}, 4096 * 4096 * 2, 3) == 2


# -- §7.10 ---------------------------------------------------------------------------------------------------

def test_softmax_moves_five_traversals_unfused_and_two_fused():
    side, traversal = 4096, 4096 * 4096 * 2
    per_kernel = softmax_bytes(side, side)
    assert [r for _, r, _ in per_kernel["unfused"]] == [traversal, traversal + 4 * side, traversal + 4 * side]
    assert [w for _, _, w in per_kernel["unfused"]] == [4 * side, traversal + 4 * side, traversal]
    assert total_bytes(side, side, "unfused") == 5 * traversal + 4 * 4 * side
    assert total_bytes(side, side, "fused") == 2 * traversal
    assert total_bytes(side, side, "unfused") / 1e6 == pytest.approx(167.8, abs=0.1)  # the lecture's table
    assert total_bytes(side, side, "fused") / 1e6 == pytest.approx(67.1, abs=0.05)
    assert traversals(side, side, "fused") == 2
    assert total_bytes(side, side, "unfused") / total_bytes(side, side, "fused") == pytest.approx(2.5, rel=1e-3)


def test_the_byte_ratio_tends_to_2_5_whatever_the_size():
    ratios = [total_bytes(s, s, "unfused") / total_bytes(s, s, "fused") for s in (256, 4096, 65536)]
    assert all(r > 2.5 for r in ratios) and ratios == sorted(ratios, reverse=True)
    assert ratios[-1] == pytest.approx(2.5, rel=1e-4)


# -- derived rows on synthetic measurements ------------------------------------------------------------------

def samples(probe, metric, values, flag="", **params):
    return pd.DataFrame([{"probe": probe, "metric": metric, "value": v, "unit": "", "flag": flag,
                          "sm_clock_hz": 1.9e9, **params} for v in values])


def ceilings(peak=800e12, bandwidth=4.0e12):
    return [derived_row("tc.bf16.peak_flops", peak, peak * 0.99, peak * 1.01, "synthetic", "tc"),
            derived_row("dram.read_bandwidth_bytes_per_s", bandwidth, bandwidth, bandwidth, "synthetic", "bw.dram")]


def roofline_measurements(rates: dict, side=4096):
    frames = [samples("matmul.roofline", "flop_rate", [r * 0.99, r, r * 1.01], block=b, matrix_side=side)
              for b, r in rates.items()]
    frames.append(samples("matmul.roofline", "flop_rate", [1e18], flag="invalid", block=128, matrix_side=side))
    return pd.concat(frames, ignore_index=True)


def test_roofline_prediction_comes_from_the_runs_own_ceilings():
    m = roofline_measurements({32: 50e12, 64: 200e12, 128: 300e12})
    table = roofline_table(m, ceilings()).set_index("block")
    assert table.loc[32, "predicted_flops"] == 16 * 4.0e12 and table.loc[32, "bound"] == "memory (HBM)"
    assert table.loc[128, "predicted_flops"] == 256e12
    assert table.loc[128, "measured_flops"] == pytest.approx(300e12), "the invalid sample is left out"
    assert table.loc[128, "measured_over_predicted"] == pytest.approx(300 / 256)
    assert roofline_table(m, ceilings(peak=100e12)).set_index("block").loc[128, "bound"] == "compute (peak)"
    lines = gap_explanation(roofline_table(m, ceilings()), DEVICE)
    assert len(lines) == 3 and "below" in lines[0] and "mma.sync" in lines[0]  # 50 of 64 predicted
    assert "L2" in lines[1] and "L2" in lines[2]  # 200 of 128, 300 of 256
    on = gap_explanation(roofline_table(roofline_measurements({128: 260e12}), ceilings()), DEVICE)
    assert "on the prediction" in on[0]


def test_tiled_fraction_is_the_best_block_128_to_256_over_the_measured_peak():
    m = roofline_measurements({64: 500e12, 128: 300e12, 256: 340e12})
    row = {r["quantity"]: r for r in matmul_rows(m, ceilings())}["roofline.tiled_fraction_of_peak"]
    assert row["value"] == pytest.approx(340 / 800), "BLOCK 64 is faster but outside the lecture's 128-256"
    assert row["ci_low"] <= row["value"] <= row["ci_high"]
    assert "BLOCK 256 at 4096^3" in row["note"] and "measured HBM read" in row["note"]
    assert all(r["quantity"] != "roofline.tiled_fraction_of_peak" for r in matmul_rows(m, ceilings()[1:])), \
        "no fraction without a measured peak"
    assert roofline_table(m).loc[:, "predicted_flops"].isna().all()


def test_library_rows():
    m = pd.concat([samples("matmul.library", "flop_rate", [700e12, 710e12, 720e12], impl="cublas", matrix_side=8192),
                   samples("matmul.library", "flop_rate", [600e12] * 3, impl="triton", matrix_side=8192)])
    rows = {r["quantity"]: r["value"] for r in matmul_rows(m)}
    assert rows == {"matmul.cublas_bf16_flops": pytest.approx(710e12), "matmul.triton_bf16_flops": 600e12}
    assert all(q in QUANTITIES for q in rows)


def test_softmax_speedup_prefers_graph_launches():
    side = 4096
    m = pd.concat([samples("fusion.softmax", "seconds", [50e-6] * 3, launch="graph", variant="unfused", matrix_side=side),
                   samples("fusion.softmax", "seconds", [20e-6] * 3, launch="graph", variant="fused", matrix_side=side),
                   samples("fusion.softmax", "seconds", [90e-6] * 3, launch="plain", variant="unfused", matrix_side=side),
                   samples("fusion.softmax", "seconds", [30e-6] * 3, launch="plain", variant="fused", matrix_side=side)])
    (row,) = fusion_rows(m)
    assert row["quantity"] == "fusion.softmax_speedup" and row["value"] == pytest.approx(2.5)
    assert "graph launches" in row["note"] and "byte ratio 2.501" in row["note"]
    assert "unfused 167.8 MB" in row["note"] and "fused 67.1 MB" in row["note"]
    (plain,) = fusion_rows(m[m["launch"] == "plain"])
    assert plain["value"] == pytest.approx(3.0)
    assert fusion_rows(m[m["variant"] == "fused"]) == []


def test_claims_evaluate_with_these_quantities():
    m = pd.concat([roofline_measurements({128: 344e12}),
                   samples("fusion.softmax", "seconds", [50e-6], launch="graph", variant="unfused", matrix_side=4096),
                   samples("fusion.softmax", "seconds", [20e-6], launch="graph", variant="fused", matrix_side=4096)])
    derived = pd.DataFrame(ceilings() + fusion_rows(m) + matmul_rows(m, ceilings()))
    verdicts = claims.judge(derived, DEVICE).set_index("claim")["verdict"]
    table = claims.judge(derived, DEVICE).set_index("claim")
    assert table.loc["SMEM tiling (BLOCK 128-256) reaches ~43% of peak", "ratio"] == "1"  # 344/800 = 0.43
    # judged like for like only against the lecture's BLOCK 256 / BLOCK_K 64 tile, which the probe does not run
    assert verdicts["SMEM tiling (BLOCK 128-256) reaches ~43% of peak"] == "cannot be tested"
    assert verdicts["fused softmax: 5 passes become 2, 2.5x faster"] == "holds"


def test_figures_draw_with_and_without_the_runs_ceilings():
    import matplotlib.pyplot as plt

    m = roofline_measurements({32: 90e12, 128: 300e12})
    for derived in (pd.DataFrame(ceilings()), pd.DataFrame(columns=["quantity", "value"])):
        ax = compute_figures.roofline(m, derived)
        assert len(ax.lines) >= 1 and math.isfinite(ax.get_ylim()[1])
        plt.close(ax.figure)
    soft = pd.concat([samples("fusion.softmax", "seconds", [50e-6], launch="graph", variant=v, matrix_side=4096)
                      for v in ("unfused", "fused")])
    ax = compute_figures.fusion(soft)
    assert len(ax.patches) >= 2
    plt.close(ax.figure)
