"""probes/families/bandwidth/__init__.py and bandwidth.cu without a GPU: every kernel compiled for sm_90 (no local memory, the
intended load width, several loads in flight before use), the sweeps sized from device dicts, the stride
layout's invariants, and the host's checksum accounting against a replay of the kernels' indexing."""
import importlib
import json
import re

import numpy as np
import pytest

from conftest import COMMITTED_RUN
from gpuatlas.probes.families.bandwidth import dram
from gpuatlas.probes.kit import samplers as kit
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass

H200 = json.loads((COMMITTED_RUN / "run.json").read_text())["device"]
#: Another GPU's properties (an A100-40GB-like part): nothing about the sweeps may be H200-specific.
OTHER = {**H200, "name": "Other GPU", "sm_count": 108, "l2_bytes": 40 << 20, "total_memory_bytes": 40 << 30,
         "smem_per_sm_bytes": 164 << 10, "memory_bus_bits": 5120, "memory_clock_hz": 1.215e9,
         "sm_clock_max_hz": 1.41e9}


@pytest.fixture(scope="module")
def bw():
    return importlib.import_module("gpuatlas.probes.families.bandwidth")


@pytest.fixture(scope="module")
def probes(bw):
    from gpuatlas.probes.registry import all_probes

    registry = all_probes()
    return {pid: registry[pid] for pid in ("bw.stride", "bw.l2", "bw.dram", "bw.onchip", "bw.dram_footprint")}


# -- kernels ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cubin():
    return compile_cubin("bandwidth.cu")


KERNELS = ("stride_2", "stride_4", "stride_16", "dram_read_u4", "dram_read_u8", "dram_read_chunk_u4",
           "dram_read_chunk_u8", "dram_read_block_u2", "dram_read_block_u4", "dram_read_block_u8", "dram_read_once",
           "dram_write", "dram_write_cs", "dram_write_once_8", "dram_write_once_16",
           "dram_write_once_16_cs", "dram_copy", "dram_copy_chunk_u4", "dram_copy_chunk_u8",
           "smem_read", "l1_read", "fill_hash", "sum_elements", "count_mismatches")
#: Kernels that must run at full occupancy on sm_90: 256-thread blocks, 2048 threads/SM -> <= 32 registers.
FULL_OCCUPANCY = ("stride_2", "stride_4", "stride_16", "dram_read_u4", "dram_read_chunk_u4", "dram_read_block_u2",
                  "dram_read_block_u4", "dram_read_once",
                  "dram_write",
                  "dram_write_cs", "dram_write_once_8", "dram_write_once_16", "dram_write_once_16_cs",
                  "dram_copy_chunk_u4", "smem_read", "l1_read")


def instructions(code: str) -> list[str]:
    return [re.sub(r"\s+", " ", l.split(";")[0]).strip().split("*/", 1)[1].strip() for l in code.splitlines()
            if re.search(r"/\*[0-9a-f]{4}\*/", l)]


def opcode(line: str) -> str:
    parts = line.split()
    return parts[1] if parts[0].startswith("@") else parts[0]


WIDTH = {"128": 4, "64": 2}


def dest_registers(line: str) -> set[str]:
    """Registers a load writes (R4 of LDG.E.128 is R4..R7)."""
    op, rest = opcode(line), line.split(None, 1 if not line.startswith("@") else 2)[-1]
    first = int(re.match(r"R(\d+)", rest).group(1))
    width = next((w for k, w in WIDTH.items() if f".{k}" in op), 1)
    return {f"R{first + i}" for i in range(width)}


def source_registers(line: str) -> set[str]:
    operands = line.split(None, 1 if not line.startswith("@") else 2)[-1].split(",")
    start = 0 if opcode(line).startswith(("ST", "RED", "BRA")) else 1
    return set(re.findall(r"\bR\d+\b", ",".join(operands[start:])))


def loop_loads(code: str, op: str) -> list[tuple[int, str]]:
    """(index, line) of every ``op`` load (exact opcode) in the kernel."""
    return [(i, l) for i, l in enumerate(instructions(code)) if opcode(l) == op]


def assert_issued_before_use(code: str, op: str, count: int) -> None:
    """The first ``count`` loads of ``op`` are all issued before any of their values is read: ``count``
    loads per thread in flight at once."""
    lines = instructions(code)
    loads = loop_loads(code, op)
    assert len(loads) >= count, f"expected {count} {op} loads, found {len(loads)}"
    group = loads[:count]
    written = set().union(*(dest_registers(l) for _, l in group))
    last = group[-1][0]
    for i in range(group[0][0] + 1, last):
        if opcode(lines[i]).startswith("LD"):
            continue  # another load of the group (its address register may reuse an old value's register)
        used = source_registers(lines[i]) & written
        # a register a load of the group wrote, read before the group's last load is issued
        mine = {r for r in used if any(r in dest_registers(l) for j, l in group if j < i)}
        assert not mine, f"{lines[i]!r} uses {mine} before the last of {count} {op} loads is issued"


def addressed(code: str) -> list[tuple[int, str]]:
    """(address, instruction) of every instruction."""
    return [(int(re.search(r"/\*([0-9a-f]{4})\*/", l).group(1), 16), instructions(l)[0])
            for l in code.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", l)]


def innermost_loops(code: str) -> list[tuple[int, int]]:
    """[start, end] address ranges of backward branches that contain no other backward branch."""
    loops = []
    for address, line in addressed(code):
        m = re.search(r"BRA (0x[0-9a-f]+)", line)
        if m and int(m.group(1), 16) <= address:
            loops.append((int(m.group(1), 16), address))
    return [(a, b) for a, b in loops if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)]


