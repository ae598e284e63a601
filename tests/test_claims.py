"""The lecture's claims judged: verdicts follow from the numbers, recomputed figures from measured inputs."""
import pandas as pd
import pytest

from gpuatlas.analysis.claims import CLAIMS, judge

DEVICE = {"sm_count": 132, "max_threads_per_sm": 2048, "regs_per_sm": 65536, "smem_per_sm_bytes": 233472,
          "l2_bytes": 60 << 20, "warp_size": 32, "max_threads_per_block": 1024, "max_blocks_per_sm": 32,
          "total_memory_bytes": 141 << 30, "memory_clock_hz": 3.2e9, "memory_bus_bits": 6144}


def derived(ci=0.01, **values):
    """A derived table of ``values``, each with a CI of +-``ci`` of it."""
    return pd.DataFrame([{"quantity": q, "value": v, "ci_low": v * (1 - ci), "ci_high": v * (1 + ci)}
                         for q, v in values.items()], columns=["quantity", "value", "ci_low", "ci_high"])


def verdicts(table):
    return dict(zip(table["claim"], table["verdict"]))


def test_every_claim_gets_a_verdict_and_unmeasured_ones_say_what_would_measure_them():
    table = judge(derived(), DEVICE)
    assert len(table) == len(CLAIMS)
    assert set(table["verdict"]) <= {"holds", "deviates", "undecided", "cannot be tested", "not measured"}
    for _, row in table[table["verdict"] == "not measured"].iterrows():
        assert row["reason"].startswith(("not measured in this run: needs ", "not in this run: ")), row["reason"]


def test_hbm_latency_claim_deviates_with_the_mechanism_and_holds_near_500():
    far = verdicts(judge(derived(**{"dram.latency_cycles": 620.0}), DEVICE))
    assert far["HBM latency ~500 cycles"] == "deviates"
    near = verdicts(judge(derived(**{"dram.latency_cycles": 520.0}), DEVICE))
    assert near["HBM latency ~500 cycles"] == "holds"


@pytest.mark.parametrize("block, predicted", [(64, "1/16"), (32, "1/8")])
def test_strided_claim_names_the_run_s_own_fetch_block(block, predicted):
    table = judge(derived(**{"coalescing.efficiency_stride32_fp32": 0.054, "l2.dram_fetch_bytes": float(block)}),
                  DEVICE).set_index("claim")
    reason = table.loc["fp32 at stride >= 32 moves 1/32 useful bytes", "reason"]
    assert f"{block}-byte blocks" in reason and f"{predicted} predicted" in reason and "measured 1/18.5" in reason
    without = judge(derived(**{"coalescing.efficiency_stride32_fp32": 0.054}), DEVICE).set_index("claim")
    assert "fetch block" in without.loc["fp32 at stride >= 32 moves 1/32 useful bytes", "reason"]


def test_device_claims_use_the_driver_properties():
    table = judge(derived(), DEVICE).set_index("claim")
    assert table.loc["132 SMs", "verdict"] == "holds"
    assert table.loc["2,048 threads (64 warps) per SM", "verdict"] == "holds"
    assert table.loc["256 KB of registers per SM", "verdict"] == "holds"
    assert table.loc["228 KB of shared memory per SM", "verdict"] == "holds"
    assert judge(derived(), {**DEVICE, "sm_count": 108}).set_index("claim").loc["132 SMs", "verdict"] == "deviates"


def test_littles_law_figures_are_recomputed_from_measured_inputs():
    # the lecture's own inputs (3,350 GB/s, 500 cycles at 1.8 GHz) must reproduce its 0.93 MB and 55 warps
    table = judge(derived(**{"dram.read_bandwidth_bytes_per_s": 3.35e12, "dram.latency_ns": 500 / 1.8e9,
                             "dram.read_bytes_per_clk_sm": 3.35e12 / 132 / 1.8e9}), DEVICE).set_index("claim")
    assert float(table.loc["~0.93 MB in flight saturates HBM", "ratio"]) == pytest.approx(1.0, abs=0.01)
    assert float(table.loc["~55 warps per SM, one 128-B load each", "ratio"]) == pytest.approx(1.0, abs=0.01)
    assert float(table.loc["one SM's fair share of HBM is 14.1 B/cycle", "ratio"]) == pytest.approx(1.0, abs=0.01)


