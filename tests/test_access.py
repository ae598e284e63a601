"""chase.access without a GPU: the recording kernel's SASS, the walker's sink check, and the split of recorded
accesses into near hits, far-partition hits and misses on synthetic distributions with known answers."""
import re

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.latency import hierarchy_rows
from gpuatlas.analysis.miss_latency import access_bands
from gpuatlas.probes.families import chase_l2
from gpuatlas.probes.kit import chain
from gpuatlas.probes.kit.cuda import compile_cubin, resource_usage, sass

DEVICE = {"l2_bytes": 60 << 20, "smem_per_sm_bytes": 228 << 10}
#: Cluster centres (cycles, before the recording's cost) like the H200's, and that cost.
NEAR, FAR, NEAR_MISS, FAR_MISS, COST = (265, 300), (425, 460, 490), (525, 550), (700, 735), 12


def draw(rng, centres, count):
    return rng.choice(centres, count) + rng.normal(0, 5, count)


def synthetic_access(far_share=0.45, accesses=4096, seed=0):
    """chase.access rows for access_footprints(DEVICE), and the far-hit values drawn (the answer)."""
    rng = np.random.default_rng(seed)
    rows, far_drawn = [], []
    for footprint in chase_l2.access_footprints(DEVICE):
        fraction = footprint / DEVICE["l2_bytes"]
        if fraction <= 1 / 4:
            values = draw(rng, NEAR, accesses)
        elif fraction <= 1:
            far = draw(rng, FAR, int(far_share * accesses))
            far_drawn.append(far)
            rest = accesses - far.size
            values = np.concatenate([far, draw(rng, NEAR_MISS, int(0.8 * rest)),
                                     draw(rng, FAR_MISS, rest - int(0.8 * rest))])
        else:  # a cold path: misses only
            values = np.concatenate([draw(rng, NEAR_MISS, accesses // 2), draw(rng, FAR_MISS, accesses - accesses // 2)])
        recorded = np.round(values + COST)
        common = dict(probe="chase.access", footprint_bytes=footprint, stride_bytes=128, flavour="cg", flag="")
        rows += [dict(common, metric="access", value=v, repeat=i) for i, v in enumerate(recorded)]
        rows += [dict(common, metric="record_step", value=recorded.mean(), repeat=0),
                 dict(common, metric="latency", value=values.mean(), repeat=0)]
    return pd.DataFrame(rows), np.concatenate(far_drawn)


def far_latency(frame):
    rows = {r["quantity"]: r for r in hierarchy_rows(frame, DEVICE)}
    return rows["l2.far_latency_cycles"]


def test_far_hits_are_found_between_the_near_hits_and_the_misses():
    frame, far = synthetic_access()
    bands = access_bands(frame, DEVICE)
    assert bands["offset"] == pytest.approx(COST, abs=0.5)
    assert max(NEAR) + COST < bands["near_edge"] < min(FAR) + COST
    assert max(FAR) + COST < bands["miss_edge"] < min(NEAR_MISS) + COST
    assert bands["far_share"] == pytest.approx(0.45, abs=0.03)
    row = far_latency(frame)
    assert row["value"] == pytest.approx(np.median(far), abs=2)
    assert row["ci_low"] <= row["value"] <= row["ci_high"] and row["probe"] == "chase.access"


@pytest.mark.parametrize("far_share", [0.15, 0.3, 0.6])
def test_the_far_latency_does_not_move_with_the_mix(far_share):
    """The plain chase's average moves with the share of far hits; the far cluster's centre must not."""
    reference = far_latency(synthetic_access(0.45)[0])["value"]
    frame, _ = synthetic_access(far_share, seed=1)
    assert far_latency(frame)["value"] == pytest.approx(reference, abs=2)
    plain = frame[(frame["metric"] == "latency") & (frame["footprint_bytes"] == 45 << 20)]["value"].iloc[0]
    assert abs(plain - reference) > 40, "the mixed average is far from the far hits' latency"


def test_no_far_latency_without_the_three_kinds_of_footprint():
    frame, _ = synthetic_access()
    l2 = DEVICE["l2_bytes"]
    for drop in (frame["footprint_bytes"] <= l2 / 4, frame["footprint_bytes"] >= 2 * l2,
                 (frame["footprint_bytes"] > l2 / 2) & (frame["footprint_bytes"] <= l2)):
        assert access_bands(frame[~drop], DEVICE) is None
        assert "l2.far_latency_cycles" not in {r["quantity"] for r in hierarchy_rows(frame[~drop], DEVICE)}


def test_no_far_band_when_misses_overlap_near_hits():
    frame, _ = synthetic_access()
    beyond = (frame["footprint_bytes"] >= 2 * DEVICE["l2_bytes"]) & (frame["metric"] == "access")
    frame.loc[beyond, "value"] = 250.0
    assert access_bands(frame, DEVICE) is None


def test_footprints_span_one_partition_to_four_l2():
    full = chase_l2.access_footprints(DEVICE)
    l2 = DEVICE["l2_bytes"]
    assert full[0] <= l2 / 4 and full[-1] >= 2 * l2 and any(l2 / 2 < f <= l2 for f in full)
    quick = chase_l2.access_footprints(DEVICE, quick=True)
    assert set(quick) <= set(full) and len(quick) == 3 and access_bands(synthetic_access()[0][
        lambda m: m["footprint_bytes"].isin(quick)], DEVICE) is not None
    assert all(f % 128 == 0 for f in full)


def test_walker_checks_the_sink_after_every_launch():
    order = np.array([2, 0, 3, 1])
    walker = chain.ChainWalker(order, 128, 4096, 512)
    assert walker.start() == 4096 + 2 * 128
    walker.advance(5, chain.expected_address(order, 5, 128, 4096))
    assert walker.start() == 4096 + 0 * 128
    with pytest.raises(RuntimeError, match="sink mismatch"):
        walker.advance(1, 4096)


def test_recording_kernel_brackets_each_dependent_load_with_one_clock_read():
    """After each LDG, an STS of the loaded value (it waits for the load) and then a clock read: consecutive
    clock reads bracket exactly one load, and the next load's address is that load's value."""
    cubin, log = compile_cubin("chase.cu")
    usage = resource_usage(log)["chase_cg_record"]
    assert usage["spill_stores"] == usage["stack_bytes"] == 0 and usage["registers"] <= 40
    lines = [re.sub(r"\s+", " ", l.split(";")[0]).strip() for l in sass(cubin)["chase_cg_record"].splitlines()
             if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    body = [l.split(" ", 1)[1] if l.startswith("/*") else l for l in lines]
    clocks = [i for i, l in enumerate(body) if "SR_CLOCKLO" in l]  # the warm walk runs before the first
    ops = [(i, l) for i, l in enumerate(body) if clocks[0] < i < clocks[-1]
           and re.match(r"(LDG|STS |CS2R\.32 \S+, SR_CLOCKLO)", l)]
    timed = [(i, *re.search(r"LDG\.E\.64\.STRONG\.GPU (R\d+), desc\[\w+\]\[(R\d+)\.64\]", l).groups())
             for i, l in ops if l.startswith("LDG")]
    assert len(timed) >= chain.UNROLL
    for (i, dest, _), (j, _, next_addr) in zip(timed, timed[1:]):
        between = [l for k, l in ops if i < k < j]
        assert next_addr == dest, "the next load's address is this load's value"
        assert len(between) >= 2 and between[0] == f"STS [{between[0].split('[')[1].split(']')[0]}], {dest}", between
        assert "SR_CLOCKLO" in between[1], "the clock is read after the store that waits for the load"


def test_misses_split_into_near_and_far_homed_clusters():
    frame, _ = synthetic_access()
    rows = {r["quantity"]: r["value"] for r in hierarchy_rows(frame, DEVICE)}
    # each cluster is two centres: its median lies between them (a median of a two-peaked cluster is not its mean)
    assert min(NEAR_MISS) <= rows["dram.near_latency_cycles"] <= max(NEAR_MISS)
    assert min(FAR_MISS) <= rows["dram.far_latency_cycles"] <= max(FAR_MISS)
    bands = access_bands(frame, DEVICE)
    assert max(NEAR_MISS) + COST < bands["miss_split"] < min(FAR_MISS) + COST


def test_one_broad_miss_cluster_is_not_split():
    from gpuatlas.analysis.l2_partitions import miss_valley

    rng = np.random.default_rng(3)
    assert miss_valley(rng.normal(600, 30, 5000)) is None
    assert miss_valley(np.full(50, 600.0)) is None  # too few to tell
    two = np.concatenate([rng.normal(530, 8, 3000), rng.normal(720, 15, 3000)])
    assert 560 < miss_valley(two) < 680


def test_misses_are_split_even_where_too_few_far_hits_were_recorded():
    frame, _ = synthetic_access(far_share=0.002)
    quantities = {r["quantity"] for r in hierarchy_rows(frame, DEVICE)}
    assert "l2.far_latency_cycles" not in quantities
    assert {"dram.near_latency_cycles", "dram.far_latency_cycles"} <= quantities