def assert_loads_in_the_loop(code: str, op: str, count: int) -> None:
    """Every ``op`` load sits inside the same innermost loop: none was hoisted out of the timed loop (ptxas
    hoists loop-invariant loads, volatile asm or not)."""
    loads = [a for a, l in addressed(code) if opcode(l) == op]
    assert len(loads) == count, f"expected {count} {op}, found {len(loads)}"
    assert any(all(lo <= a <= hi for a in loads) for lo, hi in innermost_loops(code)), \
        f"{op} loads at {[hex(a) for a in loads]} are not all inside one loop {innermost_loops(code)}"


LOOP_LOADS = {"stride_2": ("LDG.E.U16.STRONG.GPU", 16), "stride_4": ("LDG.E.STRONG.GPU", 16),
              "stride_16": ("LDG.E.128.STRONG.GPU", 4), "dram_read_u4": ("LDG.E.128", 4),
              "dram_read_u8": ("LDG.E.128", 8), "dram_read_chunk_u4": ("LDG.E.LTC256B.128", 4),
              "dram_read_chunk_u8": ("LDG.E.LTC256B.128", 8), "dram_read_block_u2": ("LDG.E.128", 2),
              "dram_read_block_u4": ("LDG.E.128", 4), "dram_read_block_u8": ("LDG.E.128", 8),
              "dram_write": ("STG.E.128", 4),
              "dram_write_cs": ("STG.E.EF.128", 4),
              "dram_copy": ("STG.E.128", 4), "dram_copy_chunk_u4": ("STG.E.128", 4),
              "dram_copy_chunk_u8": ("STG.E.128", 8),
              "smem_read": ("LDS.128", 4), "l1_read": ("LDG.E.128", 4)}


@pytest.mark.parametrize("name", list(LOOP_LOADS))
def test_every_timed_access_is_inside_the_loop(cubin, name):
    assert_loads_in_the_loop(sass(cubin[0])[name], *LOOP_LOADS[name])


def test_the_loop_check_catches_a_hoisted_load():
    """The check itself: loads of fixed addresses in a loop are hoisted by ptxas and must fail it."""
    from cupy.cuda import nvrtc

    src = r'''extern "C" __global__ void hoisted(const uint4* p, long long reps, unsigned* sink) {
        unsigned acc = 0;
        for (long long r = 0; r < reps; ++r) {
            uint4 v;
            asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p + threadIdx.x));
            acc += v.x + v.y + v.z + v.w;
        }
        *sink = acc; }'''
    prog = nvrtc.createProgram(src, "hoisted.cu", [], [])
    nvrtc.compileProgram(prog, ["-arch=sm_90"])
    code = sass(nvrtc.getCUBIN(prog) + b"\0")["hoisted"]
    with pytest.raises(AssertionError):
        assert_loads_in_the_loop(code, "LDG.E.128", 1)


def test_every_kernel_compiles_without_local_memory(cubin):
    usage = resource_usage(cubin[1])
    assert set(KERNELS) <= set(usage)
    for name in KERNELS:
        assert usage[name]["stack_bytes"] == usage[name]["spill_stores"] == usage[name]["spill_loads"] == 0, name
    for name in FULL_OCCUPANCY:
        assert usage[name]["registers"] <= H200["regs_per_sm"] // H200["max_threads_per_sm"], name
    assert usage["dram_copy"]["registers"] <= 40  # at least 6 blocks of 256 threads per SM
    for name in ("dram_read_u8", "dram_read_chunk_u8", "dram_read_block_u8", "dram_copy_chunk_u8"):
        assert usage[name]["registers"] <= 64, name  # 4 blocks per SM, 8 loads each in flight
    assert usage["smem_read"]["smem_bytes"] == 16 << 10


STRIDE_OPS = {"stride_2": ("LDG.E.U16.STRONG.GPU", 16), "stride_4": ("LDG.E.STRONG.GPU", 16),
              "stride_16": ("LDG.E.128.STRONG.GPU", 4)}


@pytest.mark.parametrize("name", list(STRIDE_OPS))
def test_stride_kernels_are_l2_only_loads_of_the_element_width(cubin, bw, name):
    code = sass(cubin[0])[name]
    op, count = STRIDE_OPS[name]
    assert count == bw.STRIDE_KERNELS[int(name.split("_")[1])][1]
    loads = [opcode(l) for l in instructions(code) if opcode(l).startswith("LDG")]
    assert loads == [op] * count, loads  # .cg: L2 only (STRONG.GPU), one per lane, U per trip
    assert_issued_before_use(code, op, count)


#: Interleaved and block-chunk kernels load plainly; per-warp chunked ones carry the 256-byte L2 fetch hint
#: (LTC256B).
READ_OPS = {512: "LDG.E.128", 4 * 512: "LDG.E.LTC256B.128", 8 * 512: "LDG.E.LTC256B.128"}