class Recorder(dict):
    """Answers every key but ``absent`` with ``value``, and records the keys asked for."""

    def __init__(self, value, absent=()):
        super().__init__()
        self.value, self.absent, self.asked = value, set(absent), set()

    def __contains__(self, key):
        self.asked.add(key)
        return key not in self.absent

    def __getitem__(self, key):
        self.asked.add(key)
        if key in self.absent:
            raise KeyError(key)
        return self.value

    def get(self, key, default=None):
        return self[key] if key not in self.absent else (self.asked.add(key), default)[1]


def names_read(claim) -> tuple[set, set]:
    """The derived quantities and the device properties a claim's measure and mechanism read, with each
    name it reads also taken away in turn, so the fallbacks of ``first_of`` are read too."""
    quantities, properties, tried = set(), set(), [None]
    while tried:
        missing = tried.pop()
        d, device = Recorder((2.0, 1.0, 3.0), {missing}), Recorder(2.0, {missing})
        try:
            measured = claim.measure(d, device)
        except KeyError:  # read without asking whether the run has it: fine when the name is taken away
            assert missing is not None, claim.text
        else:
            assert missing is not None or measured is not None, claim.text
        if callable(claim.mechanism):
            try:
                claim.mechanism(Recorder((2.0, 1.0, 3.0), {missing}), device)
            except KeyError:  # a mechanism says less without a name it reads: fine when it is taken away
                assert missing is not None, claim.text
        tried += [name for name in (d.asked | device.asked) - quantities - properties if name != missing]
        quantities |= d.asked
        properties |= device.asked
    return quantities, properties


def test_every_claim_names_a_vocabulary_quantity_or_a_device_property():
    from gpuatlas.analysis.quantities import QUANTITIES
    from fakes import DEVICE as PROPERTIES

    for claim in CLAIMS:
        if claim.untestable or claim.kind == "reference" or getattr(claim.measure, "inputs", None) == ():  # says why, published data, or the lecture's arithmetic
            continue
        quantities, properties = names_read(claim)
        assert quantities or properties, f"{claim.text}: reads nothing"
        assert quantities <= set(QUANTITIES), (claim.text, quantities - set(QUANTITIES))
        assert properties <= set(PROPERTIES), (claim.text, properties - set(PROPERTIES))
    empty = judge(derived(), {}).set_index("id")
    # with no run and no device, only the lecture's own arithmetic, references and untestable rows are judged
    unmeasured = {c.id for c in CLAIMS if c.kind != "reference" and not c.untestable
                  and getattr(c.measure, "inputs", True) != ()}
    assert (empty.loc[sorted(unmeasured), "verdict"] == "not measured").all()


def test_the_vocabulary_check_sees_quantities_inside_composed_claims():
    """Negative control: a misspelt name in a recomputed claim (``first_of``/``product``/``ratio``) is seen."""
    import dataclasses

    from gpuatlas.analysis.claims import first_of, product, quantity, ratio
    from gpuatlas.analysis.quantities import QUANTITIES

    for measure in (first_of(quantity("littles.bytes_in_flight"), product("dram.read_bandwidth", "dram.latency_ns")),
                    ratio("tc.bf16.peak_flops", "fp32.peak_flop")):
        claim = dataclasses.replace(CLAIMS[0], measure=measure)
        assert names_read(claim)[0] - set(QUANTITIES)
    quantities, _ = names_read(dataclasses.replace(CLAIMS[0], measure=lambda d, dev: d["no.such_quantity"]))
    assert quantities == {"no.such_quantity"}


def test_on_chip_total_is_recomputed_from_the_device():
    table = judge(derived(), {**DEVICE, "sm_count": 132, "regs_per_sm": 65536, "smem_per_sm_bytes": 228 * 1024,
                              "l2_bytes": 50_000_000}).set_index("claim")
    # the lecture's own H100 inputs give its 114 MB and 118x
    assert table.loc["on-chip total ~114 MB (registers + shared memory + L2)", "verdict"] == "holds"
    assert table.loc["a 7B model's 13.5 GB is 118x the on-chip total", "verdict"] == "holds"


