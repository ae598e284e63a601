"""The execution chapter without a GPU: execution.cu compiled for sm_90 with every op's chain asserted in its
SASS (the named instructions in the timed loop, in the intended count, each step reading the previous step's
result, none left outside the loop), negative controls the checker must reject, and the derivations on
synthetic measurements with known answers."""
import re

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.execution import OPS, UNITS, execution_rows, inst_table, sass_step
from gpuatlas.probes.families import execution
from gpuatlas.probes.families.execution import exec_chains
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass
from gpuatlas.probes.registry import all_probes

ADDRESS = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
REGISTER = re.compile(r"\b(U?R\d+|U?P\d+)\b")
#: Opcodes whose leading operands are all results (predicates or registers): how many.
RESULTS = {"ISETP": 2, "VOTE": 2, "SHFL": 2, "ATOMG": 2}


def instructions(code: str) -> list[tuple[int, str]]:
    """(address, instruction text without its guard predicate) of every SASS line."""
    out = []
    for line in code.splitlines():
        m = ADDRESS.search(line)
        if m:
            out.append((int(m.group(1), 16), re.sub(r"^@!?U?P\w+\s+", "", re.sub(r"\s+", " ", m.group(2)).strip())))
    return out


def timed_loop(code: str, pattern: str) -> list[str]:
    """The body of the one loop (backward branch target to branch) that holds instructions matching
    ``pattern``."""
    lines = instructions(code)
    loops = [(int(m.group(1), 16), addr) for addr, text in lines
             if (m := re.match(r"BRA (?:`\(\.L_x_\d+\) )?0x([0-9a-f]+)", text)) and int(m.group(1), 16) < addr]
    named = re.compile(rf"({pattern})$")
    bodies = [[t for a, t in lines if start <= a <= end] for start, end in loops]
    bodies = [b for b in bodies if any(named.match(t.split()[0]) for t in b)]
    assert len(bodies) == 1, f"expected one loop holding {pattern}, found {len(bodies)}"
    return bodies[0]


def registers(text: str, wide: bool) -> tuple[set, set]:
    """(results, sources) of one instruction; a wide op's Rn stands for the pair Rn, Rn+1."""
    opcode, _, rest = text.partition(" ")
    operands = [o.strip() for o in rest.split(",")]
    if opcode.startswith(("STS", "STG")):
        n_results = 0
    else:
        n_results = RESULTS.get(opcode.split(".")[0], 1)
        # a register result followed by carry-out predicates (IADD3 R7, P0, ...)
        while n_results < len(operands) and re.fullmatch(r"P\d+", operands[n_results]) and n_results >= 1 \
                and opcode.split(".")[0] not in RESULTS:
            n_results += 1

    def expand(ops):
        regs = set()
        for o in ops:
            for r in REGISTER.findall(o):
                regs.add(r)
                if wide and r[0] == "R":
                    regs.add(f"R{int(r[1:]) + 1}")
        return regs

    return expand(operands[:n_results]), expand(operands[n_results:])


def check_chain(body: list[str], sass_positions: tuple, steps: int, wide: bool = False) -> None:
    """The timed loop's body holds all ``steps`` chain steps of a trip (``sass_positions``' instructions each:
    none hoisted out of the loop), and every step reads a result of the step before (the chain unbroken)."""
    alternatives = re.compile(rf"({'|'.join(sass_positions)})$")
    chain = [t for t in body if alternatives.match(t.split()[0])]
    width = len(sass_positions)
    assert len(chain) == steps * width, (f"{len(chain)} chain instructions in the timed loop, expected "
                                         f"{steps * width}: steps hoisted out of it, or missing")
    groups = [chain[i:i + width] for i in range(0, len(chain), width)]
    for k, group in enumerate(groups):
        if k == 0:
            continue
        written = set().union(*(registers(t, wide)[0] for t in groups[k - 1]))
        read = set().union(*(registers(t, wide)[1] for t in group))
        assert written & read, f"step {k} ({' ; '.join(group)}) reads nothing step {k - 1} wrote ({written})"


def check_independent(body: list[str], sass_positions: tuple, chains: int, per_chain: int, wide: bool) -> None:
    """A throughput loop: ``chains`` x ``per_chain`` steps whose first instructions write ``chains`` distinct
    registers (independent chains)."""
    first = re.compile(rf"({sass_positions[-1]})$")
    ends = [t for t in body if first.match(t.split()[0])]
    assert len(ends) == chains * per_chain * sum(p == sass_positions[-1] for p in sass_positions), len(ends)
    results = {frozenset(registers(t, wide)[0]) for t in ends}
    assert len(results) >= chains, f"the {chains} chains write only {len(results)} distinct registers"


