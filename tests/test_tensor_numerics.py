"""The numerics probes without a GPU: their kernels compiled for sm_90 / sm_90a with the tensor instruction each
claims (against a negative control), the host's operand packing read back, and the numerics table recovering
the simulated GPU's tensor cores (tests/fakes/numerics.py, an accumulator written independently of
gpuatlas.analysis.numerics), with "no model fits" where the outputs match no model."""
from collections import Counter
from fractions import Fraction

import fakes.numerics as fake_numerics
import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.numerics import FORMATS, FP32, decode
from gpuatlas.analysis.tensor_numerics import DEPTH, FLOAT_DTYPES, numerics_rows, numerics_table
from gpuatlas.probes.families.numerics import DTYPES, ELEMENT, ROWS, Batch, _control, cases, measure, pattern
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass
from test_compute import instructions

#: The one tensor instruction each kernel must be (sm_90: FP8 mma.sync is emulated with two FP16 HMMAs).
MMA_SASS = {"fp16": ("HMMA.16816.F32", 1), "bf16": ("HMMA.16816.F32.BF16", 1), "tf32": ("HMMA.1688.F32.TF32", 1),
            "int8": ("IMMA.16832.S8.S8", 1), "e4m3": ("HMMA.16816.F32", 2), "e5m2": ("HMMA.16816.F32", 2)}
WGMMA_SASS = {"fp16": "HGMMA.64x8x16.F32", "bf16": "HGMMA.64x8x16.F32.BF16", "tf32": "HGMMA.64x8x8.F32.TF32",
              "e4m3": "QGMMA.64x8x32.F32.E4M3.E4M3", "e5m2": "QGMMA.64x8x32.F32.E5M2.E5M2",
              "int8": "IGMMA.64x8x32.S8.S8"}


def tensor_ops(code: str) -> Counter:
    return Counter(t.split()[0] for _, t in instructions(code) if "MMA" in t.split()[0])


@pytest.fixture(scope="module")
def mma_sass():
    return sass(compile_cubin("numerics_mma.cu", "sm_90")[0])