def test_dram_kernels_are_the_declared_ones(cubin, bw):
    assert set(sass(cubin[0])) >= {f"{name}" for op in dram.DRAM_KERNELS.values() for name, *_ in op}
    row = bw.BLOCK_THREADS * 16
    for op, kernels in dram.DRAM_KERNELS.items():
        for name, unroll, contiguous, block_contiguous, *barrier in kernels:
            assert barrier in ([], [True]) and bool(barrier) == ("sync" in name), name
            assert contiguous in (512, unroll * 512), name  # one warp load, or the whole trip's U loads
            assert ("chunk" in name) == (contiguous > 512), name
            # a block's trip: one row per load (interleaved), or all its U rows contiguous (chunk, block)
            interleaved = "chunk" not in name and "block" not in name
            assert block_contiguous == (row if interleaved else unroll * row), name


@pytest.mark.parametrize("name, unroll, contiguous",
                         [k[:3] for k in dram.DRAM_KERNELS["read"]])
def test_dram_read_is_16_byte_loads_in_flight(cubin, name, unroll, contiguous):
    code = sass(cubin[0])[name]
    loads = [opcode(l) for l in instructions(code) if opcode(l).startswith(("LDG", "LD."))]
    assert loads == [READ_OPS[contiguous]] * unroll, loads
    assert_issued_before_use(code, READ_OPS[contiguous], unroll)


BLOCK_READS = [(name, unroll) for name, unroll, *_ in dram.DRAM_KERNELS["read"]
               if "block" in name]


def load_offsets(code: str, op: str) -> list[int]:
    """The immediate offsets of every ``op`` load (0 where none)."""
    return [int(m.group(1), 16) if (m := re.search(r"\.64\+?(-?0x[0-9a-f]+)\]", l)) else 0
            for l in instructions(code) if opcode(l) == op]


def test_block_reads_are_the_unrolls_count_of_loads_one_block_row_apart(cubin, bw):
    """dram_read_block_u{2,4,8}: U plain 16-byte loads per trip, load j at j x (256 threads x 16 B) from
    load 0 (the block's chunk read row by row), all issued before the first is summed."""
    assert [u for _, u in BLOCK_READS] == [2, 4, 8, 4, 8]
    for name, unroll in BLOCK_READS:
        code = sass(cubin[0])[name]
        offsets = load_offsets(code, "LDG.E.128")
        assert len(offsets) == unroll, (name, offsets)
        assert [o - offsets[0] for o in offsets] == [j * bw.BLOCK_THREADS * 16 for j in range(unroll)], name
        assert_issued_before_use(code, "LDG.E.128", unroll)
        assert ("BAR.SYNC" in code) == ("sync" in name), name  # the barrier variants' per-trip barrier


def test_block_read_in_flight_check_fails_when_ptxas_sums_early():
    """Negative control: the same block_read_body<8> squeezed into 32 registers (8 blocks of 256 per SM)
    has ptxas sum loads before the eighth is issued, and the in-flight check must fail on it."""
    from cupy.cuda import nvrtc

    from gpuatlas.probes.kit.cuda import CUPY_IMPLICIT_OPTIONS, NVRTC_OPTIONS, source

    src = source("bandwidth.cu") + r'''
extern "C" __global__ void __launch_bounds__(256, 8)
squeezed(const uint4* buf, long long vecs, long long passes, unsigned int* sink) {
    block_read_body<8, false>(buf, vecs, passes, sink);
}'''
    prog = nvrtc.createProgram(src, "squeezed.cu", [], [])
    nvrtc.compileProgram(prog, [*NVRTC_OPTIONS, *CUPY_IMPLICIT_OPTIONS, "-arch=sm_90"])
    code = sass(nvrtc.getCUBIN(prog) + b"\0")["squeezed"]
    assert len(load_offsets(code, "LDG.E.128")) == 8  # the same loads, only their order differs
    with pytest.raises(AssertionError):
        assert_issued_before_use(code, "LDG.E.128", 8)


def test_chunked_loads_are_one_warp_trip_of_contiguous_512_byte_pieces(cubin):
    """Load u of a chunked trip is u x 512 bytes past load 0: the U x 512 bytes are contiguous."""
    for name in ("dram_read_chunk_u8", "dram_copy_chunk_u8"):
        lines = [l for l in instructions(sass(cubin[0])[name]) if opcode(l) == "LDG.E.LTC256B.128"]
        offsets = [int(m.group(1), 16) if (m := re.search(r"\.64\+(0x[0-9a-f]+)\]", l)) else 0 for l in lines]
        assert offsets == [u * 512 for u in range(8)], (name, lines)


def memory_ops(code: str) -> list[str]:
    """Opcodes of every global or shared load, store, reduction and atomic."""
    return [o for o in map(opcode, instructions(code)) if o.startswith(("STG", "STS", "LDG", "LDS", "RED", "ATOM"))]


def store_op(store_bytes: int, streaming: bool) -> str:
    """SASS of a global store: STG.E.64 / STG.E.128, with .EF (evict first) for st.global.cs."""
    return "STG.E" + (".EF" if streaming else "") + (".64" if store_bytes == 8 else f".{store_bytes * 8}")


