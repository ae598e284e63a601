"""geometry.mshr: the knee of miss throughput against misses in flight, the controls that call it a count or a
rate, the sweep's sizing and the kernels, against a simulated SM (tests/fakes/mshr.py) whose miss registers, port
and latencies are known and whose corner is round (a soft minimum, not the fit's sharp one)."""
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fakes
from gpuatlas.probes.kit.samplers import MEMORY_FRACTION
from gpuatlas.analysis.mshr import fit_knee, mshr_rows
from gpuatlas.probes.families import mshr
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass

FULL = mshr.configs(fakes.DEVICE)
DEVICES = {k: v for k, v in json.loads((Path(__file__).parent / "fixtures/devices.json").read_text()).items()
           if not k.startswith("_")}


def measured(configs=FULL, **physics) -> pd.DataFrame:
    rows = [{"probe": "geometry.mshr", **c, "metric": s.metric, "value": s.value, "repeat": s.repeat, "flag": s.flag,
             "sm_clock_hz": s.sm_clock_hz} for c in configs for s in fakes._mshr(None, **c, **physics)]
    return pd.DataFrame(rows)


def derived(m: pd.DataFrame, rows=()) -> dict:
    return {r["quantity"]: r for r in mshr_rows(m, fakes.DEVICE, list(rows))}


def test_the_registers_of_both_paths_are_recovered_within_their_interval():
    out = derived(measured())
    for quantity, load in (("l1.mshr_per_sm", "plain"), ("l2.requests_in_flight_per_sm", "cg")):
        row = out[quantity]
        truth = fakes.MSHRS[load]
        assert row["ci_low"] <= truth <= row["ci_high"], row
        assert row["value"] == pytest.approx(truth, rel=0.15)
        assert "a count" in row["note"] and "it holds lines, not sectors" in row["note"]
    plateau = out["l1.miss_lines_per_clk_sm"]
    assert plateau["value"] == pytest.approx(fakes.MSHRS["plain"] / fakes.LEVELS["l2"], rel=0.15)


@pytest.mark.parametrize("knee", [300.0, 517.3, 777.7])
def test_a_sharp_knee_between_grid_points_is_placed_finer_than_the_grid_and_its_interval_has_width(knee):
    """An ideal hinge (slope one, then flat) with 0.2% noise: a knee read off the search grid alone is off by
    up to half a grid step (about 1% here) and its bootstrap ends sit on grid points, often one and the same."""
    n = np.repeat(np.geomspace(8, 4096, 24), 5)
    x = np.minimum(n, knee) / 600 * (1 + np.random.default_rng(1).normal(0, 0.002, n.size))
    fit = fit_knee(n, x)
    assert fit["knee"] == pytest.approx(knee, rel=1e-3)
    low, high = fit["knee_ci"]
    assert low < high and high / low < 1.01


def test_the_cross_check_sets_plateau_times_chase_latency_beside_the_knee():
    rows = [{"quantity": "l2.latency_cycles", "value": fakes.LEVELS["l2"]},
            {"quantity": "littles.l2_bytes_in_flight", "value": 100.0 * 128 * fakes.DEVICE["sm_count"]},
            {"quantity": "l2.bandwidth_bytes_per_s", "value": 40.0 * fakes.DEVICE["sm_count"] * fakes.CLOCK_HZ}]
    note = derived(measured(), rows)["l1.mshr_per_sm"]["note"]
    little = float(re.search(r"l2.latency_cycles = (\d+) lines", note).group(1))
    assert little == pytest.approx(fakes.MSHRS["plain"], rel=0.15)
    assert "needed 100 lines per SM in flight, within" in note
    assert "against the L2's 40 B/cycle per SM" in note


def test_a_port_bound_plateau_is_a_bandwidth_not_registers():
    """Registers past what the port can feed: the 1-sector plateau is the port's bytes, as the 4-sector one's."""
    row = derived(measured(registers=4096, port_bytes=24.0))["l1.mshr_per_sm"]
    assert np.isnan(row["value"]) and "a byte bandwidth, not a count" in row["note"]


