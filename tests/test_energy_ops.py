"""Energy per operation from NVML's energy counter (energy.per_operation): the analysis recovers the simulated
board's energy per unit of work from a counter that moves at its own period in whole mJ; a counter that does
not move, or moves too rarely, gives no figure; the kernels compile to the instructions they measure."""
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest

import fakes
from gpuatlas.analysis.energy_ops import MIN_INTERVALS, counter_power, edges, energy_op_rows
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass

OPS = ("idle", *fakes.ENERGY_OPS)


def frame(windows: dict) -> pd.DataFrame:
    """Measurements of energy.per_operation from ``{op: samples}``."""
    return pd.DataFrame([{"probe": "energy.per_operation", "op": op, "config": f"op={op}", "metric": s.metric,
                          "value": float(s.value), "repeat": s.repeat, "sm_clock_hz": s.sm_clock_hz, "flag": s.flag}
                         for op, samples in windows.items() for s in samples])


def rows_of(**changed) -> dict:
    windows = {op: changed.get(op, fakes.energy_window(op)) for op in OPS}
    return {r["quantity"]: r for r in energy_op_rows(frame(windows), fakes.DEVICE)}


def truth(op: str) -> tuple[float, float]:
    """(board, net) pJ per unit of the simulated board."""
    rate, joule, _ = fakes.ENERGY_OPS[op]
    return (joule + fakes.ENERGY_IDLE_W / rate) * 1e12, joule * 1e12


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_energy_per_unit_of_every_op_is_recovered_board_and_net(seed):
    windows = {op: fakes.energy_window(op, seed=seed) for op in OPS}
    rows = {r["quantity"]: r for r in energy_op_rows(frame(windows), fakes.DEVICE)}
    assert rows["energy.idle_power_w"]["value"] == pytest.approx(fakes.ENERGY_IDLE_W, rel=0.01)
    for op in fakes.ENERGY_OPS:
        per = "flop" if fakes.ENERGY_OPS[op][2] == "FLOP" else "byte"
        for kind, want in zip(("board", "net"), truth(op)):
            row = rows[f"energy.{op}.{kind}_pj_per_{per}"]
            assert row["value"] == pytest.approx(want, rel=0.01), (op, kind)
            assert row["ci_low"] < want < row["ci_high"] and row["ci_high"] - row["ci_low"] < 0.05 * want
            assert row["unit"] == ("pJ/FLOP" if per == "flop" else "pJ/B")


def test_each_figure_carries_its_nvml_evidence_and_says_where_the_power_cap_bound():
    rows = rows_of()
    for quantity, row in rows.items():
        if quantity == "energy.idle_power_w":
            continue
        for evidence in ("counter power", "counter updates", "NVML power readings", "NVML SM clock",
                         "in-kernel SM clock", "counter read right before and after", "idle power"):
            assert evidence in row["note"], (quantity, evidence)
    assert "power cap bound the kernel" in rows["energy.bf16.board_pj_per_flop"]["note"]
    assert "100% of readings" in rows["energy.fp8.net_pj_per_flop"]["note"]
    assert "no power-cap reason set" in rows["energy.hbm.board_pj_per_byte"]["note"]


def test_a_counter_that_does_not_move_gives_no_figure():
    stuck = rows_of(hbm=fakes.energy_window("hbm", stuck=True))
    assert not any(q.startswith("energy.hbm.") for q in stuck) and "energy.l2.board_pj_per_byte" in stuck
    # no idle figure: board figures stay, net ones go (negative control: with it they are there)
    no_idle = rows_of(idle=fakes.energy_window("idle", stuck=True))
    assert "energy.idle_power_w" not in no_idle and not any("net" in q for q in no_idle)
    assert "energy.fp32.board_pj_per_flop" in no_idle and "energy.fp32.net_pj_per_flop" in rows_of()


def test_a_counter_updated_too_rarely_for_the_window_gives_no_figure():
    rare = rows_of(smem=fakes.energy_window("smem", period_s=0.4))
    assert not any(q.startswith("energy.smem.") for q in rare)
    assert any(q.startswith("energy.smem.") for q in rows_of(smem=fakes.energy_window("smem", period_s=0.1)))


def test_an_impossible_rate_gives_no_figure():
    flagged = [s for s in fakes.energy_window("l2")]
    for s in flagged:
        if s.metric in ("launch_end_s", "work_per_launch", "rate", "per_clk_sm"):
            s.flag = "invalid"
    assert not any(q.startswith("energy.l2.") for q in rows_of(l2=flagged))


def test_edges_are_the_first_readings_of_each_new_value_and_power_skips_the_start():
    t = np.arange(0, 1.0, 0.001)
    mj = np.floor(t / 0.05) * 5000.0  # 100 W, updated every 50 ms
    when, value, gap = edges(t, mj)
    assert np.allclose(when, np.arange(0.05, 1.0, 0.05), atol=1.5e-3) and np.allclose(gap, 0.001)
    fit = counter_power(t, mj, 0.0, 1.0)
    assert fit["power_w"] == pytest.approx(100.0, rel=0.02) and fit["span"][0] >= 2 * 0.05
    assert counter_power(t, mj, 0.0, (MIN_INTERVALS + 1) * 0.05) is None


