"""The exact host model of tensor-core numerics: formats against numpy's IEEE half precision and the formats'
definitions, known sums of the accumulator models, and the crafted cases recovering a known accumulator."""
from fractions import Fraction

import numpy as np
import pytest

from gpuatlas.analysis.numerics import (
    FORMATS,
    MODES,
    Accumulator,
    Case,
    consistent,
    crafted_cases,
    decode,
    encode,
    exponent,
    hypotheses,
    round_to,
    summary,
    verdict,
)

F = Fraction
K = {"fp16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32}


@pytest.mark.parametrize("name, largest, smallest", [
    ("fp16", F(65504), F(2) ** -24), ("bf16", (2 - F(2) ** -7) * F(2) ** 127, F(2) ** -133),
    ("tf32", (2 - F(2) ** -10) * F(2) ** 127, F(2) ** -136), ("e4m3", F(448), F(2) ** -9),
    ("e5m2", F(57344), F(2) ** -16), ("fp32", (2 - F(2) ** -23) * F(2) ** 127, F(2) ** -149)])
def test_the_formats_range_is_their_definitions(name, largest, smallest):
    fmt = FORMATS[name]
    assert (fmt.max_finite, fmt.min_subnormal) == (largest, smallest)
    assert decode(encode(largest, fmt), fmt) == largest and decode(encode(smallest, fmt), fmt) == smallest


def test_every_fp16_pattern_decodes_as_numpy_reads_it():
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    values = patterns.view(np.float16).astype(np.float64)
    for bits, want in zip(patterns.tolist(), values.tolist()):
        got = decode(bits, FORMATS["fp16"])
        assert (np.isnan(want) and np.isnan(float(got))) or float(got) == want, bits


def test_rounding_to_fp16_is_numpys_round_to_nearest_even():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 5, 3000),
                        (rng.integers(0, 1 << 12, 500) + 0.5) * 2.0 ** -24])  # ties among the subnormals
    for value in x.tolist():
        assert float(round_to(F(value), FORMATS["fp16"])) == float(np.float16(value)), value


def test_e4m3_has_no_infinity_and_one_nan_per_sign():
    fmt = FORMATS["e4m3"]
    finite = [decode(b, fmt) for b in range(256)]
    nans = [b for b, v in zip(range(256), finite) if isinstance(v, float) and np.isnan(v)]
    assert nans == [0x7F, 0xFF] and not any(v in (float("inf"), float("-inf")) for v in finite)
    assert round_to(F(10000), fmt) == 448  # no infinity: the largest finite value
    assert round_to(F(10 ** 6), FORMATS["e5m2"]) == float("inf")


def test_rounding_modes_on_known_ties():
    fp16 = FORMATS["fp16"]
    assert round_to(1 + F(2) ** -11, fp16, "rne") == 1  # a tie goes to the even neighbour
    assert round_to(1 + 3 * F(2) ** -11, fp16, "rne") == 1 + F(2) ** -9
    assert round_to(1 + 3 * F(2) ** -12, fp16, "rz") == 1
    assert round_to(-(1 + 3 * F(2) ** -12), fp16, "rz") == -1  # toward zero from below too
    assert round_to(F(2) ** -16, fp16, flush=True) == 0 and round_to(F(2) ** -16, fp16) == F(2) ** -16


def test_the_accumulator_keeps_its_bits_from_the_largest_exponent():
    one = (F(1),) + (F(0),) * 7
    fp16 = FORMATS["fp16"]
    assert Accumulator(24).dot(one, one, F(2) ** 23, fp16) == F(2) ** 23 + 1
    assert Accumulator(23).dot(one, one, F(2) ** 23, fp16) == F(2) ** 23  # the 1 falls below the 23 bits
    three_quarters = (F(3, 4),) + (F(0),) * 7
    assert Accumulator(11, "rz").dot(three_quarters, one, F(2) ** 10, fp16) == F(2) ** 10
    assert Accumulator(11, "rne").dot(three_quarters, one, F(2) ** 10, fp16) == F(2) ** 10 + 1
    # grouping: 2^20 - 2^20 + 1 with 16 bits loses the 1 only where it shares a group with 2^20
    a = [F(2) ** 10, -(F(2) ** 10), F(0), F(0), F(1), F(0), F(0), F(0)]
    b = [F(2) ** 10, F(2) ** 10, F(0), F(0), F(1), F(0), F(0), F(0)]
    assert Accumulator(16, group=8).dot(a, b, F(0), fp16) == 0
    assert Accumulator(16, group=4).dot(a, b, F(0), fp16) == 1


@pytest.mark.parametrize("name, truth", [
    ("e4m3", Accumulator(14, "rz", 4, "rz")), ("e5m2", Accumulator(14, "rne", 8, "rz", flush_out=True)),
    ("fp16", Accumulator(25, "rz", 0, "rz")), ("bf16", Accumulator(24, "rz", 8, "rne", flush_in=True))])
