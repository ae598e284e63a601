"""The lecture's claims judged: verdicts follow from the numbers, recomputed figures from measured inputs."""
import pandas as pd
import pytest

from analysis.claims import CLAIMS, judge

DEVICE = {"sm_count": 132, "max_threads_per_sm": 2048, "regs_per_sm": 65536, "smem_per_sm_bytes": 233472,
          "l2_bytes": 60 << 20}


def derived(**values):
    return pd.DataFrame([{"quantity": q, "value": v, "ci_low": v * 0.99, "ci_high": v * 1.01}
                         for q, v in values.items()], columns=["quantity", "value", "ci_low", "ci_high"])


def verdicts(table):
    return dict(zip(table["claim"], table["verdict"]))


def test_every_claim_gets_a_verdict_and_unmeasured_ones_say_what_would_measure_them():
    table = judge(derived(), DEVICE)
    assert len(table) == len(CLAIMS)
    assert set(table["verdict"]) <= {"holds", "deviates", "not measured"}
    unmeasured = table[table["verdict"] == "not measured"]
    assert len(unmeasured) and (unmeasured["reason"] == "not in this run: " + unmeasured["tested by"]).all()


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
            claim.mechanism(Recorder((2.0, 1.0, 3.0)), device)
        tried += [name for name in (d.asked | device.asked) - quantities - properties if name != missing]
        quantities |= d.asked
        properties |= device.asked
    return quantities, properties


def test_every_claim_names_a_vocabulary_quantity_or_a_device_property():
    from analysis.quantities import QUANTITIES
    from fakes import DEVICE as PROPERTIES

    for claim in CLAIMS:
        quantities, properties = names_read(claim)
        assert quantities or properties, f"{claim.text}: reads nothing"
        assert quantities <= set(QUANTITIES), (claim.text, quantities - set(QUANTITIES))
        assert properties <= set(PROPERTIES), (claim.text, properties - set(PROPERTIES))
    empty = judge(derived(), {})
    assert (empty["verdict"] == "not measured").all()


def test_the_vocabulary_check_sees_quantities_inside_composed_claims():
    """Negative control: a misspelt name in a recomputed claim (``first_of``/``product``/``ratio``) is seen."""
    import dataclasses

    from analysis.claims import first_of, product, quantity, ratio
    from analysis.quantities import QUANTITIES

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