H100 = {"sm_count": 132, "max_threads_per_sm": 2048, "regs_per_sm": 65536, "smem_per_sm_bytes": 228 << 10,
        "l2_bytes": 50 << 20, "warp_size": 32, "max_threads_per_block": 1024, "max_blocks_per_sm": 32,
        "total_memory_bytes": 85_000_000_000, "memory_clock_hz": 2.619e9, "memory_bus_bits": 5120}


def by_id(table):
    return table.set_index("id")


def test_the_lectures_sizes_are_its_units_of_the_drivers_binary_counts():
    """An H100's driver reports a 50 MiB L2 and 228 KiB of shared memory per SM: in the lecture's units (KB and MB
    of 10^3 and 10^6 B, the datasheet's binary counts read as decimal ones) every size of its table holds."""
    table = by_id(judge(derived(), H100))
    for claim in ("7.3.l2_capacity", "7.1.register_file_chip", "7.3.smem_chip", "7.3.on_chip",
                  "7.3.weights_over_on_chip", "7.3.hbm_capacity", "7.3.hbm_pins"):
        assert table.loc[claim, "verdict"] == "holds", (claim, table.loc[claim, "measured"])
    assert table.loc["7.3.l2_capacity", "units"].startswith("KB = 10^3 B, MB = 10^6 B")
    assert table.loc["7.3.l2_capacity", "lecture"] == "50 MB" and table.loc["7.3.l2_capacity", "measured"] == "50 MB"
    # negative controls: another part's sizes do not hold
    other = by_id(judge(derived(), {**H100, "l2_bytes": 40 << 20, "smem_per_sm_bytes": 164 << 10}))
    assert other.loc["7.3.l2_capacity", "verdict"] == "deviates"
    assert other.loc["7.3.smem_chip", "verdict"] == "deviates"


def test_each_tensor_core_dtype_is_judged_against_its_own_number():
    table = by_id(judge(derived(**{"tc.bf16.peak_flops": 980e12, "tc.fp8.peak_flops": 0.87 * 1979e12,
                                   "dram.read_bandwidth_bytes_per_s": 3.35e12}), DEVICE))
    assert table.loc["7.7.bf16_peak", "verdict"] == "holds"
    assert table.loc["7.7.fp8_peak", "verdict"] == "deviates"  # the best dtype holding does not carry FP8
    assert "tc.fp8.peak_flops" in table.loc["7.7.fp8_peak", "tested by"] or "FP8" in table.loc["7.7.fp8_peak",
                                                                                                 "tested by"]
    full = by_id(judge(derived(**{"tc.fp8.peak_flops": 1979e12, "dram.read_bandwidth_bytes_per_s": 3.35e12}),
                       DEVICE))
    assert full.loc["7.7.fp8_peak", "verdict"] == "holds" and full.loc["7.7.fp8_ridge", "verdict"] == "holds"


def test_500_plus_is_quoted_and_judged_as_at_least_about_500():
    far = by_id(judge(derived(**{"dram.latency_cycles": 630.0}), DEVICE))
    assert far.loc["7.3.hbm_latency_500plus", "verdict"] == "holds"
    assert far.loc["7.3.hbm_latency", "verdict"] == "deviates"  # the table's plain "~500" is another claim
    assert "~500+ cycles" in far.loc["7.3.hbm_latency_500plus", "quote"]
    assert "from 400 cycles up" in far.loc["7.3.hbm_latency_500plus", "tolerance"]
    short = by_id(judge(derived(**{"dram.latency_cycles": 350.0}), DEVICE))
    assert short.loc["7.3.hbm_latency_500plus", "verdict"] == "deviates"


def test_278_ns_follows_the_cold_path_chase_in_seconds():
    holds = by_id(judge(derived(**{"dram.latency_ns": 300e-9, "dram.latency_tlb_miss_ns": 900e-9}), DEVICE))
    assert holds.loc["7.3.hbm_latency_ns", "verdict"] == "holds"
    biased = by_id(judge(derived(**{"dram.latency_ns": 420e-9}), DEVICE))
    assert biased.loc["7.3.hbm_latency_ns", "verdict"] == "deviates"
    assert "≈ 278 ns" in holds.loc["7.3.hbm_latency_ns", "quote"] and "(≈)" in holds.loc["7.3.hbm_latency_ns",
                                                                                          "tolerance"]


