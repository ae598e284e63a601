"""TLB levels, the page size and the cold HBM chase, on synthetic data and fake launches (no GPU)."""
import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.miss_latency import last_octave_slope
from gpuatlas.analysis.plateaus import MIN_STEP, fit_staircase
from gpuatlas.analysis.translation import tlb_rows
from gpuatlas.probes.families import chase
from gpuatlas.probes.kit import chain

PAGE = 2 << 20


def staircase(steps: dict, stride=PAGE, noise=0.5, jitter=0.3, seed=0, lo=4 << 20, hi=32 << 30, per_octave=4):
    """Page-stride chase samples: 280 cycles plus each step past its reach (in pages x max(page, stride)),
    seven samples per footprint with per-sample noise and a per-footprint offset (the near/far L2 mix)."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in np.unique(np.geomspace(lo, hi, int(np.log2(hi / lo) * per_octave) + 1).astype(np.int64) // stride
                       * stride):
        level = 280.0 + sum(add for pages, add in steps.items() if f / max(PAGE, stride) > pages)
        offset = rng.normal(0, jitter)
        rows += [dict(probe="chase.tlb", metric="latency", flag="", flavour="cg", stride_bytes=stride,
                      footprint_bytes=int(f), value=level + offset + rng.normal(0, noise)) for _ in range(7)]
    return pd.DataFrame(rows)


def values(rows):
    return {r["quantity"]: r["value"] for r in rows}


def test_a_two_cycle_step_is_found_over_the_noise():
    found = values(tlb_rows(staircase({256: 2.0})))
    assert found["tlb.l1.miss_cycles"] == pytest.approx(2.0, abs=0.6)
    assert np.log2(found["tlb.l1.reach_bytes"] / (256 * PAGE)) == pytest.approx(0, abs=0.3)


def placements(entries: int, ways: int, penalty: float, seed=0, slice_sd=15.0, samples=9, per_octave=2):
    """Page-stride chase samples from first principles, one per placement: each sample throws the chain's pages
    into entries / ways hashed sets (a set with more pages than ways misses on each of them, as an LRU set walked
    cyclically does), and its elements' L2 hits scatter by ``slice_sd`` cycles each (the slices they land in)."""
    rng = np.random.default_rng(seed)
    rows = []
    for f in np.unique(np.geomspace(4 << 20, 32 << 30, int(13 * per_octave) + 1).astype(np.int64) // PAGE * PAGE):
        pages = int(f // PAGE)
        for _ in range(samples):
            crowd = np.bincount(rng.integers(0, entries // ways, pages), minlength=entries // ways)
            missed = crowd[crowd > ways].sum() / pages
            value = 280.0 + penalty * missed + rng.normal(0, slice_sd) / np.sqrt(pages)
            rows.append(dict(probe="chase.tlb", metric="latency", flag="", flavour="cg", stride_bytes=PAGE,
                             footprint_bytes=int(f), value=value))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("ways", [2, 4])
def test_a_ramp_of_hashed_sets_gives_its_entries_and_penalty(ways):
    rows = {r["quantity"]: r for r in tlb_rows(placements(256, ways, 10.0, seed=ways))}
    reach, miss = rows["tlb.l1.reach_bytes"], rows["tlb.l1.miss_cycles"]
    assert reach["value"] / PAGE == pytest.approx(256, rel=0.15)
    assert reach["ci_low"] <= 256 * PAGE <= reach["ci_high"] or abs(reach["value"] / PAGE / 256 - 1) < 0.05
    assert miss["value"] == pytest.approx(10.0, rel=0.1)
    assert "fully associative" not in reach["note"]
    assert "tlb.l2.reach_bytes" not in rows and "tlb.l2.reach_lower_bound_bytes" in rows


def test_a_step_is_told_from_a_ramp():
    """Negative control: a fully associative TLB (one set) steps at its reach, and the fit says so."""
    frame = placements(256, 256, 10.0)
    rows = {r["quantity"]: r for r in tlb_rows(frame)}
    pages = np.unique(frame["footprint_bytes"]) // PAGE
    below, above = pages[pages <= 256].max(), pages[pages > 256].min()
    assert below <= rows["tlb.l1.reach_bytes"]["value"] / PAGE < above, "between the footprints the step lies"
    assert "fully associative" in rows["tlb.l1.reach_bytes"]["note"]


def test_a_ramp_under_one_placement_per_footprint_is_not_trusted():
    """The old probe's samples repeated one placement: scatter between footprints that no sample's spread
    shows.  Its residual scatter then scales the penalty's error, and a 2-cycle ramp is not claimed."""
    frame = placements(256, 2, 2.0, slice_sd=40.0, samples=1)
    frame = frame.loc[frame.index.repeat(7)].reset_index(drop=True)
    frame["value"] += np.random.default_rng(1).normal(0, 0.05, len(frame))
    assert set(values(tlb_rows(frame))) == {"tlb.reach_lower_bound_bytes"}


def test_the_default_step_would_merge_it_away():
    """The 5% minimum step of the memory-level fit cannot see a 2-cycle TLB step (0.7% of 280)."""
    frame = staircase({256: 2.0})
    assert len(fit_staircase(frame["footprint_bytes"], frame["value"], min_step=MIN_STEP).plateaus) == 1


def test_no_step_gives_a_lower_bound_not_a_level():
    for seed in range(5):
        found = values(tlb_rows(staircase({}, seed=seed)))
        assert set(found) == {"tlb.reach_lower_bound_bytes"}, seed


def test_two_levels_are_both_reported():
    found = values(tlb_rows(staircase({16: 4.0, 1024: 30.0}, lo=2 * PAGE)))
    assert found["tlb.l1.miss_cycles"] == pytest.approx(4.0, abs=1.0)
    assert found["tlb.l2.miss_cycles"] == pytest.approx(30.0, abs=1.5)
    assert np.log2(found["tlb.l2.reach_bytes"] / (1024 * PAGE)) == pytest.approx(0, abs=0.3)


def test_the_page_is_the_largest_block_whose_knee_stays_put():
    frames = [staircase({256: 9.0})] + [staircase({256: 9.0}, stride=s, per_octave=2, lo=64 << 20, seed=i + 1)
                                         for i, s in enumerate(chase.PAGE_STRIDES)]
    found = values(tlb_rows(pd.concat(frames, ignore_index=True)))
    assert found["tlb.page_bytes"] == PAGE


def test_a_page_of_four_blocks_is_told_from_a_page_of_one():
    """Negative control: when the knee does not move until 8 MiB blocks, the page is 4 MiB, not 2."""
    def big_page(stride, **kw):
        frame = staircase({}, stride=stride, **kw)
        pages = frame["footprint_bytes"] / np.maximum(2 * PAGE, stride)
        frame.loc[pages > 128, "value"] += 9.0
        return frame

    frames = [big_page(PAGE)] + [big_page(s, per_octave=2, lo=64 << 20, seed=i + 1)
                                  for i, s in enumerate(chase.PAGE_STRIDES)]
    assert values(tlb_rows(pd.concat(frames, ignore_index=True)))["tlb.page_bytes"] == 2 * PAGE


def test_a_reach_that_no_page_explains_leaves_the_page_undecided():
    """Negative control for the page fit: a TLB whose set index aliases at large strides holds 512 MiB with
    blocks up to 4 MiB, only 256 MiB with 8 and 16 MiB blocks, and 16 entries x the block beyond: no page
    predicts a reach that falls, so none is named (the best single page misses by about half an octave)."""
    def reach(stride):
        mib = 1 << 20
        return 512 * mib if stride <= 4 * mib else 256 * mib if stride <= 16 * mib else 16 * stride

    def aliased(stride, **kw):
        frame = staircase({}, stride=stride, **kw)
        frame.loc[frame["footprint_bytes"] > reach(stride), "value"] += 9.0
        return frame

    frames = [aliased(PAGE)] + [aliased(s, per_octave=2, lo=64 << 20, seed=i + 1)
                                for i, s in enumerate(chase.PAGE_STRIDES)]
    row = {r["quantity"]: r for r in tlb_rows(pd.concat(frames, ignore_index=True))}["tlb.page_bytes"]
    assert np.isnan(row["value"]) and row["ci_low"] < row["ci_high"]
    assert "no page explains them" in row["note"]


def test_last_octave_slope():
    f = np.geomspace(1 << 27, 1 << 33, 13)
    flat = pd.DataFrame({"footprint_bytes": f, "value": 650.0})
    rising = pd.DataFrame({"footprint_bytes": f, "value": 650.0 * (f / f[0]) ** np.log2(1.03)})
    assert abs(last_octave_slope(flat)) < 1e-9
    assert last_octave_slope(rising) == pytest.approx(0.03, rel=1e-6)


def test_element_offsets_break_power_of_two_aliasing():
    rng = np.random.default_rng(0)
    offsets = chain.element_offsets(rng, 4096, PAGE)
    assert (offsets % chain.SECTOR_ALIGN == 0).all() and offsets.min() >= 0 and offsets.max() < PAGE
    assert len(np.unique(offsets // 128 % 64)) == 64, "the line-in-page bits take every value"
    assert (chain.element_offsets(rng, 10, 32) == 0).all()


def test_fill_chain_with_offsets_is_one_cycle():
    rng = np.random.default_rng(1)
    order = chain.chain_order(rng, 64)
    offsets = chain.element_offsets(rng, 64, 256)
    words = np.zeros(64 * 256 // 8, dtype=np.uint64)
    chain.fill_chain(words, order, 256, 4096, offsets)
    p, seen = chain.expected_address(order, 0, 256, 4096, offsets), []
    for _ in range(64):
        seen.append(p)
        p = int(words[(p - 4096) // 8])
    assert p == seen[0] and len(set(seen)) == 64
    assert seen[5] == chain.expected_address(order, 5, 256, 4096, offsets)


def test_warm_walk_only_for_chains_that_may_fit_in_l1():
    device = {"smem_per_sm_bytes": 228 << 10}
    assert chain.warm_steps(device, 64 << 10, 512) == 512
    assert chain.warm_steps(device, 64 << 20, 1 << 19) == 0


class _FakeLaunch:
    """A launch that follows a host copy of the chain, counting the addresses it loads."""

    def __init__(self, words, base):
        self.words, self.base, self.loaded = words, base, []
        self.cycles_per_step = 600.0

    def __call__(self, start, warm, steps):
        p = start
        for _ in range(warm + steps):
            self.loaded.append(p)
            p = int(self.words[(p - self.base) // 8])
        return np.array([self.cycles_per_step * steps, self.cycles_per_step * steps / 1.98, p], dtype=np.uint64)


def test_a_cold_path_is_never_revisited(monkeypatch):
    """chase.miss's measurement visits each element of its path at most once, so every access can miss."""
    from gpuatlas.probes.kit.harness import Budget, Context

    made = {}

    def chain_on_host(ctx, footprint_bytes, stride_bytes, order="random"):
        rng = ctx.rng(footprint_bytes, stride_bytes)
        elements = footprint_bytes // stride_bytes
        visit = rng.choice(elements, 4096, replace=False)
        offsets = chain.element_offsets(rng, visit.size, stride_bytes)
        words = np.zeros(elements * stride_bytes // 8, dtype=np.uint64)
        chain.fill_chain(words, visit, stride_bytes, 1 << 20, offsets)
        made["launch"] = _FakeLaunch(words, 1 << 20)
        return words, chain.ChainWalker(visit, stride_bytes, 1 << 20, footprint_bytes, offsets)

    monkeypatch.setattr(chain, "chain_on_gpu", chain_on_host)
    monkeypatch.setattr(chain, "flush_l2", lambda device: None)
    ctx = Context(device={"l2_bytes": 1 << 20, "smem_per_sm_bytes": 1 << 16, "sm_clock_max_hz": 2e9},
                  budget=Budget(min_repeats=5, max_repeats=9, time_s=10))
    samples = chain.measure_chase(ctx, 8 << 20, 128, lambda *a: made["launch"](*a), "clock64", order="path")
    loaded = made["launch"].loaded
    assert len(loaded) == len(set(loaded)), "an element was loaded twice"
    assert sum(s.metric == "latency" for s in samples) >= 5


def test_every_sample_walks_a_new_placement_whole_before_timing(monkeypatch):
    """chase.tlb's samples: each lays the chain afresh (other sectors, other order) and walks it once untimed in
    the same launch, and every launch still ends where its own chain says."""
    from gpuatlas.probes.kit.harness import Budget, Context

    made, launches = {}, []

    def chain_on_host(ctx, footprint_bytes, stride_bytes, order="random"):
        words = np.zeros(footprint_bytes // 8, dtype=np.uint64)
        made["launch"] = _FakeLaunch(words, 1 << 20)
        return words, chain.place_chain(words, 1 << 20, ctx.rng(footprint_bytes, stride_bytes), footprint_bytes,
                                        stride_bytes, order)

    def launch(start, warm, steps):
        launches.append((warm, len(made["launch"].loaded)))
        return made["launch"](start, warm, steps)

    monkeypatch.setattr(chain, "chain_on_gpu", chain_on_host)
    ctx = Context(device={"l2_bytes": 1 << 30, "smem_per_sm_bytes": 1 << 16, "sm_clock_max_hz": 2e9},
                  budget=Budget(min_repeats=5, max_repeats=5, time_s=10, warmup_s=0))
    elements = 64
    samples = chain.measure_chase(ctx, elements * 4096, 4096, launch, "clock64", placements=True)
    assert sum(s.metric == "latency" for s in samples) == 5
    timed = launches[-5:]
    assert all(warm == elements for warm, _ in timed), "a placement is walked whole before its timed steps"
    loaded = made["launch"].loaded
    placed = [frozenset(loaded[at:at + elements]) for _, at in timed]
    assert all(len(p) == elements for p in placed), "the untimed pass visits every element once"
    assert len(set(placed)) == 5, "every sample has its own placement"
    unplaced = chain.measure_chase(ctx, elements * 4096, 4096, launch, "clock64")
    assert launches[-1][0] == 0 and sum(s.metric == "latency" for s in unplaced) == 5


def test_the_reach_note_sets_the_streaming_read_inside_and_past_it():
    frame = placements(256, 2, 10.0)
    streams = pd.DataFrame({"footprint_bytes": np.repeat([256 << 20, 2 << 30], 3),
                            "value": [4.60e12] * 3 + [4.65e12] * 3})
    note = {r["quantity"]: r for r in tlb_rows(frame, streams)}["tlb.l1.reach_bytes"]["note"]
    assert "4.600 TB/s at 256 MiB inside this reach, 4.650 at 2 GiB past it (+1.1%)" in note
    assert "streaming" not in {r["quantity"]: r for r in tlb_rows(frame)}["tlb.l1.reach_bytes"]["note"]
