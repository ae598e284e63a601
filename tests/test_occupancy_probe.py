"""probes/families/occupancy/__init__.py, occupancy.cu and the Little's-law derivation without a GPU: the kernels compiled for
sm_90 (registers, no local memory, ILP independent loads of the stated width in flight), residency planning
against the occupancy calculator on two devices, the checksum accounting against a replay of the kernel's
indexing, the derivation on synthetic curves with known answers, and a simulated run end to end."""
import json

import numpy as np
import pandas as pd
import pytest

import fakes
from gpuatlas.analysis.claims import judge
from gpuatlas.analysis.derive import derive
from gpuatlas.analysis.littles_law import littles_rows, model
from gpuatlas.analysis.occupancy import occupancy
from gpuatlas.analysis.render import render
from conftest import COMMITTED_RUN
from gpuatlas.machinery import runner
from gpuatlas.probes.families import occupancy as occ
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass
from test_bandwidth import assert_issued_before_use, assert_loads_in_the_loop, instructions, opcode

H200 = json.loads((COMMITTED_RUN / "run.json").read_text())["device"]
#: An sm_86-like part: 48 warps per SM, 16 blocks, 100 KiB of shared memory, a different allocation table.
OTHER = {**H200, "name": "Other GPU", "compute_capability": "8.6", "sm_count": 84, "l2_bytes": 6 << 20,
         "max_threads_per_sm": 1536, "max_blocks_per_sm": 16, "smem_per_sm_bytes": 100 << 10,
         "smem_per_block_optin_bytes": 99 << 10, "total_memory_bytes": 24 << 30}
KERNELS = [(b, i) for b in occ.LOAD_BYTES for i in occ.ILPS]
OPCODE = {4: "LDG.E.STRONG.GPU", 16: "LDG.E.128.STRONG.GPU"}


# -- kernels ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cubin():
    return compile_cubin("occupancy.cu")


@pytest.mark.parametrize("load_bytes, ilp", KERNELS)
def test_kernel_registers_match_the_sweeps_table_without_local_memory(cubin, load_bytes, ilp):
    usage = resource_usage(cubin[1])[occ.kernel_name(load_bytes, ilp)]
    assert usage["registers"] == occ.REGISTERS[(9, 0)][(load_bytes, ilp)]
    assert usage.get("stack_bytes", 0) == usage.get("spill_stores", 0) == usage.get("spill_loads", 0) == 0
    # every variant but eight 16-byte loads (32 destination registers alone) can fill an SM: 64 warps
    assert (usage["registers"] <= 32) == ((load_bytes, ilp) != (16, 8))


@pytest.mark.parametrize("load_bytes, ilp", KERNELS)
def test_each_trip_issues_ilp_loads_of_the_width_before_using_any(cubin, load_bytes, ilp):
    code = sass(cubin[0])[occ.kernel_name(load_bytes, ilp)]
    loads = [opcode(l) for l in instructions(code) if opcode(l).startswith(("LDG", "LD."))]
    assert loads == [OPCODE[load_bytes]] * ilp, loads
    assert_loads_in_the_loop(code, OPCODE[load_bytes], ilp)
    assert_issued_before_use(code, OPCODE[load_bytes], ilp)


# -- residency planning ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", [H200, OTHER], ids=["h200", "other"])
@pytest.mark.parametrize("registers", [18, 29])
def test_every_planned_residency_is_what_the_calculator_grants(device, registers):
    max_warps = device["max_threads_per_sm"] // 32
    assert occ.max_warps_per_sm(device) == max_warps
    planned = [w for w in range(1, max_warps + 1) if occ.feasible(device, w, registers)]
    assert set(occ.FULL_WARPS) & set(range(1, max_warps + 1)) <= set(planned)
    for warps in planned:
        plan = occ.plan_residency(device, warps, registers)
        assert plan.blocks_per_sm * plan.threads_per_block == 32 * warps
        assert plan.threads_per_block <= device["max_threads_per_block"]
        assert plan.dynamic_smem_bytes <= device["smem_per_block_optin_bytes"]
        calc = occupancy(device, registers, plan.threads_per_block, plan.dynamic_smem_bytes)
        assert (calc.blocks_per_sm, calc.warps_per_sm) == (plan.blocks_per_sm, warps)
        # the spoiler, not the kernel, caps the blocks: without it more would fit wherever blocks are small
        free = occupancy(device, registers, plan.threads_per_block, 0)
        assert calc.limits["shared memory"] == plan.blocks_per_sm <= free.blocks_per_sm


