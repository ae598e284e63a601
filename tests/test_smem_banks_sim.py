"""The Numba bank-conflict kernels run in the CUDA simulator (own process: the switch is read at import
time) and load exactly the addresses the probe claims; the host check rejects any lane that does not."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuatlas.probes.kit.harness import Budget, Context
import importlib

smem_banks = importlib.import_module("gpuatlas.probes.families.smem_banks")
LANES, WARPS, expected_sink, loads_per_trip = (smem_banks.LANES, smem_banks.WARPS, smem_banks.expected_sink,
                                               smem_banks.loads_per_trip)

HERE = Path(__file__).parent
TRIPS = 2
#: access_bytes, stride_words, layout, offset_words, form
CONFIGS = [(4, 1, "plain", 0, "latency"), (4, 0, "plain", 0, "throughput"), (4, 32, "plain", 3, "latency"),
           (8, 3, "plain", 2, "latency"), (16, 5, "plain", 1, "throughput"), (4, 32, "pad1", 0, "latency"),
           (8, 32, "xor", 5, "throughput"), (16, 64, "xor", 0, "latency")]


def claimed_element(lane: int, stride: int, layout: str, offset: int) -> int:
    """The element the issue says each lane reads: lane*stride + offset, the fixes' tile layouts."""
    if layout == "plain":
        return lane * stride + offset
    if layout == "pad1":
        return lane * (stride + 1) + offset
    return lane * stride + (offset ^ (lane % stride))  # xor: column XOR row, inside the row


@pytest.fixture(scope="module")
def simulated():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE)]))
    configs = [[*c, TRIPS, WARPS[c[-1]]] for c in CONFIGS]
    done = subprocess.run([sys.executable, str(HERE / "sim_smem_banks.py"), json.dumps(configs)],
                          capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    return dict(zip(CONFIGS, json.loads(done.stdout.strip().splitlines()[-1])))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(map(str, c)))
def test_each_lane_loads_only_its_claimed_address(simulated, config):
    access, stride, layout, offset, form = config
    result = simulated[config]
    warps = WARPS[form]
    loads = loads_per_trip(form, access) * TRIPS + (form == "throughput") * smem_banks.batch(access)
    addresses = np.array([claimed_element(lane, stride, layout, offset) * access for lane in range(LANES)])
    assert len(result["visits"]) == LANES * warps
    for thread, visits in enumerate(result["visits"]):
        assert visits == [int(addresses[thread % LANES])] * loads, f"thread {thread}"
    expected = np.tile(expected_sink(addresses, form, access, TRIPS), warps)
    assert result["sink"] == expected.tolist(), "the host's sink check passes"
    base, *clocks = result["out"]
    c0, c1, t0, t1 = np.array(clocks).reshape(warps, 4).T
    assert base == 0 and (c1 > c0).all() and (t1 > t0).all(), "every warp reports its own clock readings"


def test_the_host_rejects_a_lane_that_loaded_elsewhere_and_prices_each_load():
    """measure_banks against a fake launch: cycles per access = the warps' clock span / all their loads,
    and a wrong sink (a lane that read another address) is an error, not a sample."""
    ctx = Context(device={"smem_per_block_bytes": 48 << 10}, budget=Budget(warmup_s=0, min_repeats=3,
                                                                          max_repeats=3))
    cycles_per_access, base = 7.0, 1024
    corrupt = {"lane": None}

    def launch(elements, pitch, offset, xor_mask, trips, warps):
        addresses = base + (np.arange(LANES) * pitch + offset) * 8
        sink = np.tile(expected_sink(addresses, "throughput", 8, trips), warps)
        if corrupt["lane"] is not None:
            sink[LANES + corrupt["lane"]] += 8
        span = cycles_per_access * trips * loads_per_trip("throughput", 8) * warps
        starts = 100 + 10 * np.arange(warps)  # warps start and end at different times: the span counts
        ends = starts[::-1] + span - 10 * (warps - 1)
        clocks = np.stack([starts, ends, starts // 2, ends // 2], axis=1).ravel()
        return np.array([base, *clocks]), sink

    samples = smem_banks.measure_banks(ctx, 8, 3, "plain", 1, "throughput", launch)
    assert [s.value for s in samples] == pytest.approx([cycles_per_access] * 3)
    assert {(s.metric, s.unit, s.timer, s.sm_clock_hz) for s in samples} == {
        ("cycles_per_access", "cycles", "clock64", 2e9)}
    corrupt["lane"] = 5
    with pytest.raises(RuntimeError, match=r"thread 37 \(lane 5\)"):
        smem_banks.measure_banks(ctx, 8, 3, "plain", 1, "throughput", launch)
