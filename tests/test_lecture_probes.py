"""The lecture's own methods as probes: the index-computing shared chase compiles to the chain it claims (an
address computed from each loaded index), and its simulated run derives smem.index_latency_cycles."""
import re

import numpy as np

import pandas as pd
import pytest

from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass
from tests.test_kernels import timed_region

LDS = re.compile(r"\bLDS (R\d+), \[(R\d+)[^\]]*\]")
WRITES = re.compile(r"^/\*[0-9a-f]{4}\*/ (?:@!?U?P\w+ )?([A-Z0-9.]+) (R\d+), (.*)$")


def index_steps(region: list[str]) -> list[list[str]]:
    """For each LDS after the first, the opcodes that carry the previous LDS's value into its address (none: the
    address is the loaded value itself, a pure chase); raises if the LDS does not depend on the previous."""
    loads = [(i, *LDS.search(l).groups()) for i, l in enumerate(region) if LDS.search(l)]
    steps = []
    for (i, dest, _), (j, _, addr) in zip(loads, loads[1:]):
        live, ops = {dest}, []
        for line in region[i + 1:j]:
            m = WRITES.match(line)
            if m and set(re.findall(r"R\d+", m.group(3))) & live:
                live.add(m.group(2))
                ops.append(m.group(1))
        assert addr in live, f"LDS at {region[j]} does not depend on the LDS into {dest}"
        steps.append(ops)
    return steps


@pytest.fixture(scope="module")
def cubins():
    return compile_cubin("lecture.cu"), compile_cubin("chase.cu")


def test_index_chase_computes_each_address_from_the_loaded_index(cubins):
    (cubin, log), _ = cubins
    steps = index_steps(timed_region(sass(cubin)["chase_shared_index"]))
    assert len(steps) >= 31
    assert all(any(op.startswith(("IMAD", "LEA", "SHF", "IADD")) for op in ops) for ops in steps)
    usage = resource_usage(log)["chase_shared_index"]
    assert usage["spill_stores"] == usage["stack_bytes"] == 0


def test_the_pure_chase_computes_no_address(cubins):
    """Negative control: gpuatlas's own shared chase loads each address straight from the previous load."""
    _, (cubin, _) = cubins
    steps = index_steps(timed_region(sass(cubin)["chase_shared"]))
    assert len(steps) >= 31 and all(ops == [] for ops in steps)


def test_a_simulated_index_chase_derives_its_quantity():
    from gpuatlas.analysis.latency import hierarchy_rows
    from gpuatlas.probes.registry import all_probes
    from tests import fakes

    probe = all_probes()["chase.smem_index"]
    configs = probe.configs(fakes.DEVICE, "full")
    assert configs and all(c["footprint_bytes"] <= fakes.DEVICE["smem_per_block_optin_bytes"] for c in configs)
    rows = []
    for config in configs:
        for s in fakes.FAKES["chase.smem_index"](None, **config):
            rows.append({"probe": "chase.smem_index", "metric": s.metric, "value": s.value, "unit": s.unit,
                         "flag": "", **config})
    by = {r["quantity"]: r for r in hierarchy_rows(pd.DataFrame(rows), fakes.DEVICE)}
    expected = fakes.LEVELS["smem"] + 2 * fakes.INT_LATENCY
    assert by["smem.index_latency_cycles"]["value"] == pytest.approx(expected, rel=0.01)
    assert "smem.latency_cycles" not in by  # the pure chase's quantity comes only from chase.smem


def test_the_lecture_tile_compiles_to_wgmma_in_its_predicted_shared_memory_and_spills():
    """§7.8: BLOCK 256's double-buffered tiles fit (128 KiB) but its fp32 accumulator is the whole register file,
    so the compiler spills -- the lecture's feasibility check, seen in the SASS."""
    from gpuatlas.probes.families.lecture import LECTURE_STAGES, LECTURE_TILE, LECTURE_WARPS, lecture_tile_smem_bytes
    from tests.test_triton_kernels import compile_matmul, opcode_count

    kernel = compile_matmul(*LECTURE_TILE, 1, LECTURE_WARPS, LECTURE_STAGES)
    assert "wgmma.mma_async" in kernel.asm["ptx"] and opcode_count(kernel.asm["cubin"], "HGMMA") > 0
    assert kernel.metadata.shared == lecture_tile_smem_bytes() == 128 << 10
    assert opcode_count(kernel.asm["cubin"], "STL") > 0
    # negative control: BLOCK 128 with the same BLOCK_K holds its accumulator without spilling
    small = compile_matmul(128, 128, 64, 1, LECTURE_WARPS, LECTURE_STAGES)
    assert opcode_count(small.asm["cubin"], "STL") == 0


