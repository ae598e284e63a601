"""Link and collective probes: skipped with the reason on one GPU, derived on a simulated node, their
kernels compiled for sm_90 with the instructions they claim, and nccl-tests' bus-bandwidth arithmetic."""
import re

import numpy as np
import pytest

from gpuatlas.analysis.collectives import algbw, bus_factor, busbw
from gpuatlas.analysis.links import matrix
from fakes import (COPY_FRACTION, DEVICE, KERNEL_FRACTION, LINK_PEAK, NVLINK_BYTES_PER_S, NVLINKS, REMOTE,
                   simulated_probes)
from gpuatlas.machinery import runner
from gpuatlas.probes.families.links import chain, memcpy_configs, ordered_pairs

LINK_PROBES = ("link.topology", "link.memcpy", "link.p2p_bandwidth", "link.p2p_latency", "nccl.collectives")


def _run(tmp_path, gpus):
    device = dict(DEVICE, gpu_count=gpus)
    probes = [p for p in simulated_probes() if p.id in LINK_PROBES]
    run, meta = runner.new_run(tmp_path, device, {}, probes, "quick", {}, 0, ["gpuatlas", "run"])
    return run, runner.execute(run, meta, probes, isolate=False)


def test_on_one_gpu_every_link_probe_is_skipped_with_the_reason(tmp_path):
    _, meta = _run(tmp_path, 1)
    for pid in LINK_PROBES:
        state = meta["probes"][pid]
        assert state["status"] == "skipped" and state["error"].startswith("one GPU"), (pid, state)
        assert state["configs_done"] == 0


def test_on_a_simulated_node_the_links_are_derived(tmp_path):
    run, meta = _run(tmp_path, 4)
    assert {meta["probes"][pid]["status"] for pid in LINK_PROBES} == {"ok"}
    values = run.read_derived().set_index("quantity")["value"]
    assert values["nvlink.links"] == NVLINKS
    assert values["nvlink.link_bandwidth_bytes_per_s"] == NVLINK_BYTES_PER_S
    assert values["nvlink.pair_bandwidth_bytes_per_s"] == pytest.approx(LINK_PEAK), "every link, through switches"
    assert values["p2p.read_fraction_of_nvlink"] == pytest.approx(KERNEL_FRACTION["read"])
    assert values["p2p.read_bandwidth_bytes_per_s"] == pytest.approx(KERNEL_FRACTION["read"] * LINK_PEAK)
    assert values["p2p.write_bandwidth_bytes_per_s"] == pytest.approx(KERNEL_FRACTION["write"] * LINK_PEAK)
    largest = max(c["message_bytes"] for c in memcpy_configs(dict(DEVICE, gpu_count=4), "quick"))
    assert values["p2p.memcpy_bandwidth_bytes_per_s"] == pytest.approx(
        COPY_FRACTION["one_way"] * LINK_PEAK * largest / (largest + (1 << 20)))
    assert values["p2p.latency_cycles"] == pytest.approx(REMOTE["hbm"], rel=0.01)
    assert values["p2p.l2_latency_cycles"] == pytest.approx(REMOTE["l2"], rel=0.01)
    for collective in ("all_reduce", "all_gather", "reduce_scatter", "broadcast"):
        assert values[f"nccl.{collective}_busbw_bytes_per_s"] == pytest.approx(LINK_PEAK)
    table = matrix(run.read_measurements(), "link.p2p_bandwidth", "bandwidth", op="read")
    assert table.shape == (4, 4) and np.isnan(np.diag(table.values)).all(), "a matrix of ordered pairs"


def test_pairs_and_the_memcpy_matrix_cover_every_ordered_pair():
    assert ordered_pairs(dict(DEVICE, gpu_count=3)) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    configs = memcpy_configs(dict(DEVICE, gpu_count=3), "quick")
    largest = max(c["message_bytes"] for c in configs)
    at_largest = {(c["src"], c["dst"], c["direction"]) for c in configs if c["message_bytes"] == largest}
    assert len(at_largest) == 12
    swept = {(c["src"], c["dst"]) for c in configs if c["message_bytes"] != largest}
    assert swept == {(0, 1)}, "the quick size sweep is on the first pair only"


