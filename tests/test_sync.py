"""Shared-memory atomics, barriers and wgmma latency without a GPU: smem_atomics.cu, barriers.cu and
barriers_sm90.cu compiled for sm_90 (wgmma_latency.cu for sm_90a) with the defining SASS asserted (each with
a negative control), the host references and sweeps, the probes' host code against an emulated device, and
the derivations recovering the fakes' physics through a simulated run."""
import re

import numpy as np
import pytest

from gpuatlas.probes.families import barriers
from gpuatlas.probes.families import smem_atomics
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass, source
from gpuatlas.probes.registry import all_probes
from test_execution import _DeviceArray, _FakeCupy, check_chain, instructions, timed_loop

#: Opcodes (with their modifiers) as timed_loop matches them.
BAR, STG = r"BAR\.SYNC(\.DEFER_BLOCKING)?", r"STG\.E\.STRONG\.SYS"
H100 = {"sm_count": 132, "max_threads_per_block": 1024, "max_threads_per_sm": 2048, "max_blocks_per_sm": 32,
        "compute_capability": "9.0", "l2_bytes": 50 << 20}
A100 = {**H100, "sm_count": 108, "compute_capability": "8.0"}


@pytest.fixture(scope="module")
def atoms():
    cubin, log = compile_cubin("smem_atomics.cu")
    return sass(cubin), resource_usage(log)


@pytest.fixture(scope="module")
def bars():
    return sass(compile_cubin("barriers.cu")[0]), sass(compile_cubin("barriers_sm90.cu")[0])