@pytest.mark.parametrize("variant", list(dram.WRITE_VARIANTS))
def test_write_variants_store_the_declared_width_and_hint_and_nothing_else(cubin, bw, variant):
    """Grid-stride: WRITE_U stores a trip; once: exactly one store, no loop.  The other width and the other
    hint are the negative controls: each variant's SASS must fail to match them."""
    name, store_bytes, grid_stride, streaming = dram.WRITE_VARIANTS[variant]
    code = sass(cubin[0])[name]
    want = [store_op(store_bytes, streaming)] * (dram.WRITE_U if grid_stride else 1)
    assert memory_ops(code) == want
    assert memory_ops(code) != [store_op(store_bytes, not streaming)] * len(want)
    assert memory_ops(code) != [store_op(24 - store_bytes, streaming)] * len(want)
    # a loop with a body (every kernel ends in a one-instruction BRA-to-itself after EXIT)
    assert any(hi > lo for lo, hi in innermost_loops(code)) == grid_stride


def test_the_one_trip_read_issues_its_loads_before_any_sum_and_has_no_loop(cubin):
    """dram_read_once: ONCE_READ_VECTORS 16-byte loads, all issued before the first add uses them, then one
    reduction atomic; no loop.  Negative control: the grid-stride read has a loop."""
    code = sass(cubin[0])["dram_read_once"]
    ops = memory_ops(code)
    assert ops[:dram.ONCE_READ_VECTORS] == ["LDG.E.128"] * dram.ONCE_READ_VECTORS
    assert [o for o in ops if o.startswith("LDG")] == ["LDG.E.128"] * dram.ONCE_READ_VECTORS
    assert [o for o in ops if not o.startswith("LDG")] == ["REDUX.SUM", "REDG.E.ADD.STRONG.GPU"]  # warp sum, one atomic
    assert not any(hi > lo for lo, hi in innermost_loops(code))
    assert any(hi > lo for lo, hi in innermost_loops(sass(cubin[0])["dram_read_u4"]))


def test_once_grids_write_every_element_once(bw):
    vecs = dram.dram_vectors(H200, kit.HBM_FOOTPRINT_L2, bw.BLOCK_THREADS, 1)
    for store_bytes in (8, 16):
        blocks = dram.once_blocks(vecs * 16, store_bytes)
        assert blocks * bw.BLOCK_THREADS * store_bytes == vecs * 16
    with pytest.raises(ValueError):
        dram.once_blocks(bw.BLOCK_THREADS * 16 + 16, 16)  # a partial block would leave elements unwritten
    with pytest.raises(ValueError):
        dram.once_blocks(bw.BLOCK_THREADS * 16 + 4, 8)


@pytest.mark.parametrize("name, unroll, contiguous, block_contiguous",
                         [k for k in dram.DRAM_KERNELS["copy"]])
def test_dram_copy_loads_then_stores_16_bytes(cubin, name, unroll, contiguous, block_contiguous):
    code = sass(cubin[0])[name]
    ops = [opcode(l) for l in instructions(code) if opcode(l).startswith(("STG", "LDG"))]
    assert ops == [READ_OPS[contiguous]] * unroll + ["STG.E.128"] * unroll, ops
    assert_issued_before_use(code, READ_OPS[contiguous], unroll)


def test_smem_read_is_lds128_in_flight(cubin, bw):
    code = sass(cubin[0])["smem_read"]
    lds = [opcode(l) for l in instructions(code) if opcode(l).startswith("LDS")]
    assert lds == ["LDS.128"] * bw.ONCHIP_U
    assert_issued_before_use(code, "LDS.128", bw.ONCHIP_U)
    # the timed loop reads shared memory only: the one global load fills the buffer before it
    loads = [(i, opcode(l)) for i, l in enumerate(instructions(code)) if opcode(l).startswith(("LDG", "LDS"))]
    assert [o for _, o in loads] == ["LDG.E.128"] + ["LDS.128"] * bw.ONCHIP_U


def test_l1_read_is_cached_16_byte_loads_in_flight(cubin, bw):
    code = sass(cubin[0])["l1_read"]
    loads = [opcode(l) for l in instructions(code) if opcode(l).startswith("LDG")]
    assert loads == ["LDG.E.128"] * bw.ONCHIP_U  # plain LDG: through L1 (no .STRONG.GPU, no .CONSTANT)
    assert_issued_before_use(code, "LDG.E.128", bw.ONCHIP_U)


def test_the_in_flight_check_catches_a_dependent_load(tmp_path):
    """The SASS check itself: a kernel that uses each load before issuing the next must fail it."""
    from cupy.cuda import nvrtc

    src = r'''extern "C" __global__ void serial(const uint4* p, long long n, unsigned* sink) {
        unsigned acc = 0;
        for (long long i = threadIdx.x; i < n; i += 1024) {
            uint4 a = p[i]; acc += a.x;
            uint4 b = p[i + acc % 2]; acc += b.y;
            uint4 c = p[i + acc % 3]; acc += c.z;
            uint4 d = p[i + acc % 5]; acc += d.w;
        }
        *sink = acc; }'''
    prog = nvrtc.createProgram(src, "serial.cu", [], [])
    nvrtc.compileProgram(prog, ["-arch=sm_90"])
    code = sass(nvrtc.getCUBIN(prog) + b"\0")["serial"]
    with pytest.raises(AssertionError):
        assert_issued_before_use(code, "LDG.E.128", 4)


# -- registration and sweeps ----------------------------------------------------------------------------------