@pytest.fixture(scope="module")
def build():
    cubin, log = compile_cubin("execution.cu")
    return sass(cubin), resource_usage(log)


def _wide(op):
    return OPS[op].dtype in ("u64", "f64")


@pytest.mark.parametrize("op", [op for op in OPS if OPS[op].latency])
def test_latency_kernel_is_one_unbroken_chain_of_the_named_sass(build, op):
    kernels, _ = build
    spec = OPS[op]
    pattern = "|".join(spec.sass)
    body = timed_loop(kernels[f"lat_{op}"], pattern)
    positions = tuple(spec.sass)
    check_chain(body, positions, execution.LAT_UNROLL, _wide(op))


@pytest.mark.parametrize("op", list(OPS))
def test_throughput_kernel_runs_independent_chains_of_the_named_sass(build, op):
    kernels, usage = build
    spec = OPS[op]
    body = timed_loop(kernels[f"thr_{op}"], "|".join(spec.sass))
    named = re.compile(rf"({'|'.join(spec.sass)})$")
    in_loop = sum(bool(named.match(t.split()[0])) for t in body)
    assert in_loop == execution.CHAINS * execution.UNROLL * len(spec.sass), in_loop
    if spec.latency:
        check_independent(body, tuple(spec.sass), execution.CHAINS, execution.UNROLL, _wide(op))
    assert usage[f"thr_{op}"]["spill_stores"] == usage[f"thr_{op}"]["stack_bytes"] == 0


# -- negative controls: the checker rejects a broken chain, a hoisted instruction and a short loop ----------

SYNTHETIC = """
        /*0100*/                   CS2R R2, SR_CLOCKLO ;
        /*0110*/                   FFMA R8, R8, R4, R5 ;
        /*0120*/                   FFMA R8, R8, R4, R5 ;
        /*0130*/                   FFMA R9, R7, R4, R5 ;
        /*0140*/                   FFMA R9, R9, R4, R5 ;
        /*0150*/              @!P0 BRA 0x110 ;
        /*0160*/                   CS2R R6, SR_CLOCKLO ;
"""


def test_checker_rejects_a_broken_chain():
    body = timed_loop(SYNTHETIC, "FFMA")
    with pytest.raises(AssertionError, match="step 2"):
        check_chain(body, ("FFMA",), 4)
    mended = SYNTHETIC.replace("FFMA R9, R7, R4, R5", "FFMA R9, R8, R4, R5")
    body = timed_loop(mended, "FFMA")
    check_chain(body, ("FFMA",), 4)  # the same checker accepts the unbroken chain


def test_checker_rejects_hoisted_and_missing_steps():
    mended = SYNTHETIC.replace("FFMA R9, R7, R4, R5", "FFMA R9, R8, R4, R5")
    hoisted = mended.replace("/*0110*/", "/*0108*/").replace("@!P0 BRA 0x110", "@!P0 BRA 0x120")
    with pytest.raises(AssertionError, match="hoisted"):  # the first step before the loop's start
        check_chain(timed_loop(hoisted, "FFMA"), ("FFMA",), 4)
    with pytest.raises(AssertionError, match="expected 64"):
        check_chain(timed_loop(mended, "FFMA"), ("FFMA",), 64)


def test_checker_sees_a_wide_pair_and_a_carry():
    wide = """
        /*0100*/ IMAD.WIDE.U32 R4, R5, UR5, RZ ;
        /*0110*/ IMAD.WIDE.U32 R4, R5, UR5, RZ ;
        /*0120*/ @!P0 BRA 0x100 ;
    """
    body = timed_loop(wide, r"IMAD\.WIDE\.U32")
    check_chain(body, (r"IMAD\.WIDE\.U32",), 2, wide=True)  # R5 is the high half of the pair R4
    with pytest.raises(AssertionError, match="reads nothing"):
        check_chain(body, (r"IMAD\.WIDE\.U32",), 2, wide=False)
    assert registers("IADD3 R7, P0, R10, R4, RZ", False) == ({"R7", "P0"}, {"R10", "R4"})
    assert registers("VOTE.ANY R9, PT, P0", False) == ({"R9"}, {"P0"})


def _broken_source() -> str:
    """execution.cu with the latency template's chain cut: every step starts again from the loaded value."""
    from gpuatlas.probes.kit.cuda import source

    text = source("execution.cu")
    cut = text.replace("timed_chain<LAT_UNROLL>(trips, [&] { x = Op::step(x, a, b); });",
                       "timed_chain<LAT_UNROLL>(trips, [&] { x0 = x0 + a; x = x + Op::step(x0, a, b); });")
    cut = cut.replace("typename Op::type x = Op::start(init[(threadIdx.x & 31) * CHAINS]);",
                      "typename Op::type x = Op::start(init[(threadIdx.x & 31) * CHAINS]); typename Op::type x0 = x;")
    assert cut.count("x0") == 4, "the latency template changed: update this negative control"
    return cut