def outer_loop(code: str, pattern: str) -> list[str]:
    """The body of the loop (backward branch target to branch) holding the most instructions matching
    ``pattern``, the tightest of those: the timed loop, around inner retry or spin loops and beside the
    branches back from out-of-line slow paths."""
    lines = instructions(code)
    loops = [(int(m.group(1), 16), addr) for addr, text in lines
             if (m := re.match(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)", text)) and int(m.group(1), 16) < addr]
    bodies = [[t for a, t in lines if start <= a <= end] for start, end in loops]
    bodies = [b for b in bodies if any(re.match(pattern, t) for t in b)]
    assert bodies, f"no loop holds {pattern}"
    return max(bodies, key=lambda b: (count(b, pattern), -len(b)))


def count(body: list[str], pattern: str) -> int:
    return sum(bool(re.match(pattern, t)) for t in body)


# -- shared atomics -----------------------------------------------------------------------------------------

def test_int32_latency_kernel_is_one_unbroken_chain_of_atoms_add(atoms):
    kernels, usage = atoms
    code = kernels["atoms_lat_i32"]
    assert not re.search(r"SHFL|REDUX|VOTE", code), "no warp aggregation around the atomic"
    check_chain(timed_loop(code, r"ATOMS\.ADD"), (r"ATOMS\.ADD",), smem_atomics.ATOMS_UNROLL)
    assert usage["atoms_lat_i32"]["stack_bytes"] == 0


def test_a_compiled_broken_atomic_chain_is_rejected(tmp_path, monkeypatch):
    """Negative control: every add's operand the kernel parameter instead of the previous return."""
    import gpuatlas.probes.kit.cuda as cuda

    text = source("smem_atomics.cu")
    cut = text.replace('" %0, [%1], %0;" : "+" CC(x) : "r"(q)', '" %0, [%1], %2;" : "=" CC(x) : "r"(q), CC(v)')
    assert cut != text, "the latency kernel changed: update this negative control"
    (tmp_path / "smem_atomics.cu").write_text(cut)
    monkeypatch.setattr(cuda, "KERNEL_DIR", tmp_path)
    body = timed_loop(sass(compile_cubin("smem_atomics.cu")[0])["atoms_lat_i32"], r"ATOMS\.ADD")
    with pytest.raises(AssertionError, match="reads nothing"):
        check_chain(body, (r"ATOMS\.ADD",), smem_atomics.ATOMS_UNROLL)


def test_fp32_shared_add_is_a_compare_and_swap_loop_per_step(atoms):
    kernels, _ = atoms
    lines = [t for _, t in instructions(kernels["atoms_lat_f32"])]
    assert not any(t.startswith("ATOMS.ADD") for t in lines), "no native fp32 shared add on sm_90"
    cas = [i for i, t in enumerate(lines) if t.startswith("ATOMS.CAST.SPIN ")]
    assert len(cas) == smem_atomics.ATOMS_UNROLL
    for i in cas:  # each CAS retried by its own backward branch, after a load and an FADD of its own
        assert any(re.match(r"BRA 0x", t) for t in lines[i + 1:i + 4]), lines[i:i + 4]
        assert lines[i - 1].startswith("FADD") or lines[i - 2].startswith("FADD")
    # negative control: the int32 kernel has no CAS loop
    assert "ATOMS.CAST" not in kernels["atoms_lat_i32"]


def test_fp64_shared_add_is_not_native_on_sm90(tmp_path, monkeypatch):
    """Why the probe has no fp64: atom.shared.add.f64 compiles to ATOMS.CAST.SPIN.64 (a CAS loop).  If a new
    ptxas makes it native this fails, and fp64 belongs in the probe."""
    import gpuatlas.probes.kit.cuda as cuda

    text = source("smem_atomics.cu").replace('SMEM_ATOMICS(f32, float, "f", "f32")',
                                             'SMEM_ATOMICS(f64, double, "d", "f64")')
    (tmp_path / "smem_atomics.cu").write_text(text)
    monkeypatch.setattr(cuda, "KERNEL_DIR", tmp_path)
    code = sass(compile_cubin("smem_atomics.cu")[0])["atoms_lat_f64"]
    assert "ATOMS.CAST.SPIN.64" in code and not re.search(r"ATOMS\.ADD\.F64", code)


@pytest.mark.parametrize("dtype, opcode", [("i32", r"ATOMS\.ADD RZ"), ("f32", r"ATOMS\.CAST\.SPIN ")])
def test_throughput_kernels_loop_over_unrolled_shared_adds(atoms, dtype, opcode):
    kernels, usage = atoms
    body = outer_loop(kernels[f"atoms_thr_{dtype}"], opcode)
    assert count(body, opcode) == smem_atomics.ATOMS_THR_UNROLL
    lines = [t for _, t in instructions(kernels[f"atoms_thr_{dtype}"])]
    first = next(i for i, t in enumerate(lines) if re.match(opcode, t))
    before = [t for t in lines[:first] if "SR_CLOCKLO" in t or "SR_GLOBALTIMERLO" in t]
    assert len(before) == 2, "clock64 and %globaltimer read before the loop"
    assert usage[f"atoms_thr_{dtype}"]["smem_bytes"] == smem_atomics.ATOMS_WORDS * 4


def test_shared_atomic_host_references():
    assert [smem_atomics.chain_reference("i32", n)[0] for n in range(1, 8)] == [0, 1, 1, 2, 3, 5, 8]
    assert smem_atomics.chain_reference("i32", 60)[1] == (1548008755920 % 2**32)  # F(60) wrapped
    x, word = smem_atomics.chain_reference("f32", 400)
    assert np.isinf(word) and x.dtype == np.float32
    w = smem_atomics.expected_words("i32", "warp", 1024, 10)
    assert w[:32].tolist() == [320] * 32 and not w[32:].any()
    assert smem_atomics.expected_words("f32", "same", 1024, 2**15)[0] == 2**24  # 2^25 adds of 1 stop at 2^24
    assert smem_atomics.expected_words("i32", "same", 1024, 2**22)[0] == 0  # 2^32 wraps
    assert smem_atomics.expected_words("i32", "distinct", 256, 3)[:257].tolist() == [3] * 256 + [0]
    assert smem_atomics.block_threads({"max_threads_per_block": 1024}) == 1024
    assert smem_atomics.block_threads({"max_threads_per_block": 2048}) == smem_atomics.ATOMS_WORDS


def _emulated(monkeypatch, module, kernels: dict):
    import sys

    from gpuatlas.probes.kit.harness import Budget, Context

    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy)
    monkeypatch.setattr(module, "_kernel", lambda *names: kernels[names[-1]])
    ctx = Context(device=dict(H100, sm_clock_max_hz=2e9), budget=Budget(min_repeats=3, max_repeats=3, warmup_s=0))
    monkeypatch.setattr(Context, "sm_clock", lambda self, *a, **k: 2e9)
    return ctx


def test_smem_atomics_host_flow_on_an_emulated_device(monkeypatch):
    def lat(grid, block, args):
        v, trips, out, cycles = args
        out[:] = smem_atomics.chain_reference("i32", int(trips) * smem_atomics.ATOMS_UNROLL)
        cycles[0] = 200 + 40 * int(trips) * smem_atomics.ATOMS_UNROLL  # 40 cycles an add

    def thr(grid, block, args):  # every thread adds, 16 adds a clock, at 2 GHz
        v, mode, reps, out, clocks = args
        mode_name = {0: "same", 1: "warp", 2: "distinct"}[int(mode)]
        adds = int(reps) * smem_atomics.ATOMS_THR_UNROLL
        out[:] = smem_atomics.expected_words("i32", mode_name, block[0], adds)
        clocks[:] = [block[0] * adds / 16, block[0] * adds / 16 / 2.0]

    monkeypatch.setattr(smem_atomics, "calibrate", lambda run, unit, target, max_count: (5, target))
    ctx = _emulated(monkeypatch, smem_atomics, {"atoms_lat_i32": lat, "atoms_thr_i32": thr})
    assert {s.value for s in smem_atomics.exec_smem_atomics(ctx, "i32", "latency")} == {40.0}
    samples = smem_atomics.exec_smem_atomics(ctx, "i32", "distinct")
    rates = [s for s in samples if s.metric == "ops_per_clk_sm"]
    assert {s.value for s in rates} == {16.0} and rates[0].sm_clock_hz == pytest.approx(2e9)
    assert [s.value for s in samples if s.metric == "ops_per_s_sm"] == pytest.approx([32e9] * 3)

    def lossy(grid, block, args):  # a word one add short is refused
        thr(grid, block, args)
        args[3][3] -= 1

    ctx = _emulated(monkeypatch, smem_atomics, {"atoms_thr_i32": lossy})
    with pytest.raises(RuntimeError, match="1 words differ"):
        smem_atomics.exec_smem_atomics(ctx, "i32", "distinct")

    def off(grid, block, args):  # a chain whose returns break the recurrence is refused
        lat(grid, block, args)
        args[2][0] += 1

    ctx = _emulated(monkeypatch, smem_atomics, {"atoms_lat_i32": off})
    with pytest.raises(RuntimeError, match="recurrence"):
        smem_atomics.exec_smem_atomics(ctx, "i32", "latency")
    with pytest.raises(ValueError, match="bad shared atomics config"):
        smem_atomics.exec_smem_atomics(ctx, "f64", "latency")


# -- barriers -----------------------------------------------------------------------------------------------

def test_named_barriers_loop_over_bar_sync_with_their_ids(bars):
    plain, _ = bars
    body = timed_loop(plain["named_partial"], BAR)
    assert count(body, r"BAR\.SYNC(\.DEFER_BLOCKING)? 0x1, R\d+$") == barriers.BARRIER_UNROLL
    ids = timed_loop(plain["named_ids"], BAR)
    assert count(ids, r"BAR\.SYNC(\.DEFER_BLOCKING)? R\d+, R\d+$") == barriers.BARRIER_UNROLL  # id from a register
    # negative control: __syncthreads is barrier 0 of the whole block, no id 1 and no count
    sync_lat = sass(compile_cubin("execution.cu")[0])["sync_lat"]
    assert count(timed_loop(sync_lat, BAR), r"BAR\.SYNC(\.DEFER_BLOCKING)? 0x1, R\d+$") == 0


@pytest.mark.parametrize("fence, membar", [("cta", r"MEMBAR\.SC\.CTA"), ("gpu", r"MEMBAR\.SC\.GPU"),
                                           ("sys", r"MEMBAR\.SC\.SYS")])
def test_each_fence_kernel_stores_then_fences_at_its_scope(bars, fence, membar):
    plain, _ = bars
    body = timed_loop(plain[f"fence_{fence}"], STG)
    assert count(body, r"STG\.E\.STRONG") == count(body, membar) == barriers.BARRIER_UNROLL
    others = {r"MEMBAR\.SC\.CTA", r"MEMBAR\.SC\.GPU", r"MEMBAR\.SC\.SYS"} - {membar}
    assert not any(count(body, o) for o in others)
    # negative control: the baseline stores with no fence
    none = timed_loop(plain["fence_none"], STG)
    assert count(none, r"STG\.E\.STRONG") == barriers.BARRIER_UNROLL and count(none, r"MEMBAR") == 0


def test_grid_barrier_adds_at_gpu_scope_and_spins_between_block_barriers(bars):
    plain, _ = bars
    body = outer_loop(plain["grid_sync"], r"ATOMG")
    assert count(body, r"ATOMG\.E\.ADD\.STRONG\.GPU") == barriers.GRID_UNROLL
    assert count(body, r"LDG\.E\.STRONG\.GPU") == barriers.GRID_UNROLL  # the acquire spin's load
    assert count(body, r"BAR\.SYNC") == 2 * barriers.GRID_UNROLL
    # negative control: a named-barrier loop has no global atomic
    assert count(timed_loop(plain["named_partial"], BAR), r"ATOMG") == 0


def test_mbarrier_kernel_arrives_and_waits_on_the_phase_each_step(bars):
    _, sm90 = bars
    body = outer_loop(sm90["mbar_rt"], r"SYNCS\.ARRIVE")
    assert count(body, r"SYNCS\.ARRIVE\.TRANS64") == barriers.BARRIER_UNROLL
    assert count(body, r"SYNCS\.PHASECHK\.TRANS64\.TRYWAIT") == barriers.BARRIER_UNROLL
    assert count(body, r"BAR\.SYNC") == 0, "no block barrier inside the timed mbarrier loop"
    # negative control: the named barrier kernel has no mbarrier instruction
    assert "SYNCS" not in bars[0]["named_partial"]


@pytest.mark.parametrize("size", barriers.CLUSTER_SIZES)
def test_cluster_barrier_kernel_arrives_and_waits_each_step(bars, size):
    _, sm90 = bars
    body = outer_loop(sm90[f"cluster_bar_c{size}"], r"UCGABAR_ARV")
    assert count(body, r"UCGABAR_ARV") == count(body, r"UCGABAR_WAIT") == barriers.BARRIER_UNROLL
    assert count(body, r"MEMBAR\.ALL\.GPU") == barriers.BARRIER_UNROLL, "arrive.release: a GPU-scope fence first"
    relaxed = outer_loop(sm90[f"cluster_bar_relaxed_c{size}"], r"UCGABAR_ARV")
    assert count(relaxed, r"UCGABAR_ARV") == count(relaxed, r"UCGABAR_WAIT") == barriers.BARRIER_UNROLL
    assert count(relaxed, r"MEMBAR") == 0, "arrive.relaxed: the barrier alone"
    # negative control: the mbarrier kernel never touches the cluster barrier
    assert "UCGABAR" not in sm90["mbar_rt"]


def test_every_kernel_the_probe_names_exists(bars):
    plain, sm90 = bars
    for config in barriers.barrier_configs(H100):
        spec = barriers.layout(config["kind"], config["n"], H100)
        kernels = plain if spec["file"] == "barriers.cu" else sm90
        assert spec["name"] in kernels, spec
        if not config["kind"].startswith("fence_") and config["kind"] != "cluster_relaxed":
            assert spec["name"] + "_check" in kernels, spec


def test_barrier_sweep_comes_from_the_device():
    h100 = barriers.barrier_configs(H100)
    kinds = {c["kind"] for c in h100}
    assert kinds == set(barriers.KINDS)
    assert [c["n"] for c in h100 if c["kind"] == "named_partial"] == [1, 2, 4, 8, 16, 32]
    assert [c["n"] for c in h100 if c["kind"] == "grid"] == [1, 2, 4, 8, 16]  # 2048 threads / 128
    assert [c["n"] for c in h100 if c["kind"] == "cluster"] == [2, 4, 8, 16]
    assert [c["n"] for c in h100 if c["kind"] == "cluster_relaxed"] == [2, 4, 8, 16]
    a100 = {c["kind"] for c in barriers.barrier_configs(A100)}
    assert a100 == set(barriers.KINDS) - {"mbarrier", "cluster", "cluster_relaxed"}, "sm_90 kinds only from 9.0"
    small = barriers.barrier_configs({**H100, "max_threads_per_block": 768, "max_threads_per_sm": 1536})
    assert [c["n"] for c in small if c["kind"] == "named_partial"] == [1, 2, 4, 8, 16, 24]
    assert [c["n"] for c in small if c["kind"] == "named_ids"] == [1, 2, 4, 8]  # 24 warps: no 16 equal groups
    assert [c["n"] for c in small if c["kind"] == "grid"] == [1, 2, 4, 8, 12]


def _barrier_kernel(cycles_per, participants, behind=0, missing=0):
    def run(grid, block, args):
        n, trips, scratch, passed, cycles = args
        steps = int(trips) * barriers.BARRIER_UNROLL
        passed[:] = [participants * steps - missing, behind]
        scratch[0] = steps - 1
        cycles[0] = 500 + cycles_per * steps
    return run


def test_barriers_host_flow_on_an_emulated_device(monkeypatch):
    ctx = _emulated(monkeypatch, barriers, {"named_partial": _barrier_kernel(25, 4 * 32),
                                             "named_partial_check": _barrier_kernel(99, 4 * 32),
                                             "fence_gpu": _barrier_kernel(300, 1)})
    assert {s.value for s in barriers.exec_barriers(ctx, "named_partial", 4)} == {25.0}
    fenced = barriers.exec_barriers(ctx, "fence_gpu", 1)
    assert {s.value for s in fenced if s.metric == "latency"} == {300.0}
    offsets = [s.value for s in fenced if s.metric == "address_offset"]
    assert len(set(offsets)) == barriers.PLACEMENTS  # each sample's store at its own line
    with pytest.raises(ValueError, match="bad barrier config"):
        barriers.exec_barriers(ctx, "named_partial", 3)
    ctx = _emulated(monkeypatch, barriers, {"named_partial": _barrier_kernel(25, 4 * 32),
                                             "named_partial_check": _barrier_kernel(25, 4 * 32, behind=1)})
    with pytest.raises(RuntimeError, match="1 neighbours seen behind"):  # the check variant saw a broken order
        barriers.exec_barriers(ctx, "named_partial", 4)
    ctx = _emulated(monkeypatch, barriers, {"named_partial": _barrier_kernel(25, 4 * 32, missing=1),
                                             "named_partial_check": _barrier_kernel(25, 4 * 32)})
    with pytest.raises(RuntimeError, match="barriers passed"):  # a thread short of its barriers
        barriers.exec_barriers(ctx, "named_partial", 4)


def test_grid_barrier_launches_cooperatively(monkeypatch):
    launched = []

    def cooperative(func, blocks, threads, args):
        launched.append((blocks, threads))
        n, trips, scratch, passed, cycles = args
        steps = int(trips) * barriers.GRID_UNROLL
        passed[:] = [blocks * steps, 0]
        cycles[0] = 3000 * steps

    ctx = _emulated(monkeypatch, barriers, {"grid_sync": object(), "grid_sync_check": object()})
    monkeypatch.setattr(barriers, "cooperative_launch", cooperative)
    monkeypatch.setattr(barriers, "blocks_per_sm", lambda func, threads: 16)
    assert {s.value for s in barriers.exec_barriers(ctx, "grid", 2)} == {3000.0}
    assert set(launched) == {(2 * H100["sm_count"], barriers.GRID_THREADS)}
    monkeypatch.setattr(barriers, "blocks_per_sm", lambda func, threads: 1)
    with pytest.raises(RuntimeError, match="fewer than 2 blocks"):  # not co-resident: refused, not hung
        barriers.exec_barriers(ctx, "grid", 2)


# -- registration and derivation ----------------------------------------------------------------------------

def test_probes_are_registered_with_fakes_after_the_execution_chapter():
    import fakes
    from gpuatlas.probes.registry import probe_modules

    probes = all_probes()
    for pid in ("exec.smem_atomics", "exec.barriers", "exec.wgmma_latency"):
        assert pid in probes and pid in fakes.FAKES
    order = [name.removeprefix("gpuatlas.probes.families.") for name in probe_modules()]
    assert (order.index("execution") < order.index("smem_atomics") < order.index("barriers")
            < order.index("compute.wgmma_latency"))
    assert probes["exec.barriers"].kernels == ("barriers.cu", "barriers_sm90.cu")


def test_a_simulated_run_recovers_the_fakes_sync_physics(tmp_path):
    import fakes
    from gpuatlas.analysis.derive import derive
    from gpuatlas.machinery import runner

    probes = [p for p in fakes.simulated_probes()
              if p.id in ("exec.smem_atomics", "exec.barriers", "exec.wgmma_latency")]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    assert {s["status"] for s in meta["probes"].values()} == {"ok"}
    d = derive(meta, run.read_measurements()).set_index("quantity")["value"]
    assert d["atomic.shared.add_i32_latency_cycles"] == fakes.SMEM_ATOMIC_LATENCY
    assert d["atomic.shared.add_f32_latency_cycles"] == pytest.approx(
        fakes.SMEM_ATOMIC_LATENCY + fakes.LEVELS["smem"] + fakes.FFMA_DEPTH)
    assert d["atomic.shared.add_i32_ops_per_clk_sm_same"] == 1.0
    assert d["atomic.shared.add_i32_ops_per_clk_sm_distinct"] == fakes.SMEM_ATOMIC_LANES
    assert d["atomic.shared.add_f32_ops_per_clk_sm_warp"] == fakes.SMEM_ATOMIC_LANES / 2
    assert d["sync.named_barrier_cycles_one_warp"] == fakes.BARRIER_BASE + 1
    assert d["sync.named_barrier_cycles_all_warps"] == fakes.BARRIER_BASE + 32
    assert d["sync.named_barrier_cycles_16_ids"] == fakes.BARRIER_BASE + 2
    assert d["sync.fence_gpu_near_cycles"] == fakes.STORE_ISSUE + fakes.LEVELS["l2"]
    assert d["sync.fence_gpu_far_cycles"] == fakes.STORE_ISSUE + fakes.LEVELS["l2"] + fakes.CROSSING
    assert d["sync.fence_sys_near_cycles"] - d["sync.fence_none_cycles"] == fakes.LEVELS["dram"]
    assert d["sync.grid_sync_cycles_full"] - d["sync.grid_sync_cycles_one_block_per_sm"] == 15 * fakes.DEVICE["sm_count"]
    assert d["sync.mbarrier_cycles_all_warps"] == fakes.MBARRIER_BASE + 32
    assert d["sync.cluster_barrier_cycles_c16"] - d["sync.cluster_barrier_cycles_c2"] == 14
    assert d["sync.cluster_barrier_cycles_c4"] - d["sync.cluster_barrier_relaxed_cycles_c4"] == fakes.LEVELS["l2"]
    assert d["tc.bf16.wgmma_latency_cycles_n256"] == fakes.wgmma_latency("bf16", 256)
    assert d["tc.fp8.wgmma_latency_cycles_n64"] == fakes.WGMMA_FILL + 2 * 64 * 64 * 32 / fakes.WGMMA_PER_CLK["e4m3"]
    # negative control: without the barrier probe's rows none of its quantities appear
    only = run.read_measurements()
    only = only[only["probe"] == "exec.smem_atomics"]
    assert not any(q.startswith("sync.") for q in derive(meta, only)["quantity"])


# -- wgmma latency ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wgmma_lat():
    return sass(compile_cubin("wgmma_latency.cu", "sm_90a")[0])


#: The SASS of one wgmma step on sm_90a (fp8 runs on QGMMA).
HGMMA = {"bf16": r"HGMMA\.64x{n}x16\.F32\.BF16", "fp16": r"HGMMA\.64x{n}x16\.F32",
         "tf32": r"HGMMA\.64x{n}x8\.F32\.TF32", "e4m3": r"QGMMA\.64x{n}x32\.F32\.E4M3\.E4M3"}


def waited_each_step(body: list[str], opcode: str) -> bool:
    """Every wgmma of the loop is waited for to completion (DEPBAR.LE gsb0, 0x0) before the next issues."""
    steps = [i for i, t in enumerate(body) if re.match(rf"{opcode}\b", t.split()[0] + " ")]
    ends = steps[1:] + [len(body)]
    return bool(steps) and all(any(re.match(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0$", t) for t in body[i:j])
                               for i, j in zip(steps, ends))


@pytest.mark.parametrize("dtype", list(HGMMA))
@pytest.mark.parametrize("n", [64, 256])
def test_wgmma_latency_kernel_is_one_waited_accumulator_chain(wgmma_lat, dtype, n):
    from gpuatlas.probes.families.compute import wgmma_latency

    opcode = HGMMA[dtype].format(n=n)
    body = timed_loop(wgmma_lat[f"wgmma_lat_{dtype}_n{n}"], opcode)
    check_chain(body, (opcode,), wgmma_latency.WG_LAT_UNROLL)  # each step accumulates into the last's result
    assert waited_each_step(body, opcode)


def test_the_wait_check_rejects_the_pipelined_throughput_kernel(wgmma_lat):
    """Negative control: wgmma.cu's throughput loop keeps a group in flight (wait_group 1)."""
    opcode = HGMMA["bf16"].format(n=64)
    body = timed_loop(wgmma_lat["wgmma_bf16_n64"], opcode)
    assert not waited_each_step(body, opcode)


def test_wgmma_latency_host_flow_on_an_emulated_device(monkeypatch):
    from gpuatlas.probes.families.compute import wgmma_latency

    def chain(grid, block, args):
        a_rows, b_rows, trips, out, cycles = args
        assert a_rows.view(np.uint32).tolist() == [0x3F803F80] * (64 * 8)
        out[:] = int(trips) * wgmma_latency.WG_LAT_UNROLL * 16
        cycles[0] = 300 + 70 * int(trips) * wgmma_latency.WG_LAT_UNROLL

    monkeypatch.setattr(_FakeCupy, "full", staticmethod(lambda n, v, dtype: np.full(n, v, dtype).view(_DeviceArray)),
                        raising=False)
    ctx = _emulated(monkeypatch, wgmma_latency, {"wgmma_lat_bf16_n64": chain})
    assert {s.value for s in wgmma_latency.exec_wgmma_latency(ctx, "bf16", 64)} == {70.0}

    def short(grid, block, args):  # an accumulator a step short is refused
        chain(grid, block, args)
        args[3][5] -= 16

    ctx = _emulated(monkeypatch, wgmma_latency, {"wgmma_lat_bf16_n64": short})
    with pytest.raises(RuntimeError, match="expected"):
        wgmma_latency.exec_wgmma_latency(ctx, "bf16", 64)
