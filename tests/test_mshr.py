"""geometry.mshr: the knee of miss throughput against misses in flight, the controls that call it a count or a
rate, the sweep's sizing and the kernels, against a simulated SM (tests/fakes.py) whose miss registers, port
and latencies are known and whose corner is round (a soft minimum, not the fit's sharp one)."""
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fakes
from probes.kit.samplers import MEMORY_FRACTION
from analysis.mshr import fit_knee, mshr_rows
from probes.families import mshr
from probes.kit.cuda import compile_cubin, resource_usage, sass

FULL = mshr.configs(fakes.DEVICE)
DEVICES = {k: v for k, v in json.loads((Path(__file__).parent / "fixtures/devices.json").read_text()).items()
           if not k.startswith("_")}


def measured(configs=FULL, **physics) -> pd.DataFrame:
    rows = [{"probe": "geometry.mshr", **c, "metric": s.metric, "value": s.value, "repeat": s.repeat, "flag": s.flag}
            for c in configs for s in fakes._mshr(None, **c, **physics)]
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
        assert "a count" in row["note"] and "it counts lines" in row["note"]
    plateau = out["l1.miss_lines_per_clk_sm"]
    assert plateau["value"] == pytest.approx(fakes.MSHRS["plain"] / fakes.LEVELS["l2"], rel=0.15)


def test_the_cross_check_sets_plateau_times_chase_latency_beside_the_knee():
    rows = [{"quantity": "l2.latency_cycles", "value": fakes.LEVELS["l2"]},
            {"quantity": "littles.l2_bytes_in_flight", "value": 100.0 * 128 * fakes.DEVICE["sm_count"]}]
    note = derived(measured(), rows)["l1.mshr_per_sm"]["note"]
    little = float(re.search(r"l2.latency_cycles = (\d+) lines", note).group(1))
    assert little == pytest.approx(fakes.MSHRS["plain"], rel=0.15)
    assert "needed 100 lines per SM in flight, within" in note


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
    from analysis.accelsim import DL1_QUEUES, _dl1
    from analysis.accelsim_options import cache_fields
    from analysis.accelsim_run import Run

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

    from analysis.mshr_figure import knee

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
    assert row["value"] == pytest.approx(fakes.MSHRS["plain"], rel=0.15) and "it counts sectors" in row["note"]
