"""The lecture's exercise 3 probe (column_read.cu) compiled for sm_90 without a GPU: the direct kernel reads
its columns with 16-bit global loads only; the staged one loads rows into a shared tile and reads columns
from it; the tile's padding makes that column read conflict-free."""
import re
from collections import Counter

import pytest

from analysis.banks import degree_of
from probes.kit.cuda import compile_cubin, resource_usage, sass
import importlib

column_read = importlib.import_module("probes.families.column_read")


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
