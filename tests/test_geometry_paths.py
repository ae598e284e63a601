"""The data paths, write policies and instruction caches on simulated hardware of known behaviour: the
kernels' defining instructions, the sweeps, and the rows that recover what the simulation was built with."""
import re

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.geometry_paths import path_rows
from gpuatlas.probes.families.readonly import ALIGN, knee_footprints, read_footprints, readonly_configs
from tests import fakes


class Ctx:
    device = fakes.DEVICE


def frame(probe: str, fake, configs, **kw) -> pd.DataFrame:
    return pd.DataFrame([{"probe": probe, "metric": s.metric, "value": s.value, "repeat": s.repeat, "flag": s.flag,
                          **c} for c in configs for s in fake(Ctx, **c, **kw)])


def readonly_frame(**kw) -> pd.DataFrame:
    return frame("geometry.readonly", fakes._readonly, readonly_configs(fakes.DEVICE), **kw)


def rows_of(measurements) -> dict:
    return {r["quantity"]: r for r in path_rows(measurements, fakes.DEVICE)}


# -- the kernels ------------------------------------------------------------------------------------------

def timed_loads(kernel_name: str, filename: str = "readonly.cu") -> list[tuple[str, str, str]]:
    """(opcode, destination, address register) of every 64-bit LDG between the kernel's two clock reads."""
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    code = sass(compile_cubin(filename)[0])[kernel_name]
    lines = [l for l in code.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    clocks = [i for i, l in enumerate(lines) if "SR_CLOCKLO" in l]
    pattern = re.compile(r"(LDG\.E\.64[A-Z0-9.]*) (R\d+), desc\[\w+\]\[(R\d+)\.64\]")
    return [m.groups() for l in lines[clocks[0]:clocks[-1]] if (m := pattern.search(l))]


def assert_dependent_chain(loads, opcodes) -> None:
    """At least 32 loads, each one's address the previous one's value, with the opcodes cycling as given."""
    assert len(loads) >= 32
    assert all(addr == dest for (_, dest, _), (_, _, addr) in zip(loads, loads[1:]))
    assert [op for op, _, _ in loads] == [opcodes[i % len(opcodes)] for i in range(len(loads))], loads


def test_the_nc_chase_is_a_dependent_chain_of_read_only_loads():
    assert_dependent_chain(timed_loads("ro_chase_nc"), ["LDG.E.64.CONSTANT"])
    assert_dependent_chain(timed_loads("ro_chase_plain"), ["LDG.E.64"])
    assert_dependent_chain(timed_loads("ro_chase_mixed"), ["LDG.E.64", "LDG.E.64.CONSTANT"])


def test_the_plain_chase_is_not_a_read_only_chase():
    """Negative control: the same check on the plain kernel (and on chase.cu's L2-only one) fails."""
    with pytest.raises(AssertionError):
        assert_dependent_chain(timed_loads("ro_chase_plain"), ["LDG.E.64.CONSTANT"])
    with pytest.raises(AssertionError):
        assert_dependent_chain(timed_loads("chase_cg", "chase.cu"), ["LDG.E.64"])


def texture_chain(kernel_name: str) -> list[tuple[str, str]]:
    """(destination, index register) of every texture fetch between the kernel's two clock reads."""
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    code = sass(compile_cubin("readonly.cu")[0])[kernel_name]
    lines = [l for l in code.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    clocks = [i for i, l in enumerate(lines) if "SR_CLOCKLO" in l]
    pattern = re.compile(r"TLD\S* RZ, (R\d+), (R\d+),")
    return [m.groups() for l in lines[clocks[0]:clocks[-1]] if (m := pattern.search(l))]


def test_the_texture_chase_is_a_dependent_chain_of_texture_fetches():
    """Each TLD's texel index is the previous TLD's result; negative control: the nc chase fetches no texel."""
    fetches = texture_chain("ro_chase_tex")
    assert len(fetches) >= 32
    assert all(index == dest for (dest, _), (_, index) in zip(fetches, fetches[1:]))
    assert texture_chain("ro_chase_nc") == []


def test_the_read_kernels_differ_in_the_load_path_only():
    from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass

    cubin, log = compile_cubin("readonly.cu")
    code = sass(cubin)

    def loads(name):
        return re.findall(r"(LDG\.E\.128[A-Z0-9.]*) ", code[name])

    assert loads("ro_read_nc") and set(loads("ro_read_nc")) == {"LDG.E.128.CONSTANT"}
    assert loads("ro_read_plain") and set(loads("ro_read_plain")) == {"LDG.E.128"}
    assert len(loads("ro_read_nc")) == len(loads("ro_read_plain"))
    usage = resource_usage(log)
    assert all(usage[k]["stack_bytes"] == 0 and usage[k].get("spill_stores", 0) == 0 for k in usage)


# -- the sweeps -------------------------------------------------------------------------------------------

def test_sweeps_come_from_the_device():
    small = fakes.DEVICE
    big = {**small, "smem_per_sm_bytes": 2 * small["smem_per_sm_bytes"], "l2_bytes": 2 * small["l2_bytes"]}
    assert knee_footprints(small)[0] <= small["smem_per_sm_bytes"] // 4 + ALIGN
    assert knee_footprints(small)[-1] >= 4 * small["smem_per_sm_bytes"] - ALIGN
    assert knee_footprints(big)[-1] > knee_footprints(small)[-1]
    assert read_footprints(big)["l2"] == 2 * read_footprints(small)["l2"]
    assert all(f % ALIGN == 0 for c in readonly_configs(small) if c["measure"] == "chase" for f in
               [c["footprint_bytes"]])
    assert len(readonly_configs(small, quick=True)) < len(readonly_configs(small))


def test_a_bad_config_is_refused():
    from gpuatlas.probes.families.readonly import geometry_readonly

    with pytest.raises(ValueError):
        geometry_readonly(Ctx, "chase", "nc", ALIGN + 8)
    with pytest.raises(ValueError):
        geometry_readonly(Ctx, "read", "mixed", 4096)


# -- the rows ---------------------------------------------------------------------------------------------

def test_rows_recover_the_simulated_read_only_path():
    rows = rows_of(readonly_frame())
    assert rows["readonly.latency_cycles"]["value"] == pytest.approx(fakes.NC_L1_CYCLES, rel=0.01)
    assert rows["readonly.capacity_bytes"]["value"] == pytest.approx(fakes.L1_BYTES, rel=0.05)
    assert rows["readonly.capacity_ratio"]["value"] == pytest.approx(1, rel=0.05)
    assert rows["readonly.shared_capacity_ratio"]["value"] == pytest.approx(1, rel=0.05)
    assert rows["readonly.l1_shared"]["value"] == 1.0
    assert rows["readonly.l2_latency_cycles"]["value"] == pytest.approx(fakes.LEVELS["l2"], rel=0.01)
    assert rows["readonly.dram_latency_cycles"]["value"] == pytest.approx(fakes.LEVELS["dram"], rel=0.01)
    assert rows["readonly.l1_bandwidth_bytes_per_clk_sm"]["value"] == fakes.L1_READ_PER_CLK["nc"]
    assert rows["readonly.l1_bandwidth_ratio"]["value"] == pytest.approx(
        fakes.L1_READ_PER_CLK["nc"] / fakes.L1_READ_PER_CLK["plain"])
    assert rows["readonly.l2_bandwidth_ratio"]["value"] == pytest.approx(1.0)
    assert rows["readonly.tex_latency_cycles"]["value"] == pytest.approx(fakes.LEVELS["l1"] + fakes.TEX_EXTRA,
                                                                          rel=0.01)
    assert rows["readonly.tex_capacity_bytes"]["value"] == pytest.approx(fakes.L1_BYTES, rel=0.05)
    assert rows["readonly.tex_l2_latency_cycles"]["value"] == pytest.approx(fakes.LEVELS["l2"] + fakes.TEX_EXTRA,
                                                                             rel=0.01)


def test_a_read_only_array_of_its_own_is_told_apart():
    """Negative control: with separate arrays the alternating chain holds twice the lines, and the verdict
    turns."""
    rows = rows_of(readonly_frame(shares_l1=False))
    assert rows["readonly.shared_capacity_ratio"]["value"] == pytest.approx(2, rel=0.05)
    assert rows["readonly.l1_shared"]["value"] == 0.0
    assert "capacity of its own" in rows["readonly.l1_shared"]["note"]


def test_flagged_or_foreign_samples_give_no_rows():
    m = readonly_frame()
    assert path_rows(m.assign(flag="throttled"), fakes.DEVICE) == []
    assert path_rows(m.assign(probe="chase.latency"), fakes.DEVICE) == []


def test_a_sweep_too_sparse_for_a_knee_gives_no_capacity():
    """Negative control: the quick profile's knee sweep has its points, a sweep cut to three footprints
    does not, and no capacity or verdict is claimed from it."""
    m = frame("geometry.readonly", fakes._readonly, readonly_configs(fakes.DEVICE, quick=True))
    assert "readonly.l1_shared" in rows_of(m)
    chase = m[m["measure"] == "chase"]
    kept = sorted(chase["footprint_bytes"].unique())[:3]
    cut = pd.concat([m[m["measure"] == "read"], chase[chase["footprint_bytes"].isin(kept)]])
    rows = rows_of(cut)
    assert not {"readonly.capacity_bytes", "readonly.l1_shared"} & set(rows)
    assert "readonly.l1_bandwidth_ratio" in rows


def test_every_derived_id_is_declared_and_in_the_vocabulary():
    from gpuatlas.analysis.quantities import QUANTITIES
    from gpuatlas.probes.registry import all_probes

    probes = all_probes()
    declared = set(probes["geometry.readonly"].quantities)
    assert declared <= set(QUANTITIES)
    assert set(rows_of(readonly_frame())) == declared


def test_a_simulated_run_of_the_probes_alone_derives_their_rows(tmp_path):
    """The runner measures the simulated path probes alone (their own columns only) and derive recovers the
    simulated L1, its read-only path, every write policy and the instruction cache."""
    from gpuatlas.analysis.derive import derive
    from gpuatlas.machinery import runner

    probes = [p for p in fakes.simulated_probes()
              if p.id in ("geometry.readonly", "geometry.write_policy", "geometry.icache")]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "full", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    derived = derive(meta, run.read_measurements())
    rows = derived.set_index("quantity")
    assert rows.loc["readonly.capacity_bytes", "value"] == pytest.approx(fakes.L1_BYTES, rel=0.05)
    assert rows.loc["readonly.l1_shared", "value"] == float(fakes.READONLY_SHARES_L1)
    assert rows.loc["l1.keeps_stored_lines", "value"] == float(fakes.L1_KEEPS_STORES)
    assert rows.loc["l2.write_allocates", "value"] == float(fakes.L2_WRITE_ALLOCATES)
    assert rows.loc["dram.partial_write_rmw", "value"] == float(fakes.PARTIAL_RMW)
    assert fakes.ICACHE_L0_BYTES / 2 ** 0.25 <= rows.loc["icache.l0.capacity_bytes", "value"] <= fakes.ICACHE_L0_BYTES


# -- write policies ---------------------------------------------------------------------------------------

def write_frame(**kw) -> pd.DataFrame:
    from gpuatlas.probes.families.write_policy import write_configs

    return frame("geometry.write_policy", fakes._write_policy, write_configs(fakes.DEVICE), **kw)


def timed_region(kernel_name: str, filename: str = "write_policy.cu") -> list[str]:
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    code = sass(compile_cubin(filename)[0])[kernel_name]
    lines = [re.sub(r"\s+", " ", l.split(";")[0].split("*/", 1)[1]).strip() for l in code.splitlines()
             if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    clocks = [i for i, l in enumerate(lines) if "SR_CLOCKLO" in l]
    return lines[clocks[0]:clocks[-1]]


def assert_stores_each_loaded_word_back(region: list[str]) -> None:
    """Every L1-caching load of the chain is followed, before the next load, by a store of the loaded register
    to the very address it was loaded from."""
    loads = [(i, m.groups()) for i, l in enumerate(region)
             if (m := re.search(r"LDG\.E\.64 (R\d+), desc\[\w+\]\[(R\d+)\.64\]$", l))]
    assert len(loads) >= 32
    for (i, (dest, addr)), (j, (_, next_addr)) in zip(loads, loads[1:]):
        assert next_addr == dest
        assert any(re.search(rf"STG\.E\.64 desc\[\w+\]\[{addr}\.64\], {dest}$", l) for l in region[i + 1:j]), \
            region[i:j + 1]


def test_the_store_chase_writes_each_loaded_word_back_before_the_next_load():
    assert_stores_each_loaded_word_back(timed_region("wp_chase_store"))


def test_the_load_only_chase_stores_nothing():
    """Negative control: the load-only walk (and readonly.cu's plain chase) fail the check; the L2-only walk
    loads with STRONG.GPU (L1-bypassing) loads."""
    for name, filename in (("wp_chase_load", "write_policy.cu"), ("ro_chase_plain", "readonly.cu")):
        with pytest.raises(AssertionError):
            assert_stores_each_loaded_word_back(timed_region(name, filename))
    assert_dependent_chain(timed_loads("wp_chase_cg", "write_policy.cu"), ["LDG.E.64.STRONG.GPU"])


def test_the_allocate_kernel_writes_then_reads_l2_only_between_barriers():
    from gpuatlas.probes.kit.cuda import compile_cubin, sass

    code = sass(compile_cubin("write_policy.cu")[0])["wp_allocate"]
    assert re.search(r"STG\.E\.128 ", code) and re.search(r"LDG\.E\.128\.STRONG\.GPU ", code)
    assert "BAR.SYNC" in code and "SR_CLOCKLO" in code
    assert not re.search(r"LDG\.E\.128 ", code), "no L1-caching read of the written lines"
    scatter = sass(compile_cubin("write_policy.cu")[0])["wp_scatter"]
    assert re.findall(r"(STG\.E[A-Z0-9.]*) ", scatter) == ["STG.E"], "one 4-byte store per word"
    # negative control: the read-only path's reader caches in L1 and stores nothing
    plain = sass(compile_cubin("readonly.cu")[0])["ro_read_plain"]
    assert not re.search(r"LDG\.E\.128\.STRONG\.GPU ", plain) and "STG.E.128" not in plain


def test_write_rows_recover_the_simulated_policies():
    rows = rows_of(write_frame())
    assert rows["l1.store_reload_cycles"]["value"] == pytest.approx(fakes.write_chase_cycles("store"), rel=0.01)
    assert rows["l1.keeps_stored_lines"]["value"] == float(fakes.L1_KEEPS_STORES)
    assert rows["l2.write_allocates"]["value"] == float(fakes.L2_WRITE_ALLOCATES)
    assert rows["l2.written_hit_fraction"]["value"] == pytest.approx(1.0)
    assert rows["dram.partial_write_rmw"]["value"] == float(fakes.PARTIAL_RMW)
    ratio = (1 / (1 / fakes.HBM_WRITE + 1 / fakes.HBM_READ)) / fakes.HBM_WRITE
    assert rows["dram.partial_write_sector_ratio"]["value"] == pytest.approx(ratio)
    assert rows["dram.partial_write_useful_bytes_per_s"]["value"] == pytest.approx(
        fakes.partial_write_bandwidth(8))
    assert rows["dram.partial_write_sector_bytes_per_s"]["value"] == pytest.approx(8 * fakes.partial_write_bandwidth(8))


def test_the_opposite_policies_turn_every_verdict():
    """Negative control: an L1 that keeps stored lines, an L2 that writes around itself and byte-masked HBM
    writes give the opposite verdicts from the same analysis."""
    rows = rows_of(write_frame(keeps=True, allocates=False, rmw=False))
    assert rows["l1.keeps_stored_lines"]["value"] == 1.0 and rows["l1.store_reload_cycles"]["value"] < 40
    assert rows["l2.write_allocates"]["value"] == 0.0 and rows["l2.written_hit_fraction"]["value"] == 0.0
    assert rows["dram.partial_write_rmw"]["value"] == 0.0
    assert rows["dram.partial_write_sector_ratio"]["value"] == pytest.approx(1.0)


def test_a_missing_reference_gives_no_verdict():
    """Without the L2-only walk there is no split to judge the stored walk by; without whole sectors, no ratio."""
    m = write_frame()
    rows = rows_of(m[~((m["measure"] == "store_reload") & (m["access"] == "cg"))
                     & ~((m["measure"] == "partial_write") & (m["access"] == "full"))])
    assert not {"l1.keeps_stored_lines", "l1.store_reload_cycles", "dram.partial_write_rmw"} & set(rows)
    assert "l2.write_allocates" in rows


def test_write_policy_ids_are_declared_and_in_the_vocabulary():
    from gpuatlas.analysis.quantities import QUANTITIES
    from gpuatlas.probes.registry import all_probes

    declared = set(all_probes()["geometry.write_policy"].quantities)
    assert declared <= set(QUANTITIES)
    assert set(rows_of(write_frame())) == declared


def test_a_bad_write_config_is_refused():
    from gpuatlas.probes.families.write_policy import geometry_write_policy

    with pytest.raises(ValueError):
        geometry_write_policy(Ctx, "store_reload", "plain")
    with pytest.raises(ValueError):
        geometry_write_policy(Ctx, "partial_write", "store")


def test_write_sizes_come_from_the_device():
    from gpuatlas.probes.families.write_policy import allocate_slice_bytes, chain_bytes, partial_span_bytes

    small = fakes.DEVICE
    big = {**small, "l2_bytes": 2 * small["l2_bytes"], "smem_per_sm_bytes": 2 * small["smem_per_sm_bytes"]}
    assert partial_span_bytes(big) == 2 * partial_span_bytes(small)
    assert allocate_slice_bytes(big) >= 2 * allocate_slice_bytes(small) - 16
    assert chain_bytes(big) == 2 * chain_bytes(small)
    tiny = {**small, "total_memory_bytes": small["l2_bytes"] * 8}
    assert partial_span_bytes(tiny) <= tiny["total_memory_bytes"] // 4


# -- the instruction caches -------------------------------------------------------------------------------

def loop_body(instructions: int, arch: str = "sm_90") -> tuple[int, int]:
    """(instructions, FFMAs) of the generated loop's body, compiled as the probe compiles it: from the target of
    its one backward branch to that branch."""
    from cupy.cuda import nvrtc

    from gpuatlas.probes.kit.cuda import CUPY_IMPLICIT_OPTIONS, NVRTC_OPTIONS, sass
    from gpuatlas.probes.families.icache import loop_source

    program = nvrtc.createProgram(loop_source(instructions), "icache.cu", [], [])
    nvrtc.compileProgram(program, [*NVRTC_OPTIONS, *CUPY_IMPLICIT_OPTIONS, f"-arch={arch}"])
    code = sass(nvrtc.getCUBIN(program) + b"\0")["icache_loop"]
    listing = [(int(m.group(1), 16), m.group(2)) for l in code.splitlines()
               if (m := re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", l))]
    back = [(at, int(m.group(1), 16)) for at, text in listing
            if (m := re.search(r"BRA\S*\s+(?:\S+,\s*)?(0x[0-9a-f]+)$", text)) and int(m.group(1), 16) < at]
    assert len(back) == 1, back
    end, start = back[0]
    body = [text for at, text in listing if start <= at <= end]
    assert (end - start) // 16 + 1 == len(body)
    return len(body), sum(text.startswith("FFMA ") for text in body)


def assert_loop_of(instructions: int, measured: tuple[int, int], slack: int = 0) -> None:
    """The body holds the FFMAs asked for and LOOP_INSTRUCTIONS more (give or take ``slack``)."""
    from gpuatlas.probes.families.icache import LOOP_INSTRUCTIONS

    total, ffma = measured
    assert ffma == instructions
    assert abs(total - instructions - LOOP_INSTRUCTIONS) <= slack, (total, instructions)


@pytest.mark.parametrize("instructions", [64, 4096, 32768])
def test_the_loop_body_grows_with_the_code_asked_for(instructions):
    """sm_90: the loop body is exactly the FFMAs asked for plus the loop's own instructions (1 KiB .. 512 KiB)."""
    assert_loop_of(instructions, loop_body(instructions))


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_100", "sm_120"])
def test_the_loop_overhead_holds_on_every_target(arch):
    assert_loop_of(1000, loop_body(1000, arch), slack=2)


def test_a_loop_of_another_size_fails_the_check():
    """Negative control: half the FFMAs asked for, or the loop's overhead counted as code, fails."""
    measured = loop_body(2048)
    with pytest.raises(AssertionError):
        assert_loop_of(4096, measured)
    with pytest.raises(AssertionError):
        assert_loop_of(2048, (measured[0] + 3, measured[1]), slack=2)


def icache_frame(per_octave: int = 4) -> pd.DataFrame:
    from gpuatlas.probes.families.icache import code_sizes

    return pd.DataFrame([{"probe": "geometry.icache", "metric": s.metric, "value": s.value, "repeat": s.repeat,
                          "flag": s.flag, "code_bytes": c}
                         for c in code_sizes(fakes.DEVICE, per_octave) for s in fakes._icache(Ctx, c)])


@pytest.mark.parametrize("per_octave", [4, 2])
def test_icache_rows_recover_the_simulated_levels(per_octave):
    """Capacities within one sweep step below the truth (the knee lies between the last point that fits and
    the first that does not), the issue rate and each level's miss cost per instruction."""
    rows = rows_of(icache_frame(per_octave))
    step = 2 ** (1 / per_octave)
    assert fakes.ICACHE_L0_BYTES / step <= rows["icache.l0.capacity_bytes"]["value"] <= fakes.ICACHE_L0_BYTES
    assert fakes.ICACHE_L1_BYTES / step <= rows["icache.l1.capacity_bytes"]["value"] <= fakes.ICACHE_L1_BYTES
    assert rows["icache.l0.cycles_per_instruction"]["value"] == pytest.approx(1.0, rel=0.01)
    per_line = fakes.ICACHE_LINE / 16
    assert rows["icache.l0.miss_cycles_per_instruction"]["value"] == pytest.approx(
        fakes.ICACHE_L1_FETCH / per_line, rel=0.02)
    assert rows["icache.l1.miss_cycles_per_instruction"]["value"] == pytest.approx(
        fakes.ICACHE_BEYOND_FETCH / per_line, rel=0.02)


def test_one_level_gives_no_capacity():
    """Negative control: a loop that always fits (a flat staircase) gives the issue rate and no capacity; a
    sweep of too few sizes gives nothing."""
    m = icache_frame()
    flat = m.assign(value=1.0)
    rows = rows_of(flat)
    assert set(rows) == {"icache.l0.cycles_per_instruction"}
    few = m[m["code_bytes"] <= 2048]
    assert few["code_bytes"].nunique() < 6 and rows_of(few) == {}


def test_icache_ids_are_declared_and_the_sweep_is_refused_outside_it():
    from gpuatlas.analysis.quantities import QUANTITIES
    from gpuatlas.probes.families.icache import HIGHEST, geometry_icache
    from gpuatlas.probes.registry import all_probes

    declared = set(all_probes()["geometry.icache"].quantities)
    assert declared <= set(QUANTITIES) and set(rows_of(icache_frame())) == declared
    with pytest.raises(ValueError):
        geometry_icache(Ctx, 2 * HIGHEST)
    with pytest.raises(ValueError):
        geometry_icache(Ctx, 1024 + 8)


# -- on a GPU ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpu_ctx():
    from gpuatlas.machinery.device import device_properties
    from gpuatlas.probes.kit.harness import Budget, Context

    return Context(device=device_properties(), budget=Budget())


def _median(samples, metric: str) -> float:
    return float(np.median([s.value for s in samples if s.metric == metric]))


@pytest.mark.gpu
def test_gpu_readonly_chases_and_reads_pass_their_checks(gpu_ctx):
    """Every load path's chase walks its chain to the right end, an L1-resident chase is faster than one past
    the L2, and both read kernels sum every word they read."""
    from gpuatlas.probes.families.readonly import geometry_readonly, knee_footprints, level_footprints, read_footprints

    device = gpu_ctx.device
    small, far = knee_footprints(device)[0], level_footprints(device)[-1]
    for load in ("plain", "nc", "mixed", "tex"):
        assert 0 < _median(geometry_readonly(gpu_ctx, "chase", load, small), "latency") < \
            _median(geometry_readonly(gpu_ctx, "chase", "plain", far), "latency")
    for load in ("plain", "nc"):
        for footprint in read_footprints(device).values():
            assert _median(geometry_readonly(gpu_ctx, "read", load, footprint), "bytes_per_clk_sm") > 0


@pytest.mark.gpu
def test_gpu_write_policy_walks_and_streams_pass_their_checks(gpu_ctx):
    from gpuatlas.probes.families.write_policy import geometry_write_policy

    walks = {a: _median(geometry_write_policy(gpu_ctx, "store_reload", a), "latency") for a in ("load", "store", "cg")}
    assert walks["load"] < walks["cg"] and walks["store"] > 0
    allocate = geometry_write_policy(gpu_ctx, "write_allocate", "plain")
    assert _median(allocate, "second_read_cycles") < _median(allocate, "cold_read_cycles")
    for access in ("full", "word_per_sector"):
        assert _median(geometry_write_policy(gpu_ctx, "partial_write", access), "bandwidth") > 0


@pytest.mark.gpu
def test_gpu_icache_small_loop_issues_near_one_per_cycle(gpu_ctx):
    from gpuatlas.probes.families.icache import HIGHEST, LOWEST, geometry_icache

    small = _median(geometry_icache(gpu_ctx, LOWEST), "cycles_per_instruction")
    assert 0.5 < small < 2.0
    assert _median(geometry_icache(gpu_ctx, HIGHEST), "cycles_per_instruction") >= small