def test_the_chain_is_one_cycle_through_every_block():
    base, footprint, stride = 1 << 40, 64 * 128, 128
    words = chain(base, footprint, stride, np.random.default_rng(1))
    seen, p = set(), base
    for _ in range(footprint // stride):
        seen.add(p)
        p = int(words[(p - base) // 8])
        assert (p - base) % stride == 0
    assert p == base and len(seen) == footprint // stride


@pytest.mark.parametrize("collective, n, factor", [("all_reduce", 8, 14 / 8), ("all_reduce", 2, 1.0),
                                                   ("all_gather", 8, 7 / 8), ("reduce_scatter", 4, 3 / 4),
                                                   ("broadcast", 8, 1.0), ("all_reduce", 1, 0.0)])
def test_bus_bandwidth_follows_nccl_tests(collective, n, factor):
    """nccl-tests doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (all-gather,
    reduce-scatter), 1 (broadcast); algbw = S / t."""
    size, seconds = 1 << 30, 0.01
    assert algbw(size, seconds) == size / seconds
    assert busbw(collective, size, seconds, n) == pytest.approx(size / seconds * factor)
    assert bus_factor(collective, n) == pytest.approx(factor)


def test_a_wrong_bus_factor_would_be_caught():
    """Negative control: all-gather's factor is not all-reduce's, nor is it the rank count's."""
    assert busbw("all_gather", 1, 1, 8) != busbw("all_reduce", 1, 1, 8)
    with pytest.raises(ValueError):
        bus_factor("all_to_all", 8)


@pytest.fixture(scope="module")
def links_sass():
    from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass

    cubin, log = compile_cubin("links.cu")
    return sass(cubin), resource_usage(log)


def _ops(code):
    return [re.sub(r"\s+", " ", l.split(";")[0]).strip() for l in code.splitlines()
            if re.search(r"/\*[0-9a-f]{4}\*/", l)]


def test_peer_chase_is_a_dependent_l2_only_chain(links_sass):
    from test_kernels import assert_dependent_chain, timed_region

    code, usage = links_sass
    assert_dependent_chain(timed_region(code["peer_chase"]), "LDG.E.64.STRONG.GPU", at_least=16)
    assert usage["peer_chase"]["spill_stores"] == usage["peer_chase"]["stack_bytes"] == 0


def test_peer_read_and_write_move_16_bytes_per_instruction(links_sass):
    code, usage = links_sass
    reads = [l for l in _ops(code["peer_read"]) if "LDG" in l]
    writes = [l for l in _ops(code["peer_write"]) if "STG" in l]
    assert reads and all(".128" in l for l in reads)
    assert writes and all(".128" in l for l in writes)
    assert not [l for l in _ops(code["peer_write"]) if "LDG" in l], "the write kernel reads nothing"
    for name in ("peer_read", "peer_write"):
        assert usage[name]["spill_stores"] == usage[name]["stack_bytes"] == 0


def test_a_pair_wired_directly_is_rated_by_its_own_links_only():
    """Two links straight to the peer, eighteen elsewhere: the pair's rate is two links', not eighteen
    (a control: the switch count is used only when no link ends at the peer)."""
    import pandas as pd

    from gpuatlas.analysis.links import pair_link_rate

    rows = [{"probe": "link.topology", "metric": m, "value": v, "src": 0, "dst": 1, "flag": ""}
            for m, v in (("nvlink_links_to_peer", 2), ("nvlink_links_to_switch", 18), ("nvlink_link_bytes_per_s", 5.0))]
    rate = pair_link_rate(pd.DataFrame(rows))
    assert rate[(0, 1)] == 10.0 and rate[(1, 0)] == 10.0


def test_nvml_bus_ids_and_field_values_are_read_whatever_their_spelling():
    from types import SimpleNamespace

    from gpuatlas.probes.families.links import bus_key, field_value

    assert bus_key(b"00000000:18:00.0\x00") == bus_key("0000:18:00.0") == (0, 0x18, 0, 0)
    assert bus_key("0000:19:00.0") != bus_key("0000:18:00.0")
    value = SimpleNamespace(dVal=0.0, uiVal=1234, ulVal=0, ullVal=0, sllVal=0, siVal=0, usVal=0)
    assert field_value(SimpleNamespace(valueType=1, value=value)) == 1234
    assert field_value(SimpleNamespace(valueType=0, value=value)) == 0.0, "the member the type names, not another"