def test_the_crafted_cases_recover_a_known_accumulator(name, truth):
    fmt, k = FORMATS[name], K[name]
    cases = crafted_cases(fmt, k)
    observed = {c.name: truth.dot(c.a, c.b, c.c, fmt) for c in cases}
    left = consistent(observed, cases, fmt, hypotheses(k, bits=range(12, 27)))
    assert truth in left
    row = summary(left)
    assert row["mantissa_bits"] == str(truth.mantissa_bits) and row["alignment"] == truth.align
    assert row["subnormal_outputs"] == ("flushed" if truth.flush_out else "kept")
    if truth.bits <= 24:  # the group test reaches past these bits
        assert row["group"] == str(truth.group or "k")


def test_the_e8m13_claim_is_judged_from_the_outputs():
    fmt, k = FORMATS["e4m3"], K["e4m3"]
    cases = crafted_cases(fmt, k)
    grid = hypotheses(k, bits=(12, 13, 14, 15, 16, 23))

    def judged(truth):
        return verdict(consistent({c.name: truth.dot(c.a, c.b, c.c, fmt) for c in cases}, cases, fmt, grid), 13)

    assert judged(Accumulator(14)) == "holds"
    assert judged(Accumulator(23)) == "refuted"
    # negative control: an output no model of the grid gives is reported, not forced onto the nearest model
    observed = {c.name: Accumulator(14).dot(c.a, c.b, c.c, fmt) for c in cases}
    observed["bits_3"] += 1
    assert verdict(consistent(observed, cases, fmt, grid), 13) == "no model fits"
    assert verdict([Accumulator(14), Accumulator(15)], 13) == "undecided"



@pytest.mark.parametrize("name", sorted(K))
def test_consistent_keeps_exactly_the_models_whose_dot_gives_every_output(name):
    """``consistent`` (integer arithmetic) against the models' own Fraction ``dot``: random models, random
    cases (operands of either sign, a fifth subnormal, sparse and dense; FP32 accumulators from subnormal to
    2^60) and the outputs of one of the models, one of them moved by an FP32 unit so that the model no longer fits."""
    fmt, k = FORMATS[name], K[name]
    e, m = fmt.exponent_bits, fmt.mantissa_bits
    rng = np.random.default_rng(sum(map(ord, name)))

    def operand():
        biased = 0 if rng.random() < 0.2 else int(rng.integers(1, min(fmt.bias + 20, (1 << e) - 1)))
        return decode(int(rng.integers(2)) << (e + m) | biased << m | int(rng.integers(1 << m)), fmt)

    cases = []
    for n in range(16):
        a, b = [F(0)] * k, [F(0)] * k
        for i in rng.choice(k, size=k if n % 4 == 0 else int(rng.integers(0, 4)), replace=False).tolist():
            a[i], b[i] = operand(), operand()
        c = round_to(F(float(rng.standard_normal())) * F(2) ** int(rng.integers(-150, 60)), FORMATS["fp32"])
        cases.append(Case(f"case_{n}", tuple(a), tuple(b), c, "random"))
    groups = [g for g in (1, 2, 4, 8, 16) if g < k] + [0]
    models = list(dict.fromkeys(
        Accumulator(int(rng.integers(6, 29)), str(rng.choice(MODES)), int(rng.choice(groups)), str(rng.choice(MODES)),
                    bool(rng.integers(2)), bool(rng.integers(2))) for _ in range(80)))
    outputs = {mo: {c.name: mo.dot(c.a, c.b, c.c, fmt) for c in cases} for mo in models}
    for truth in models[:3]:
        for moved in (None, cases[int(rng.integers(len(cases)))].name):
            observed = dict(outputs[truth])
            if moved:
                observed[moved] += F(2) ** (exponent(observed[moved]) - 23) if observed[moved] else F(2) ** -149
            want = [mo for mo in models if outputs[mo] == observed]
            assert consistent(observed, cases, fmt, models) == want
            assert (truth in want) == (moved is None)


def test_an_output_past_fp32_is_infinite_to_nearest_and_the_largest_value_toward_zero():
    fmt, k = FORMATS["bf16"], K["bf16"]
    big = (F(0),) * (k - 1) + (F(2) ** 100,)  # in the last group, so that no later group adds to an infinity
    case, grid = Case("past_fp32", big, big, F(0), "2^200"), hypotheses(k)
    assert consistent({case.name: float("inf")}, [case], fmt, grid) == [m for m in grid if m.out == "rne"]
    largest = FORMATS["fp32"].max_finite
    assert consistent({case.name: largest}, [case], fmt, grid) == [m for m in grid if m.out == "rz"]