def test_probes_are_registered_with_their_axes_kernels_and_quantities(probes):
    axes = {"bw.stride": {"element_bytes", "stride_elements", "aligned", "level"}, "bw.l2": {"footprint_bytes"},
            "bw.dram": {"op", "variant"}, "bw.onchip": {"level"}, "bw.dram_footprint": {"footprint_bytes"}}
    quantities = {"bw.stride": {"coalescing.efficiency_stride32_fp32", "coalescing.block_bytes", "l2.sector_bytes",
                                "coalescing.efficiency_stride2_fp32", "coalescing.efficiency_misaligned_fp32",
                                "coalescing.efficiency_stride64_fp16"},
                  "bw.l2": {"l2.bandwidth_bytes_per_s", "l2.capacity_bytes"},
                  "bw.dram": {"dram.read_bandwidth_bytes_per_s", "dram.write_bandwidth_bytes_per_s",
                              "dram.copy_bandwidth_bytes_per_s", "dram.read_bytes_per_clk_sm"},
                  "bw.onchip": {"smem.bandwidth_bytes_per_clk_sm", "l1.bandwidth_bytes_per_clk_sm"},
                  "bw.dram_footprint": {"dram.read_bandwidth_large_footprint_bytes_per_s"}}
    for pid, p in probes.items():
        assert set(p.axes) == axes[pid]
        assert set(p.quantities) == quantities[pid]
        assert p.kernels == ("bandwidth.cu",)
        module = importlib.import_module(p.func.__module__)
        assert getattr(module, p.func.__qualname__) is p.func  # module-level: a child process finds it


def test_config_counts_on_the_committed_h200(probes):
    counts = {pid: (len(p.configs(H200, "quick")), len(p.configs(H200, "full"))) for pid, p in probes.items()}
    assert counts == {"bw.stride": (84, 252), "bw.l2": (19, 21), "bw.dram": (9, 9), "bw.onchip": (2, 2),
                      "bw.dram_footprint": (6, 16)}
    configs = probes["bw.dram"].configs(H200, "full")
    assert {c["variant"] for c in configs if c["op"] == "write"} == set(dram.WRITE_VARIANTS)
    assert [c["op"] for c in configs if c["op"] != "write"] == ["read", "read", "copy", "memcpy"]
    full = probes["bw.stride"].configs(H200, "full")
    assert sorted({c["stride_elements"] for c in full}) == [1, 2, 3, *range(4, 65, 4), 128, 256]
    assert {c["aligned"] for c in full} == {"aligned", "misaligned"}
    assert {c["level"] for c in full} == {"dram", "l2"} and {c["element_bytes"] for c in full} == {2, 4, 16}
    quick = probes["bw.stride"].configs(H200, "quick")
    assert sorted({c["stride_elements"] for c in quick}) == [1, 2, 4, 8, 16, 32, 64]


