"""probes/families/compute/__init__.py, compute.cu and wgmma.cu without a GPU: every kernel compiled (sm_90, and sm_90a for
wgmma) with the instructions that make it the probe it claims to be, in the counts intended; the host's FLOP
accounting, bounds and reference arithmetic; and the derivation on synthetic measurements with known answers."""
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from gpuatlas.probes.families import compute
from gpuatlas.probes.families.compute import wgmma
from gpuatlas.probes.kit import samplers as kit
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass

ADDRESS = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")


def instructions(code: str) -> list[tuple[int, str]]:
    """(address, instruction text without predicate) of every SASS line."""
    out = []
    for line in code.splitlines():
        m = ADDRESS.search(line)
        if m:
            text = re.sub(r"^@!?U?P\w+\s+", "", re.sub(r"\s+", " ", m.group(2)).strip())
            out.append((int(m.group(1), 16), text))
    return out


def loop_body(code: str, marker: str) -> list[str]:
    """Instructions of the kernel's one loop (from a backward branch's target to the branch) that holds an
    instruction starting with ``marker``: the timed loop, not the operand copies around it."""
    lines = instructions(code)
    loops = [(int(m.group(1), 16), addr) for addr, text in lines
             if (m := re.match(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)", text)) and int(m.group(1), 16) < addr]
    bodies = [[text for addr, text in lines if start <= addr <= end] for start, end in loops]
    bodies = [body for body in bodies if any(text.startswith(marker) for text in body)]
    assert len(bodies) == 1, f"expected one loop with {marker}, found {len(bodies)}"
    return bodies[0]


def opcodes(body: list[str]) -> Counter:
    return Counter(text.split()[0] for text in body)


def by_name(kernels: dict, name: str) -> str:
    hits = [k for k in kernels if k == name or k.endswith(name)]
    assert len(hits) == 1, (name, list(kernels))
    return kernels[hits[0]]


@pytest.fixture(scope="module")
def vector_build():
    cubin, log = compile_cubin("compute.cu", "sm_90")
    return sass(cubin), resource_usage(log)


@pytest.fixture(scope="module")
def wgmma_build():
    cubin, log = compile_cubin("wgmma.cu", "sm_90a")
    return sass(cubin), resource_usage(log), log


def test_compute_kernels_have_no_local_memory_and_fit_their_occupancy(vector_build):
    _, usage = vector_build
    for name, use in usage.items():
        assert use["spill_stores"] == use["spill_loads"] == use["stack_bytes"] == 0, name
    for name in ("fp32_fma", "fp64_fma", "fp16x2_hfma2", "int32_imad"):
        assert usage[name]["registers"] <= 32, f"{name}: more than 32 registers forbids a full SM"
    for dtype in ("bf16", "fp16", "tf32"):
        assert usage[f"mma_{dtype}"]["registers"] <= 64, "at least 4 blocks of 256 (32 warps) per SM"
    # the emulated e4m3 path holds A and B unpacked to fp16 as well: 2 blocks (16 warps, 4 per sub-partition)
    assert usage["mma_e4m3"]["registers"] <= 128


@pytest.mark.parametrize("kernel, ops", [("fp32_fma", {"FFMA.FTZ"}), ("fp64_fma", {"DFMA"}),
                                         ("fp16x2_hfma2", {"HFMA2", "HFMA2.MMA"}), ("int32_imad", {"IMAD"})])
def test_throughput_loops_are_the_intended_instruction_and_little_else(vector_build, kernel, ops):
    counts = opcodes(loop_body(vector_build[0][kernel], sorted(ops)[0]))
    work = sum(counts[op] for op in ops)
    assert work == compute.CHAINS * compute.UNROLL, counts
    overhead = sum(counts.values()) - work
    assert overhead <= 4, f"loop overhead {counts}"  # counter add, compare, branch (+ a constant reload)
    assert overhead / (work + overhead) < 0.01


def test_latency_kernel_is_one_dependent_ffma_chain(vector_build):
    body = loop_body(vector_build[0]["latency_fp32"], "FFMA")
    ffma = [re.match(r"FFMA\.FTZ (R\d+), (R\d+), ", t).groups() for t in body if t.startswith("FFMA")]
    assert len(ffma) == compute.LATENCY_UNROLL
    for (dest, _), (_, source) in zip(ffma, ffma[1:]):
        assert source == dest, "each FFMA multiplies the previous one's result"


@pytest.mark.parametrize("dtype, hmma", [("bf16", "HMMA.16816.F32.BF16"), ("fp16", "HMMA.16816.F32"),
                                         ("tf32", "HMMA.1688.F32.TF32")])
def test_mma_sync_loops_issue_one_hmma_per_accumulator(vector_build, dtype, hmma):
    counts = opcodes(loop_body(vector_build[0][f"mma_{dtype}"], "HMMA"))
    assert counts[hmma] == compute.MMA_ACC and sum(v for k, v in counts.items() if k.startswith("HMMA")) == \
        compute.MMA_ACC, counts


def test_mma_sync_e4m3_is_emulated_on_sm90(vector_build):
    """sm_90 has no FP8 mma.sync: ptxas unpacks E4M3 to FP16 (once, the operands being loop-invariant) and
    issues two m16n8k16 HMMAs and four FADDs per m16n8k32, so compute.mma_sync's e4m3 rate measures that
    path, not an FP8 tensor-core mode.  Each accumulator's own B keeps every product in the loop."""
    code = vector_build[0]["mma_e4m3"]
    counts = opcodes(loop_body(code, "HMMA"))
    assert counts["HMMA.16816.F32"] == 2 * compute.MMA_ACC, counts
    assert counts["FADD"] == 4 * compute.MMA_ACC, counts
    assert "F2FP.F16.E4M3.UNPACK_B" in code


#: SASS of each wgmma: HGMMA for 16- and 32-bit inputs, QGMMA for 8-bit ones.
GMMA = {"bf16": "HGMMA.64x{n}x16.F32.BF16", "fp16": "HGMMA.64x{n}x16.F32", "tf32": "HGMMA.64x{n}x8.F32.TF32",
        "e4m3": "QGMMA.64x{n}x32.F32.E4M3.E4M3"}


@pytest.mark.parametrize("dtype", compute.TC_DTYPES)
@pytest.mark.parametrize("n", wgmma.WGMMA_NS)
def test_wgmma_loops_keep_a_group_in_flight(wgmma_build, dtype, n):
    kernels, usage, _ = wgmma_build
    name = f"wgmma_{dtype}_n{n}"
    assert usage[name]["spill_stores"] == usage[name]["stack_bytes"] == 0
    shape = GMMA[dtype].format(n=n)
    body = loop_body(kernels[name], shape[:5])
    hgmma = [t for t in body if t[1:5] == "GMMA"]
    assert len(hgmma) == wgmma.WGMMA_STEPS and all(t.split()[0] == shape for t in hgmma), hgmma
    assert all("gdesc" in t for t in hgmma), "both operands through shared-memory descriptors"
    assert any(t.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1") for t in body), "wait_group 1: one group stays queued"


def test_wgmma_is_not_serialized_and_leaves_room_for_three_warpgroups(wgmma_build):
    _, usage, log = wgmma_build
    assert "serialized" not in log.lower(), log
    for dtype in compute.TC_DTYPES:
        # 3 warpgroups of 128 threads in 65,536 registers: at most 170, allocated in steps of 8.
        assert usage[f"wgmma_{dtype}_n256"]["registers"] <= 168


# -- host side ------------------------------------------------------------------------------------------

def test_flop_accounting():
    assert compute.mma_flop("bf16") == 2 * 16 * 8 * 16
    assert compute.mma_flop("tf32") == 2 * 16 * 8 * 8 and compute.mma_flop("e4m3") == 2 * 16 * 8 * 32
    assert wgmma.wgmma_flop("bf16", 256) == 2 * 64 * 256 * 16
    assert wgmma.wgmma_flop("e4m3", 128) == 2 * wgmma.wgmma_flop("fp16", 128) == 4 * wgmma.wgmma_flop("tf32", 128)
    threads, trips = 1000, 7
    assert compute.vector_work_per_launch("fp32", threads, trips) == threads * 8 * compute.UNROLL * trips * 2
    assert compute.vector_work_per_launch("fp16x2", threads, trips) == 2 * compute.vector_work_per_launch(
        "fp64", threads, trips)


def test_bounds_admit_the_real_hardware_and_refuse_twice_the_issue_limit():
    assert 256 < compute.vector_bound_per_clk_sm("fp32") < 2 * 256
    assert 512 < compute.vector_bound_per_clk_sm("fp16x2") < 2 * 512
    hopper = {"bf16": 4096, "fp16": 4096, "tf32": 2048, "e4m3": 8192}  # dense FLOP/clk/SM of an H100 SM
    for dtype, per_clk in hopper.items():
        assert per_clk < compute.tensor_bound_per_clk_sm(dtype) <= 2.1 * per_clk


def test_affine_power_matches_stepping():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b, x = (int(v) for v in rng.integers(0, 2**32, 3))
        n = int(rng.integers(0, 300))
        y = x
        for _ in range(n):
            y = (a * y + b) % 2**32
        big_a, big_b = compute.affine_power(a, b, n)
        assert (big_a * x + big_b) % 2**32 == y


def test_affine_chain_matches_float_stepping():
    x0, a, b = np.array([0.3, -0.7]), np.array([0.6, 0.85]), np.array([0.5, 0.25])
    x = x0.copy()
    for _ in range(37):
        x = x * a + b
    np.testing.assert_allclose(compute.affine_chain(x0, a, b, 37), x, rtol=1e-12)


def test_vector_operands_predict_a_float32_fma_chain():
    init, a, b, expect = compute._vector_operands(np.random.default_rng(1), "fp32", 16)
    x = init.copy()
    for _ in range(200):
        x = (x.astype(np.float64) * a + b).astype(np.float32)  # what FFMA rounds once per step
    compute._check_chains("fp32", x, expect(200), "host replay")
    with pytest.raises(RuntimeError, match="differ"):
        compute._check_chains("fp32", x * np.float32(1.01), expect(200), "host replay")


def test_vector_operands_int32_and_fp16x2():
    init, a, b, expect = compute._vector_operands(np.random.default_rng(2), "int32", 8)
    x = init.astype(np.uint64)
    for _ in range(50):
        x = (x * np.uint64(a) + np.uint64(b)) & np.uint64(0xFFFFFFFF)
    compute._check_chains("int32", x.astype(np.uint32), expect(50), "host replay")
    assert int(a) % 2 == 1 and np.all(init != 0)
    init, a, b, expect = compute._vector_operands(np.random.default_rng(3), "fp16x2", 8)
    halves, ha, hb = init.view(np.float16).copy(), np.array([a]).view(np.float16), np.array([b]).view(np.float16)
    for _ in range(100):
        halves = (halves.astype(np.float32) * np.tile(ha, 8) + np.tile(hb, 8)).astype(np.float16)
    compute._check_chains("fp16x2", halves.view(np.uint32), expect(100), "host replay")


def test_e4m3_decoding():
    values = compute.e4m3_value(np.array([0x38, 0xB8, 0x7E, 0x01, 0x08, 0x7F, 0xFF]))
    np.testing.assert_array_equal(values[:5], [1.0, -1.0, 448.0, 2.0**-9, 2.0**-6])
    assert np.isnan(values[5:]).all()


@pytest.mark.parametrize("dtype", compute.TC_DTYPES)
def test_random_operands_are_non_zero_and_their_bytes_decode_to_their_values(dtype):
    raw, values = compute.random_operand(np.random.default_rng(4), dtype,
                                         (64, wgmma.ROW_BYTES // compute.TC_SHAPES[dtype][0]))
    assert len(np.unique(np.abs(values))) > 24 and (values < 0).any(), "random magnitudes, both signs"
    assert raw.dtype == np.uint8 and raw.shape == (64, wgmma.ROW_BYTES)
    assert np.all(values != 0) and np.isfinite(values).all()
    flat = raw.reshape(-1)
    decoded = {"bf16": lambda: (flat.view(np.uint16).astype(np.uint32) << 16).view(np.float32),
               "fp16": lambda: flat.view(np.float16), "tf32": lambda: flat.view(np.float32),
               "e4m3": lambda: compute.e4m3_value(flat)}[dtype]()
    np.testing.assert_array_equal(decoded.astype(np.float64), values.reshape(-1))
    if dtype == "tf32":
        assert not np.any(flat.view(np.uint32) & 0x1FFF)


def test_wgmma_fragment_layout_is_a_bijection_onto_the_tile():
    n = 64
    out = np.arange(wgmma.WG_THREADS * n // 2, dtype=np.float64)
    d = wgmma.wgmma_fragment_to_matrix(out, n)
    assert sorted(d.reshape(-1)) == list(out)
    regs = out.reshape(wgmma.WG_THREADS, n // 2)
    assert d[0, 0] == regs[0, 0] and d[0, 1] == regs[0, 1] and d[8, 0] == regs[0, 2] and d[0, 8] == regs[0, 4]
    assert d[16 + 1, 2] == regs[32 + 5, 0]  # warp 1, lane 5: row 16 + 5 / 4, column 2 (5 mod 4)


def test_kernel_clock_is_cycles_over_nanoseconds():
    clocks = np.array([1_980_000, 1_000_000, 1_960_000, 1_000_000, 2_000_000, 1_000_000], dtype=np.uint64)
    assert kit.kernel_clock_hz(clocks) == pytest.approx(1.98e9)
    with pytest.raises(RuntimeError, match="globaltimer"):
        kit.kernel_clock_hz(np.zeros(4, dtype=np.uint64))


def test_check_identical_catches_one_differing_unit():
    out = np.ones((5, 8), dtype=np.float32)
    compute.check_identical(out, "x", "CTAs")
    out[3, 2] = 2
    with pytest.raises(RuntimeError, match="1 of 5 CTAs"):
        compute.check_identical(out, "x", "CTAs")
    with pytest.raises(RuntimeError, match="non-finite"):
        compute.check_identical(np.full((2, 2), np.inf), "x", "CTAs")


def test_wgmma_needs_hopper_and_sweeps_n():
    from gpuatlas.probes.registry import all_probes

    probe = all_probes()["compute.wgmma"]
    assert probe.min_cc == (9, 0)
    quick = probe.configs({}, "quick")
    assert {c["n"] for c in quick} == set(wgmma.QUICK_WGMMA_NS) and len(quick) == 4 * len(wgmma.QUICK_WGMMA_NS)
    assert {c["n"] for c in probe.configs({}, "full")} == set(wgmma.WGMMA_NS)


# -- derivation -------------------------------------------------------------------------------------------

def simulated_measurements(flag_fp32_invalid: bool = False) -> pd.DataFrame:
    from gpuatlas.analysis.results import config_key
    from fakes import FAKES

    rows = []
    for probe_id, params in ([("compute.vector", {"op": op}) for op in compute.VECTOR_OPS]
                             + [("compute.latency", {"op": "fp32"})]
                             + [("compute.mma_sync", {"dtype": d}) for d in compute.TC_DTYPES]
                             + [("compute.wgmma", {"dtype": d, "n": n}) for d in compute.TC_DTYPES
                                for n in wgmma.WGMMA_NS]):
        for s in FAKES[probe_id](None, **params):
            rows.append({"probe": probe_id, "config": config_key(params), "metric": s.metric, "value": s.value,
                         "unit": s.unit, "repeat": s.repeat, "sm_clock_hz": s.sm_clock_hz, "flag": s.flag,
                         **params})
    frame = pd.DataFrame(rows)
    if flag_fp32_invalid:  # a wild sample above the bound: flagged, so it must not move the peak
        wild = frame[(frame["probe"] == "compute.vector") & (frame["op"] == "fp32")].iloc[:2].copy()
        wild["value"] *= 10
        wild["flag"] = "invalid"
        frame = pd.concat([frame, wild], ignore_index=True)
    return frame


def test_derivation_recovers_the_simulated_peaks():
    from fakes import (CLOCK_HZ, DEVICE, FMA_LATENCY, MMA_SYNC_PER_CLK, VECTOR_PER_CLK, WGMMA_PER_CLK,
                       burst_clock_hz, power_limited_clock_hz)

    from gpuatlas.analysis.compute import compute_rows

    rows = pd.DataFrame(compute_rows(simulated_measurements(flag_fp32_invalid=True))).set_index("quantity")
    scale = DEVICE["sm_count"] * CLOCK_HZ
    assert rows.loc["fp32.peak_flops", "value"] == pytest.approx(VECTOR_PER_CLK["fp32"] * scale)
    assert rows.loc["fp32.flop_per_clk_sm", "value"] == pytest.approx(VECTOR_PER_CLK["fp32"])
    assert rows.loc["fp64.peak_flops", "value"] == pytest.approx(VECTOR_PER_CLK["fp64"] * scale)
    assert rows.loc["fp16.peak_flops", "value"] == pytest.approx(VECTOR_PER_CLK["fp16x2"] * scale)
    assert rows.loc["int32.peak_ops", "unit"] == "op/s"
    assert rows.loc["fp32.latency_cycles", "value"] == pytest.approx(FMA_LATENCY)
    assert rows.loc["tc.bf16.mma_sync_peak_flops", "value"] == pytest.approx(MMA_SYNC_PER_CLK["bf16"] * scale)
    for dtype, name in (("bf16", "bf16"), ("fp16", "fp16"), ("tf32", "tf32"), ("e4m3", "fp8")):
        # the fakes peak at N=256: the best N is chosen, not the mean over N; the burst peak is the faster
        # operand set's, at its own clock
        clock = max(burst_clock_hz(dtype, 256, operands) for operands in ("signed", "unit"))
        assert rows.loc[f"tc.{name}.peak_flops", "value"] == pytest.approx(WGMMA_PER_CLK[dtype] * 132 * clock)
        assert "N=64" in rows.loc[f"tc.{name}.peak_flops", "note"]
        assert rows.loc[f"tc.{name}.flop_per_clk_sm", "value"] == pytest.approx(WGMMA_PER_CLK[dtype])
        # sustained: the power-limited clock; the ramp at the full clock (before the limiter's lag) is left out
        capped = power_limited_clock_hz(dtype, 256)
        assert capped < 0.95 * CLOCK_HZ, "the simulated power limit must bite for this test to mean anything"
        assert rows.loc[f"tc.{name}.sustained_flops", "value"] == pytest.approx(WGMMA_PER_CLK[dtype] * 132 * capped)
        assert rows.loc[f"tc.{name}.sustained_flops", "ci_high"] < rows.loc[f"tc.{name}.peak_flops", "value"]
        assert "no NVML telemetry" in rows.loc[f"tc.{name}.sustained_flops", "note"]
    # FP8 draws the most power per clock: its signed bursts are held below the full clock, the unit ones not
    assert burst_clock_hz("e4m3", 256, "unit") == CLOCK_HZ
    assert burst_clock_hz("e4m3", 256, "signed") < 0.95 * CLOCK_HZ
    assert rows.loc["tc.fp8.peak_flops", "note"].startswith("unit operands (")
    assert f"at {CLOCK_HZ / 1e9:.3f} GHz" in rows.loc["tc.fp8.peak_flops", "note"]
    assert "; signed operands: " in rows.loc["tc.fp8.peak_flops", "note"]
    assert rows.loc["tc.bf16_over_fp32", "value"] == pytest.approx(WGMMA_PER_CLK["bf16"] / VECTOR_PER_CLK["fp32"])
    assert (rows["ci_low"] <= rows["value"]).all() and (rows["value"] <= rows["ci_high"]).all()


def test_the_burst_peak_is_the_faster_operand_sets_and_a_run_without_the_unit_set_keeps_signed():
    """Synthetic bursts with known medians: the peak takes the set whose median is higher, whichever it is,
    and never a median over both sets."""
    from gpuatlas.analysis.compute import compute_rows

    base = {"probe": "compute.wgmma", "config": "dtype=e4m3,n=256", "dtype": "e4m3", "n": 256, "flag": ""}
    timed = [{**base, "metric": "throughput", "value": 1.0e15, "repeat": r, "sm_clock_hz": 1.5e9} for r in range(3)]

    def peak(signed, unit):
        rows = [{**base, "metric": "burst_throughput", "value": v, "repeat": r, "sm_clock_hz": 1.6e9}
                for r, v in enumerate(signed)]
        rows += [{**base, "metric": "burst_unit_throughput", "value": v, "repeat": r, "sm_clock_hz": 1.7e9}
                 for r, v in enumerate(unit)]
        derived = {r["quantity"]: r for r in compute_rows(pd.DataFrame(timed + rows))}
        return derived["tc.fp8.peak_flops"]

    faster_unit = peak([1.80e15, 1.81e15, 1.79e15], [1.90e15, 1.91e15, 1.89e15])
    assert faster_unit["value"] == 1.90e15 and faster_unit["note"].startswith("unit operands (")
    assert "1.700 GHz" in faster_unit["note"] and "signed operands: " in faster_unit["note"]
    faster_signed = peak([1.80e15, 1.81e15, 1.79e15], [1.70e15, 1.71e15, 1.69e15])
    assert faster_signed["value"] == 1.80e15 and faster_signed["note"].startswith("signed operands (")
    assert "1.600 GHz" in faster_signed["note"]
    alone = peak([1.80e15, 1.81e15, 1.79e15], [])
    assert alone["value"] == 1.80e15 and "unit operands" not in alone["note"]


def test_lecture_claims_of_issue_7_are_judged_from_these_quantities():
    from gpuatlas.analysis.claims import judge
    from gpuatlas.analysis.compute import compute_rows
    from fakes import DEVICE

    derived = pd.DataFrame(compute_rows(simulated_measurements()))
    table = judge(derived, DEVICE).set_index("claim")
    judged = table[table["reason"].str.contains("#7") | (table["verdict"] != "not measured")]
    assert table.loc["FP32 vector ~67 TFLOP/s", "verdict"] == "holds"  # 256 x 132 x 1.98 GHz = 66.9 T
    assert table.loc["tensor vs vector peak ~15x", "verdict"] != "not measured"
    assert table.loc["dense BF16 tensor cores ~989 TFLOP/s", "verdict"] != "not measured"
    assert len(judged) >= 3


def test_peak_figure_draws_every_measured_peak_and_the_library_bars():
    from gpuatlas.analysis.compute import compute_rows
    from gpuatlas.analysis.compute_figures import compute_peaks

    derived = pd.DataFrame(compute_rows(simulated_measurements()))
    ax = compute_peaks(derived)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "wgmma BF16" in labels and "FP32 FFMA" in labels and "cuBLAS BF16 8192³" not in labels
    library = pd.DataFrame([{"quantity": "matmul.cublas_bf16_flops", "value": 7e14, "ci_low": 6.9e14,
                             "ci_high": 7.1e14}])
    ax = compute_peaks(pd.concat([derived, library], ignore_index=True))
    assert "cuBLAS BF16 8192³" in [t.get_text() for t in ax.get_yticklabels()]


def test_the_sustained_rate_leaves_out_the_ramp_and_names_the_reason_nvml_set():
    from gpuatlas.analysis.compute import compute_rows, steady_part, telemetry_note

    config = "dtype=bf16,n=256"
    t = np.arange(1, 10) / 10  # 0.1 ... 0.9 s: samples ending before 0.3 s are the ramp
    rate = np.where(t < 0.3, 2e15, 1e15)
    base = {"probe": "compute.wgmma", "config": config, "dtype": "bf16", "n": 256, "flag": "", "sm_clock_hz": 1.7e9}
    rows = ([{**base, "metric": "sustained_throughput", "value": v, "repeat": i, "power_w": 690.0 + i,
              "power_max_w": 700.0, "clock_event_reasons": 0x4 | (0x20 if i == 8 else 0)}
             for i, v in enumerate(rate)]
            + [{**base, "metric": "sustained_t_s", "value": v, "repeat": i} for i, v in enumerate(t)])
    frame = pd.DataFrame(rows)
    steady = steady_part(frame[frame["metric"] == "sustained_throughput"], frame[frame["metric"] == "sustained_t_s"])
    assert sorted(steady["repeat"]) == list(range(2, 9)) and set(steady["value"]) == {1e15}
    note = telemetry_note(steady)
    assert note.startswith("SW power cap set in 100% of samples, SW thermal slowdown set in 14% of samples")
    assert note.endswith(f"mean {np.mean(690.0 + np.arange(2, 9)):.0f} W")
    assert telemetry_note(steady.assign(clock_event_reasons=0)).startswith("no clock-event reason set")
    # No repeat-timed samples, no wgmma rows; with them, the sustained row carries the note.
    assert not [r for r in compute_rows(frame) if r["quantity"].startswith("tc.")]
    timed = pd.DataFrame([{**base, "metric": "throughput", "value": 1e15, "repeat": 0}])
    derived = {r["quantity"]: r for r in compute_rows(pd.concat([frame, timed], ignore_index=True))}
    assert derived["tc.bf16.sustained_flops"]["value"] == 1e15
    assert "SW power cap set in 100%" in derived["tc.bf16.sustained_flops"]["note"]


def test_the_wgmma_operand_lists_are_generated_and_name_every_accumulator_register():
    """The compute family's wgmma operand lists come from tools/wgmma_operands.py: the committed header is its
    output, and each N's lists name the registers %0 .. %(N/2 - 1) and the constraints of d[0] .. d[N/2 - 1] in
    order, then the operands after them from N/2 on (checked by the preprocessor and compiler themselves)."""
    from gpuatlas.probes.kit.cuda import compile_source, source
    from tools.wgmma_operands import HEADER, NS, header

    assert HEADER.read_text() == header(), "run `python -m tools.wgmma_operands`"
    # d[i] is i, and INDEX(x) is x: WGMMA_ACC_N(INDEX) is the list of the indices it names.
    code = (source("wgmma_operands.cuh") + """
constexpr bool same(const char* a, const char* b) {
    for (; *a == *b; ++a, ++b) if (!*a) return true;
    return false;
}
template <typename... T> constexpr int in_order(T... x) {
    const int v[] = {x...};
    for (int i = 0; i < (int)sizeof...(x); ++i) if (v[i] != i) return -1;
    return sizeof...(x);
}
struct Index { constexpr int operator[](int i) const { return i; } };
constexpr Index d{};
#define INDEX(x) x
""")
    checks = "".join(f'static_assert(same(WGMMA_REGS_{n}, "{", ".join(f"%{i}" for i in range(n // 2))}"), "");\n'
                     f'static_assert(in_order(WGMMA_ACC_{n}(INDEX)) == {n // 2}, "");\n'
                     f'static_assert(same(WGMMA_AFTER_{n}(WGMMA_SS), "%{n // 2}, %{n // 2 + 1}"), "");\n'
                     for n in NS)
    compile_source(code + checks, "lists.cu", "sm_90a")
    with pytest.raises(RuntimeError, match="static assertion failed"):  # negative control: the lists follow N
        compile_source(code + 'static_assert(in_order(WGMMA_ACC_64(INDEX)) == 64, "");\n', "lists.cu", "sm_90a")