def test_43_percent_is_not_judged_against_a_different_tile():
    """The lecture's 43% is BLOCK 256 with BLOCK_K 64; the probe's BLOCK_K = BLOCK tile is not like for like,
    even when its number happens to match."""
    row = by_id(judge(derived(**{"roofline.tiled_fraction_of_peak": 0.43}), DEVICE)).loc["7.8.tiled_fraction"]
    assert row["verdict"] == "cannot be tested" and "BLOCK_K 64" in row["reason"] and row["ratio"] == "1"


def test_the_pure_lds_chase_is_not_judged_against_index_computing_chases():
    row = by_id(judge(derived(**{"smem.latency_cycles": 23.0}), DEVICE)).loc["7.3.smem_latency"]
    assert row["verdict"] == "cannot be tested" and "pure LDS" in row["reason"]


def test_exercise_3_says_it_compares_implementations():
    row = by_id(judge(derived(**{"smem.column_read_recovery": 4.4}), DEVICE)).loc["ex3.recovery"]
    assert "two implementations" in row["tested by"] and row["verdict"] == "deviates"


def test_recomputations_show_their_inputs_and_use_the_lectures_formula():
    # the lecture's own inputs reproduce its arithmetic
    lecture = by_id(judge(derived(**{"dram.read_bandwidth_bytes_per_s": 3.35e12, "tc.bf16.peak_flops": 989e12,
                                     "launch.overhead_s": 5e-6, "launch.graph_overhead_s": 1e-6}), DEVICE))
    for claim in ("7.3.decode_floor", "7.8.naive_4096", "7.8.floor_4096", "7.8.block128_4096", "7.8.ridge_block",
                  "7.8.tiling_ceiling", "7.10.unfused_time", "7.10.fused_time", "7.10.activation_time",
                  "7.10.launches", "7.7.tile_idle", "7.8.naive_fraction", "7.4.decode_fraction"):
        assert lecture.loc[claim, "verdict"] == "holds", (claim, lecture.loc[claim, "measured"])
    assert "dram.read_bandwidth_bytes_per_s = 3.35 TB/s" in lecture.loc["7.3.decode_floor", "inputs"]
    assert "launch.graph_overhead_s = 1 us" in lecture.loc["7.10.launches", "inputs"]
    # negative control: a GPU with faster HBM moves them
    fast = by_id(judge(derived(**{"dram.read_bandwidth_bytes_per_s": 4.8e12}), DEVICE))
    assert fast.loc["7.3.decode_floor", "verdict"] == "deviates"
    assert fast.loc["7.3.decode_floor", "figure"] == "bandwidth-footprint.svg"


def test_the_reference_ratios_come_from_the_reference_data():
    table = by_id(judge(derived(), {}))
    for claim in ("7.13.compute_ratio", "7.13.bandwidth_ratio", "7.13.ridge_ratio"):
        assert table.loc[claim, "kind"] == "reference" and "ref:h100-sxm:" in table.loc[claim, "inputs"]
        assert table.loc[claim, "verdict"] in ("holds", "deviates")


def test_deviations_link_to_a_report_figure_and_the_summary_counts_them():
    from gpuatlas.analysis.claims import summary
    from gpuatlas.analysis.report_figures import declared_figures

    stems = {f.stem for f in declared_figures()}
    assert {c.figure for c in CLAIMS if c.figure} <= stems
    table = judge(derived(**{"dram.read_bandwidth_bytes_per_s": 4.8e12, "dram.latency_cycles": 640.0}), DEVICE)
    deviating = table[table["verdict"] == "deviates"]
    measured = deviating[deviating["kind"].isin(["measured", "recomputed"])]
    assert len(measured) > 10 and measured["figure"].str.endswith(".svg").all()
    assert (deviating["figure"] != "").all()
    assert (table.loc[table["verdict"] != "deviates", "figure"] == "").all()
    counts = summary(table).set_index("section")
    assert counts.loc["all", "deviates"] == len(deviating)
    assert counts.drop("all").sum().tolist() == counts.loc["all"].tolist()
    assert list(table["section"]).index("§7.3") < list(table["section"]).index("§7.10")  # lecture order