def test_a_simulated_lecture_tile_derives_its_fraction_of_peak():
    from gpuatlas.analysis.lecture import lecture_rows
    from gpuatlas.analysis.quantities import derived_row
    from tests import fakes

    rows = [{"probe": "matmul.lecture_tile", "metric": s.metric, "value": s.value, "unit": s.unit, "flag": "",
             "matrix_side": 4096} for s in fakes.FAKES["matmul.lecture_tile"](None, 4096)]
    peak = derived_row("tc.bf16.peak_flops", fakes.TC_PEAK, fakes.TC_PEAK, fakes.TC_PEAK, "m", "p")
    by = {r["quantity"]: r["value"] for r in lecture_rows(pd.DataFrame(rows), [peak])}
    assert by["roofline.lecture_tile_fraction_of_peak"] == pytest.approx(128 * fakes.HBM_READ / fakes.TC_PEAK)
    assert "roofline.lecture_tile_fraction_of_peak" not in {r["quantity"] for r in lecture_rows(pd.DataFrame(rows))}


def test_the_naive_matmul_is_one_fma_per_loaded_pair_and_no_tiling(cubins):
    (cubin, log), (chase, _) = cubins
    code = sass(cubin)["naive_matmul"]
    assert re.search(r"\bFFMA\b", code) and re.search(r"\bLDG\.E\.U16\b", code)
    assert not re.search(r"\b(LDS|STS|HMMA|HGMMA)\b", code)  # no shared-memory tile, no tensor core
    assert resource_usage(log)["naive_matmul"]["spill_stores"] == 0
    # negative control: the staged column read does tile through shared memory, and the predicate sees it
    staged = sass(compile_cubin("column_read.cu")[0])["column_staged"]
    assert re.search(r"\b(LDS|STS)\b", staged)


def test_bf16_bits_round_to_nearest_and_a_simulated_naive_run_derives_its_time():
    from gpuatlas.analysis.lecture import lecture_rows
    from gpuatlas.probes.families.lecture import bf16_bits, bf16_values
    from tests import fakes

    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38], dtype=np.float32)
    assert list(bf16_values(bf16_bits(x))) == [1.0, 1.0, 1.015625, -2.5, float(bf16_values(bf16_bits(x))[-1])]
    assert bf16_values(bf16_bits(np.float32([1.0078125])))[0] == 1.0078125  # exactly representable
    rows = [{"probe": "matmul.naive", "metric": s.metric, "value": s.value, "unit": s.unit, "flag": "",
             "matrix_side": 4096} for s in fakes.FAKES["matmul.naive"](None, 4096)]
    by = {r["quantity"]: r["value"] for r in lecture_rows(pd.DataFrame(rows))}
    assert by["matmul.naive_seconds"] == pytest.approx(4 * 4096 ** 3 / fakes.HBM_READ)


def test_decode_sizes_its_weights_past_the_l2_and_a_simulated_run_attains_about_m():
    from gpuatlas.analysis.lecture import lecture_rows
    from gpuatlas.analysis.quantities import derived_row
    from gpuatlas.probes.families.lecture import DECODE_K, decode_bytes, decode_n
    from tests import fakes

    n = decode_n(fakes.DEVICE)
    assert DECODE_K * n * 2 >= 4 * fakes.DEVICE["l2_bytes"] and n % 128 == 0
    assert decode_bytes(1, n) == 2 * (DECODE_K + DECODE_K * n + n)
    rows = [{"probe": "matmul.decode", "metric": s.metric, "value": s.value, "unit": s.unit, "flag": "", "batch": m}
            for m in (1, 16) for s in fakes.FAKES["matmul.decode"](None, m)]
    hbm = derived_row("dram.read_bandwidth_bytes_per_s", fakes.HBM_READ, fakes.HBM_READ, fakes.HBM_READ, "m", "p")
    by = {r["quantity"]: r["value"] for r in lecture_rows(pd.DataFrame(rows), [hbm])}
    assert by["decode.m1_bandwidth_bytes_per_s"] == pytest.approx(fakes.HBM_READ)
    assert 15 < by["decode.m16_flop_per_hbm_byte"] < 16  # 2MNK / 2(MK + KN + MN): just under M
    # negative control: without the run's HBM bandwidth no attained intensity is claimed
    assert "decode.m16_flop_per_hbm_byte" not in {r["quantity"] for r in lecture_rows(pd.DataFrame(rows))}