def test_a_per_line_rate_is_told_by_the_dram_control():
    """A processing rate of lines (the same from both sources) caps the plateau: its knee moves with the
    latency, so it is no count, and the DRAM knee is the lower bound."""
    row = derived(measured(registers=4096, line_rate=0.6))["l1.mshr_per_sm"]
    assert np.isnan(row["value"]) and "a rate, not a count" in row["note"]
    floor = float(re.search(r"at least (\d+) misses", row["note"]).group(1))
    assert floor == pytest.approx(0.6 * fakes.LEVELS["dram"], rel=0.2)
    assert row["ci_high"] == np.inf and 0.8 * floor <= row["ci_low"] <= floor, "the interval is the lower bound"
    assert row["ci_low"] <= 4096, "and the simulated registers lie inside it"


def test_too_few_steps_or_a_knee_past_the_sweep_is_undecided():
    n = np.array([32, 64, 128, 256, 512])
    assert not fit_knee(np.repeat(n, 3), np.repeat(np.minimum(n / 270, 1.0), 3))["decided"]
    n = np.geomspace(32, 8192, 12)
    rising = n / 270 * np.random.default_rng(0).lognormal(0, 0.02, n.size)  # registers past the sweep
    fit = fit_knee(n, rising)
    assert not fit["decided"] and "not inside the sweep" in fit["why"]
    row = derived(measured(registers=1 << 16, port_bytes=1e6))["l1.mshr_per_sm"]
    assert np.isnan(row["value"]) and row["note"].startswith("undecided")