def test_claim_ids_are_unique_and_every_input_is_a_quantity_device_key_or_reference():
    from gpuatlas.analysis.claims import _inputs
    from gpuatlas.analysis.quantities import QUANTITIES

    assert len({c.id for c in CLAIMS}) == len(CLAIMS) and all(c.id for c in CLAIMS)
    assert {c.kind for c in CLAIMS} <= {"measured", "recomputed", "property", "reference"}
    for claim in CLAIMS:
        for name in _inputs(claim):
            assert name in QUANTITIES or name in H100 or (name.startswith("ref:") and name.split(":")[2] in
                                                           QUANTITIES), (claim.id, name)


def test_the_report_groups_claims_by_section_and_links_each_deviation_to_its_figure(tmp_path):
    from gpuatlas.analysis.render import _write_page, claim_sections

    sections = claim_sections(derived(**{"dram.read_bandwidth_bytes_per_s": 4.8e12}), DEVICE)
    assert sections[0][0] == "The lecture's claims, judged" and "cannot be tested" in sections[0][1]
    titles = [title for title, _ in sections[1:]]
    assert titles.index("Claims of §7.3") < titles.index("Claims of §7.10") and len(titles) == len(set(titles))
    page = _write_page("t", sections, tmp_path)
    assert "bandwidth-footprint (not drawn from this run)" in page.read_text()  # the page has no such figure
    assert "[bandwidth-footprint.svg](bandwidth-footprint.svg)" in (tmp_path / "index.md").read_text()


def test_the_index_computing_chase_is_judged_like_for_like_against_30():
    row = by_id(judge(derived(**{"smem.latency_cycles": 23.0, "smem.index_latency_cycles": 30.5}), DEVICE))
    assert row.loc["7.3.smem_latency", "verdict"] == "holds" and row.loc["7.3.smem_latency", "measured"].startswith(
        "30.5")
    off = by_id(judge(derived(**{"smem.latency_cycles": 23.0, "smem.index_latency_cycles": 45.0}), DEVICE))
    assert off.loc["7.3.smem_latency", "verdict"] == "deviates"


def test_43_percent_is_judged_against_the_lectures_own_tile_when_the_run_has_it():
    table = by_id(judge(derived(**{"roofline.tiled_fraction_of_peak": 0.385,
                                   "roofline.lecture_tile_fraction_of_peak": 0.41}), DEVICE))
    assert table.loc["7.8.tiled_fraction", "verdict"] == "holds"
    low = by_id(judge(derived(**{"roofline.lecture_tile_fraction_of_peak": 0.2}), DEVICE))
    assert low.loc["7.8.tiled_fraction", "verdict"] == "deviates" and "spills" in low.loc["7.8.tiled_fraction",
                                                                                           "reason"]


def test_the_490_launch_claim_prefers_the_timed_chain_and_shows_the_graph():
    timed = by_id(judge(derived(**{"launch.chain_490_s": 4.0e-3, "launch.chain_490_graph_s": 0.4e-3,
                                   "launch.overhead_s": 5e-6}), DEVICE)).loc["7.10.launches"]
    assert timed["verdict"] == "deviates" and timed["measured"].startswith("4 ms")  # the chain, not 490 x 5 us
    assert "launch.chain_490_graph_s = 400 us" in timed["inputs"]
    recomputed = by_id(judge(derived(**{"launch.overhead_s": 5e-6}), DEVICE)).loc["7.10.launches"]
    assert recomputed["verdict"] == "holds"


def test_the_wave_claim_holds_at_one_program_per_sm_and_deviates_at_two():
    one = by_id(judge(derived(ci=0, **{"waves.programs_per_wave": 132.0}), DEVICE)).loc["7.8.wave_size"]
    two = by_id(judge(derived(ci=0, **{"waves.programs_per_wave": 264.0}), DEVICE)).loc["7.8.wave_size"]
    assert one["verdict"] == "holds" and two["verdict"] == "deviates" and two["figure"] == "wave-quantization.svg"