@pytest.fixture(scope="module")
def wgmma_sass():
    return sass(compile_cubin("numerics_wgmma.cu", "sm_90a")[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_mma_sync_kernel_is_its_tensor_instruction(mma_sass, dtype):
    op, count = MMA_SASS[dtype]
    assert tensor_ops(mma_sass[f"numerics_mma_{dtype}"]) == {op: count}


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_wgmma_kernel_is_one_warpgroup_mma(wgmma_sass, dtype):
    assert tensor_ops(wgmma_sass[f"numerics_wgmma_{dtype}"]) == {WGMMA_SASS[dtype]: 1}


@pytest.mark.parametrize("filename, arch", [("numerics_mma.cu", "sm_90"), ("numerics_wgmma.cu", "sm_90a")])
def test_the_kernels_use_no_local_memory(filename, arch):
    usage = resource_usage(compile_cubin(filename, arch)[1])
    assert len(usage) == len(DTYPES)
    assert all(u["stack_bytes"] == 0 and u["spill_stores"] == 0 for u in usage.values()), usage


def test_the_instruction_check_fails_on_a_kernel_without_one(mma_sass, wgmma_sass):
    """Negative control: an empty kernel has no tensor instruction, and mma.sync's kernels no warpgroup one."""
    assert tensor_ops(sass(compile_cubin("launch.cu", "sm_90")[0])["empty_kernel"]) == Counter()
    assert not any("GMMA" in op for code in mma_sass.values() for op in tensor_ops(code))


@pytest.mark.parametrize("instruction", ROWS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_the_operands_read_back_as_the_cases_and_the_control_is_small_integers(instruction, dtype):
    crafted = cases(dtype)
    batch = Batch(dtype, ROWS[instruction], 1 + len(crafted))
    exact = batch.set_full(0, *_control(np.random.default_rng(0), ROWS[instruction], DEPTH[dtype]))
    for i, case in enumerate(crafted, 1):
        batch.set_case(i, case)
    fmt = FP32 if dtype == "tf32" else FORMATS[dtype]
    words = batch.words(batch.a)
    assert words.shape == (len(crafted) + 1, ROWS[instruction], 8) and words.dtype == np.uint32
    for i, case in enumerate(crafted, 1):
        assert [decode(int(x), fmt) for x in batch.a[i, 0]] == list(case.a)
        assert [decode(int(x), fmt) for x in batch.b[i, 0]] == list(case.b)
        assert Fraction(float(batch.c[i, 0, 0])) == case.c and not batch.a[i, 1:].any() and not batch.b[i, 1:].any()
    a = np.array([[float(decode(int(x), fmt)) for x in row] for row in batch.a[0]])
    b = np.array([[float(decode(int(x), fmt)) for x in row] for row in batch.b[0]])
    assert np.array_equal(batch.c[0] + a @ b.T, exact) and np.abs(a).max() <= 3
    # element j of K sits in word j * size / 4 of its row, low bytes first
    size = batch.a.itemsize
    assert (words[0, 0, 0] & ((1 << (8 * size)) - 1) if size < 4 else words[0, 0, 0]) == batch.a[0, 0, 0]


def test_a_value_the_format_lacks_is_refused():
    with pytest.raises(ValueError):
        pattern(Fraction(1, 3), "fp16")
    with pytest.raises(ValueError):
        pattern(1 + Fraction(1, 2 ** 12), "tf32")  # an FP32 value tf32's 10 mantissa bits do not hold


def _frame(probe: str, dtypes, broken: bool = False) -> pd.DataFrame:
    rows = [{"probe": probe, "dtype": dtype, "metric": s.metric, "value": s.value, "repeat": s.repeat}
            for dtype in dtypes for s in fake_numerics.numerics(None, dtype, broken)]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def simulated():
    rows = numerics_rows(_frame("numerics.wgmma", DTYPES), {"compute_capability": "9.0"})
    return pd.DataFrame(rows).set_index("quantity")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_the_table_recovers_the_simulated_tensor_cores(simulated, dtype):
    bits, group, rounding, flush_in, flush_out = fake_numerics.TRUTH[dtype]
    truth = {"accumulator_mantissa_bits": bits - 1, "alignment_rounding": 1, "group": group or DEPTH[dtype],
             "output_rounding": int(rounding == "trunc"), "subnormal_inputs": int(not flush_in),
             "subnormal_outputs": int(not flush_out)}
    for name, want in truth.items():
        row = simulated.loc[f"numerics.{dtype}.wgmma.{name}"]
        assert row["ci_low"] <= want <= row["ci_high"], name
        assert row["value"] == want or (np.isnan(row["value"]) and row["note"].startswith("undecided")), name
    for name in ("accumulator_mantissa_bits", "alignment_rounding", "group"):  # what the cases always decide
        assert simulated.loc[f"numerics.{dtype}.wgmma.{name}", "value"] == truth[name], name
    if dtype in ("e4m3", "e5m2"):  # 13 explicit mantissa bits: the e8m13 claim holds on this GPU
        row = simulated.loc[f"numerics.{dtype}.wgmma.e8m13_claim"]
        assert row["value"] == 1 and row["note"].startswith("the e8m13 claim holds")
    assert simulated.loc["numerics.int8.wgmma.accumulation_exact", "value"] == 1


def test_outputs_no_model_gives_are_reported_so_not_fitted():
    rows = pd.DataFrame(numerics_rows(_frame("numerics.mma_sync", ("e4m3", "bf16"), broken=True),
                                      {"compute_capability": "9.0"})).set_index("quantity")
    assert rows["value"].isna().all() and rows["ci_low"].isna().all()
    assert all(note.startswith("no model fits") for q, note in rows["note"].items() if not q.endswith("claim"))
    assert rows.loc["numerics.e4m3.mma_sync.e8m13_claim", "note"].startswith("the e8m13 claim no model fits")
    assert "emulates" in rows.loc["numerics.e4m3.mma_sync.group", "note"]


def test_an_int8_case_off_its_exact_sum_is_not_exact():
    frame = _frame("numerics.wgmma", ("int8",))
    frame.loc[frame["metric"] == "mismatches_int32_max", "value"] = 1.0
    (row,) = numerics_rows(frame, {})
    assert row["value"] == 0 and "int32_max" in row["note"]


def test_the_report_table_says_each_property_in_words(simulated):
    table = numerics_table(simulated.reset_index()).set_index(["input", "instruction"])
    assert table.loc[("fp16", "wgmma"), "alignment rounding"] == "truncated"
    assert table.loc[("bf16", "wgmma"), "subnormal inputs"] == "flushed"
    assert table.loc[("e4m3", "wgmma"), "output rounding"] == "nearest even or toward zero"  # undecided
    assert table.loc[("e4m3", "wgmma"), "e8m13 claim"] == "holds"
    assert table.loc[("tf32", "wgmma"), "accumulator mantissa bits"] == "23"


# -- the kernels' fragment gathers (numerics_mma.cu, as written there) against the PTX ISA's element layouts ----

def _ptx_a(size: int, g: int, t: int, i: int) -> tuple:
    """(row, col) of element a_i of a lane's A fragment, as the PTX ISA states it for m16n8k16 (16-bit),
    m16n8k8 (tf32) and m16n8k32 (8-bit)."""
    if size == 2:
        return g + 8 * (i in (2, 3, 6, 7)), 2 * t + (i & 1) + 8 * (i >= 4)
    if size == 4:
        return g + 8 * (i in (1, 3)), t + 4 * (i >= 2)
    return g + 8 * (i in (4, 5, 6, 7, 12, 13, 14, 15)), 4 * t + (i & 3) + 16 * (i >= 8)


def _ptx_b(size: int, g: int, t: int, i: int) -> tuple:
    """(k, n) of element b_i of a lane's B fragment (PTX ISA)."""
    if size == 2:
        return 2 * t + (i & 1) + 8 * (i >= 2), g
    if size == 4:
        return t + 4 * i, g
    return 4 * t + (i & 3) + 16 * (i >= 4), g


@pytest.mark.parametrize("dtype", ("fp16", "tf32", "e4m3"))
def test_the_kernel_gathers_each_operand_element_where_the_ptx_isa_places_it(dtype):
    k, size = DEPTH[dtype], np.dtype(ELEMENT[dtype]).itemsize
    rng = np.random.default_rng(1)
    a = rng.integers(1, 1 << (8 * size - 1), (16, k)).astype(ELEMENT[dtype])
    b = rng.integers(1, 1 << (8 * size - 1), (8, k)).astype(ELEMENT[dtype])
    a_words, b_words = a.view(np.uint32).ravel(), b.view(np.uint32).ravel()
    per_word = 4 // size
    seen_a, seen_b = np.zeros_like(a), np.zeros_like(b)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        ar = [a_words[(g + 8 * (r & 1)) * 8 + t + 4 * (r >> 1)] for r in range(4)]  # numerics_mma.cu's gather
        br = [b_words[g * 8 + t + 4 * r] for r in range(2)]
        for r, word in enumerate(ar):
            for j in range(per_word):
                row, col = _ptx_a(size, g, t, r * per_word + j)
                seen_a[row, col] = (int(word) >> (8 * size * j)) & ((1 << (8 * size)) - 1)
        for r, word in enumerate(br):
            for j in range(per_word):
                kk, n = _ptx_b(size, g, t, r * per_word + j)
                seen_b[n, kk] = (int(word) >> (8 * size * j)) & ((1 << (8 * size)) - 1)
    assert np.array_equal(seen_a, a) and np.array_equal(seen_b, b)



# -- the probe's host side end to end, on a kernel emulated in numpy (no GPU): packing, checks, samples --------

class _Device(np.ndarray):
    def get(self):
        return np.array(self)


class _FakeCupy:
    @staticmethod
    def asarray(x):
        return np.array(x).view(_Device)

    @staticmethod
    def zeros_like(x):
        return np.zeros_like(np.asarray(x)).view(_Device)


def _values(words: np.ndarray, dtype: str) -> np.ndarray:
    """The elements of packed operand rows as float64 (int64 for int8)."""
    raw = np.ascontiguousarray(words).view({2: np.uint16, 4: np.uint32, 1: np.uint8}[
        np.dtype(ELEMENT[dtype]).itemsize])
    if dtype == "int8":
        return raw.view(np.int8).astype(np.int64)
    fmt = FP32 if dtype == "tf32" else FORMATS[dtype]
    table = {int(p): float(decode(int(p), fmt)) for p in np.unique(raw)}
    return np.vectorize(table.get, otypes=[float])(raw)


def _emulated_kernel(dtype: str, broken_layout: bool = False):
    """D = C + A B^T exactly, D(0, 0) of the crafted cases as the simulated tensor core computes it;
    ``broken_layout``: D's columns stored one place off, as a misread fragment would."""
    crafted = cases(dtype) if dtype != "int8" else []

    def launch(grid, block, args):
        a, b, c, d = (np.asarray(x) for x in args)
        av, bv = _values(a, dtype), _values(b, dtype)
        exact = c.astype(av.dtype) + np.einsum("xik,xjk->xij", av, bv)
        d[...] = np.roll(exact, 1, axis=2) if broken_layout else exact  # broken: D's columns one off
        for i, case in enumerate(crafted, 1):
            d[i, 0, 0] = fake_numerics.tensor_core(dtype, case.a, case.b, case.c)

    return launch


@pytest.mark.parametrize("instruction", ROWS)
@pytest.mark.parametrize("dtype", ("fp16", "tf32", "e4m3", "int8"))
def test_the_probe_checks_its_control_and_records_every_case(monkeypatch, instruction, dtype):
    import sys

    import fakes
    from gpuatlas.probes.kit.harness import Budget, Context

    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy)
    ctx = Context(device=fakes.DEVICE, budget=Budget())
    samples = measure(ctx, _emulated_kernel(dtype), instruction, dtype)
    if dtype == "int8":
        assert {s.metric: s.value for s in samples} == {f"mismatches_{n}": 0 for n in
                                                        ("random_full", "int32_max", "int32_min")}
    else:
        assert {s.metric: s.value for s in samples} == {f"d_{c.name}": fake_numerics.tensor_core(
            dtype, c.a, c.b, c.c) for c in cases(dtype)}
    with pytest.raises(RuntimeError, match="control case"):  # a misread layout is caught on the GPU
        measure(ctx, _emulated_kernel(dtype, broken_layout=True), instruction, dtype)


def test_more_bits_than_the_cases_reach_is_a_lower_bound_not_a_count(monkeypatch):
    """A tensor core keeping 30 significant bits reads as the grid's top count, which the cases cannot tell from
    more: the row gives the bound, not a value."""
    monkeypatch.setitem(fake_numerics.TRUTH, "fp16", (30, None, "trunc", False, False))
    rows = pd.DataFrame(numerics_rows(_frame("numerics.wgmma", ("fp16",)), {})).set_index("quantity")
    row = rows.loc["numerics.fp16.wgmma.accumulator_mantissa_bits"]
    assert np.isnan(row["value"]) and row["ci_high"] == float("inf") and row["note"].startswith("at least 25")
    table = numerics_table(rows.reset_index())
    assert table.loc[0, "accumulator mantissa bits"] == "at least 25"