def test_a_compiled_broken_chain_is_rejected(tmp_path, monkeypatch):
    import gpuatlas.probes.kit.cuda as cuda

    (tmp_path / "execution.cu").write_text(_broken_source())
    monkeypatch.setattr(cuda, "KERNEL_DIR", tmp_path)
    kernels = sass(compile_cubin("execution.cu")[0])
    body = timed_loop(kernels["lat_ffma"], "FFMA")
    with pytest.raises(AssertionError):
        check_chain(body, ("FFMA",), execution.LAT_UNROLL)


# -- scheduling and divergence kernels ----------------------------------------------------------------------

@pytest.mark.parametrize("ilp", execution.SCHEDULE_ILPS)
def test_schedule_kernel_issues_ilp_independent_ffma_chains(build, ilp):
    kernels, _ = build
    body = timed_loop(kernels[f"sched_ffma_ilp{ilp}"], "FFMA")
    ffma = [t for t in body if t.startswith("FFMA")]
    assert len(ffma) == execution.SCHED_FFMA
    results = [registers(t, False)[0] for t in ffma]
    assert len({frozenset(r) for r in results}) == ilp
    for k in range(ilp, len(ffma)):  # every FFMA continues a chain: it reads what an earlier one wrote
        assert registers(ffma[k], False)[1] & set().union(*results[:k])


def test_diverge_kernel_branches_around_one_body(build):
    kernels, _ = build
    code = kernels["diverge_ffma"]
    lines = [t for _, t in instructions(code)]
    ffma = [i for i, t in enumerate(lines) if t.startswith("FFMA")]
    assert len(ffma) == execution.DIVERGE_ILP * execution.DIVERGE_UNROLL
    assert ffma[-1] - ffma[0] + 1 == len(ffma), "the body is one straight run"
    guard = [t for t in lines[:ffma[0]] if re.match(r"BRA|BSSY", t)]
    assert guard, "a branch skips the body for lanes of other branches"
    raw = [l for l in code.splitlines() if "BRA" in l]
    assert any(re.search(r"@!?P\d+\s+BRA", l) for l in raw), "the skip is conditional per lane"


@pytest.mark.parametrize("dtype", list(exec_chains.MMA_ONES))
def test_mma_latency_kernel_is_one_accumulator_chain(build, dtype):
    from gpuatlas.analysis.execution import MMA_LATENCY

    kernels, usage = build
    opcode = re.escape(MMA_LATENCY[dtype][1])
    check_chain(timed_loop(kernels[f"mma_lat_{dtype}"], opcode), (opcode,), exec_chains.MMA_UNROLL,
                wide=dtype == "fp64")
    assert usage[f"mma_lat_{dtype}"]["stack_bytes"] == 0


@pytest.mark.parametrize("dtype, opcode", [("i32", r"ATOMG\.E\.ADD\.STRONG\.GPU"),
                                           ("f32", r"ATOMG\.E\.ADD\.F32\.FTZ\.RN\.STRONG\.GPU"),
                                           ("f64", r"ATOMG\.E\.ADD\.F64\.RN\.STRONG\.GPU")])
def test_atomic_kernels_chain_atom_and_loop_over_red(build, dtype, opcode):
    kernels, _ = build
    code = kernels[f"atom_lat_{dtype}"]
    assert "SHFL" not in code, "no warp aggregation around the atomic"
    check_chain(timed_loop(code, opcode), (opcode,), exec_chains.ATOM_UNROLL, wide=dtype == "f64")
    red = opcode.replace("ATOMG", "REDG")
    body = timed_loop(kernels[f"red_{dtype}"], red)
    assert sum(bool(re.match(rf"({red})$", t.split()[0])) for t in body) == 1 and "SHFL" not in kernels[f"red_{dtype}"]


def test_atomic_host_references():
    assert [exec_chains.atomic_chain("i32", n)[0] for n in range(1, 8)] == [0, 1, 1, 2, 3, 5, 8]
    assert exec_chains.atomic_chain("i32", 7)[1] == 13
    x, p = exec_chains.atomic_chain("f32", 400)
    assert np.isinf(p) and x.dtype == np.float32  # the float chain overflows, as the GPU's does
    assert exec_chains.atomic_chain("i32", 60)[1] == (1548008755920 % 2**32)  # F(60) wrapped to 32 bits
    assert exec_chains.red_expected("f32", 2**24 + 5) == 2**24 and exec_chains.red_expected("f64", 2**24 + 5) == 2**24 + 5
    assert exec_chains.red_expected("i32", 2**32 + 3) == 3