def test_the_latency_gap_uses_the_index_computing_chase_when_the_run_has_it():
    both = by_id(judge(derived(**{"dram.latency_cycles": 510.0, "smem.latency_cycles": 23.0,
                                  "smem.index_latency_cycles": 30.0}), DEVICE)).loc["7.3.latency_gap"]
    assert both["verdict"] == "holds" and float(both["ratio"]) == pytest.approx(17 / 17, abs=0.01)
    pure = by_id(judge(derived(**{"dram.latency_cycles": 510.0, "smem.latency_cycles": 23.0}), DEVICE))
    assert pure.loc["7.3.latency_gap", "verdict"] == "deviates"  # 510 / 23 = 22: the pure chase's gap


# -- one precision table, verdicts from intervals -------------------------------------------------------------

def test_every_claims_band_is_its_precision_words_in_the_one_table():
    """No claim sets its own tolerance: its band is PRECISION's rule for its word (its digits: half a unit of
    the digits the lecture prints, which its words show; a few: 2 to 5 of the unit it counts)."""
    import dataclasses
    import math

    from gpuatlas.analysis.claims import PRECISION, band, tolerance
    from gpuatlas.analysis.claims.model import Claim

    assert not {"tolerance", "bounds"} & {f.name for f in dataclasses.fields(Claim)}
    for claim in CLAIMS:
        rule = PRECISION[claim.precision]
        low, high = band(claim)
        if claim.precision == "its digits":
            assert claim.digits in claim.text + "".join(claim.quote), claim.id
            decimals = len(claim.digits.partition(".")[2])
            assert tolerance(claim) == pytest.approx(0.5 * 10 ** -decimals / float(claim.digits)), claim.id
        elif claim.precision == "a few":
            assert (low, high) == (2 * claim.counts, 5 * claim.counts), claim.id
            continue
        else:
            assert not claim.digits and claim.counts == 1, claim.id
            assert tolerance(claim) == rule.tolerance, claim.id
        assert low == pytest.approx(claim.value * (1 - tolerance(claim))), claim.id
        assert math.isinf(high) == (claim.or_more or rule.one_sided), claim.id
        if not math.isinf(high):
            assert high == pytest.approx(claim.value * (1 + tolerance(claim))), claim.id
    # negative control: a word outside the table has no band
    with pytest.raises(KeyError):
        band(dataclasses.replace(CLAIMS[0], precision="~ (25%)"))


def test_the_summary_counts_undecided_and_a_claim_spanning_its_band_is_neither_held_nor_deviating():
    from gpuatlas.analysis.claims import summary

    frame = derived(ci=0)
    frame.loc[0] = ["coalescing.block_bytes", 128.0, 64.0, 128.0]
    row = by_id(judge(frame, DEVICE)).loc["7.6.segment"]
    assert row["verdict"] == "undecided" and "64 B" in row["reason"] and "128 B" in row["reason"]
    assert summary(judge(frame, DEVICE)).set_index("section").loc["all", "undecided"] >= 1
    frame.loc[0] = ["coalescing.block_bytes", 128.0, 128.0, 128.0]  # the same value without the doubt
    assert by_id(judge(frame, DEVICE)).loc["7.6.segment", "verdict"] == "holds"
    frame.loc[0] = ["coalescing.block_bytes", 64.0, 32.0, 64.0]
    assert by_id(judge(frame, DEVICE)).loc["7.6.segment", "verdict"] == "deviates"


@pytest.mark.parametrize("latency_ns", [150, 220, 276, 280, 340, 347, 420])
@pytest.mark.parametrize("spread", [0.0, 0.02, 0.1])
def test_the_chase_rate_and_its_bandwidth_share_one_verdict(latency_ns, spread):
    row = by_id(judge(derived(ci=spread, **{"dram.latency_ns": latency_ns * 1e-9}), DEVICE))
    assert row.loc["7.4.chase_rate", "verdict"] == row.loc["7.4.chase_bandwidth", "verdict"]
    assert row.loc["7.4.chase_rate", "verdict"] != "not measured"