@pytest.mark.parametrize("device", [H200, OTHER], ids=["h200", "other"])
def test_l2_sweep_spans_1_mib_to_four_l2s_dense_around_the_l2_of_the_device(bw, probes, device):
    l2 = device["l2_bytes"]
    for profile, dense in (("quick", 3), ("full", 4)):
        footprints = [c["footprint_bytes"] for c in probes["bw.l2"].configs(device, profile)]
        assert footprints[0] == 1 << 20 and footprints[-1] == bw.L2_SWEEP_TOP * l2
        assert footprints == sorted(set(footprints)) and all(f % 2048 == 0 for f in footprints)
        around = [f for f in footprints if l2 // 2 <= f <= 2 * l2]
        assert len(around) >= 2 * dense, (profile, len(around))  # two octaves, dense where the knee is
        assert len([f for f in footprints if f > 2 * l2]) >= 2  # the HBM plateau


@pytest.mark.parametrize("device, capped_configs", [(H200, 31), (OTHER, 56)], ids=["h200", "other"])
def test_stride_footprints_are_sized_from_the_device(bw, device, capped_configs):
    warps = bw.full_occupancy_warps(device)
    assert warps == device["sm_count"] * device["max_threads_per_sm"] // 32
    cap = device["total_memory_bytes"] * kit.MEMORY_FRACTION
    capped = 0
    for e in bw.ELEMENT_BYTES:
        tile_elements = 32 * bw.STRIDE_KERNELS[e][1]
        for s in (*range(1, 65), 128, 256):  # every stride up to 64, beyond what the sweep declares
            pitch = s * e
            dram = bw.stride_layout(device, e, s, "dram", warps)
            assert dram["step"] == warps % dram["tiles"]
            assert dram["elements"] == dram["tiles"] * tile_elements
            assert dram["touched_bytes"] == dram["elements"] * min(pitch, 32)
            assert dram["span_bytes"] + 2 * e <= cap
            wanted = -(-kit.HBM_FOOTPRINT_L2 * device["l2_bytes"] // min(pitch, 32) // tile_elements // warps) * warps
            if wanted * tile_elements * pitch + 2 * e <= cap:  # room: a pass reads every tile once
                assert dram["tiles"] % warps == 0 and dram["trips_per_pass"] * warps == dram["tiles"]
                assert dram["touched_bytes"] >= kit.HBM_FOOTPRINT_L2 * device["l2_bytes"]
            else:  # capped: as many whole tiles as the cap holds, still well beyond L2
                capped += 1
                assert (dram["tiles"] + 1) * tile_elements * pitch + 2 * e > cap
                assert dram["touched_bytes"] > 1.5 * device["l2_bytes"]
            l2 = bw.stride_layout(device, e, s, "l2", warps)
            per_element = min(pitch, bw.LARGEST_BLOCK)
            assert l2["elements"] * per_element <= bw.L2_TOUCH_FRACTION * device["l2_bytes"]
            assert l2["elements"] * per_element > bw.L2_TOUCH_FRACTION * device["l2_bytes"] / 2
            assert l2["trips_per_pass"] == -(-l2["tiles"] // warps)
    assert capped == capped_configs


def test_stride_footprints_scale_with_the_l2(bw):
    small = {**H200, "l2_bytes": H200["l2_bytes"] // 2}
    warps = bw.full_occupancy_warps(H200)
    a = bw.stride_layout(H200, 4, 8, "l2", warps)
    b = bw.stride_layout(small, 4, 8, "l2", warps)
    assert a["tiles"] == 2 * b["tiles"]
    assert dram.dram_vectors(small, 8, 1024, 4) * 2 == pytest.approx(dram.dram_vectors(H200, 8, 1024, 4), rel=1e-3)


def test_dram_buffers_are_whole_grid_trips_and_several_l2(bw):
    threads = H200["sm_count"] * 2048
    for unroll in (4, 8):
        vecs = dram.dram_vectors(H200, kit.HBM_FOOTPRINT_L2, threads, unroll)
        assert vecs % (threads * unroll) == 0
        assert vecs * 16 >= kit.HBM_FOOTPRINT_L2 * H200["l2_bytes"]
    tiny = {**H200, "total_memory_bytes": 1 << 30}
    assert dram.dram_vectors(tiny, kit.HBM_FOOTPRINT_L2, threads, 4) * 16 <= (1 << 30) * kit.MEMORY_FRACTION


def test_dram_variants_are_each_kernel_at_full_and_half_occupancy(bw):
    variants = dram.dram_variants([("u4", 4, 512, 4096), ("c8", 8, 4096, 32768)], [8, 5])
    assert [(v.func, v.unroll, v.contiguous_bytes, v.block_contiguous_bytes, v.blocks_per_sm) for v in variants] == [
        ("u4", 4, 512, 4096, 8), ("u4", 4, 512, 4096, 4), ("c8", 8, 4096, 32768, 5), ("c8", 8, 4096, 32768, 2)]
    assert [v.blocks_per_sm for v in dram.dram_variants([("copy", 4, 512, 4096)], [1])] == [1]


@pytest.mark.parametrize("device", [H200, OTHER], ids=["h200", "other"])
def test_footprint_sweep_spans_four_l2s_to_the_top_or_the_memory_cap(bw, device):
    l2 = device["l2_bytes"]
    for per_octave in (2, 3):
        footprints = dram.footprint_sweep(device, per_octave)
        top = min(dram.FOOTPRINT_TOP_L2 * l2, device["total_memory_bytes"] * kit.MEMORY_FRACTION)
        assert footprints[0] == dram.FOOTPRINT_LOW_L2 * l2 and footprints[-1] == pytest.approx(top, abs=1 << 20)
        assert footprints == sorted(set(footprints)) and all(f % (1 << 20) == 0 for f in footprints)
        steps = np.diff(np.log2(footprints))
        assert np.allclose(steps, 1 / per_octave, atol=0.02)  # per_octave points per doubling, evenly
    small = {**device, "total_memory_bytes": 16 * l2}  # memory, not the L2 multiple, caps the sweep
    assert dram.footprint_sweep(small, 2)[-1] <= small["total_memory_bytes"] * kit.MEMORY_FRACTION


def test_misaligned_start_is_one_element(bw):
    assert bw.misaligned_bytes(4, "aligned") == 0
    assert [bw.misaligned_bytes(e, "misaligned") for e in (2, 4, 16)] == [2, 4, 16]
    with pytest.raises(ValueError):
        bw.misaligned_bytes(4, "True")


# -- checksums: replay the kernels' indexing -----------------------------------------------------------------

def replay_stride_kernel(tiles: int, warps: int, trips: int, loads: int, values: np.ndarray) -> int:
    """What stride_read<T, U> sums, computed as the kernel walks (tile = warp % tiles, += step, wrap)."""
    step = warps % tiles
    total = 0
    for warp in range(warps):
        tile = warp % tiles
        for _ in range(trips):
            for u in range(loads):
                chunk = tile * loads + u
                total += int(values[chunk * 32: chunk * 32 + 32].sum())
            tile += step
            if tile >= tiles:
                tile -= tiles
    return total % 2**32


@pytest.mark.parametrize("tiles, warps, trips", [(5, 3, 7), (3, 8, 5), (16, 8, 2), (8, 8, 3), (7, 7, 1),
                                                 (40, 12, 4), (1, 4, 9)])
def test_host_checksum_matches_the_kernels_walk(bw, tiles, warps, trips):
    loads = 2
    values = np.random.default_rng(tiles * warps).integers(0, 2**32, tiles * loads * 32, dtype=np.uint64)
    q, r = bw.tile_reads(tiles, warps, trips)
    per_tile = loads * 32
    expected = (q * int(values.sum()) + int(values[: r * per_tile].sum())) % 2**32
    assert expected == replay_stride_kernel(tiles, warps, trips, loads, values)


def replay_block_read(words: np.ndarray, grid: int, unroll: int, passes: int, threads: int = 256,
                      spacing: int | None = None) -> tuple[int, np.ndarray, int]:
    """What block_read_body<U> folds into the sink (mod 2^32, loads past the buffer's end left out), how
    often it reads each 16-byte vector, and how many of its loads fall past the end: thread t of block b
    starts at vector b x U x threads + t, loads j x ``spacing`` (threads) past it with no bounds check, and
    moves on by U x threads x grid while its start is inside the buffer, ``passes`` times."""
    spacing = threads if spacing is None else spacing
    vecs = words.size // 4
    vector_sums = words.reshape(vecs, 4).astype(np.uint64).sum(axis=1)
    reads, outside = np.zeros(vecs, dtype=np.int64), 0
    for b in range(grid):
        for first in b * unroll * threads + np.arange(threads):
            for i in range(first, vecs, unroll * threads * grid):
                for j in range(unroll):
                    if i + j * spacing < vecs:
                        reads[i + j * spacing] += passes
                    else:
                        outside += passes
    return int((reads.astype(np.uint64) * vector_sums).sum() % 2**32), reads, outside


def test_block_read_host_checksum_is_passes_times_the_buffer_sum(bw):
    """The host checks dram_read_block_u*'s sink against passes x sum32(buffer) (as every read kernel): true
    when the buffer is a whole number of every variant's grid trips, as stream_vectors sizes it."""
    small = {**H200, "sm_count": 3, "l2_bytes": 48 << 10}
    variants = dram.dram_variants([("block_u2", 2, 512, 8192), ("block_u4", 4, 512, 16384)], [2, 3])
    vecs = dram.stream_vectors(small, 2, variants)
    assert vecs * 16 >= 2 * small["l2_bytes"]
    words = np.random.default_rng(7).integers(0, 2**32, vecs * 4, dtype=np.uint64).astype(np.uint32)
    total = int(words.astype(np.uint64).sum()) % 2**32
    for v in variants:
        got, reads, outside = replay_block_read(words, small["sm_count"] * v.blocks_per_sm, v.unroll, passes=3)
        assert outside == 0 and (reads == 3).all() and got == 3 * total % 2**32, v
    # negative controls: a buffer one block row short of whole chunks has the last chunk's loads fall past
    # its end (whatever lies there joins the sum); loads a warp (32 vectors) apart instead of a block row
    # read some vectors twice and others never, and the host's sum no longer holds.
    got, reads, outside = replay_block_read(words[: (vecs - bw.BLOCK_THREADS) * 4], small["sm_count"] * 3, 4, 1)
    assert outside == bw.BLOCK_THREADS
    got, reads, outside = replay_block_read(words, small["sm_count"] * 2, 2, passes=1, spacing=32)
    assert outside == 0 and (reads == 2).any() and (reads == 0).any() and got != total


def test_dram_passes_read_every_tile_equally(bw):
    warps = bw.full_occupancy_warps(H200)
    layout = bw.stride_layout(H200, 4, 3, "dram", warps)
    for passes in (1, 3):
        q, r = bw.tile_reads(layout["tiles"], warps, passes * layout["trips_per_pass"])
        assert (q, r) == (passes, 0)


# -- validity -----------------------------------------------------------------------------------------------

def test_dram_bound_comes_from_the_device_properties(bw):
    peak = kit.dram_peak_bytes_per_s(H200)
    assert peak == pytest.approx(3.201e9 * 6016 / 8 * 2)  # 4.81 TB/s
    assert kit.bandwidth_bound(H200, "dram") == pytest.approx(peak * kit.DRAM_SLACK)
    assert kit.dram_peak_bytes_per_s(OTHER) == pytest.approx(1.215e9 * 5120 / 8 * 2)
    assert kit.bandwidth_bound({**H200, "memory_clock_hz": None}, "dram") is None
    assert kit.bandwidth_bound(H200, "l2") == pytest.approx(132 * 1.98e9 * kit.MAX_BYTES_PER_CLK_SM)


class FakeCtx:
    def __init__(self, hz=1.98e9):
        from gpuatlas.probes.kit.harness import Budget

        self.device = H200
        self.budget = Budget(warmup_s=0.0, min_repeats=3, max_repeats=3)
        self.hz = hz

    def sm_clock(self):
        return self.hz

    def throttle_flag(self, hz):
        return "throttled" if hz < 0.85 * self.device["sm_clock_max_hz"] else ""


def test_flags_invalid_above_the_bound_and_throttled_below_the_clock(bw):
    ctx = FakeCtx()
    assert kit.flag_for(ctx, 5e12, 4e12, 1.98e9) == "invalid"
    assert kit.flag_for(ctx, 3e12, 4e12, 1.98e9) == ""
    assert kit.flag_for(ctx, 3e12, 4e12, 1.0e9) == "throttled"
    assert kit.flag_for(ctx, 3e12, None, 1.98e9) == ""


@pytest.fixture
def fake_timer(monkeypatch):
    """EventTimer replaced by one that reports fixed seconds per launch and calls launch once per sample."""
    class Timer:
        seconds = 1e-3

        def __init__(self, launch, min_sample_s, stream=None):
            self.launch, self.batch = launch, 1

        def seconds_per_launch(self):
            self.launch()
            return Timer.seconds

    monkeypatch.setattr(kit, "EventTimer", Timer)
    return Timer


def test_measure_reports_bytes_per_clock_per_sm_and_checks_every_sample(bw, fake_timer):
    ctx = FakeCtx(hz=1.9e9)
    calls = {"launch": 0, "reset": 0, "verify": 0}
    per_launch = 120.0 * 132 * 1.9e9 * 1e-3  # 120 B/clk/SM for 1 ms

    samples = kit.bandwidth_samples(ctx, lambda: calls.__setitem__("launch", calls["launch"] + 1),
                                    lambda: calls.__setitem__("reset", calls["reset"] + 1),
                                    lambda: calls.__setitem__("verify", calls["verify"] + 1),
                                    per_launch, sample_s=bw.SAMPLE_S, per_clk_bound=kit.MAX_BYTES_PER_CLK_SM)
    per_clk = [s for s in samples if s.metric == "bytes_per_clk_sm" and s.repeat >= 0]
    assert len(per_clk) == 3 and all(s.value == pytest.approx(120.0) and s.unit == "B/cycle" for s in per_clk)
    assert {s.flag for s in samples} == {""} and {s.sm_clock_hz for s in samples} == {1.9e9}
    bandwidth = [s for s in samples if s.metric == "bandwidth"]
    assert bandwidth[0].value == pytest.approx(per_launch / 1e-3) and bandwidth[0].unit == "B/s"
    assert calls["reset"] == calls["verify"] == calls["launch"] == 4  # warm-up sample + 3 repeats


def test_measure_flags_an_impossible_bandwidth_invalid_and_keeps_it(bw, fake_timer):
    ctx = FakeCtx()
    fake_timer.seconds = 1e-6  # 1e9 bytes in a microsecond: 1 PB/s
    samples = kit.bandwidth_samples(ctx, lambda: None, lambda: None, lambda: None, 1e9, sample_s=bw.SAMPLE_S,
                                    bound=kit.bandwidth_bound(H200, "dram"))
    assert samples and all(s.flag == "invalid" for s in samples)
    assert samples[0].value == pytest.approx(1e15)


def test_a_simulated_run_recovers_the_fakes_write_and_footprint_physics(tmp_path):
    """The fakes' fastest write variant and their largest-footprint read come back as the headlines."""
    import fakes
    from gpuatlas.analysis.derive import derive
    from gpuatlas.machinery import runner

    probes = [p for p in fakes.simulated_probes() if p.id in ("bw.dram", "bw.dram_footprint")]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    assert {s["status"] for s in meta["probes"].values()} == {"ok"}
    derived = derive(meta, run.read_measurements()).set_index("quantity")
    best = max(fakes.WRITE_LOSS, key=fakes.WRITE_LOSS.get)
    write = derived.loc["dram.write_bandwidth_bytes_per_s"]
    assert write["value"] == pytest.approx(fakes.HBM_WRITE * fakes.WRITE_LOSS[best], rel=1e-6)
    assert write["note"].startswith(f"fastest: {best} ")
    top = max(c["footprint_bytes"] for c in probes[1].configs(fakes.DEVICE, "quick"))
    large = derived.loc["dram.read_bandwidth_large_footprint_bytes_per_s"]
    assert large["value"] == pytest.approx(fakes.read_bandwidth(top), rel=1e-6)
    assert large["value"] < fakes.HBM_READ  # past the fakes' TLB reach, translation-limited
    # the read's headline (the fakes' one-trip read) bounds the L2's share by its own buffer, 2 x 32 L2s
    read = derived.loc["dram.read_bandwidth_bytes_per_s"]
    assert f"serves at most {1 / (2 * fakes.FAKE_READ_L2S):.1%} of the bytes" in read["note"], read["note"]
    # without it, the grid-stride kernels' row names the fakes' recorded layout: 8 x 256 x 16 B chunks
    measurements = run.read_measurements()
    kernels = derive(meta, measurements[measurements["variant"] != "once_64"]).set_index("quantity")
    note = kernels.loc["dram.read_bandwidth_bytes_per_s", "note"]
    chunk_kib = fakes.FAKE_READ_UNROLL * fakes.FAKE_READ_THREADS * 16 // 1024
    assert note.startswith(f"fastest: block-contiguous chunks ({chunk_kib} KiB contiguous per block trip"), note
    assert f"{fakes.FAKE_READ_BLOCKS} blocks of {fakes.FAKE_READ_THREADS} threads per SM" in note
    assert f"serves at most {1 / fakes.FAKE_READ_L2S:.1%} of the bytes" in note, note


def test_the_read_headline_is_the_faster_read_variant_and_names_it():
    """bw.dram's read runs as grid-stride kernels and as one trip per thread; the row takes the faster (the
    fake's one-trip read) and lists both, with a negative control where the grid-stride kernel is faster."""
    import pandas as pd

    from gpuatlas.analysis.coalescing import bandwidth_rows

    def rows(fastest, once):
        frame = pd.DataFrame([dict(probe="bw.dram", op="read", variant=v, metric="bandwidth", value=x, repeat=r,
                                   sm_clock_hz=1.98e9, flag="", config=f"op=read,variant={v}")
                              for v, x in (("fastest", fastest), ("once_64", once)) for r in range(5)])
        return {r["quantity"]: r for r in bandwidth_rows(frame, {"l2_bytes": 60 << 20, "sm_count": 132})}

    row = rows(4.5e12, 4.7e12)["dram.read_bandwidth_bytes_per_s"]
    assert row["value"] == 4.7e12 and "one trip of four 16-byte loads" in row["note"] and "fastest 4.5" in row["note"]
    assert rows(4.8e12, 4.7e12)["dram.read_bandwidth_bytes_per_s"]["value"] == 4.8e12
