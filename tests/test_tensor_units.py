"""probes/families/compute/tensor_units.py and tensor_units.cu without a GPU: every kernel compiled for sm_90a with the SASS that
makes it the unit it claims (HGMMA with A from shared memory or from registers, IGMMA, DMMA), each against a
negative control; the fragment layouts at positions the PTX ISA states; the accounting; the derivation on the
simulated backend's known widths."""
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from gpuatlas.probes.families.compute import tensor_units as tu
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass
from test_compute import by_name, instructions

#: An HGMMA's operands: ``D, A, B, C`` with A a register (RS) or ``gdesc[...]`` (SS, two operands before C).
HGMMA_RS = re.compile(r"HGMMA\.64x(\d+)x16\.F32\.BF16 R\d+, R\d+, gdesc\[UR\d+\], R\d+")
HGMMA_SS = re.compile(r"HGMMA\.64x(\d+)x16\.F32\.BF16 R\d+, gdesc\[UR\d+\], R\d+")
#: The sparse HGMMA's: ``D, A, B, C, metadata, selector``, A a register (RS) or a descriptor (SS).
HGMMA_SP_RS = re.compile(r"HGMMA\.SP\.64x256x32\.F32\.BF16 R\d+, R\d+, gdesc\[UR\d+\], R\d+, R\d+, 0x0\b")
HGMMA_SP_SS = re.compile(r"HGMMA\.SP\.64x256x32\.F32\.BF16 R\d+, gdesc\[UR\d+\], R\d+, R\d+, 0x0\b")