def test_sync_kernel_times_a_loop_of_barriers(build):
    kernels, _ = build
    body = timed_loop(kernels["sync_lat"], r"BAR\.SYNC(\.DEFER_BLOCKING)?")
    assert sum(t.startswith("BAR.SYNC") for t in body) == exec_chains.SYNC_UNROLL
    assert exec_chains.sync_threads({"max_threads_per_block": 1024}) == [32, 64, 128, 256, 512, 1024]


def test_every_kernel_named_by_the_probe_exists(build):
    kernels, _ = build
    for op in OPS:
        assert f"thr_{op}" in kernels and f"lat_{op}" in kernels
    assert "diverge_ffma" in kernels


# -- host logic -------------------------------------------------------------------------------------------

def test_schedule_layout_puts_w_warps_on_each_sm():
    device = {"sm_count": 132, "max_threads_per_sm": 2048, "max_threads_per_block": 1024}
    for warps in execution.schedule_warps(device):
        blocks, threads = execution.schedule_layout(warps, device)
        assert blocks * threads == warps * 32 and threads <= 1024 and threads % 32 == 0
    assert execution.schedule_warps(device)[:8] == list(range(1, 9)) and max(execution.schedule_warps(device)) == 64
    assert max(execution.schedule_warps({**device, "max_threads_per_sm": 1536})) == 48
    assert max(execution.schedule_warps({**device, "max_threads_per_sm": 1280})) == 40


def test_schedule_kernels_fit_the_largest_layout(build):
    _, usage = build
    for ilp in execution.SCHEDULE_ILPS:  # 2048 threads of one SM share 65536 registers
        assert usage[f"sched_ffma_ilp{ilp}"]["registers"] <= 32 and usage[f"sched_ffma_ilp{ilp}"]["stack_bytes"] == 0


def test_per_sm_rate_sums_blocks_over_each_sms_span():
    # two SMs, two blocks each; SM 1's blocks overlap for 100 of their 150 cycles
    rec = np.array([[0, 0, 100, 0, 50], [0, 0, 100, 0, 50], [1, 10, 110, 0, 50], [1, 60, 160, 0, 50],
                    [2, 0, 100, 0, 50], [3, 0, 100, 0, 50]], np.uint64)
    rates, counts = execution.per_sm_rates(rec, work_per_block=200.0)
    assert counts.tolist() == [2, 2, 1, 1]
    assert rates.tolist() == [4.0, pytest.approx(400 / 150), 2.0, 2.0]
    assert execution.placed_rates(rec, 200.0, blocks_per_sm=2).tolist() == [4.0, pytest.approx(400 / 150)]
    with pytest.raises(RuntimeError, match="placed"):  # one SM of three with its two blocks
        execution.placed_rates(rec[[0, 1, 2, 4]], 200.0, blocks_per_sm=2)


# -- derivation -------------------------------------------------------------------------------------------

