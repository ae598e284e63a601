"""The lecture's exercise 3 probe (column_read.cu) compiled for sm_90 without a GPU: the direct kernel reads
its columns with 16-bit global loads only; the staged one loads rows into a shared tile and reads columns
from it; the tile's padding makes that column read conflict-free."""
import ast
import re
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from gpuatlas.analysis.banks import degree_of
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass
from gpuatlas.probes.kit.harness import Budget, Context
import importlib

column_read = importlib.import_module("gpuatlas.probes.families.column_read")


@pytest.fixture(scope="module")
def compiled():
    cubin, log = compile_cubin("column_read.cu")
    return sass(cubin), resource_usage(log)


def opcodes(sass_text: str) -> Counter:
    return Counter(re.sub(r"\s+", " ", l.split(";")[0]).strip().split(" ")[1] for l in sass_text.splitlines()
                   if re.search(r"/\*[0-9a-f]{4}\*/", l))


def test_direct_reads_global_memory_only(compiled):
    ops = opcodes(compiled[0]["column_direct"])
    assert ops["LDG.E.U16"] >= 4
    assert not [op for op in ops if op.startswith(("LDS", "STS", "BAR", "LDL", "STL"))]


def test_staged_goes_through_a_padded_shared_tile(compiled):
    ops = opcodes(compiled[0]["column_staged"])
    assert ops["LDG.E.U16"] >= 4 and ops["STS.U16"] >= 4 and ops["LDS.U16"] >= 4
    assert ops["BAR.SYNC.DEFER_BLOCKING"] >= 2
    assert not [op for op in ops if op.startswith(("LDL", "STL"))]
    assert compiled[1]["column_staged"]["smem_bytes"] == 32 * 34 * 2


def test_the_padded_tile_column_read_is_conflict_free():
    """Lane x reads tile[x][c]: rows of 34 halves (17 words) spread the lanes over all 32 banks; rows of 32
    halves (16 words) would put them in two banks."""
    for column in range(32):
        assert degree_of([68 * x + 2 * column for x in range(32)], 2, 32, 4) == 1
        assert degree_of([64 * x + 2 * column for x in range(32)], 2, 32, 4) == 16


def test_matrix_sides_are_the_lecture_s_and_one_beyond_l2():
    for l2 in (40 << 20, 60 << 20, 96 << 20):
        small, large = column_read.matrix_sides({"l2_bytes": l2})
        assert small == column_read.LECTURE_N and large * large * 2 >= 4 * l2 and (large // 2) ** 2 * 2 < 4 * l2


def test_the_generator_twin_is_lowbias32_in_plain_integers():
    """uniform_halves against the hash written out in Python integers: k / 1024 with k its top 10 bits."""
    def lowbias32(x):
        x ^= x >> 16
        x = x * 0x7FEB352D & 0xFFFFFFFF
        x ^= x >> 15
        x = x * 0x846CA68B & 0xFFFFFFFF
        return x ^ (x >> 16)

    key = column_read.hash_key(7)
    index = np.array([0, 1, 2, 4095, 1 << 20, (1 << 28) - 1])
    want = np.array([(lowbias32(int(i) ^ int(key)) >> 22) / 1024 for i in index], dtype=np.float16)
    assert np.array_equal(column_read.uniform_halves(index, key), want.view(np.uint16))
    values = column_read.uniform_halves(np.arange(1 << 16), key).view(np.float16).astype(np.float64)
    assert values.min() == 0 and values.max() == 1023 / 1024 and abs(values.mean() - 1023 / 2048) < 0.01


class FakeDeviceArray:
    """A device array of the fake CuPy: memory and copies only (CuPy's own kernels are absent on purpose)."""

    def __init__(self, data):
        self.data = data

    def __getitem__(self, index):
        return FakeDeviceArray(self.data[index])

    def get(self):
        return self.data.copy()


def fake_cupy():
    module = types.ModuleType("cupy")
    module.uint16, module.float32, module.float64 = np.uint16, np.float32, np.float64
    module.empty = lambda shape, dtype: FakeDeviceArray(np.zeros(shape, dtype))
    module.asarray = lambda host: FakeDeviceArray(np.array(host))
    return module


def fake_kernels(wrong_sums: bool = False):
    """column_read.cu's kernels as numpy: what the GPU computes, for the probe's host side to check."""
    def run(name):
        def launch(grid, block, args):
            if name == "fill_uniform":
                matrix, count, key = args
                matrix.data.reshape(-1)[:] = column_read.uniform_halves(np.arange(int(count)), key)
            elif name == "column_reference":
                matrix, n, sums = args
                sums.data[:] = matrix.data.view(np.float16).astype(np.float64).sum(axis=0)
            else:
                matrix, n, rows, partial = args
                values = matrix.data.view(np.float16).astype(np.float32)
                partial.data[:] = values.reshape(-1, int(rows), int(n)).sum(axis=1) + (1.0 if wrong_sums else 0.0)
        return launch
    return lambda filename, name: run(name)


@pytest.fixture
def faked_gpu(monkeypatch):
    import gpuatlas.probes.kit.cuda as cuda_kit

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    monkeypatch.setattr(column_read, "EventTimer", lambda launch, min_s: None)
    monkeypatch.setattr(column_read, "repeat_until_stable", lambda sample, metric, budget: ["measured"])
    return lambda wrong=False: monkeypatch.setattr(cuda_kit, "kernel", fake_kernels(wrong))


def test_column_read_uses_no_cupy_generator_or_reduction(faked_gpu):
    """The probe's host side runs on a CuPy that has memory and copies only: no cupy.random (whose cuRAND
    module CuPy compiles on first use) and no CuPy reduction or elementwise kernel."""
    faked_gpu()
    ctx = Context(device={"l2_bytes": 1 << 20}, budget=Budget(), seed=3)
    for method in column_read.KERNELS:
        assert column_read.column_read(ctx, 256, method) == ["measured"]


def test_column_read_raises_on_wrong_sums(faked_gpu):
    faked_gpu(wrong=True)
    with pytest.raises(RuntimeError, match="column sums do not match"):
        column_read.column_read(Context(device={}, budget=Budget(), seed=3), 256, "staged")


def test_column_read_module_never_names_cupy_random():
    tree = ast.parse(Path(column_read.__file__).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "random"]


def test_generator_and_reference_kernels_compile(compiled):
    assert {"fill_uniform", "column_reference"} <= set(compiled[1])
    assert not [op for op in opcodes(compiled[0]["column_reference"]) if op.startswith(("LDL", "STL"))]
