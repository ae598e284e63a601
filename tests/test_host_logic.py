"""Host-side logic of the probes and harness, with known answers."""
import math

import numpy as np
import pytest

from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.results import config_filename, config_key
from gpuatlas.analysis.units import fmt_bytes, fmt_value
from gpuatlas.probes.families import chase
from gpuatlas.probes.kit import chain
from gpuatlas.probes.kit.harness import Budget, Sample, calibrate, launch_seconds, rel_iqr, repeat_until_stable
from gpuatlas.probes.registry import all_probes, geom, parse_override, select


@pytest.mark.parametrize("elements", [2, 3, 17, 1000])
def test_chain_is_one_cycle_through_every_element(elements):
    stride = 128
    order = chain.chain_order(np.random.default_rng(elements), elements)
    words = np.zeros(elements * stride // 8, dtype=np.uint64)
    base = 0x7F0000000000
    chain.fill_chain(words, order, stride, base)
    p, seen = base + int(order[0]) * stride, []
    for _ in range(elements):
        seen.append(p)
        p = int(words[(p - base) // 8])
    assert p == seen[0], "back at the start after exactly `elements` steps"
    assert sorted(seen) == [base + i * stride for i in range(elements)], "every element once"
    assert np.count_nonzero(words) == elements, "only the chain's words are written"


def test_expected_address_is_where_the_walk_ends():
    order = np.array([3, 0, 2, 1])
    assert chain.expected_address(order, 0, 128, 1000) == 1000 + 3 * 128
    assert chain.expected_address(order, 6, 128, 1000) == 1000 + 2 * 128


def test_steps_are_a_multiple_of_the_unroll_and_bounded():
    assert chain.steps_for(1e-9) % chain.UNROLL == 0
    assert chain.steps_for(1e-12) == chain.MAX_STEPS
    assert chain.steps_for(1.0) == chain.MIN_STEPS
    assert abs(chain.steps_for(1e-7) * 1e-7 - chain.SAMPLE_S) < 1e-7 * chain.UNROLL


def test_footprints_are_sized_from_the_device():
    device = {"smem_per_sm_bytes": 100 << 10, "l2_bytes": 4 << 20}
    l1, l2, dram = chain.three_footprints(device)
    assert l1 < device["smem_per_sm_bytes"] / 4 and l1 % 128 == 0
    assert device["smem_per_sm_bytes"] < l2 < device["l2_bytes"] / 2
    assert dram >= 2 * device["l2_bytes"]
    sweep = chase.footprint_sweep(device)
    assert sweep[0] == 1024 and sweep[-1] == 4 * device["l2_bytes"]
    octaves = math.log2(sweep[-1] / sweep[0])
    assert len(sweep) >= 3.5 * octaves, "about 4 points per octave"
    assert all(f % 128 == 0 for f in sweep)


def test_geom_is_log_spaced_and_jitter_is_seeded():
    plain = geom(1024, 1 << 20, per_octave=4)
    assert plain[0] == 1024 and plain[-1] == 1 << 20 and len(plain) == 41
    assert geom(1024, 1 << 20, 4, jitter_seed=1) == geom(1024, 1 << 20, 4, jitter_seed=1)
    assert geom(1024, 1 << 20, 4, jitter_seed=1) != plain


def test_every_probe_declares_quick_and_full_and_counts_configs():
    device = {"sm_count": 132, "l2_bytes": 60 << 20, "smem_per_sm_bytes": 228 << 10, "smem_per_block_bytes": 48 << 10,
              "total_memory_bytes": 141 << 30, "compute_capability": "9.0", "max_threads_per_sm": 2048,
              "max_threads_per_block": 1024, "max_blocks_per_sm": 32, "regs_per_sm": 65536,
              "smem_per_block_optin_bytes": 227 << 10}
    for probe in all_probes().values():
        node = dict(device, gpu_count=probe.min_gpus)  # the link probes size their pairs from the GPUs seen
        quick, full = probe.configs(node, "quick"), probe.configs(node, "full")
        assert 0 < len(full) and len(quick) <= len(full)  # quick is a subset; a full-only probe has none
        if probe.min_gpus > 1:
            assert probe.configs(dict(device, gpu_count=1), "quick") == [], "no pair on one GPU"
        assert probe.summary and probe.version


def test_select_by_exact_id_or_prefix_and_reject_unknown():
    assert [p.id for p in select(["chase"])] == ["chase.access", "chase.every_sm", "chase.latency", "chase.line",
                                                 "chase.miss", "chase.smem", "chase.tlb", "chase.latency_numba",
                                                 "chase.smem_index"]
    assert [p.id for p in select(["clock.sm"])] == ["clock.sm"]
    with pytest.raises(UsageError, match="unknown probe 'nope'"):
        select(["nope"])


def test_axis_overrides_parse_units_and_reject_nonsense():
    probes = select(["chase.latency"])
    assert parse_override("footprint_bytes=4KiB,64MiB,1000", probes) == ("footprint_bytes", [4096, 64 << 20, 1000])
    assert parse_override("flavour=cg", probes) == ("flavour", ["cg"])
    for bad in ("footprint_bytes", "=3", "footprint_bytes=", "footprint_bytes=1,,2", "nope=1", "footprint_bytes=nan"):
        with pytest.raises(UsageError):
            parse_override(bad, probes)


def test_config_keys_are_canonical_and_file_names_distinct():
    assert config_key({"b": 2, "a": "x"}) == "a=x,b=2"
    assert "/" not in config_filename({"a": "../x/y"}) and config_filename({}) == "default.parquet"
    names = {config_filename({"footprint_bytes": f, "flavour": fl}) for f in (1, 10, 100) for fl in ("cg", "default")}
    assert len(names) == 6


def test_repeat_until_stable_stops_when_stable_and_keeps_every_sample():
    calls = []

    def sample(repeat):
        calls.append(repeat)
        return [Sample("latency", 100.0, "cycles", repeat, 1e9, "clock64")]

    fake_time = iter(np.arange(0, 100, 0.001))
    samples = repeat_until_stable(sample, "latency", Budget(warmup_s=0.0025, min_repeats=5, max_repeats=50),
                                  clock=lambda: next(fake_time))
    assert calls[:3] == [-1, -1, -1] and -1 not in calls[3:], "timed warm-up first, its samples dropped"
    assert len(samples) == 5, "a constant metric is stable after min_repeats"


def test_repeat_until_stable_runs_to_the_cap_when_noisy_and_unbudgeted():
    rng = np.random.default_rng(0)
    samples = repeat_until_stable(lambda r: [Sample("x", rng.uniform(1, 2), "s", r, None, "t")], "x",
                                  Budget(warmup_s=0, min_repeats=3, max_repeats=9, time_s=1e9))
    assert len(samples) == 9


def test_rel_iqr():
    assert rel_iqr([1, 1, 1, 1]) == 0
    assert rel_iqr([1]) == math.inf
    assert rel_iqr([90, 100, 110]) == pytest.approx(0.1)


def _calibrate_linear(seconds_per_count: float, unit: int, target_s: float, overhead_s: float = 0.0, **kw):
    """calibrate() on a fake kernel whose launch of ``count`` lasts ``overhead_s + count x seconds_per_count``:
    (count, seconds, the counts it tried)."""
    tried = []

    def run(count):
        tried.append(count)
        return lambda: overhead_s + count * seconds_per_count

    count, seconds = calibrate(run, unit, target_s, time_launch=lambda launch: launch(), **kw)
    return count, seconds, tried


def test_calibrate_grows_short_trials_at_most_64x_then_scales_to_the_target():
    # 0.1 us a trip: 1 and 64 trips are far below target/4, 4096 trips (410 us) is the first long enough
    count, seconds, tried = _calibrate_linear(1e-7, 1, 1e-3)
    assert tried == [1, 64, 4096] and seconds == pytest.approx(4096e-7)
    assert count == 10_000, "4096 trips scaled from 410 us to the 1 ms target"
    # 10 us a trip: grown by ceil(target/2 / seconds) = 50, not 64, then scaled to the target
    assert _calibrate_linear(1e-5, 1, 1e-3)[::2] == (100, [1, 50])
    # a first trial of at least target/4 is scaled at once
    assert _calibrate_linear(1e-3, 1, 1e-3)[::2] == (1, [1])


def test_calibrate_answers_a_multiple_of_the_unit_and_at_least_one_unit():
    count, _, tried = _calibrate_linear(1e-6, 64, 1e-3)
    assert tried == [64, 512] and count == 1024, "512 trips last 512 us: 15.6 units rounded to 16"
    assert _calibrate_linear(1.0, 64, 1e-3)[0] == 64, "a unit that already lasts longer than the target"
    count, _, _ = _calibrate_linear(3e-7, 3, 2e-3, overhead_s=5e-6)
    assert count % 3 == 0 and count > 0


def test_calibrate_caps_trials_at_max_count_or_stops_unclamped_at_two_to_the_forty():
    # a kernel that takes no time: counts grow 64x a step until the cap
    count, _, tried = _calibrate_linear(1e-18, 1, 1e-3, max_count=2**31 - 1)
    assert max(tried) == 2**31 - 1 and all(b <= 2**31 - 1 for b in tried) and count == 2**31 - 1
    assert tried[:3] == [1, 64, 4096] and len(tried) == 7
    count, _, tried = _calibrate_linear(1e-18, 1, 1e-3)
    assert tried[-1] == 64**7 >= 1 << 40 and len(tried) == 8, "without max_count trials stop at 2**40, not capped"
    assert count == round(64**7 * 1e-3 / (64**7 * 1e-18)), "and the answer is not clamped"


def test_launch_seconds_warms_up_then_times_each_launch_alone_and_keeps_the_fastest(monkeypatch):
    import sys
    import types

    log, elapsed_ms = [], iter([4.0, 2.0, 3.0])

    class Event:
        def record(self, stream=None):
            log.append(("record", self, stream))

        def synchronize(self):
            log.append(("wait", self))

    cuda = types.SimpleNamespace(Event=Event, get_elapsed_time=lambda start, stop: next(elapsed_ms))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))

    def launch():
        log.append(("launch",))

    assert launch_seconds(launch, warmup=2) == pytest.approx(4e-3)
    kinds = [entry[0] for entry in log]
    assert kinds == ["launch", "launch", "record", "launch", "record", "wait"], "warm-ups queued, one launch timed"
    assert all(entry[2] is None for entry in log if entry[0] == "record"), "on the current stream"
    log.clear()
    assert launch_seconds(launch, 2, warmup=1, wait_after_warmup=True, stream="s") == pytest.approx(2e-3)
    assert [entry[0] for entry in log] == ["launch", "record", "wait"] + ["record", "launch", "record", "wait"] * 2
    assert {entry[2] for entry in log if entry[0] == "record"} == {"s"}


def test_unit_formatting():
    assert fmt_bytes(60 << 20) == "60 MiB"
    assert fmt_bytes(14592) == "14.2 KiB"
    assert fmt_value(7.2224e-6, "s") == "7.222 us"
    assert fmt_value(59.24, "1/cycle") == "59.24 operations per cycle per SM"
    assert fmt_value(1.98e9, "Hz") == "1.98 GHz"
    assert fmt_value(float("nan"), "s") == "-"


def test_page_and_line_sweeps_are_sized_from_the_device():
    device = {"smem_per_sm_bytes": 164 << 10, "l2_bytes": 40 << 20, "total_memory_bytes": 16 << 30,
              "smem_per_block_bytes": 48 << 10}
    pages = chase.page_footprints(device, chase.PAGE_STRIDE)
    assert pages[0] == 2 * chase.PAGE_STRIDE and pages[-1] <= device["total_memory_bytes"] // 4
    assert all(f % chase.PAGE_STRIDE == 0 for f in pages) and pages == sorted(set(pages))
    tlb = [c["footprint_bytes"] for c in chase.tlb_configs(device) if c["stride_bytes"] == chase.PAGE_STRIDE]
    assert device["total_memory_bytes"] // 4 < tlb[-1] <= device["total_memory_bytes"] * chase.TLB_MEMORY_FRACTION
    configs = chase.line_configs(device, [8, 32, 512])
    assert len(configs) == 6 and all(c["footprint_bytes"] % c["stride_bytes"] == 0 for c in configs)
    for c in configs:  # every chain touches more 32-byte blocks than the cache it must overflow holds
        touched = c["footprint_bytes"] // c["stride_bytes"] * 32
        if c["flavour"] == "default":
            assert touched >= 2 * device["smem_per_sm_bytes"] and c["footprint_bytes"] <= device["l2_bytes"] / 2
        else:
            assert touched >= 2 * device["l2_bytes"]
    assert max(chain.smem_footprints(device)) <= device["smem_per_block_bytes"] // 2