def _frame(rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame["flag"] = ""
    frame["sm_clock_hz"] = 1.8e9
    return frame


def _inst(truth_latency: dict, truth_rate: dict):
    rng = np.random.default_rng(0)
    rows = []
    for op, lat in truth_latency.items():
        for r in range(7):
            rows.append({"probe": "exec.inst", "op": op, "metric": "latency", "value": lat + 0.01 * rng.standard_normal()})
            rows.append({"probe": "exec.inst", "op": op, "metric": "ops_per_clk_sm",
                         "value": truth_rate[op] * (1 + 0.001 * rng.standard_normal())})
    return _frame(rows)


def test_instruction_rows_and_table_recover_synthetic_truth():
    lat, rate = {"ffma": 4.0, "mufu_ex2": 18.0, "dfma": 8.0}, {"ffma": 128.0, "mufu_ex2": 16.0, "dfma": 64.0}
    rows = {r["quantity"]: r for r in execution_rows(_inst(lat, rate))}
    for op in lat:
        assert rows[f"inst.{op}.latency_cycles"]["value"] == pytest.approx(lat[op], abs=0.02)
        low, high = rows[f"inst.{op}.latency_cycles"]["ci_low"], rows[f"inst.{op}.latency_cycles"]["ci_high"]
        assert low <= lat[op] + 0.02 and high >= lat[op] - 0.02 and low < high
        assert rows[f"inst.{op}.ops_per_clk_sm"]["value"] == pytest.approx(rate[op], rel=1e-3)
    table = inst_table(pd.DataFrame(list(rows.values())))
    assert table["unit"].tolist() == ["FP32", "FP64", "SFU"]  # grouped in UNITS order
    assert table.set_index("op").at["mufu_ex2", "SASS of one step"] == "MUFU.EX2"
    assert sass_step("vote") == "ISETP.NE.U32.AND + VOTE.ANY"
    # negative control: another op's truth is not recovered for this one
    assert rows["inst.ffma.latency_cycles"]["value"] != pytest.approx(lat["dfma"], abs=0.5)


def schedule_truth(warps: int, ilp: int, schedulers: int, latency: float, issue: float = 1.0) -> float:
    """Warp instructions per clock per SM: warp w sits on scheduler w mod S, each warp issues at most one
    instruction per latency per chain, each scheduler at most ``issue`` per clock."""
    per_scheduler = np.bincount(np.arange(warps) % schedulers, minlength=schedulers)
    return float(sum(min(issue, n * ilp / latency) for n in per_scheduler))


def _schedule(schedulers: int, latency: float = 4.0):
    rng = np.random.default_rng(1)
    rows = []
    for ilp in (1, 2, 4, 8):
        for w in (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64):
            for r in range(5):
                rows.append({"probe": "exec.schedule", "ilp": ilp, "resident_warps_per_sm": w,
                             "metric": "warp_ipc_sm",
                             "value": schedule_truth(w, ilp, schedulers, latency) * (1 + 0.002 * rng.standard_normal())})
    return _frame(rows)


@pytest.mark.parametrize("schedulers", [4, 2])
def test_scheduler_count_is_found_from_the_saturation_curve(schedulers):
    rows = {r["quantity"]: r for r in execution_rows(_schedule(schedulers))}
    assert rows["sm.schedulers"]["value"] == pytest.approx(schedulers, rel=0.01)
    assert rows["sm.schedulers"]["ci_low"] <= schedulers <= rows["sm.schedulers"]["ci_high"] * 1.01
    assert rows["sm.issue_per_clk_per_scheduler"]["value"] == pytest.approx(1.0, rel=0.01)
    assert f"ILP 1: {4 * schedulers}" in rows["sm.schedulers"]["note"]  # latency x schedulers warps at ILP 1


def test_divergence_fraction_recovers_one_over_ways():
    rows = []
    for ways in (1, 2, 4, 8, 16, 32):
        for r in range(5):
            rows.append({"probe": "exec.diverge", "ways": ways, "metric": "lane_ffma_per_clk_sm",
                         "value": 128.0 / ways * (1 + 0.001 * r)})
    (row,) = execution_rows(_frame(rows))
    assert row["quantity"] == "divergence.throughput_fraction_32way"
    assert row["value"] == pytest.approx(1 / 32, rel=0.01)
    broken = _frame([{**r, "value": 128.0} for r in rows])  # no serialisation: fraction 1, not 1/32
    assert execution_rows(broken)[0]["value"] == pytest.approx(1.0, rel=0.01)


def test_probes_are_registered_with_fakes():
    from tests.fakes import FAKES

    probes = all_probes()
    for pid in ("exec.inst", "exec.schedule", "exec.diverge", "exec.mma_latency", "exec.atomics", "exec.sync"):
        assert pid in probes and pid in FAKES
    assert len(probes["exec.inst"].configs({"sm_count": 132}, "full")) == len(OPS) >= 30
    assert set(UNITS) == {spec.unit for spec in OPS.values()}


def test_the_quantity_vocabulary_lists_every_op():
    from gpuatlas.analysis.quantities import QUANTITIES

    for op, spec in OPS.items():
        assert (f"inst.{op}.latency_cycles" in QUANTITIES) == spec.latency
        assert f"inst.{op}.ops_per_clk_sm" in QUANTITIES


def test_ffma_latency_note_sets_it_beside_compute_latency():
    frame = pd.concat([_inst({"ffma": 4.0}, {"ffma": 128.0}),
                       _frame([{"probe": "compute.latency", "op": "fp32", "metric": "latency", "value": 4.0}
                               for _ in range(5)])])
    row = next(r for r in execution_rows(frame) if r["quantity"] == "inst.ffma.latency_cycles")
    assert "compute.latency's fp32.latency_cycles 4.00" in row["note"]
    assert float(re.search(r"ratio ([\d.]+)", row["note"]).group(1)) == pytest.approx(1.0, abs=0.01)
    assert "compute.latency" not in next(r for r in execution_rows(frame[frame["probe"] == "exec.inst"])
                                         if r["quantity"] == "inst.ffma.latency_cycles")["note"]


def test_the_lecture_claims_are_judged_from_the_chapter():
    from gpuatlas.analysis.claims import judge

    def table(**values):
        d = pd.DataFrame([{"quantity": q, "value": v, "ci_low": v * 0.99, "ci_high": v * 1.01}
                          for q, v in values.items()])
        return dict(zip(*judge(d, {"sm_count": 132}).pipe(lambda t: (t["claim"], t["verdict"]))))

    good = table(**{"sm.schedulers": 4.01, "divergence.throughput_fraction_32way": 1 / 32.5,
                    "tc.bf16.peak_flops": 989e12})
    assert good["four warp schedulers per SM"] == "holds"
    assert good["a 32-way divergent branch runs at 1/32 throughput"] == "holds"
    assert good["989 / 132 ≈ 7.5 TFLOP/s of MMA per SM"] == "holds"
    bad = table(**{"sm.schedulers": 2.0, "divergence.throughput_fraction_32way": 1 / 16,
                   "tc.bf16.peak_flops": 600e12})
    assert set(v for k, v in bad.items() if k in good and k.startswith(("four", "a 32", "989 / 132"))) == {"deviates"}


def test_a_simulated_run_recovers_the_fakes_execution_physics_and_renders(tmp_path):
    import fakes
    from gpuatlas.analysis.derive import derive
    from gpuatlas.analysis.render import render
    from gpuatlas.machinery import runner

    probes = [p for p in fakes.simulated_probes() if p.id.startswith("exec.")]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    assert {s["status"] for s in meta["probes"].values()} == {"ok"}
    measurements = run.read_measurements()
    derived = derive(meta, measurements)
    d = derived.set_index("quantity")
    assert d.at["sm.schedulers", "value"] == pytest.approx(fakes.SCHEDULERS, rel=1e-6)
    assert d.at["sm.issue_per_clk_per_scheduler", "value"] == pytest.approx(1.0, rel=1e-6)
    assert d.at["divergence.throughput_fraction_32way", "value"] == pytest.approx(1 / 32, rel=1e-6)
    assert d.at["inst.ffma.latency_cycles", "value"] == fakes.FFMA_DEPTH
    assert d.at["inst.mufu_ex2.ops_per_clk_sm", "value"] == pytest.approx(4 * fakes._pipe("mufu_ex2")[1])
    assert d.at["tc.int8.mma_sync_latency_cycles", "value"] == fakes.MMA_CYCLES_PER_K * 32
    assert d.at["atomic.global.add_i32_latency_near_cycles", "value"] == fakes.ATOMIC_LATENCY
    assert d.at["atomic.global.add_i32_latency_far_cycles", "value"] == fakes.ATOMIC_LATENCY + fakes.CROSSING
    assert d.at["atomic.global.add_f64_ops_per_s_same", "value"] == pytest.approx(fakes.CLOCK_HZ)
    assert d.at["sync.syncthreads_cycles", "value"] == fakes.BARRIER_BASE + 1024 / 32
    assert d.at["sync.syncthreads_cycles_one_warp", "value"] == fakes.BARRIER_BASE + 1
    assert "inst.sts.latency_cycles" not in d.index and "inst.sts.ops_per_clk_sm" in d.index
    assert sum(q.startswith("inst.") and q.endswith(".latency_cycles") for q in d.index) >= 30
    page = render(meta, measurements, derived, tmp_path / "report")
    md = (tmp_path / "report" / "index.md").read_text()
    assert "Instruction table" in md and "| SFU | mufu_sin | FMUL.RZ + MUFU.SIN |" in md
    for name in ("instruction-latency-throughput.svg", "warp-scheduling.svg", "divergence.svg"):
        assert (tmp_path / "report" / name).exists(), name
    assert page.exists()
    from test_figures import overlaps

    from gpuatlas.analysis.figure_job import draw_figures
    from gpuatlas.analysis.execution_figures import FIGURES

    mine = [spec for spec in FIGURES if spec.probe.startswith("exec.")]
    drawn = list(draw_figures(meta, measurements, derived, mine))
    assert len(drawn) == 3
    for spec, fig in drawn:
        assert overlaps(fig) == [], spec.stem


@pytest.mark.gpu
def test_the_chapter_measures_on_a_gpu_within_its_time(tmp_path):
    """On a GPU: every exec probe passes its own checks, the table has 30 or more instructions with both
    figures, and the whole chapter (full profile, kernels compiled on first use) takes at most 25 s."""
    import time

    from gpuatlas.analysis.results import RunDir
    from gpuatlas.cli import main

    start = time.perf_counter()
    assert main(["run", "--profile", "full", "-p", "exec", "--out", str(tmp_path)]) == 0
    elapsed = time.perf_counter() - start
    (path,) = tmp_path.iterdir()
    run = RunDir(path)
    meta = run.read_meta()
    assert {pid: s["status"] for pid, s in meta["probes"].items()} == {pid: "ok" for pid in meta["probes"]}
    d = run.read_derived().set_index("quantity")
    both = [op for op in OPS if f"inst.{op}.latency_cycles" in d.index and f"inst.{op}.ops_per_clk_sm" in d.index]
    assert len(both) >= 30
    assert 1 <= d.at["sm.schedulers", "value"] <= 8
    assert d.at["divergence.throughput_fraction_32way", "value"] < 0.5
    assert elapsed <= 25, f"the execution chapter took {elapsed:.1f} s"


# -- the probes' host code against an emulated device -------------------------------------------------------

class _DeviceArray(np.ndarray):
    """A numpy array standing in for a CuPy one (``get``, ``data.ptr``)."""

    def get(self):
        return np.asarray(self).copy()

    @property
    def data(self):
        import types

        return types.SimpleNamespace(ptr=self.ctypes.data)


class _FakeCupy:
    uint32, uint64, int32, int64, float32, float64 = np.uint32, np.uint64, np.int32, np.int64, np.float32, np.float64

    @staticmethod
    def zeros(n, dtype):
        return np.zeros(n, dtype).view(_DeviceArray)

    empty = zeros

    @staticmethod
    def asarray(a):
        return np.array(a).view(_DeviceArray)

    @staticmethod
    def arange(n, dtype):
        return np.arange(n, dtype=dtype).view(_DeviceArray)


class _MillisecondTimer:
    """EventTimer on an emulated device: one launch a sample, each taking 1 ms."""

    def __init__(self, launch, min_sample_s):
        self.launch = launch

    def seconds_per_launch(self):
        self.launch()
        return 1e-3


SM_COUNT, CLOCK_GHZ = 4, 2.0


#: An atomic's latency at an address homed near its SM, and across the chip (a crossing of the interconnect).
NEAR_ATOMIC, FAR_ATOMIC = 280.0, 470.0


def _emulated(monkeypatch, kernels: dict):
    """Context on an emulated device: ``kernels`` maps names to Python functions of (grid, block, args)."""
    import sys

    from gpuatlas.probes.kit.harness import Budget, Context

    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy)

    for module in (execution, exec_chains):
        monkeypatch.setattr(module, "_kernel", lambda name: kernels[name.split("_", 1)[0] if name.startswith(
            ("thr_", "lat_")) else name])
        monkeypatch.setattr(module, "blocks_per_sm", lambda func, threads: 2)
        monkeypatch.setattr(module, "calibrate", lambda run, unit, target, max_count: (3, target))
        monkeypatch.setattr(module, "EventTimer", _MillisecondTimer)
    device = {"sm_count": SM_COUNT, "max_threads_per_sm": 2048, "max_threads_per_block": 1024,
              "sm_clock_max_hz": CLOCK_GHZ * 1e9, "l2_bytes": 1 << 20}
    ctx = Context(device=device, budget=Budget(min_repeats=3, max_repeats=3))
    monkeypatch.setattr(Context, "sm_clock", lambda self: CLOCK_GHZ * 1e9)
    return ctx