@pytest.mark.parametrize("name", DEVICES)
def test_the_sweep_fits_every_launch_in_its_footprint(name):
    device = DEVICES[name]
    configs = mshr.configs(device) + mshr.configs(device, quick=True)
    for c in configs:
        footprint = mshr.footprint_lines(device, c["source"])
        assert footprint * mshr.LINE <= MEMORY_FRACTION * device["total_memory_bytes"]
        for loads in mshr.LOADS_PER_THREAD:
            n = c["warps"] * loads * mshr.lines_per_warp_load(c["sectors_per_line"])
            passes = mshr.passes_for(n, footprint)
            assert (passes + mshr.WARM_PASSES) * n <= footprint
            assert footprint * mshr.LINE >= 16 * device["smem_per_sm_bytes"]  # far past the L1: no line hits it
    assert {c["warps"] for c in configs} <= set(range(1, device["max_threads_per_block"] // 32 + 1))
    assert len(mshr.configs(device, quick=True)) < len(mshr.configs(device))


def test_placements_are_spread_and_line_ranges_wrap():
    assert mshr.spread(list(range(0, 264, 2)), 4, 130) == [260, 62, 128, 194]
    assert mshr.lines_read(90, 20, 100) == [(90, 10), (0, 10)]
    assert mshr.lines_read(10, 20, 100) == [(10, 20)]


@pytest.fixture(scope="module")
def cubin():
    return compile_cubin("mshr.cu")


@pytest.mark.parametrize("load, opcode", [("plain", "LDG.E"), ("cg", "LDG.E.STRONG.GPU")])
@pytest.mark.parametrize("sectors, width", [(1, ""), (4, ".128")])
def test_each_kernel_issues_its_loads_of_a_pass_before_it_uses_any(cubin, load, opcode, sectors, width):
    usage = resource_usage(cubin[1])
    code = sass(cubin[0])
    for loads in mshr.LOADS_PER_THREAD:
        name = f"mshr_{load}_s{sectors}_l{loads}"
        assert usage[name]["spill_stores"] == usage[name]["stack_bytes"] == 0
        lines = [l for l in code[name].splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", l)]
        clocks = [i for i, l in enumerate(lines) if "SR_CLOCKLO" in l]
        region = lines[clocks[0]:clocks[-1] + 1]
        ldg = [i for i, l in enumerate(region) if re.search(r"\bLDG\.", l)]
        flavours = {re.search(r"(LDG\.[A-Z0-9.]+)", region[i]).group(1) for i in ldg}
        assert flavours == {"LDG.E" + width + opcode[len("LDG.E"):]}, (name, flavours)
        assert len(ldg) == loads, name  # one pass's loads, unrolled in the loop
        loaded: set[str] = set()  # registers a load of this pass has written so far
        for line in region[ldg[0]:ldg[-1] + 1]:
            op = re.search(r"(LDG\.[A-Z0-9.]+) R(\d+)", line)
            if op:
                width_regs = 4 if ".128" in op.group(1) else 1
                loaded |= {f"R{int(op.group(2)) + k}" for k in range(width_regs)}
                continue
            sources = line.split(",", 1)[1] if "," in line else ""
            assert not loaded & set(re.findall(r"\bR\d+\b", sources)), (name, line)


def test_the_load_check_fails_on_a_kernel_that_loads_otherwise(cubin):
    """Negative control: the L2-only kernel's loads are not the plain ones."""
    code = sass(cubin[0])["mshr_cg_s1_l4"]
    assert not re.search(r"LDG\.E R\d+", code)


def test_accelsims_dl1_takes_its_mshr_entries_from_the_run_where_measured():
    from gpuatlas.analysis.accelsim import DL1_QUEUES, _dl1
    from gpuatlas.analysis.accelsim_options import cache_fields
    from gpuatlas.analysis.accelsim_run import Run

    def dl1(mshr: float) -> tuple[dict, str]:
        rows = [("l1.capacity_bytes", 200.0 * 1024), ("l1.line_bytes", 128.0), ("l1.mshr_per_sm", mshr)]
        derived = pd.DataFrame([{"quantity": q, "value": v, "unit": "1", "ci_low": v, "ci_high": v} for q, v in rows])
        option = _dl1(Run({"device": fakes.DEVICE}, derived))
        return cache_fields(option.value), option.why

    fields, comment = dl1(300.4)
    assert fields["mshr_entries"] == 300 and "l1.mshr_per_sm = 300.4" in comment
    fields, comment = dl1(float("nan"))  # undecided: the simulator's tested value, said so
    assert fields["mshr_entries"] == cache_fields(f"S:4:128:400,L:T:m:L:L,{DL1_QUEUES}")["mshr_entries"]
    assert "not measured" in comment


def test_the_knee_figure_is_legible():
    """Drawn from simulated data until the committed run has the probe (test_figures checks the committed run's)."""
    import matplotlib.pyplot as plt
    from test_figures import axes_without_units, drawn_texts, legend_mismatches, overlaps

    from gpuatlas.analysis.mshr_figure import knee

    fig = knee(measured()).figure
    fig.canvas.draw()
    assert overlaps(fig) == [] and axes_without_units(fig) == [] and legend_mismatches(fig) == []
    assert [text for text, _ in drawn_texts(fig) if "$" in text] == []
    assert any("knee" in text for text, _ in drawn_texts(fig))
    plt.close(fig)
    other = pd.DataFrame([{"probe": "clock.sm", "metric": "sm_clock", "value": 1.0, "repeat": 0, "flag": ""}])
    assert knee(other) is None and mshr_rows(other, fakes.DEVICE, []) == []


def test_registers_that_hold_sectors_are_told_from_registers_that_hold_lines():
    row = derived(measured(per_sector=True, port_bytes=1e6))["l1.mshr_per_sm"]
    assert row["value"] == pytest.approx(fakes.MSHRS["plain"], rel=0.15) and "it holds sectors" in row["note"]


def test_a_per_warp_limit_parts_the_splits_of_one_n():
    from gpuatlas.analysis.mshr import launches, split_spread

    spread = {limit: split_spread(launches(measured(configs=[c for c in FULL if c["sectors_per_line"] == 1
                                                              and c["load"] == "plain" and c["source"] == "l2"],
                                                     warp_limit=limit))) for limit in (float("inf"), 64)}
    assert spread[float("inf")] < 1.1 < 1.5 < spread[64]
    note = derived(measured())["l1.mshr_per_sm"]["note"]
    assert float(re.search(r"agree within ([\d.]+)x", note).group(1)) < 1.1


class _Array:
    """The little of a CuPy array the probe's host side uses, over numpy."""

    def __init__(self, values):
        self.a = values
        self.data = type("Data", (), {"memset_async": lambda _, value, size: self.a.fill(value)})()

    def get(self):
        return self.a.copy()

    def fill(self, value):
        self.a.fill(value)


def _emulated_kernel(name: str, words: np.ndarray, rng: np.random.Generator):
    """mshr.cu's kernels as the CUDA reads: the winning block's lines, pass by pass, warp by warp, lane by
    lane, with its index arithmetic; the grid misses the target SM at times (the host must retry)."""
    def sm_ids(grid, block, args):
        args[0].a[:] = np.arange(grid[0]) % 8 * 2  # eight SMs, even ids

    def misses(grid, block, args):
        _, lines, first, warm, passes, target, ticket, claim, sink, out = args
        if rng.random() < 0.05 or claim.a[0] != ticket:
            return  # no block of this launch on the target SM (or it lost the ticket)
        claim.a[0] += 1
        per_thread = int(name.rsplit("_l", 1)[1])
        group = 1 if "_s1_" in name else 8
        per_warp, warps = 32 // group, block[0] // 32
        n = warps * per_thread * per_warp
        acc, pass_first = 0, int(first)
        for _ in range(int(warm) + int(passes)):
            for u in range(per_thread):
                for warp in range(warps):
                    for lane in range(32):
                        line = pass_first + u * warps * per_warp + warp * per_warp + lane // group
                        line -= int(lines) if line >= int(lines) else 0
                        start = line * 32 + (lane % group) * (4 if group == 8 else 0)
                        acc += int(words[start:start + (4 if group == 8 else 1)].sum())
            pass_first = (pass_first + n) % int(lines)
        sink.a[0] = (int(sink.a[0]) + acc) % 2**32
        out.a[:] = [1000 * int(passes), 500 * int(passes), int(target)]

    return sm_ids if name == "mshr_sm_ids" else misses


def test_the_host_side_checks_an_emulated_kernel_through_retries_and_wraps(monkeypatch):
    """The probe's host logic end to end, its kernel emulated in numpy from the CUDA's own indexing: the
    claims, the retries, the cursor's wrap and the checksum of every launch must agree."""
    import sys
    import types

    from gpuatlas.probes.kit import chain, cuda

    fake = types.ModuleType("cupy")
    fake.uint32, fake.uint64 = np.uint32, np.uint64
    fake.zeros = lambda n, dtype: _Array(np.zeros(n, dtype=dtype))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    rng = np.random.default_rng(1)
    words = rng.integers(0, 2**32, (8 << 20) // 4, dtype=np.uint64).astype(np.uint32)

    def sum32(array, offset_bytes=0, count=None, pitch_bytes=4, element_bytes=4):
        index = offset_bytes // 4 + np.arange(count) * (pitch_bytes // 4)
        return int(array.a[index].astype(np.uint64).sum() % 2**32)

    monkeypatch.setattr(mshr, "sum32", sum32)
    monkeypatch.setattr(mshr.Filled, "at_least", classmethod(lambda cls, nbytes, device: _Array(words)))
    monkeypatch.setattr(mshr, "HBM_FOOTPRINT_L2", 2)
    monkeypatch.setattr(mshr, "LINES_PER_LAUNCH", 512)  # short launches: the emulation walks every lane
    monkeypatch.setattr(cuda, "kernel", lambda filename, name: _emulated_kernel(name, words, rng))
    monkeypatch.setattr(chain, "flush_l2", lambda device: None)
    device = {"sm_count": 8, "l2_bytes": 4 << 20, "max_threads_per_block": 1024}
    ctx = types.SimpleNamespace(device=device, rng=lambda *salt: np.random.default_rng([0, *salt]),
                                throttle_flag=lambda hz: "", sm_clock=lambda **kw: 1.9e9)
    for source, sectors in (("l2", 1), ("l2", 4), ("dram", 1)):
        samples = mshr.measure(ctx, "plain", source, sectors, 1)
        rates = [s for s in samples if s.metric == "lines_per_clk"]
        assert len(rates) == len(mshr.LOADS_PER_THREAD) * mshr.REPEATS * mshr.PLACEMENTS
        placements = {s.value for s in samples if s.metric == "smid"}
        assert len(placements) == mshr.PLACEMENTS and placements <= set(range(0, 16, 2))
        assert all(s.sm_clock_hz == pytest.approx(2e9) for s in rates)

    def corrupted(name):  # negative control: a kernel that adds one more to the sink than its loads
        inner = _emulated_kernel(name, words, rng)
        if name == "mshr_sm_ids":
            return inner
        return lambda grid, block, args: (inner(grid, block, args), args[8].a.__setitem__(0, args[8].a[0] + 1))

    monkeypatch.setattr(cuda, "kernel", lambda filename, name: corrupted(name))
    with pytest.raises(RuntimeError, match="checksum mismatch"):
        mshr.measure(ctx, "plain", "l2", 1, 1)