def loop_body(code: str, marker: str) -> list[str]:
    """Instructions of the one loop (backward branch's target to the branch) holding ``marker``."""
    lines = instructions(code)
    loops = [(int(m.group(1), 16), addr) for addr, text in lines
             if (m := re.match(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)", text)) and int(m.group(1), 16) < addr]
    bodies = [[t for a, t in lines if start <= a <= end] for start, end in loops]
    bodies = [b for b in bodies if any(marker in t for t in b)]
    assert len(bodies) == 1, f"expected one loop with {marker}, found {len(bodies)}"
    return bodies[0]


@pytest.fixture(scope="module")
def build():
    cubin, log = compile_cubin("tensor_units.cu", "sm_90a")
    return sass(cubin), resource_usage(log)


def test_the_operand_forms_number_what_follows_the_accumulator():
    """The operands after the accumulator start right after its N/2 registers: A's registers and B's descriptor
    (rs), the descriptors and the sparsity metadata (sp), then scale-d; checked by the preprocessor itself."""
    from gpuatlas.probes.kit.cuda import compile_source, source

    expected = {"WGMMA_AFTER_256(WGMMA_RS)": "{%128, %129, %130, %131}, %132",
                "WGMMA_AFTER_128(WGMMA_RS_SCALE)": "%69", "WGMMA_AFTER_256(WGMMA_SS)": "%128, %129",
                "WGMMA_AFTER_256(WGMMA_SS_SCALE)": "%130", "WGMMA_AFTER_256(WGMMA_SP)": "%128, %129, %130, 0",
                "WGMMA_AFTER_256(WGMMA_SPRS)": "{%128, %129, %130, %131}, %132, %133, 0",
                "WGMMA_AFTER_256(WGMMA_SPRS_SCALE)": "%134"}
    checks = "".join(f'static_assert(same({form}, "{text}"), "{form}");\n' for form, text in expected.items())
    code = (source("wgmma_operands.cuh") + "constexpr bool same(const char* a, const char* b) {\n"
            "    for (; *a == *b; ++a, ++b) if (!*a) return true;\n    return false;\n}\n")
    compile_source(code + checks, "forms.cu", "sm_90a")
    with pytest.raises(RuntimeError, match="static assertion failed"):  # the negative control: one off
        compile_source(code + 'static_assert(same(WGMMA_AFTER_128(WGMMA_RS_SCALE), "%70"), "");\n', "forms.cu",
                       "sm_90a")


def test_kernels_use_no_local_memory_and_fit_three_warpgroups_per_sm(build):
    _, usage = build
    for name, use in usage.items():
        assert use["spill_stores"] == use["spill_loads"] == use["stack_bytes"] == 0, name
    for op in ("ss", "rs", "s8", "sp", "sprs"):
        assert 3 * usage[f"tu_{op}_n256"]["registers"] * tu.WG_THREADS <= 65536, op


@pytest.mark.parametrize("n", (128, 256))
def test_rs_kernel_reads_a_from_registers_and_ss_from_shared_memory(build, n):
    kernels, _ = build
    rs = loop_body(by_name(kernels, f"tu_rs_n{n}"), "HGMMA")
    ss = loop_body(by_name(kernels, f"tu_ss_n{n}"), "HGMMA")
    assert [int(m.group(1)) for t in rs if (m := HGMMA_RS.match(t))] == [n] * tu.STEPS
    assert [int(m.group(1)) for t in ss if (m := HGMMA_SS.match(t))] == [n] * tu.STEPS
    # negative controls: neither form matches the other kernel's HGMMAs
    assert not any(HGMMA_SS.match(t) for t in rs) and not any(HGMMA_RS.match(t) for t in ss)
    assert sum(t.startswith("HGMMA") for t in rs + ss) == 2 * tu.STEPS


def test_int8_kernel_is_igmma(build):
    kernels, _ = build
    body = loop_body(by_name(kernels, "tu_s8_n256"), "GMMA")
    assert Counter(t.split()[0] for t in body if "GMMA" in t) == {"IGMMA.64x256x32.S8.S8": tu.STEPS}
    ss = loop_body(by_name(kernels, "tu_ss_n256"), "GMMA")  # negative control: bf16 is HGMMA, not IGMMA
    assert not any(t.startswith("IGMMA") for t in ss)


def test_sparse_kernel_is_the_sparse_hgmma(build):
    kernels, _ = build
    body = loop_body(by_name(kernels, "tu_sp_n256"), "GMMA")
    gmma = [t for t in body if "GMMA" in t]
    assert [t.split()[0] for t in gmma] == ["HGMMA.SP.64x256x32.F32.BF16"] * tu.STEPS
    assert all(re.search(r", R\d+, 0x0(, gsb0)?$", t) for t in gmma)  # the metadata register, selector 0
    dense = loop_body(by_name(kernels, "tu_ss_n256"), "GMMA")  # negative control: the dense form has no .SP
    assert not any(".SP." in t for t in dense)


def test_sparse_rs_kernel_reads_a_from_registers_and_the_ss_one_from_shared_memory(build):
    kernels, usage = build
    rs = [t for t in loop_body(by_name(kernels, "tu_sprs_n256"), "GMMA") if "GMMA" in t]
    ss = [t for t in loop_body(by_name(kernels, "tu_sp_n256"), "GMMA") if "GMMA" in t]
    assert sum(bool(HGMMA_SP_RS.match(t)) for t in rs) == tu.STEPS == len(rs)
    assert sum(bool(HGMMA_SP_SS.match(t)) for t in ss) == tu.STEPS == len(ss)
    # negative controls: neither form matches the other kernel's HGMMAs
    assert not any(HGMMA_SP_SS.match(t) for t in rs) and not any(HGMMA_SP_RS.match(t) for t in ss)
    # A is not staged in shared memory: the RS kernel's static shared memory is B's 256 x 32 bf16 alone
    assert usage["tu_sprs_n256"]["smem_bytes"] == 256 * 32 * 2
    assert usage["tu_sp_n256"]["smem_bytes"] == 256 * 32 * 2 + 64 * 16 * 2


def test_sparse_metadata_and_expansion():
    assert tu.sparse_meta_word((0, 1)) == 0x44444444 and tu.sparse_meta_word((1, 3)) == 0xDDDDDDDD
    values = np.arange(1.0, 9.0).reshape(1, 8)
    dense = tu.sparse_expand(values, (1, 3))
    assert dense.tolist() == [[0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8]]
    assert tu.sparse_expand(values, (0, 2)).tolist() != dense.tolist()  # negative control: other positions
    assert tu.unit_ops("bf16_sparse_n256") == 2 * 64 * 256 * 32  # dense-equivalent
    assert tu.bound_per_clk_sm("bf16_sparse_n256") == 2 * tu.bound_per_clk_sm("bf16_ss_n256")
    assert tu.unit_ops("bf16_sparse_rs_n256") == 2 * 64 * 256 * 32
    assert tu.bound_per_clk_sm("bf16_sparse_rs_n256") == tu.bound_per_clk_sm("bf16_sparse_n256")
    assert tu.unit_ops("bf16_rs_n256") != tu.unit_ops("bf16_sparse_rs_n256")  # negative control: k16 vs k32


@pytest.mark.parametrize("name, dmma", [("dmma_m8n8k4", "DMMA.8x8x4"), ("dmma_m16n8k16", "DMMA.16x8x16")])
def test_fp64_kernels_issue_one_dmma_per_accumulator(build, name, dmma):
    kernels, _ = build
    body = loop_body(by_name(kernels, name), "DMMA")
    assert Counter(t.split()[0] for t in body if "MMA" in t or "DFMA" in t) == {dmma: tu.DMMA_ACC}


def test_the_fp64_vector_kernel_is_no_dmma():
    """Negative control for the DMMA check: compute.cu's FP64 chain is DFMA, which the check tells apart."""
    code = sass(compile_cubin("compute.cu", "sm_90")[0])["fp64_fma"]
    assert "DMMA" not in code and "DFMA" in code


# -- fragment layouts (PTX ISA: g = lane / 4, c = lane % 4) --------------------------------------------------

def test_rs_a_fragment_places_each_element_once_where_the_ptx_isa_says():
    a = np.arange(64 * 16, dtype=np.uint16).reshape(64, 16)  # element (r, k) = 16 r + k
    words = tu.rs_a_fragment(a).reshape(128, 4)
    def word(row, col):  # two consecutive elements of a row, the first in the low half
        return int(a[row, col]) | int(a[row, col + 1]) << 16

    assert words[0, 0] == word(0, 0)
    # thread 37: warp 1, lane 5 (g 1, c 1); word 3 = row 16 + 1 + 8, columns 2 + 8 and 11
    assert words[37, 3] == word(25, 10) and words[37, 1] == word(25, 2) and words[37, 2] == word(17, 10)
    halves = np.concatenate([words & 0xFFFF, words >> 16]).reshape(-1)
    assert sorted(halves) == list(range(64 * 16))  # a bijection
    # negative control: a transposed layout puts other elements there
    assert tu.rs_a_fragment(a.T.copy().reshape(64, 16)).reshape(128, 4)[37, 3] != words[37, 3]


def test_the_sparse_register_a_is_the_dense_fragment_over_the_kept_values():
    """PTX ISA, sparse mma.m16n8k32 .bf16 (each warp's 16 rows of wgmma.mma_async.sp m64nNk32): register r
    holds the two kept values a_2r, a_2r+1 of one 4-wide chunk (the lower index low), row g for a0, a1, a4,
    a5 and g + 8 otherwise, the chunk from column 4 c for a_i, i < 4, and 16 + 4 c otherwise.  rs's fragment of
    the 64 x 16 kept values puts exactly those there."""
    kept = np.arange(64 * 16, dtype=np.uint16).reshape(64, 16)
    dense = tu.sparse_expand(kept.astype(np.int64), tu.SPARSE_KEPT)

    def ptx_word(t, r):
        warp, lane = divmod(t, 32)
        row = 16 * warp + lane // 4 + 8 * (r % 2)
        first = 4 * (lane % 4) + 16 * (r // 2)
        low, high = dense[row, first + np.array(tu.SPARSE_KEPT)]
        return int(low) | int(high) << 16

    expected = np.array([[ptx_word(t, r) for r in range(4)] for t in range(tu.WG_THREADS)])
    assert np.array_equal(tu.rs_a_fragment(kept).reshape(tu.WG_THREADS, 4), expected)
    # negative control: the kept values' columns read in another order are another fragment
    swapped = kept.reshape(64, 2, 8).transpose(0, 2, 1).reshape(64, 16).copy()
    assert not np.array_equal(tu.rs_a_fragment(swapped).reshape(tu.WG_THREADS, 4), expected)


def test_accumulator_fragment_to_matrix():
    out = np.arange(128 * 128, dtype=np.float32)  # thread t's register i = t * 128 + i, N = 256
    d = tu.wgmma_fragment_to_matrix(out, 256)
    assert d[0, 0] == 0 and d[0, 1] == 1 and d[8, 0] == 2  # thread 0: registers 0, 1, then row 8
    assert d[9, 3] == 5 * 128 + 3  # lane 5 (g 1, c 1), register 3: row 1 + 8, column 2 + 1
    assert d[16, 8] == 32 * 128 + 4  # warp 1's first row, second column block
    assert sorted(d.reshape(-1)) == list(out)


def test_dmma_fragments_where_the_ptx_isa_says():
    a16, b16 = np.arange(256.0).reshape(16, 16), np.arange(128.0).reshape(16, 8)
    fa, fb = tu.dmma_a_fragment(a16), tu.dmma_b_fragment(b16)
    assert fa.shape == (32, 8) and fb.shape == (32, 4)
    assert fa[6, 5] == a16[9, 10] and fb[6, 3] == b16[14, 1]  # lane 6: g 1, c 2
    assert sorted(fa.reshape(-1)) == list(a16.reshape(-1)) and sorted(fb.reshape(-1)) == list(b16.reshape(-1))
    c = tu.dmma_c_matrix(np.arange(128.0), 16)
    assert c[9, 5] == 6 * 4 + 3 and c[1, 4] == 6 * 4
    a8, b8 = np.arange(32.0).reshape(8, 4), np.arange(32.0).reshape(4, 8)
    assert tu.dmma_a_fragment(a8)[6, 0] == a8[1, 2] and tu.dmma_b_fragment(b8)[6, 0] == b8[2, 1]
    c8 = tu.dmma_c_matrix(np.arange(64.0), 8)
    assert c8[1, 4] == 12 and c8[1, 5] == 13
    # negative control: swapping g and c misplaces lane 6's A element
    assert tu.dmma_a_fragment(a8.T.copy().reshape(8, 4))[6, 0] != a8[1, 2]


def test_a_warp_mma_through_the_layouts_is_the_matmul():
    """The lanes' fragments, multiplied the way the PTX ISA defines a lane's contribution, give A B."""
    rng = np.random.default_rng(0)
    for m, k in ((8, 4), (16, 16)):
        a, b = tu.int_operand(rng, (m, k)).astype(float), tu.int_operand(rng, (k, 8)).astype(float)
        fa, fb = tu.dmma_a_fragment(a), tu.dmma_b_fragment(b)
        lane = np.arange(32)
        # rebuild A and B from the fragments with the same index maps, then the product
        ra, rb = np.zeros_like(a), np.zeros_like(b)
        for i in range(fa.shape[1]):
            ra[lane // 4 + 8 * (i % 2), lane % 4 + 4 * (i // 2)] = fa[:, i]
        for i in range(fb.shape[1]):
            rb[lane % 4 + 4 * i, lane // 4] = fb[:, i]
        assert np.array_equal(ra @ rb, a @ b)


# -- accounting ---------------------------------------------------------------------------------------------

def test_operation_counts_and_bounds():
    assert tu.unit_ops("bf16_rs_n256") == tu.unit_ops("bf16_ss_n256") == 2 * 64 * 256 * 16
    assert tu.unit_ops("bf16_ss_n128") == 2 * 64 * 128 * 16
    assert tu.unit_ops("int8_n256") == 2 * 64 * 256 * 32
    assert tu.unit_ops("fp64_m8n8k4") == 2 * 8 * 8 * 4 and tu.unit_ops("fp64_m16n8k16") == 2 * 16 * 8 * 16
    assert tu.dmma_regs(8, 4) == (1, 1, 2) and tu.dmma_regs(16, 16) == (8, 4, 4)
    assert tu.bound_per_clk_sm("int8_n256") == 2 * tu.bound_per_clk_sm("bf16_ss_n256")
    assert tu.bound_per_clk_sm("fp64_m8n8k4") == tu.bound_per_clk_sm("bf16_ss_n256") / 4


def test_int_operands_are_nonzero_and_bounded():
    x = tu.int_operand(np.random.default_rng(1), (64, 32))
    assert np.all(x != 0) and np.abs(x).max() <= tu.INT_MAX_ABS and np.any(x < 0)


def test_probe_is_sm90a_only_and_refuses_unknown_ops():
    from gpuatlas.probes.registry import all_probes, probe_modules

    probe = all_probes()["compute.tensor_units"]
    assert probe.min_cc == probe.max_cc == (9, 0)
    order = [name.removeprefix("gpuatlas.probes.families.") for name in probe_modules()]
    assert order.index("compute.tensor_units") == order.index("compute.wgmma") + 1
    assert {c["op"] for c in probe.configs({}, "full")} == set(tu.UNITS)
    with pytest.raises(ValueError, match="unknown tensor op"):
        tu.compute_tensor_units(None, "fp4_n256")


# -- derivation -------------------------------------------------------------------------------------------

def simulated_measurements() -> pd.DataFrame:
    from gpuatlas.analysis.results import config_key
    from fakes import FAKES

    rows = []
    for op in tu.UNITS:
        for s in FAKES["compute.tensor_units"](None, op=op):
            rows.append({"probe": "compute.tensor_units", "config": config_key({"op": op}), "metric": s.metric,
                         "value": s.value, "unit": s.unit, "repeat": s.repeat, "sm_clock_hz": s.sm_clock_hz,
                         "flag": s.flag, "op": op})
    return pd.DataFrame(rows)


def test_derivation_recovers_the_simulated_widths():
    from fakes import tensor_unit_per_clk

    from gpuatlas.analysis.tensor_units import tensor_unit_rows

    rows = pd.DataFrame(tensor_unit_rows(simulated_measurements())).set_index("quantity")
    assert rows.loc["tc.bf16.ss_flop_per_clk_sm", "value"] == pytest.approx(tensor_unit_per_clk("bf16_ss_n256"))
    assert rows.loc["tc.bf16.rs_flop_per_clk_sm", "value"] == pytest.approx(tensor_unit_per_clk("bf16_rs_n256"))
    assert rows.loc["tc.bf16.rs_over_ss", "value"] == pytest.approx(1.0)
    n128 = tensor_unit_per_clk("bf16_rs_n128") / tensor_unit_per_clk("bf16_ss_n128")
    assert f"at N=128: {n128:.3f}" in rows.loc["tc.bf16.rs_over_ss", "note"]
    assert rows.loc["tc.int8.ops_per_clk_sm", "value"] == pytest.approx(tensor_unit_per_clk("int8_n256"))
    assert rows.loc["tc.int8.ops_per_clk_sm", "unit"] == "op/cycle"
    assert rows.loc["tc.bf16.sparse_flop_per_clk_sm", "value"] == pytest.approx(
        tensor_unit_per_clk("bf16_sparse_n256"))
    assert rows.loc["tc.bf16.sparse_rs_flop_per_clk_sm", "value"] == pytest.approx(
        tensor_unit_per_clk("bf16_sparse_rs_n256"))
    # the fake's SS form is fed B / (A + B) of the RS form's rate: (256 x 32 + 64 x 16) / (256 x 32) = 9/8
    assert rows.loc["tc.bf16.sparse_rs_over_ss", "value"] == pytest.approx(9 / 8)
    # the FP64 width is the faster shape's, not the first listed one's
    fast, slow = tensor_unit_per_clk("fp64_m16n8k16"), tensor_unit_per_clk("fp64_m8n8k4")
    assert fast > slow
    assert rows.loc["tc.fp64.flop_per_clk_sm", "value"] == pytest.approx(fast)
    assert rows.loc["tc.fp64.m8n8k4_flop_per_clk_sm", "value"] == pytest.approx(slow)
    assert "of NVIDIA's documented" in rows.loc["tc.int8.ops_per_clk_sm", "note"]


def _with_sparse(rates: dict, lds: float | None) -> pd.DataFrame:
    """The simulated run with the sparse ops' per_clk_sm replaced by ``rates`` (op -> value), and bw.onchip's
    LDS bandwidth when ``lds`` is given."""
    m = simulated_measurements()
    m = m[~(m["op"].isin(list(rates)) & (m["metric"] == "per_clk_sm"))]
    frames = [m] + [pd.DataFrame([{"probe": "compute.tensor_units", "metric": "per_clk_sm", "value": v, "repeat": r,
                                   "sm_clock_hz": 1.8e9, "flag": "", "op": op} for r in range(5)])
                    for op, v in rates.items()]
    if lds is not None:
        frames.append(pd.DataFrame([{"probe": "bw.onchip", "metric": "bytes_per_clk_sm", "value": lds, "repeat": r,
                                     "flag": "", "level": "smem"} for r in range(5)]))
    return pd.concat(frames, ignore_index=True)


def test_the_sparse_rates_are_set_beside_the_shared_memory_bandwidth_their_operand_reads_need():
    """A sparse wgmma m64n256k32 is 2 x 64 x 256 x 32 FLOP; it reads B's 256 x 32 bf16 from shared memory
    (1/64 byte per FLOP) and, in the SS form, A's 64 x 16 kept bf16 too (1/512 more).  At 6400 FLOP per clock
    that is 100 B per clock with A from registers (0.80 of an LDS bandwidth of 125) and 112.5 (0.90) with A
    from shared memory; NVIDIA's documented width (datasheet / SMs / clock) would need 128 and 144.  Without
    bw.onchip's samples, no claim."""
    from gpuatlas.analysis.tensor_units import tensor_unit_rows

    flop = 2 * 64 * 256 * 32
    b_bytes, a_bytes = 256 * 32 * 2, 64 * 16 * 2
    documented = 1978.9e12 / 132 / 1.83e9
    rates = {"bf16_sparse_n256": 6400.0, "bf16_sparse_rs_n256": 6400.0}
    rows = pd.DataFrame(tensor_unit_rows(_with_sparse(rates, 125.0))).set_index("quantity")
    ss, rs = rows.loc["tc.bf16.sparse_flop_per_clk_sm", "note"], rows.loc["tc.bf16.sparse_rs_flop_per_clk_sm", "note"]
    need_ss, need_rs = 6400 * (b_bytes + a_bytes) / flop, 6400 * b_bytes / flop
    assert (need_ss, need_rs) == (112.5, 100.0)
    assert (f"B and A's kept values read from shared memory at {need_ss:.1f} B per clock per SM, "
            f"{need_ss / 125:.2f} of the LDS bandwidth measured (125.0)") in ss
    assert f"would need {documented * (b_bytes + a_bytes) / flop:.0f}" in ss and "would need 144" in ss
    assert (f"B (A from registers) read from shared memory at {need_rs:.1f} B per clock per SM, "
            f"{need_rs / 125:.2f} of the LDS bandwidth measured (125.0)") in rs
    assert f"would need {documented * b_bytes / flop:.0f}" in rs and "would need 128" in rs
    # negative controls: the SS form's A is not left out, nor is A counted where it comes from registers
    assert "at 100.0 B" not in ss and "at 112.5 B" not in rs
    alone = pd.DataFrame(tensor_unit_rows(_with_sparse(rates, None))).set_index("quantity")
    assert "LDS" not in alone.loc["tc.bf16.sparse_flop_per_clk_sm", "note"]
    assert "LDS" not in alone.loc["tc.bf16.sparse_rs_flop_per_clk_sm", "note"]


def test_the_sparse_rs_width_is_judged_against_the_documented_sparse_width_and_set_over_ss():
    """6963.2 FLOP per clock with A from registers is 0.85 of the documented 2:4 sparse width (1978.9 TFLOP/s
    / 132 SMs / 1.83 GHz), not of the dense one; over 6144 with A from shared memory it is 1.133."""
    from gpuatlas.analysis.tensor_units import tensor_unit_rows

    documented = 1978.9e12 / 132 / 1.83e9
    rates = {"bf16_sparse_n256": 6144.0, "bf16_sparse_rs_n256": 6963.2}
    rows = pd.DataFrame(tensor_unit_rows(_with_sparse(rates, None))).set_index("quantity")
    rs = rows.loc["tc.bf16.sparse_rs_flop_per_clk_sm"]
    assert rs["value"] == pytest.approx(6963.2) and rs["unit"] == "FLOP/cycle"
    assert f"{6963.2 / documented:.3f} of NVIDIA's documented {documented:.0f} per clock per SM" in rs["note"]
    assert f"{6963.2 / (documented / 2):.3f} of" not in rs["note"]  # negative control: not the dense width
    ratio = rows.loc["tc.bf16.sparse_rs_over_ss"]
    assert ratio["value"] == pytest.approx(6963.2 / 6144.0) and ratio["unit"] == "1"
    # the ratio's CI spans the ends of both CIs (identical samples: a point)
    assert ratio["ci_low"] == pytest.approx(ratio["value"]) and ratio["ci_high"] == pytest.approx(ratio["value"])
    without = pd.DataFrame(tensor_unit_rows(_with_sparse({"bf16_sparse_n256": 6144.0}, None).query(
        "op != 'bf16_sparse_rs_n256'"))).set_index("quantity")
    assert "tc.bf16.sparse_rs_over_ss" not in without.index and "tc.bf16.sparse_flop_per_clk_sm" in without.index


def test_derivation_without_the_probe_has_no_rows():
    from gpuatlas.analysis.tensor_units import tensor_unit_rows

    other = simulated_measurements().assign(probe="compute.vector")
    assert tensor_unit_rows(other) == []


def test_documented_widths_are_the_datasheet_over_sms_and_clock():
    from gpuatlas.analysis.tensor_units import documented_per_clk_sm

    # NVIDIA/cudnn-frontend PR#650: 989.5 TFLOP/s = 132 SMs x 1.83 GHz x 4096 FLOP/clk/SM
    assert documented_per_clk_sm("bf16") == pytest.approx(4096, rel=1e-3)
    assert documented_per_clk_sm("int8") == pytest.approx(2 * documented_per_clk_sm("bf16"), rel=1e-3)
    assert documented_per_clk_sm("fp64") == pytest.approx(66.9e12 / 132 / 1.98e9)


# -- the host code against an emulated device ----------------------------------------------------------------

def _gather(frag, n_regs, rows, cols, shape):
    """A matrix rebuilt from per-thread registers ``frag`` (threads x n_regs) with the index maps rows/cols."""
    m = np.zeros(shape, dtype=frag.dtype)
    m[rows, cols] = frag.reshape(-1, n_regs)
    return m


def _emulated_device(monkeypatch, layout_ok=True, a_words=(0, 1, 2, 3)):
    """tensor_units' kernels as numpy (the PTX ISA's layouts, written out here), on a 4-SM device at 2 GHz;
    ``a_words``: the order the device reads a thread's 4 register-A words in (the PTX ISA's: 0, 1, 2, 3)."""
    import sys

    import gpuatlas.probes.kit.samplers
    from gpuatlas.probes.kit.harness import Budget, Context
    from test_execution import _FakeCupy, _MillisecondTimer

    blocks_per_sm, sms, hz = 2, 4, 2e9

    def wgmma(name, n, k):
        def run(grid, block, args):
            a_rows, a_frag, b_rows, groups, out, clocks = args
            integer = name.startswith("tu_s8")
            if integer:
                a, b = a_rows.view(np.int8).reshape(64, k), b_rows.view(np.int8).reshape(n, k)
            else:
                def values(codes):
                    return (codes.astype(np.uint32) << 16).view(np.float32)
                b = values(b_rows.view(np.uint16).reshape(n, k))
                words = np.asarray(a_frag).reshape(128, tu.FRAG_WORDS)

                def register_a():  # A's 64 x 16 codes from the threads' registers: word j of thread t
                    t, j = np.arange(128)[:, None], np.arange(4)[None, :]
                    lane = t % 32
                    rows = 16 * (t // 32) + lane // 4 + 8 * (j % 2)
                    cols = 2 * (lane % 4) + 8 * (j // 2)
                    read = words[:, list(a_words)]
                    codes = np.zeros((64, 16), np.uint16)
                    codes[rows, cols], codes[rows, cols + 1] = read & 0xFFFF, read >> 16
                    return codes

                if name.startswith("tu_sp"):  # kept values, placed by thread 0's metadata nibbles
                    kept = values(register_a() if name.startswith("tu_sprs")
                                  else a_rows.view(np.uint16).reshape(64, k // 2))
                    meta = int(words[0, 4])
                    a = np.zeros((64, k), np.float32)
                    for group in range(k // 4):
                        nibble = meta >> (4 * (group % 8)) & 0xF
                        a[:, 4 * group + (nibble & 3)] = kept[:, 2 * group]
                        a[:, 4 * group + (nibble >> 2)] = kept[:, 2 * group + 1]
                elif name.startswith("tu_rs"):
                    a = values(register_a())
                else:
                    a = values(a_rows.view(np.uint16).reshape(64, k))
            d = int(groups) * tu.STEPS * (a.astype(np.float64) @ b.T.astype(np.float64))
            t, i = np.arange(128)[:, None], np.arange(n // 2)[None, :]
            lane = t % 32
            frag = d[16 * (t // 32) + lane // 4 + 8 * ((i % 4) >= 2), 8 * (i // 4) + 2 * (lane % 4) + (i % 2)]
            if not layout_ok:
                frag = frag[:, ::-1]
            out.reshape(grid[0], -1)[:] = frag.reshape(-1).astype(out.dtype)
            clocks.reshape(-1, 2)[:] = [hz * 1e-3, 1e6]
        return run

    def dmma(m, k):
        def run(grid, block, args):
            a_in, b_in, trips, out, clocks = args
            regs_a, regs_b, regs_c = tu.dmma_regs(m, k)
            lane = np.arange(32)[:, None]
            ia, ib, ic = (np.arange(r)[None, :] for r in (regs_a, regs_b, regs_c))
            a = _gather(np.asarray(a_in), regs_a, lane // 4 + 8 * (ia % 2), lane % 4 + 4 * (ia // 2), (m, k))
            bs = np.asarray(b_in).reshape(32, tu.DMMA_ACC, regs_b)
            warp = []
            for j in range(tu.DMMA_ACC):
                b = _gather(bs[:, j].copy(), regs_b, lane % 4 + 4 * ib, lane // 4, (k, 8))
                c = int(trips) * (a @ b)
                warp.append(c[lane // 4 + 8 * (ic // 2), 2 * (lane % 4) + ic % 2])
            frag = np.stack(warp, axis=1).reshape(32, -1)  # lane x (accumulator, register)
            if not layout_ok:
                frag = frag[:, ::-1]
            out.reshape(-1, frag.size)[:] = frag.reshape(-1)
            clocks.reshape(-1, 2)[:] = [hz * 1e-3, 1e6]
        return run

    kernels = {name: wgmma(name, n, k) for name, n, k, _ in tu.WGMMA_UNITS.values()}
    kernels.update({name: dmma(m, k) for name, m, k in tu.DMMA_UNITS.values()})

    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy)
    monkeypatch.setattr(tu, "_kernel", lambda name: kernels[name])
    monkeypatch.setattr(tu, "blocks_per_sm", lambda func, threads: blocks_per_sm)
    monkeypatch.setattr(tu, "calibrate", lambda run, unit, target, max_count: (min(3, max_count), target))
    monkeypatch.setattr(gpuatlas.probes.kit.samplers, "EventTimer", _MillisecondTimer)
    device = {"sm_count": sms, "compute_capability": "9.0", "sm_clock_max_hz": hz}
    return Context(device=device, budget=Budget(min_repeats=3, max_repeats=3, warmup_s=0)), blocks_per_sm * sms


@pytest.mark.parametrize("op", tu.UNITS)
def test_host_flow_on_an_emulated_device(monkeypatch, op):
    ctx, blocks = _emulated_device(monkeypatch)
    samples = tu.compute_tensor_units(ctx, op)
    per_clk = [s.value for s in samples if s.metric == "per_clk_sm"]
    threads = tu.WG_THREADS if op in tu.WGMMA_UNITS else tu.DMMA_THREADS
    per_launch = 3 * (tu.STEPS if op in tu.WGMMA_UNITS else tu.DMMA_ACC) * tu.unit_ops(op)  # 3 trips
    per_launch *= blocks if op in tu.WGMMA_UNITS else blocks * threads // 32
    assert per_clk == pytest.approx([per_launch / 1e-3 / 4 / 2e9] * 3)
    assert {s.flag for s in samples if s.metric == "per_clk_sm"} <= {""}
    assert [s.value for s in samples if s.metric == "blocks_per_sm"] == [2]


@pytest.mark.parametrize("op, message", [("bf16_rs_n128", "off the host matmul"), ("int8_n256", "off the host matmul"),
                                         ("bf16_sparse_n256", "off the host matmul"),
                                         ("bf16_sparse_rs_n256", "off the host matmul"),
                                         ("fp64_m16n8k16", "not steps x A B")])
def test_a_misread_fragment_layout_is_refused(monkeypatch, op, message):
    ctx, _ = _emulated_device(monkeypatch, layout_ok=False)
    with pytest.raises(RuntimeError, match=message):
        tu.compute_tensor_units(ctx, op)


@pytest.mark.parametrize("op", ("bf16_rs_n256", "bf16_sparse_rs_n256"))
def test_a_register_a_read_in_another_order_is_refused(monkeypatch, op):
    """A device that reads a thread's A words in another order than the host wrote them (rows g and g + 8
    swapped with columns +8) multiplies another A: the one-group check refuses it."""
    ctx, _ = _emulated_device(monkeypatch, a_words=(0, 2, 1, 3))
    with pytest.raises(RuntimeError, match="off the host matmul"):
        tu.compute_tensor_units(ctx, op)


def test_a_gpu_other_than_compute_capability_9_0_is_refused(monkeypatch):
    ctx, _ = _emulated_device(monkeypatch)
    ctx.device["compute_capability"] = "10.0"
    with pytest.raises(RuntimeError, match="sm_90a"):
        tu.compute_tensor_units(ctx, "bf16_ss_n256")


def test_a_simulated_run_derives_every_declared_width(tmp_path):
    import fakes
    from gpuatlas.analysis.derive import derive
    from gpuatlas.machinery import runner

    probes = [p for p in fakes.simulated_probes() if p.id == "compute.tensor_units"]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "full", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    assert {s["status"] for s in meta["probes"].values()} == {"ok"}
    d = derive(meta, run.read_measurements()).set_index("quantity")["value"]
    assert set(probes[0].quantities) <= set(d.index)
    assert d["tc.fp64.flop_per_clk_sm"] == fakes.tensor_unit_per_clk("fp64_m16n8k16")
    assert d["tc.bf16.sparse_rs_flop_per_clk_sm"] == 2 * d["tc.bf16.ss_flop_per_clk_sm"]
    assert d["tc.bf16.sparse_flop_per_clk_sm"] == pytest.approx(2 * d["tc.bf16.ss_flop_per_clk_sm"] * 8 / 9)


@pytest.mark.gpu
@pytest.mark.parametrize("op", tu.UNITS)
def test_every_unit_passes_its_own_result_checks_on_the_gpu(op):
    """On a Hopper GPU: each kernel's results match the host's (layouts, metadata, exact integer chains), and
    no rate exceeds its physical bound."""
    from gpuatlas.machinery.device import device_properties
    from gpuatlas.probes.kit.harness import Budget, Context

    device = device_properties()
    if device["compute_capability"] != "9.0":
        pytest.skip("tensor_units.cu is built for sm_90a")
    ctx = Context(device=device, budget=Budget(min_repeats=3, max_repeats=3, time_s=0.05))
    samples = tu.compute_tensor_units(ctx, op)
    assert samples and not [s for s in samples if s.flag == "invalid"]