def test_h200_plans_one_block_up_to_32_warps_then_two():
    assert occ.plan_residency(H200, 1, 18) == occ.Residency(1, 1, 32, 232448)
    assert occ.plan_residency(H200, 32, 18).blocks_per_sm == 1
    assert occ.plan_residency(H200, 64, 29) == occ.Residency(64, 2, 1024, 233472 // 2 - 1024)


def test_registers_cap_the_residency_the_sweep_asks_for():
    # 45 registers are allocated as 48: 10 warps per scheduler partition, 40 per SM
    assert occ.feasible(H200, 40, 45) and not occ.feasible(H200, 48, 45)
    with pytest.raises(ValueError, match="registers bind"):
        occ.plan_residency(H200, 64, 45)
    with pytest.raises(ValueError):
        occ.plan_residency(H200, 65, 18)
    with pytest.raises(ValueError):
        occ.plan_residency(OTHER, 37, 18)  # prime and above one block's 32 warps: 37 one-warp blocks > 16


@pytest.mark.parametrize("device", [H200, OTHER], ids=["h200", "other"])
def test_sweeps_follow_the_device(device):
    max_warps = device["max_threads_per_sm"] // 32
    full = occ.sweep(occ.FULL_WARPS, occ.ILPS, device)
    quick = occ.sweep(occ.QUICK_WARPS, occ.QUICK_ILPS, device)
    assert all(c in full for c in quick) and len(quick) < len(full) / 4
    assert max(c["resident_warps_per_sm"] for c in full) == max_warps
    for c in full:
        registers = occ.kernel_registers(device, c["load_bytes"], c["ilp"])
        assert occ.feasible(device, c["resident_warps_per_sm"], registers)
    top = {(c["load_bytes"], c["ilp"]): c["resident_warps_per_sm"] for c in sorted(
        full, key=lambda c: c["resident_warps_per_sm"])}
    assert top[(16, 4)] == max_warps and top[(16, 8)] < max_warps


@pytest.mark.parametrize("device", [H200, OTHER], ids=["h200", "other"])
@pytest.mark.parametrize("load_bytes, ilp", [(4, 1), (16, 8)])
def test_footprints_are_far_beyond_or_well_inside_the_l2(device, load_bytes, ilp):
    tile = occ.tile_bytes(load_bytes, ilp)
    assert occ.footprint_tiles(device, "dram", load_bytes, ilp) * tile >= 4 * device["l2_bytes"]
    assert occ.footprint_tiles(device, "l2", load_bytes, ilp) * tile <= device["l2_bytes"] / 4


# -- checksum accounting ------------------------------------------------------------------------------------

@pytest.mark.parametrize("tiles, warps, trips", [(7, 3, 5), (10, 10, 1), (4, 9, 2), (100, 12, 3), (5, 5, 4)])
def test_tiles_read_matches_a_replay_of_the_kernels_indexing(tiles, warps, trips):
    first = 0
    for _ in range(4):  # consecutive launches, each starting where the last stopped
        counts = np.zeros(tiles, dtype=int)
        step = warps % tiles
        for w in range(warps):
            tile = (first + w) % tiles
            for _ in range(trips):
                counts[tile] += 1
                tile += step
                if tile >= tiles:
                    tile -= tiles
        q, ranges = occ.tiles_read(first, tiles, warps, trips)
        want = np.full(tiles, q)
        for start, count in ranges:
            want[start:start + count] += 1
        assert (counts == want).all() and len(ranges) <= 2
        first = (first + warps * trips) % tiles


# -- the derivation on synthetic measurements -------------------------------------------------------------------

def synthetic(device, latency_s, peak, level="dram", noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for c in occ.sweep(occ.FULL_WARPS, occ.ILPS, device):
        if c["level"] != level:
            continue
        loads = device["sm_count"] * c["resident_warps_per_sm"] * c["ilp"]
        truth = float(model(loads, 32 * c["load_bytes"], latency_s, peak))
        for r in range(5):
            rows.append({**c, "probe": "occupancy.throughput", "metric": "bandwidth", "repeat": r,
                         "value": truth * rng.lognormal(0, noise), "unit": "B/s", "sm_clock_hz": 1.9e9, "flag": ""})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("latency_s, peak", [(650e-9, 4.6e12), (900e-9, 3.0e12)])
def test_littles_rows_recover_latency_peak_and_knee(latency_s, peak):
    rows = {r["quantity"]: r for r in littles_rows(synthetic(H200, latency_s, peak), H200)}
    assert rows["littles.loaded_latency_s"]["value"] == pytest.approx(latency_s, rel=0.05)
    assert rows["littles.loaded_latency_cycles"]["value"] == pytest.approx(latency_s * 1.9e9, rel=0.05)
    assert rows["littles.peak_bandwidth_bytes_per_s"]["value"] == pytest.approx(peak, rel=0.03)
    assert rows["littles.bytes_in_flight"]["value"] == pytest.approx(latency_s * peak, rel=0.06)
    knee = latency_s * peak / 128 / H200["sm_count"]
    warps = rows["occupancy.warps_to_saturate_dram_ilp1"]
    assert warps["ci_low"] <= knee <= warps["ci_high"] and warps["value"] == pytest.approx(knee, rel=0.06)
    assert rows["occupancy.warps_to_saturate_dram_ilp1_16b"]["value"] == pytest.approx(knee / 4, rel=0.06)
    assert "cannot saturate" in warps["note"] and "MB in flight" in warps["note"]
    top = rows["occupancy.full_occupancy_dram_bandwidth_bytes_per_s"]
    assert top["value"] == pytest.approx(peak, rel=0.03) and "64 warps/SM" in top["note"]
    assert "occupancy.full_occupancy_fraction_of_dram_read" not in rows  # no bw.dram in this run


def test_a_short_latency_lets_one_load_per_warp_saturate():
    # 150 ns x 4.4 TB/s / 128 B / 132 SMs = 39 warps per SM: below the 64 an SM holds
    warps = {r["quantity"]: r for r in littles_rows(synthetic(H200, 150e-9, 4.4e12), H200)}[
        "occupancy.warps_to_saturate_dram_ilp1"]
    assert warps["value"] == pytest.approx(39, rel=0.06) and "can saturate HBM here" in warps["note"]


def test_the_l2_fit_is_separate_and_flagged_samples_are_left_out():
    frame = pd.concat([synthetic(H200, 700e-9, 4.4e12), synthetic(H200, 300e-9, 9e12, level="l2")])
    frame.loc[frame.index[:40], "value"] *= 50  # absurd samples, flagged as the probe flags them
    frame.loc[frame.index[:40], "flag"] = "invalid"
    rows = {r["quantity"]: r for r in littles_rows(frame.reset_index(drop=True), H200)}
    assert rows["littles.loaded_latency_s"]["value"] == pytest.approx(700e-9, rel=0.05)
    assert rows["littles.l2_loaded_latency_s"]["value"] == pytest.approx(300e-9, rel=0.05)
    assert rows["littles.l2_bytes_in_flight"]["value"] == pytest.approx(300e-9 * 9e12, rel=0.06)


def test_no_occupancy_samples_no_rows():
    assert littles_rows(pd.DataFrame({"probe": ["bw.dram"], "metric": ["bandwidth"], "value": [1.0]}), H200) == []


# -- a simulated run end to end ------------------------------------------------------------------------------

def test_a_simulated_run_fits_the_fakes_physics_renders_and_feeds_the_claims(tmp_path):
    probes = [p for p in fakes.simulated_probes() if p.id in ("bw.dram", "occupancy.throughput")]
    run, meta = runner.new_run(tmp_path, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    assert {s["status"] for s in meta["probes"].values()} == {"ok"}
    measurements = run.read_measurements()
    derived = derive(meta, measurements)
    d = derived.set_index("quantity")["value"]
    latency, peak, sms = fakes.OCCUPANCY_LATENCY_S["dram"], fakes.OCCUPANCY_PEAK["dram"], fakes.DEVICE["sm_count"]
    assert d["littles.loaded_latency_s"] == pytest.approx(latency, rel=0.02)
    assert d["littles.peak_bandwidth_bytes_per_s"] == pytest.approx(peak, rel=0.02)
    assert d["occupancy.warps_to_saturate_dram_ilp1"] == pytest.approx(latency * peak / 128 / sms, rel=0.03)
    assert d["occupancy.full_occupancy_fraction_of_dram_read"] == pytest.approx(peak / 4.5e12, rel=0.02)
    # the fit is preferred to the recomputation from an idle chase latency, when a run has both
    chase = pd.DataFrame([{"quantity": "dram.latency_ns", "value": 300e-9, "unit": "s", "ci_low": 290e-9,
                           "ci_high": 310e-9, "method": "chase", "probe": "chase.latency", "note": ""}])
    claims = judge(pd.concat([derived, chase]), fakes.DEVICE).set_index("claim")
    assert claims.loc["~0.93 MB in flight saturates HBM", "ratio"] == f"{d['littles.bytes_in_flight'] / 0.93e6:.3g}"
    assert claims.loc["~55 warps per SM, one 128-B load each", "verdict"] == "deviates"
    render(meta, measurements, derived, tmp_path / "report")
    assert (tmp_path / "report" / "occupancy-throughput.svg").stat().st_size > 10_000


# -- the host side against a replay of the kernel (no CuPy device calls) ---------------------------------------

class _Array(np.ndarray):
    """A NumPy array standing in for a CuPy one: .get() and a zeroing memset."""

    def get(self):
        return np.asarray(self)


class _ReplayKernel:
    """stream_<W>b_ilp<N> replayed in NumPy: checks the launch's arguments against the kernel's signature and
    adds what every warp would sum to the sink."""

    def __init__(self, load_bytes, ilp, registers):
        self.load_bytes, self.ilp, self.num_regs, self.shared_size_bytes = load_bytes, ilp, registers, 0
        self.launches = []

    def __call__(self, grid, block, args, shared_mem=0):
        words, tiles, first, trips, sink = args
        assert (type(tiles), type(first), type(trips)) == (np.uint32, np.uint32, np.int64)
        assert shared_mem == self.max_dynamic_shared_size_bytes and block[0] % 32 == 0
        warps, tile_words = grid[0] * block[0] // 32, self.ilp * 32 * self.load_bytes // 4
        per_tile = words[:int(tiles) * tile_words].reshape(int(tiles), tile_words).sum(axis=1, dtype=np.uint64)
        read = (int(first) + np.arange(warps * int(trips))) % int(tiles)  # warp w, trip t: first + w + t x warps
        sink[0] = (int(sink[0]) + int(per_tile[read].sum())) % 2**32
        self.launches.append((grid[0], block[0], shared_mem, int(first)))


def test_the_host_accounts_for_every_launch_of_a_replayed_kernel(monkeypatch):
    import gpuatlas.probes.kit.cuda
    from gpuatlas.probes.kit.harness import Budget, Context, Sink

    device = {**OTHER, "sm_count": 3, "l2_bytes": 1 << 16}
    replay = _ReplayKernel(16, 2, 22)
    words = (np.arange(1 << 20, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    monkeypatch.setattr(gpuatlas.probes.kit.cuda, "kernel", lambda filename, name: replay)
    monkeypatch.setattr(occ, "_api_blocks_per_sm", lambda func, threads, smem: occupancy(
        device, func.num_regs, threads, smem).blocks_per_sm)
    monkeypatch.setattr(occ.Filled, "at_least", classmethod(lambda cls, nbytes, dev: words))
    monkeypatch.setattr(occ, "sum32", lambda w, offset, count: int(w[offset // 4:offset // 4 + count].sum()) % 2**32)
    monkeypatch.setattr(Sink, "__init__", lambda self, what: setattr(self, "array", np.zeros(1, np.uint32).view(
        _Array)) or setattr(self, "launches", 0) or setattr(self, "what", what))
    monkeypatch.setattr(Sink, "reset", lambda self: self.array.fill(0) or setattr(self, "launches", 0))
    monkeypatch.setattr(occ, "calibrate", lambda run, unit, target_s: (7, target_s))
    checked = []

    def measure(ctx, launch, reset, verify, nbytes, **kw):
        for _ in range(3):  # three samples of 1, 2 and 3 launches, each checked
            reset()
            for _ in range(len(checked) + 1):
                launch()
            verify()
            checked.append(nbytes)
        return []

    monkeypatch.setattr(occ, "bandwidth_samples", measure)
    ctx = Context(device=device, budget=Budget())
    for warps, level in ((3, "l2"), (40, "dram")):
        replay.launches.clear()
        occ.measure_throughput(ctx, warps, 2, 16, level)
        grid, block, smem, _ = replay.launches[0]
        assert grid * block == 3 * warps * 32 and smem == occ.plan_residency(device, warps, 22).dynamic_smem_bytes
        assert len({first for *_, first in replay.launches}) > 1  # the cursor moves from launch to launch
    # a kernel that skipped a tile would not match: the check itself can fail
    monkeypatch.setattr(occ, "sum32", lambda w, offset, count: 1)
    with pytest.raises(RuntimeError, match="checksum mismatch"):
        occ.measure_throughput(ctx, 3, 2, 16, "l2")



def test_the_probe_refuses_a_residency_the_api_does_not_grant(monkeypatch):
    import gpuatlas.probes.kit.cuda
    from gpuatlas.probes.kit.harness import Budget, Context

    monkeypatch.setattr(gpuatlas.probes.kit.cuda, "kernel", lambda filename, name: _ReplayKernel(16, 4, 29))
    monkeypatch.setattr(occ, "_api_blocks_per_sm", lambda func, threads, smem: 1)  # 1 block: 20 of 40 warps
    with pytest.raises(RuntimeError, match="intended 40 resident warps per SM, the occupancy API grants 20, "
                                           "the calculator 40: refusing"):
        occ.measure_throughput(Context(device=H200, budget=Budget()), 40, 4, 16, "dram")