def _lop3(x, a, b, steps):
    return x ^ (a ^ b) if steps % 2 else x


def _block_clocks(clocks, cycles):
    clocks.reshape(-1, 2)[:] = [cycles, cycles / CLOCK_GHZ]


def test_exec_inst_host_flow_on_an_emulated_device(monkeypatch):
    def lat(grid, block, args):
        init, a, b, trips, out, cycles = args
        out[:] = _lop3(init.reshape(32, execution.CHAINS)[:, 0], a, b, trips * execution.LAT_UNROLL)
        cycles[0] = 100 + 2 * execution.LAT_UNROLL * trips  # 2 cycles a step, 100 around the loop

    def thr(grid, block, args):
        init, a, b, trips, out, clocks = args
        lanes = np.tile(init.reshape(32, execution.CHAINS), (out.size // init.size, 1)).reshape(-1)
        out[:] = _lop3(lanes, a, b, trips * execution.UNROLL)
        _block_clocks(clocks, 1e6)

    ctx = _emulated(monkeypatch, {"lat": lat, "thr": thr})
    samples = execution.exec_inst(ctx, "lop3")
    latency = {s.value for s in samples if s.metric == "latency"}
    assert latency == {2.0}
    rates = [s for s in samples if s.metric == "ops_per_clk_sm"]
    threads = SM_COUNT * 2 * execution.THR_THREADS
    assert rates[0].value == pytest.approx(threads * execution.CHAINS * execution.UNROLL * 3 / 1e-3 / SM_COUNT
                                           / (CLOCK_GHZ * 1e9))
    assert rates[0].sm_clock_hz == pytest.approx(CLOCK_GHZ * 1e9)

    def lazy(grid, block, args):  # a throughput kernel that skips a step: the cross-check refuses it
        init, a, b, trips, out, clocks = args
        thr(grid, block, (init, a, b, trips, out, clocks))
        out[:] = _lop3(out, a, b, 1)

    ctx = _emulated(monkeypatch, {"lat": lat, "thr": lazy})
    with pytest.raises(RuntimeError, match="disagree"):
        execution.exec_inst(ctx, "lop3")


def _rec(rec, blocks, cycles):
    r = rec.reshape(-1, 5)
    r[:, 0] = np.arange(blocks) % SM_COUNT
    r[:, 1], r[:, 2], r[:, 3], r[:, 4] = 1000, 1000 + cycles, 0, cycles / CLOCK_GHZ


def test_exec_schedule_and_diverge_host_flow_on_an_emulated_device(monkeypatch):
    def sched(grid, block, args):  # the truth model: one warp instruction a clock per scheduler
        init, a, b, trips, out, rec = args
        warps_per_sm = grid[0] // SM_COUNT * block[0] // 32
        ipc = schedule_truth(warps_per_sm, 8, 4, 4.0)
        _rec(rec, grid[0], warps_per_sm * int(trips) * execution.SCHED_FFMA / ipc)

    def diverge(grid, block, args):
        init, a, b, ways, trips, out, rec = args
        useful = grid[0] // SM_COUNT * block[0] * int(trips) * execution.DIVERGE_ILP * execution.DIVERGE_UNROLL
        _rec(rec, grid[0], useful / (128.0 / int(ways)))

    ctx = _emulated(monkeypatch, {f"sched_ffma_ilp{i}": sched for i in execution.SCHEDULE_ILPS}
                    | {"diverge_ffma": diverge})
    assert execution.exec_schedule(ctx, 2, 8)[0].value == pytest.approx(2.0)
    assert execution.exec_schedule(ctx, 48, 8)[0].value == pytest.approx(4.0)
    assert execution.exec_diverge(ctx, 32)[0].value == pytest.approx(128.0 / 32)
    with pytest.raises(ValueError, match="bad schedule config"):
        execution.exec_schedule(ctx, 9, 8)


def test_exec_mma_atomics_sync_host_flow_on_an_emulated_device(monkeypatch):
    def mma(grid, block, args):
        a, b, trips, out, cycles = args
        out[:] = trips * exec_chains.MMA_UNROLL * 16
        cycles[0] = 50 + 33 * trips * exec_chains.MMA_UNROLL

    homes = []

    def atom(grid, block, args):  # an address's home partition, near or far, from a hash of its line
        p, v, trips, out, cycles = args
        out[0], p[0] = exec_chains.atomic_chain("i32", int(trips) * exec_chains.ATOM_UNROLL)
        far = bin(p.ctypes.data // 128).count("1") % 2
        homes.append(far)
        cycles[0] = (NEAR_ATOMIC, FAR_ATOMIC)[far] * trips * exec_chains.ATOM_UNROLL

    adds = []

    def red(grid, block, args):
        p, v, mode, reps, clocks = args
        p += np.uint32(reps * (grid[0] * block[0] // p.size))
        adds.append(int(reps))
        _block_clocks(clocks, 1e6)

    def sync(grid, block, args):
        trips, passed, cycles = args
        passed[0] = block[0] * trips * exec_chains.SYNC_UNROLL
        cycles[0] = 30 * trips * exec_chains.SYNC_UNROLL

    ctx = _emulated(monkeypatch, {"mma_lat_bf16": mma, "atom_lat_i32": atom, "red_i32": red, "sync_lat": sync})
    assert exec_chains.exec_mma_latency(ctx, "bf16")[0].value == pytest.approx(33.0)
    placed = exec_chains.exec_atomics(ctx, "i32", "latency")
    latency = [x.value for x in placed if x.metric == "latency"]
    offsets = [x.value for x in placed if x.metric == "address_offset"]
    assert len(latency) == len(set(offsets)) == exec_chains.PLACEMENTS  # one distinct address per sample
    assert 0 < sum(homes) < len(homes)  # both homes among them
    assert sorted(set(latency)) == pytest.approx([NEAR_ATOMIC, FAR_ATOMIC])
    for mode in ("same", "warp", "distinct"):
        samples = exec_chains.exec_atomics(ctx, "i32", mode)
        assert samples[0].metric == "ops_per_s" and samples[0].value == pytest.approx(SM_COUNT * 2 * 256 * 3 / 1e-3)
    assert exec_chains.exec_sync(ctx, 256)[0].value == pytest.approx(30.0)

    def short(grid, block, args):  # an accumulator one step short is refused
        mma(grid, block, args)
        args[3][:] -= 16

    ctx = _emulated(monkeypatch, {"mma_lat_bf16": short})
    with pytest.raises(RuntimeError, match="expected"):
        exec_chains.exec_mma_latency(ctx, "bf16")