def test_the_decode_chain_kernel_adds_one_per_block_and_a_simulated_chain_derives_both_modes(cubins):
    from gpuatlas.analysis.lecture import lecture_rows
    from tests import fakes

    (cubin, _), _ = cubins
    code = sass(cubin)["step_kernel"]
    assert re.search(r"\bIADD3\b|\bIADD\.64\b|\bIADD3\.X\b", code) and re.search(r"\bSTG\.E\.64\b", code)
    rows = [{"probe": "launch.decode_chain", "metric": s.metric, "value": s.value, "unit": s.unit, "flag": "",
             "mode": mode} for mode in ("plain", "graph") for s in fakes.FAKES["launch.decode_chain"](None, mode)]
    by = {r["quantity"]: r["value"] for r in lecture_rows(pd.DataFrame(rows))}
    assert by["launch.chain_490_s"] == pytest.approx(490 * 2e-6)
    assert by["launch.chain_490_graph_s"] < by["launch.chain_490_s"]


@pytest.mark.parametrize("resident", [1, 2])
def test_the_wave_size_is_the_step_that_explains_time_against_programs(resident):
    from gpuatlas.analysis.lecture import wave_rows
    from gpuatlas.probes.families.lecture import wave_tiles
    from tests import fakes

    sms = fakes.DEVICE["sm_count"]
    tiles = wave_tiles(fakes.DEVICE)
    assert {sms, sms + 1, 2 * sms, 2 * sms + 1} <= set(tiles)
    rows = [{"probe": "matmul.waves", "metric": "seconds", "value": (-(-t // (resident * sms))) * 20e-6 + 3e-6,
             "unit": "s", "flag": "", "tiles": t} for t in tiles for _ in range(3)]
    (row,) = wave_rows(pd.DataFrame(rows), fakes.DEVICE)
    assert row["quantity"] == "waves.programs_per_wave" and row["value"] == resident * sms
    # the simulated GPU's own physics (one program per SM) gives one program per SM per wave
    fake = [{"probe": "matmul.waves", "metric": s.metric, "value": s.value, "unit": s.unit, "flag": "", "tiles": t}
            for t in tiles for s in fakes.FAKES["matmul.waves"](None, t)]
    assert wave_rows(pd.DataFrame(fake), fakes.DEVICE)[0]["value"] == sms


def test_a_wave_size_that_wins_on_a_few_program_counts_only_is_undecided():
    """Time that grows with the programs but steps at no wave (a smooth cost per program, plus scatter) fits one
    and two programs per SM about alike: the bootstrap over program counts leaves the size undecided between
    them, while clean steps (the test above) decide it."""
    from gpuatlas.analysis.lecture import wave_rows
    from gpuatlas.probes.families.lecture import wave_tiles
    from tests import fakes

    sms = fakes.DEVICE["sm_count"]
    scatter = np.random.default_rng(3).normal(0, 0.05, 64)
    rows = [{"probe": "matmul.waves", "metric": "seconds", "value": (5e-6 + 0.1e-6 * t) * (1 + scatter[i]),
             "unit": "s", "flag": "", "tiles": t} for i, t in enumerate(wave_tiles(fakes.DEVICE))]
    (row,) = wave_rows(pd.DataFrame(rows), fakes.DEVICE)
    assert np.isnan(row["value"]) and row["note"].startswith("undecided")
    assert row["ci_low"] == sms and row["ci_high"] >= 2 * sms


def test_the_wave_and_decode_figures_draw_a_simulated_run_and_nothing_without_one():
    import matplotlib

    matplotlib.use("Agg")
    from gpuatlas.analysis import compute_figures
    from gpuatlas.analysis.lecture import lecture_rows
    from gpuatlas.analysis.quantities import derived_row
    from tests import fakes

    rows = [{"probe": "matmul.waves", "metric": s.metric, "value": s.value, "unit": s.unit, "flag": "", "tiles": t}
            for t in (66, 67, 132, 133, 264, 265) for s in fakes.FAKES["matmul.waves"](None, t)]
    rows += [{"probe": "matmul.decode", "metric": s.metric, "value": s.value, "unit": s.unit, "flag": "", "batch": m}
             for m in (1, 4, 16) for s in fakes.FAKES["matmul.decode"](None, m)]
    m = pd.DataFrame(rows)
    hbm = derived_row("dram.read_bandwidth_bytes_per_s", fakes.HBM_READ, fakes.HBM_READ, fakes.HBM_READ, "m", "p")
    d = pd.DataFrame([hbm, *lecture_rows(m, [hbm], fakes.DEVICE)])
    ax = compute_figures.wave_quantization(m, fakes.DEVICE, d)
    assert any("fitted wave: 132" in t.get_text() for t in ax.get_legend().get_texts())
    assert compute_figures.decode_gemm(m, d).get_lines()
    empty = m.iloc[:0]
    assert compute_figures.wave_quantization(empty, fakes.DEVICE, d) is None and compute_figures.decode_gemm(empty, d) is None