def test_a_quotients_interval_spans_the_corners_of_its_inputs():
    """8 +- 1 over 2 +- 0.2: the naive interval (all inputs low, then all high) is [3.89, 4.09]; the quotient
    can be anywhere in [7/2.2, 9/1.8]."""
    from gpuatlas.analysis.claims.model import calc, interval

    quotient = calc(lambda v: v["a.x"] / v["b.y"], "a.x", "b.y")
    d = {"a.x": (8.0, 7.0, 9.0), "b.y": (2.0, 1.8, 2.2)}
    assert quotient(d, {}) == pytest.approx((4.0, 7 / 2.2, 9 / 1.8))
    naive = (7 / 1.8, 9 / 2.2)
    assert quotient(d, {})[2] - quotient(d, {})[1] > 2 * abs(naive[1] - naive[0])
    assert interval(lambda v: v["a"] * v["b"], {"a": (2.0, 1.0, 3.0), "b": (5.0, 5.0, 5.0)}) == (10.0, 5.0, 15.0)
    # the committed FP8 ridge: wider than its inputs' naive ends allow
    row = by_id(judge(derived(**{"tc.fp8.peak_flops": 1.929e15, "dram.read_bandwidth_bytes_per_s": 4.65e12}),
                      DEVICE)).loc["7.7.fp8_ridge"]
    assert row["measured"].endswith(f"[{1.929e15 * 0.99 / (4.65e12 * 1.01):.4g}, "
                                    f"{1.929e15 * 1.01 / (4.65e12 * 0.99):.4g}]")


def test_the_repro_interval_decides_where_the_run_has_it_and_the_ci_where_it_is_nan():
    frame = derived(**{"sm.schedulers": 4.0}).assign(repro_low=[3.3], repro_high=[4.1])
    row = by_id(judge(frame, DEVICE)).loc["7.2.schedulers"]
    assert row["verdict"] == "undecided" and "repro" in row["reason"] and row["measured"] == "4 [3.3, 4.1]"
    nan = frame.assign(repro_low=[float("nan")], repro_high=[float("nan")])
    assert by_id(judge(nan, DEVICE)).loc["7.2.schedulers", "verdict"] == "holds"


#: Words of the committed run's own part that are false of another part.
def _committed_words():
    import json

    from conftest import COMMITTED_RUN

    device = json.loads((COMMITTED_RUN / "run.json").read_text())["device"]
    top = f"{device['sm_clock_max_hz'] / 1e9:.3g} GHz"
    return device, ("HBM3", device["name"].split()[-1], f"{top} maximum", f"same {device['sm_count']} SMs",
                    f"{device['l2_bytes'] >> 20} MiB L2", "faster", "slower", "larger", "smaller")


@pytest.mark.parametrize("part", ["a100", "rtx-5090"])
def test_every_mechanism_speaks_from_the_parts_own_data(part):
    """The committed run's measurements judged as another part's (the A100 relabel of the issue, an RTX 5090's
    GDDR7 bus): no sentence names the committed part, its memory's generation, its clock or SM count, or a
    direction the data did not decide; a bus narrower than an HBM stack is not called HBM."""
    import json

    from gpuatlas.analysis.claims.mechanisms import in_words
    from gpuatlas.analysis.claims.verdict import intervals
    from conftest import COMMITTED_RUN

    committed, words = _committed_words()
    frame = pd.read_csv(COMMITTED_RUN / "derived.csv")
    fixtures = json.loads((COMMITTED_RUN.parents[1] / "tests/fixtures/devices.json").read_text())
    device = ({**committed, "name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "sm_count": 108,
               "l2_bytes": 40 << 20, "total_memory_bytes": 80 * 10 ** 9, "sm_clock_max_hz": 1.41e9,
               "memory_bus_bits": 5120} if part == "a100" else fixtures["rtx-5090"])
    d = intervals(frame)[0]
    sentences = [in_words(claim.mechanism(d, device) if callable(claim.mechanism) else claim.mechanism, device)
                 for claim in CLAIMS]
    table = judge(frame, device)
    sentences += [*table["reason"], *table["tested by"]]
    for word in words:
        assert not [s for s in sentences if word in s], word
    hbm = [s for s in sentences if "HBM" in s]
    assert (not hbm) if part == "rtx-5090" else hbm
    # negative control: of the committed part itself, the clock's sentence names its own maximum
    from gpuatlas.analysis.claims.mechanisms import clock

    assert words[2] in clock(d, committed) and words[2] not in clock(d, device)