def test_the_sweep_is_full_only_idle_first_and_fp8_only_where_native():
    from gpuatlas.probes.families import energy
    from gpuatlas.probes.registry import all_probes

    probe = all_probes()["energy.per_operation"]
    assert probe.configs(fakes.DEVICE, "quick") == []
    assert [c["op"] for c in probe.configs(fakes.DEVICE, "full")] == list(energy.OPS)
    for cc, fp8 in (("8.0", False), ("8.9", True), ("9.0", True), ("10.0", False), ("12.0", True)):
        ops = [c["op"] for c in energy.ops_for({"compute_capability": cc})]
        assert ("fp8" in ops) == fp8 and ops[0] == "idle" and "bf16" in ops, cc


def test_the_probe_keeps_the_readings_around_each_change():
    from gpuatlas.probes.families.energy import _changes

    readings = [(0.0, 5), (0.001, 5), (0.002, 5), (0.003, 9), (0.004, 9), (0.005, 9)]
    kept = [s.value for s in _changes(readings) if s.metric == "energy_t_s"]
    assert kept == [0.0, 0.002, 0.003, 0.005]


# -- the kernels ------------------------------------------------------------------------------------------------

def opcodes(code: str) -> Counter:
    return Counter(re.findall(r"\*/\s+([A-Z0-9]+)[. ]", code))


@pytest.fixture(scope="module")
def energy_sass():
    cubin, log = compile_cubin("energy.cu", "sm_90")
    return sass(cubin), resource_usage(log)


def test_each_kernel_does_the_work_it_counts(energy_sass):
    from gpuatlas.probes.families.energy import work as energy

    code, usage = energy_sass
    assert opcodes(code["ffma_chains"])["FFMA"] == energy.CHAINS * energy.UNROLL
    assert opcodes(code["smem_read"])["LDS"] == energy.SMEM_UNROLL and "LDS.128" in code["smem_read"]
    stream = [line for line in code["read_stream"].splitlines() if "LDG" in line]
    assert stream and all("LDG.E.128.STRONG.GPU" in line for line in stream)  # ld.global.cg: L2, not L1
    assert opcodes(code["mma_bf16"])["HMMA"] == energy.MMA_ACC * energy.MMA_UNROLL
    for name in code:
        assert usage[name]["stack_bytes"] == 0 and usage[name].get("spill_stores", 0) == 0, name
    # negative control: the check fails on a kernel that lacks the instruction
    assert opcodes(code["read_stream"])["FFMA"] == 0 and opcodes(code["ffma_chains"])["LDS"] == 0


@pytest.mark.parametrize("arch, opcode", [("sm_89", "QMMA"), ("sm_120", "QMMA")])
def test_fp8_mma_sync_is_native_where_the_sweep_measures_it(arch, opcode):
    from gpuatlas.probes.families import energy
    from gpuatlas.probes.families.energy.work import MMA_ACC, MMA_UNROLL

    code = sass(compile_cubin("energy.cu", arch)[0])
    assert opcodes(code["mma_e4m3"])[opcode] == MMA_ACC * MMA_UNROLL
    # negative control: on sm_100 it is emulated (one product, then FADDs), and the sweep leaves it out
    emulated = opcodes(sass(compile_cubin("energy.cu", "sm_100")[0])["mma_e4m3"])
    assert sum(n for op, n in emulated.items() if op.endswith("MMA")) < MMA_ACC * MMA_UNROLL
    assert "fp8" not in [c["op"] for c in energy.ops_for({"compute_capability": "10.0"})]


def test_a_window_goes_on_until_the_counter_has_moved_enough_past_its_start():
    from gpuatlas.probes.families.energy import SETTLE_PERIODS, WANT_UPDATES, settled_updates

    every_50ms = list(np.arange(0.03, 1.1, 0.05))
    assert settled_updates(every_50ms) == sum(c >= SETTLE_PERIODS * 0.05 for c in every_50ms) >= WANT_UPDATES
    every_300ms = [0.2, 0.5, 0.8, 1.1]
    assert settled_updates(every_300ms) < WANT_UPDATES and settled_updates([0.5]) == 0


def test_the_ffma_chains_end_where_the_hosts_single_rounded_steps_say():
    """fma(x, -1, b) is b - x rounded once: numpy's float32 subtraction, checked against the exact difference
    (float64 holds it) rounded to float32; the chains flip between two values from the first step on."""
    from gpuatlas.probes.families.energy.work import UNROLL, alternation

    rng = np.random.default_rng(5)
    start, b = rng.uniform(-1, 1, 4096).astype(np.float32), np.float32(0.6180339)
    x = start
    for _ in range(UNROLL):  # one trip, as the kernel steps, each step rounded once from the exact difference
        x = (np.float64(b) - x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(x, alternation(start, b)) and UNROLL % 2 == 0
    assert not np.array_equal(alternation(start, b), start)  # negative control: the steps moved the chains
