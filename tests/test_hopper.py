"""Hopper's units (issue 10) without a GPU: every kernel of hopper.cu compiled for sm_90 and sm_90a, the
instructions that make each probe what it claims, the host's arithmetic, and the derivations on synthetic
measurements with known answers."""
import re

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.hopper import dpx_rows, dsmem_rows, refused_cluster_sizes, tma_rows
from gpuatlas.analysis.stats import ratio_ci
from gpuatlas.probes.families import hopper
from gpuatlas.probes.families.hopper import tma
from gpuatlas.probes.kit import tensor_map
from gpuatlas.probes.kit.cuda import CUPY_IMPLICIT_OPTIONS, NVRTC_OPTIONS, compile_cubin, resource_usage, sass, source
from test_kernels import assert_dependent_chain, timed_region

LD_GENERIC_64 = re.compile(r"(LD\.E\.64) (R\d+), desc\[\w+\]\[(R\d+)\.64\]")
#: ptxas narrows the chain's loads to 32 bits (only the low word is an address) and keeps the last one
#: 64-bit (the final value is reported whole): both count as links.
LDS_CHAIN = re.compile(r"(LDS)(?:\.64)? (R\d+), \[(R\d+)\]")


def _opcodes(code: str) -> list[str]:
    return [m.group(1) for l in code.splitlines()
            if (m := re.search(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", l))]


@pytest.fixture(scope="module", params=["sm_90", "sm_90a"])
def built(request):
    cubin, log = compile_cubin("hopper.cu", request.param)
    return sass(cubin), resource_usage(log)


@pytest.fixture(scope="module")
def ptx():
    """PTX per kernel (NVRTC, the same options as the cubin)."""
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(source("hopper.cu"), "hopper.cu", [], [])
    nvrtc.compileProgram(prog, [*NVRTC_OPTIONS, *CUPY_IMPLICIT_OPTIONS, "-arch=compute_90"])
    text = nvrtc.getPTX(prog).decode().rstrip("\0")
    return dict(re.findall(r"\.entry (\w+)\((.*?)\n}\n", text, flags=re.S))


def test_every_kernel_builds_without_local_memory(built):
    code, usage = built
    names = {k for k in usage if not k.startswith("_Z")}
    expected = ({f"dsmem_{kind}_{m}_c{n}" for n in hopper.CLUSTER_SIZES
                 for kind, modes in (("chase", hopper.CHASE_MODES), ("read", hopper.READ_PATTERNS)) for m in modes}
                | {f"stream_{p}_v{c // 4096}" for p in hopper.COPY_PATHS for c in hopper.CHUNK_BYTES}
                | {f"dpx_{form}_{c['op']}_{c['impl']}" for form in ("latency", "throughput") for c in hopper.DPX_CONFIGS}
                | {"bulk_latency", "tensor_latency"})
    assert expected <= names, expected - names
    for name in expected:
        assert usage[name]["spill_stores"] == usage[name]["stack_bytes"] == 0, name
        assert usage[name]["registers"] <= 64, name  # 256-thread blocks, 4 per SM at least


@pytest.mark.parametrize("mode", ["self", "remote"])
def test_cluster_chase_is_a_dependent_chain_of_generic_loads(built, mode):
    code, _ = built
    for n in hopper.CLUSTER_SIZES:
        text = code[f"dsmem_chase_{mode}_c{n}"]
        assert_dependent_chain(timed_region(text), "LD.E.64", at_least=32, pattern=LD_GENERIC_64)
        ops = _opcodes(text)
        assert ops.count("UCGABAR_ARV") == ops.count("UCGABAR_WAIT") == 2, "cluster barrier before and after"


def test_local_chase_is_a_dependent_lds_chain(built):
    code, _ = built
    assert_dependent_chain(timed_region(code["dsmem_chase_local_c2"]), "LDS", at_least=32, pattern=LDS_CHAIN)


def test_remote_addresses_come_from_mapa_and_the_cluster_rank(ptx):
    for n in hopper.CLUSTER_SIZES:
        remote = ptx[f"dsmem_chase_remote_c{n}"]
        assert "mapa.u64" in remote and "%cluster_ctarank" in remote and "%cluster_nctarank" in remote
        assert f".reqnctapercluster {n}, 1, 1" in remote or f".reqnctapercluster {n}" in remote
        assert "barrier.cluster.arrive.release" in remote and "barrier.cluster.wait.acquire" in remote
        for pattern in ("pair", "ring"):
            body = ptx[f"dsmem_read_{pattern}_c{n}"]
            assert "mapa.shared::cluster.u32" in body and body.count("ld.shared::cluster.v4.u32") == 8
        assert "mapa" not in ptx[f"dsmem_read_local_c{n}"]


def test_remote_reads_are_16_byte_cluster_loads_and_local_ones_lds128(built):
    code, _ = built
    for pattern in ("pair", "ring"):
        assert _opcodes(code[f"dsmem_read_{pattern}_c8"]).count("LD.E.128") == 8
    local = _opcodes(code["dsmem_read_local_c8"])
    assert local.count("LDS.128") == 8 and "LD.E.128" not in local


@pytest.mark.parametrize("pattern, op", [("local", "LDS.128"), ("pair", "LD.E.128"), ("ring", "LD.E.128")])
def test_dsmem_reads_stay_inside_the_timed_loop(built, pattern, op):
    """Reads of fixed addresses are hoisted out of the loop by ptxas (the first H200 run measured 430
    "B/clk/SM", flagged invalid): every rep's 8 loads must be in the loop."""
    from test_bandwidth import assert_loads_in_the_loop

    code, _ = built
    for n in (2, 16):
        assert_loads_in_the_loop(code[f"dsmem_read_{pattern}_c{n}"], op, 8)


def test_bulk_copies_use_the_tma_unit_and_transaction_mbarriers(built):
    code, _ = built
    for name in ("bulk_latency", "stream_tma_v1", "stream_tma_v8"):
        ops = set(_opcodes(code[name]))
        assert {"UBLKCP.S.G", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT", "SYNCS.EXCH.64"} <= ops, name
        assert "LDG.E.128" not in ops and "LDGSTS.E.BYPASS.128" not in ops
    timed = timed_region(code["bulk_latency"])
    assert any("UBLKCP" in l for l in timed) and any("SYNCS.PHASECHK" in l for l in timed)


def test_tensor_boxes_use_the_tma_unit_through_the_tensor_map(built, ptx):
    code, _ = built
    ops = set(_opcodes(code["tensor_latency"]))
    assert {"UTMALDG.2D", "SYNCS.ARRIVE.TRANS64", "SYNCS.PHASECHK.TRANS64.TRYWAIT"} <= ops
    timed = timed_region(code["tensor_latency"])
    assert any("UTMALDG.2D" in l for l in timed) and any("SYNCS.PHASECHK" in l for l in timed)
    assert "fence.proxy.tensormap::generic.acquire.gpu" in ptx["tensor_latency"]


def test_mbarrier_waits_are_bounded_by_the_globaltimer(ptx):
    for name in ("bulk_latency", "tensor_latency", "stream_tma_v4"):
        body = ptx[name]
        assert "mbarrier.try_wait.parity" in body and "%globaltimer" in body
        assert "mbarrier.arrive.expect_tx" in body and "fence.mbarrier_init" in body


def test_classic_paths_are_what_they_claim(built):
    code, _ = built
    for v in (1, 8):
        cp_async = _opcodes(code[f"stream_cp_async_v{v}"])
        assert "LDGSTS.E.BYPASS.128" in cp_async and "LDGDEPBAR" in cp_async and "DEPBAR.LE" in cp_async
        assert "UBLKCP.S.G" not in cp_async
        ldg = _opcodes(code[f"stream_ldg_v{v}"])
        assert ldg.count("LDG.E.128") == 2 * v and ldg.count("STS.128") == v, "v loads in flight, then stored"
        assert "LDGSTS.E.BYPASS.128" not in ldg


@pytest.mark.parametrize("op, impl, opcode", [("viaddmax", "dpx", "VIADDMNMX"), ("vimax3", "dpx", "VIMNMX3")])
def test_dpx_maps_to_a_dedicated_instruction_in_a_dependent_chain(built, op, impl, opcode):
    code, _ = built
    region = [l.split(" ", 1)[1] for l in timed_region(code[f"dpx_latency_{op}_{impl}"])]
    chain = [l for l in region if l.startswith(opcode + " ")]
    assert len(chain) >= 32
    for previous, line in zip(chain, chain[1:]):
        dest = previous.split()[1].rstrip(",")
        assert dest in line.split(",", 1)[1], f"{line} does not use the previous result {dest}"
    assert _opcodes(code[f"dpx_throughput_{op}_{impl}"]).count(opcode) >= hopper.DPX_CHAINS * hopper.DPX_UNROLL


def test_the_emulation_is_the_two_instruction_path(built):
    code, _ = built
    for form in ("latency", "throughput"):
        ops = _opcodes(code[f"dpx_{form}_viaddmax_emu"])
        assert "VIADDMNMX" not in ops and "VIMNMX3" not in ops
        assert ops.count("VIMNMX") >= 32 and ops.count("IMAD") >= 32


# -- host arithmetic -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("start, count", [(0, 1), (0, 8192), (12345, 777), (2**30, 4096)])
def test_known_sum_matches_the_words(start, count):
    assert hopper.known_sum(start, count) == int(hopper.known_words(start, count).astype(np.uint64).sum()) & 0xFFFFFFFF


@pytest.mark.parametrize("first, visits, chunks", [(0, 5, 7), (3, 7, 7), (5, 30, 7), (6, 2, 7), (0, 0, 3)])
def test_stream_checksum_counts_every_chunk_visit(first, visits, chunks):
    chunk_bytes = 64
    words = hopper.known_words(0, chunks * chunk_bytes // 4).astype(np.uint64).reshape(chunks, -1).sum(axis=1)
    brute = sum(int(words[(first + i) % chunks]) for i in range(visits)) & 0xFFFFFFFF
    assert hopper.stream_checksum(first, visits, chunks, chunk_bytes) == brute


def test_dpx_reference_wraps_like_32_bit_hardware():
    big = np.array([2**31 - 1], dtype=np.int32)
    assert hopper.dpx_reference("viaddmax", big, np.array([1]), np.array([-5]), 1)[0] == -5  # wraps to -2^31
    assert hopper.dpx_reference("viaddmax", big, np.array([1]), np.array([-2**31]), 1)[0] == -2**31
    assert hopper.dpx_reference("vimax3", np.array([3]), np.array([-7]), np.array([2]), 5)[0] == 3
    x = np.array([0, 10], dtype=np.int32)
    assert list(hopper.dpx_reference("viaddmax", x, np.array([3, -4]), np.array([1, 0]), 3)) == [9, 0]


def test_chase_next_index_is_one_cycle_through_every_element():
    order = np.random.default_rng(1).permutation(1024)
    nxt = hopper.chase_next_index(order)
    seen, e = set(), int(order[0])
    for _ in range(1024):
        seen.add(e)
        e = int(nxt[e])
    assert len(seen) == 1024 and e == order[0]


def test_latency_slots_are_a_power_of_two_sized_by_level():
    device = {"l2_bytes": 60 << 20}
    for copy in hopper.COPY_SIZES:
        for level in hopper.LEVELS:
            slots, slot = hopper.latency_slots(device, copy, level)
            assert slots & (slots - 1) == 0 and slot >= copy and slot % 16 == 0
            span = slots * slot
            assert (span <= 2 << 20) if level == "l2" else (span >= 8 * device["l2_bytes"])


def test_stream_footprints_sit_in_l2_or_far_beyond_it():
    device = {"l2_bytes": 60 << 20}
    for chunk in hopper.CHUNK_BYTES:
        assert hopper.stream_footprint(device, chunk, "l2") * chunk <= device["l2_bytes"] / 4
        assert hopper.stream_footprint(device, chunk, "dram") * chunk >= 4 * device["l2_bytes"] - chunk


def test_tensor_map_arguments_follow_the_encoders_rules():
    args = tensor_map.tensor_map_args(4096, 64, 64, 16)
    assert args == {"dims": [4096, 64], "strides": [16384], "box": [64, 16], "element_strides": [1, 1]}
    for cols, rows, box_cols, box_rows in ((4096, 64, 2, 16), (4096, 64, 512, 1), (4096, 64, 64, 48)):
        with pytest.raises(ValueError):
            tensor_map.tensor_map_args(cols, rows, box_cols, box_rows)


@pytest.mark.parametrize("box, box_cols, box_rows", [(0, 16, 16), (5, 16, 16), (30, 64, 16), (63, 64, 64)])
def test_box_sum_is_the_sum_of_the_boxs_words(box, box_cols, box_rows):
    cols, rows = 256, 1024
    tensor = hopper.known_words(0, cols * rows).reshape(rows, cols).astype(np.uint64)
    x, y, total = tma.box_sum(box, cols, box_cols, box_rows)
    assert (x, y) == (box % (cols // box_cols) * box_cols, box // (cols // box_cols) * box_rows)
    assert total == int(tensor[y:y + box_rows, x:x + box_cols].sum()) & 0xFFFFFFFF


def test_tensor_rows_are_a_power_of_two_sized_by_level():
    device = {"l2_bytes": 60 << 20}
    l2, dram = tma.tensor_shape(device, "l2"), tma.tensor_shape(device, "dram")
    assert l2 & (l2 - 1) == 0 and dram & (dram - 1) == 0
    assert l2 * tma.TENSOR_COLS * 4 <= 2 << 20 and dram * tma.TENSOR_COLS * 4 >= 8 * device["l2_bytes"]
    for box_cols, box_rows in tma.TENSOR_BOXES:
        for rows in (l2, dram):
            tensor_map.tensor_map_args(tma.TENSOR_COLS, rows, box_cols, box_rows)


def test_hopper_probes_need_compute_capability_9():
    from gpuatlas.probes.registry import all_probes

    family = [p for pid, p in all_probes().items() if pid.startswith("hopper.")]
    assert len(family) == 6 and all(p.min_cc == (9, 0) for p in family)


def test_an_ampere_gpu_records_the_family_as_skipped(tmp_path):
    from fakes import DEVICE, simulated_probes
    from gpuatlas.machinery import runner

    probes = [p for p in simulated_probes() if p.id.startswith("hopper.") or p.id == "clock.sm"]
    ampere = {**DEVICE, "compute_capability": "8.0"}
    run, meta = runner.new_run(tmp_path, ampere, {"python": "3"}, probes, "quick", {}, 0, ["gpuatlas", "run"])
    meta = runner.execute(run, meta, probes, isolate=False)
    for pid, state in meta["probes"].items():
        if pid.startswith("hopper."):
            assert state["status"] == "skipped" and "(9, 0)" in state["error"] and "(8, 0)" in state["error"]
        else:
            assert state["status"] == "ok"


# -- derivations on synthetic measurements ----------------------------------------------------------------------

def _frame(probe: str, rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame["probe"], frame["flag"] = probe, frame.get("flag", "")
    return frame.fillna({"flag": ""})


def test_dsmem_latency_pools_cluster_sizes_and_names_refused_ones():
    rng = np.random.default_rng(0)
    rows = [{"metric": "latency", "value": base + rng.normal(0, 1), "cluster_size": n, "mode": mode}
            for n in (2, 4, 8) for mode, base in (("remote", 180.0 + n), ("self", 40.0), ("local", 28.0))
            for _ in range(9)]
    rows.append({"metric": "cluster_refused", "value": 912.0, "cluster_size": 16, "mode": "remote", "flag": "invalid"})
    m = _frame(hopper_probe := "hopper.dsmem_latency", rows)
    assert refused_cluster_sizes(m, hopper_probe) == {16: 912}
    got = {r["quantity"]: r for r in dsmem_rows(m)}
    remote = got["dsmem.latency_cycles"]
    assert remote["ci_low"] <= remote["value"] <= remote["ci_high"] and 183 < remote["value"] < 189
    assert "cluster size 16 (CUresult 912)" in remote["note"] and "2: 18" in remote["note"]
    assert got["dsmem.self_latency_cycles"]["value"] == pytest.approx(40, abs=1)


def test_dsmem_bandwidth_takes_the_best_remote_config_not_local():
    rows = [{"metric": metric, "value": v * scale, "cluster_size": n, "pattern": p}
            for metric, scale in (("bandwidth", 1e9), ("bytes_per_clk_sm", 1.0))
            for n, p, v in ((2, "local", 120.0), (2, "pair", 30.0), (4, "ring", 26.0)) for _ in range(5)]
    got = {r["quantity"]: r for r in dsmem_rows(_frame("hopper.dsmem_bandwidth", rows))}
    assert got["dsmem.bandwidth_bytes_per_clk_sm"]["value"] == 30.0
    assert got["dsmem.bandwidth_bytes_per_s"]["note"] == "pair, cluster size 2"


def test_tma_rows_report_the_smallest_copy_and_the_best_chunk_per_path_and_level():
    lat = [{"metric": "latency", "value": base + size / 64, "copy_bytes": size, "level": level}
           for level, base in (("l2", 500.0), ("dram", 900.0)) for size in (16, 4096) for _ in range(5)]
    bw = [{"metric": "bandwidth", "value": v * (2 if level == "l2" else 1) * min(1, chunk / 16384), "path": path,
           "chunk_bytes": chunk, "level": level}
          for path, v in (("tma", 3.5e12), ("cp_async", 3.3e12), ("ldg", 2.9e12)) for level in ("l2", "dram")
          for chunk in (4096, 16384) for _ in range(5)]
    boxes = [{"metric": "latency", "value": 520.0 + c * r / 16, "box_cols": c, "box_rows": r, "level": "l2"}
             for c, r in ((16, 16), (64, 64)) for _ in range(5)]
    m = pd.concat([_frame("hopper.tma_latency", lat), _frame("hopper.copy_bandwidth", bw),
                   _frame("hopper.tma_tensor", boxes)], ignore_index=True)
    got = {r["quantity"]: r["value"] for r in tma_rows(m)}
    assert got["tma.tensor_latency_cycles"] == 536.0
    assert got["tma.latency_cycles"] == 500.25 and got["tma.dram_latency_cycles"] == 900.25
    assert got["tma.bandwidth_bytes_per_s"] == 3.5e12 and got["tma.l2_bandwidth_bytes_per_s"] == 7e12
    assert got["cp_async.bandwidth_bytes_per_s"] == 3.3e12 and got["ldg_smem.l2_bandwidth_bytes_per_s"] == 5.8e12


def test_dpx_speedup_is_the_ratio_of_medians_with_a_ci():
    rng = np.random.default_rng(2)
    rows = [{"metric": metric, "value": v * (1 + 0.01 * rng.standard_normal()), "op": op, "impl": impl}
            for op, impl, lat, tp in (("viaddmax", "dpx", 4.0, 64.0), ("viaddmax", "emu", 9.0, 32.0),
                                      ("vimax3", "dpx", 4.0, 64.0))
            for metric, v in (("latency", lat), ("ops_per_clk_sm", tp)) for _ in range(15)]
    got = {r["quantity"]: r for r in dpx_rows(_frame("hopper.dpx", rows))}
    speedup = got["dpx.viaddmax_speedup"]
    assert speedup["ci_low"] < 2.0 < speedup["ci_high"] and speedup["value"] == pytest.approx(2.0, rel=0.02)
    assert got["dpx.viaddmax_latency_speedup"]["value"] == pytest.approx(2.25, rel=0.02)
    assert got["dpx.vimax3_ops_per_clk_sm"]["value"] == pytest.approx(64, rel=0.02)


def test_ratio_ci_is_empty_without_samples():
    assert all(np.isnan(v) for v in ratio_ci([], [1.0]))
