"""An exact host model of what a tensor core computes, for crafted mma operands: the input formats, their
rounding, and a family of accumulator models a probe's outputs can be held against.

Values are Python ``Fraction``s, so every sum is exact until a model rounds it.  The accumulator model, after
Fasi et al. (2021, "Numerical behavior of NVIDIA tensor cores"): the products a_i * b_i are exact; the
accumulator c and a group of ``group`` products are aligned to the largest exponent among them, each kept to
``bits`` significant bits counted from that exponent (``align``: truncated, ``rz``, or to nearest even,
``rne``), summed exactly and rounded to FP32 (``out``); the next group starts from that result.  Subnormal
inputs may be flushed to zero (``flush_in``), and so may subnormal results (``flush_out``).

``crafted_cases`` builds dot products whose exact sums separate the models: the effective bits (c = 2^k plus
or minus 1), the alignment's rounding (2^k plus 3/4), the group size (2^m - 2^m + 1 with the 1 moved along k) and
subnormals in and out.  ``consistent`` keeps the models that reproduce every observed output (it runs ``dot``'s
steps in integers, every value in units of a case's 2^-shift: the same outputs, without a Fraction per step);
``verdict`` judges a claimed accumulator width (e.g. the e8m13 claim for FP8: 13 mantissa bits) against them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

MODES = ("rne", "rz")


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: exponent and mantissa (stored fraction) bits; ``ieee``: the top exponent
    holds infinities and NaNs (OCP FP8 e4m3 keeps it for numbers, and only all-ones is NaN)."""

    exponent_bits: int
    mantissa_bits: int
    ieee: bool = True

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def max_finite(self) -> Fraction:
        top = (1 << self.exponent_bits) - (2 if self.ieee else 1)
        mantissa = (1 << self.mantissa_bits) - (1 if self.ieee else 2)
        return Fraction((1 << self.mantissa_bits) + mantissa) * Fraction(2) ** (top - self.bias - self.mantissa_bits)

    @property
    def min_subnormal(self) -> Fraction:
        return Fraction(2) ** (self.emin - self.mantissa_bits)


FORMATS = {"fp16": Format(5, 10), "bf16": Format(8, 7), "tf32": Format(8, 10), "e4m3": Format(4, 3, ieee=False),
           "e5m2": Format(5, 2), "fp32": Format(8, 23)}
FP32 = FORMATS["fp32"]


def exponent(x: Fraction) -> int:
    """floor(log2 |x|) of a nonzero x, exactly."""
    x = abs(Fraction(x))
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e if Fraction(2) ** e <= x else e - 1


def round_quantum(x: Fraction, quantum: Fraction, mode: str) -> Fraction:
    """x to a multiple of ``quantum``: to nearest, ties to even (``rne``), or toward zero (``rz``)."""
    q = Fraction(x) / quantum
    whole = q.numerator // q.denominator  # floor
    if mode == "rz":
        whole += 1 if q < 0 and whole != q else 0
    elif mode == "rne":
        rest = q - whole
        whole += 1 if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2) else 0
    else:
        raise ValueError(f"rounding mode {mode!r}: one of {MODES}")
    return whole * quantum


def round_to(x: Fraction, fmt: Format, mode: str = "rne", flush: bool = False):
    """x rounded to ``fmt`` (subnormals kept, or flushed to zero with ``flush``); past the largest finite value
    +-inf where the format has infinities and the mode rounds to nearest, else the largest finite value."""
    x = Fraction(x)
    if x == 0:
        return Fraction(0)
    if flush and abs(x) < Fraction(2) ** fmt.emin:
        return Fraction(0)
    e = max(exponent(x), fmt.emin)
    out = round_quantum(x, Fraction(2) ** (e - fmt.mantissa_bits), mode)
    if flush and abs(out) < Fraction(2) ** fmt.emin:
        return Fraction(0)
    if abs(out) > fmt.max_finite:
        if fmt.ieee and mode == "rne":
            return float("inf") if x > 0 else float("-inf")
        return fmt.max_finite if x > 0 else -fmt.max_finite
    return out


def decode(bits: int, fmt: Format):
    """The value of a bit pattern (sign, exponent, mantissa): a Fraction, +-inf or nan."""
    m, e = fmt.mantissa_bits, fmt.exponent_bits
    sign = -1 if bits >> (e + m) & 1 else 1
    biased, mantissa = bits >> m & ((1 << e) - 1), bits & ((1 << m) - 1)
    if biased == (1 << e) - 1 and (fmt.ieee or mantissa == (1 << m) - 1):
        return float("nan") if mantissa or not fmt.ieee else sign * float("inf")
    if biased == 0:
        return sign * mantissa * fmt.min_subnormal
    return sign * Fraction((1 << m) + mantissa) * Fraction(2) ** (biased - fmt.bias - m)


def encode(x: Fraction, fmt: Format) -> int:
    """The bit pattern of a value ``fmt`` holds exactly (ValueError otherwise): what a probe loads."""
    x = Fraction(x)
    if round_to(x, fmt) != x:
        raise ValueError(f"{x} is not a value of this format")
    m, e = fmt.mantissa_bits, fmt.exponent_bits
    sign = (1 << (e + m)) if x < 0 else 0
    x = abs(x)
    if x < Fraction(2) ** fmt.emin:
        return sign | int(x / fmt.min_subnormal)
    ex = exponent(x)
    return sign | (ex + fmt.bias) << m | int(x / Fraction(2) ** (ex - m)) - (1 << m)


@dataclass(frozen=True)
class Accumulator:
    """One hypothesis of how a tensor core sums c + a . b (module docstring)."""

    bits: int  # significant bits kept from the group's largest exponent (the FP32 significand is 24)
    align: str = "rz"
    group: int = 0  # products per alignment group; 0: all of k in one group
    out: str = "rz"
    flush_in: bool = False
    flush_out: bool = False

    @property
    def mantissa_bits(self) -> int:
        """Explicit mantissa bits, as "e8m13" counts them: the significant bits less the leading one."""
        return self.bits - 1

    def dot(self, a, b, c, fmt: Format) -> Fraction:
        """c + sum(a_i b_i) of ``fmt`` operands a, b and an FP32 c, as this model computes it."""
        tiny = Fraction(2) ** fmt.emin

        def kept(v):
            return not (self.flush_in and abs(v) < tiny)

        acc = Fraction(0) if self.flush_in and abs(c) < Fraction(2) ** FP32.emin else Fraction(c)
        products = {i: Fraction(x) * Fraction(y) for i, (x, y) in enumerate(zip(a, b)) if x and y and kept(x)
                    and kept(y)}
        size = self.group or len(a)
        for start in range(0, len(a), size):
            terms = [acc] + [v for i, v in products.items() if start <= i < start + size]
            nonzero = [t for t in terms if t]
            if not nonzero:
                continue
            quantum = Fraction(2) ** (max(exponent(t) for t in nonzero) - self.bits + 1)
            if (len(nonzero) == 1 and nonzero[0] is acc and (acc / quantum).denominator == 1
                    and abs(acc) >= Fraction(2) ** FP32.emin):
                continue  # a normal accumulator alone that the alignment keeps whole: nothing changes
            acc = round_to(sum(round_quantum(t, quantum, self.align) for t in terms), FP32, self.out,
                           self.flush_out)
        return acc


@dataclass(frozen=True)
class Case:
    """One crafted dot product: its operands (values of the input format; c in FP32) and what it tests."""

    name: str
    a: tuple
    b: tuple
    c: Fraction
    tests: str


def _one_at(k: int, index: int, value) -> tuple:
    return tuple(Fraction(value) if i == index else Fraction(0) for i in range(k))


def _product_of(target: Fraction, fmt: Format) -> tuple[Fraction, Fraction] | None:
    """Two values of ``fmt`` (normal, powers of two) whose product is the power of two ``target``."""
    e = exponent(target)
    top = exponent(fmt.max_finite)
    for ea in range(min(top, e - fmt.emin), fmt.emin - 1, -1):
        if fmt.emin <= e - ea <= top:
            return Fraction(2) ** ea, Fraction(2) ** (e - ea)
    return None


def crafted_cases(fmt: Format, k: int, max_bits: int = 26) -> list[Case]:
    """Dot products of length ``k`` whose exact sums separate the accumulator models (module docstring)."""
    one = _one_at(k, 0, 1)
    cases = [Case(f"bits_{j}", one, one, Fraction(2) ** j, f"2^{j} + 1: kept with {j + 1} or more bits")
             for j in range(1, max_bits)]
    cases += [Case(f"cancel_{j}", _one_at(k, 0, -1), one, Fraction(2) ** j,
                   f"2^{j} - 1: kept with {j + 1} or more bits, past FP32's 24 only through its rounding")
              for j in range(1, max_bits)]
    three_quarters = _one_at(k, 0, Fraction(3, 4))
    cases += [Case(f"align_{j}", three_quarters, one, Fraction(2) ** j,
                   f"2^{j} + 3/4: with {j + 1} bits, 2^{j} + 1 to nearest, 2^{j} truncated")
              for j in range(1, max_bits)]
    reach = [m for m in range(2, max_bits) if _product_of(Fraction(2) ** m, fmt)]
    if reach:  # the largest product that is a power of two: the group test needs more than the kept bits
        m = reach[-1]
        pair = _product_of(Fraction(2) ** m, fmt)
        for j in range(2, k):
            a, b = [Fraction(0)] * k, [Fraction(0)] * k
            (a[0], b[0]), (a[1], b[1]), (a[j], b[j]) = pair, (-pair[0], pair[1]), (Fraction(1), Fraction(1))
            cases.append(Case(f"group_{j}", tuple(a), tuple(b), Fraction(0),
                              f"2^{m} - 2^{m} + 1 at k={j}: the 1 survives in a later group than 2^{m}, or with more "
                              f"than {m} bits"))
    small = fmt.min_subnormal
    scale = _product_of(Fraction(2) ** (exponent(small) + fmt.mantissa_bits + 1), fmt)
    cases.append(Case("subnormal_in", _one_at(k, 0, small), _one_at(k, 0, 1), Fraction(0),
                      "the smallest subnormal input times 1: kept or flushed"))
    if scale:
        cases.append(Case("subnormal_in_scaled", _one_at(k, 0, small), _one_at(k, 0, scale[0]), Fraction(0),
                          "the smallest subnormal input times a power of two"))
    cases.append(Case("subnormal_c", _one_at(k, 0, 0), _one_at(k, 0, 0), FP32.min_subnormal * 4,
                      "an FP32 subnormal accumulator input, no products: kept or flushed"))
    tiny_product = _product_of(Fraction(2) ** (FP32.emin - 4), fmt)
    if tiny_product:
        cases.append(Case("subnormal_out", _one_at(k, 0, tiny_product[0]), _one_at(k, 0, tiny_product[1]),
                          Fraction(0), "normal inputs whose product is an FP32 subnormal: kept or flushed"))
    return cases


def hypotheses(k: int, bits=range(10, 27)) -> list[Accumulator]:
    """The grid of models: every bit count, alignment and output rounding, group size dividing k, flushes."""
    groups = [g for g in (1, 2, 4, 8, 16, 32) if g < k and k % g == 0] + [0]
    return [Accumulator(p, align, g, out, fi, fo)
            for p, align, out, g, fi, fo in itertools.product(bits, MODES, MODES, groups, (False, True),
                                                               (False, True))]


def consistent(observed: dict, cases: list[Case], fmt: Format, models: list[Accumulator]) -> list[Accumulator]:
    """The models whose output on every observed case (name -> value) is the one observed."""
    by_name = {case.name: case for case in cases}
    left = list(models)
    names = list(observed)
    for name in [names[i] for i in _bisection(len(names))]:  # one case at a time, halving the models
        value, case = observed[name], by_name[name]
        scaled = _Scaled(case, fmt) if left else None
        left = [m for m in left if _output_is(m, case, scaled, value, fmt)]
    return left


def _output_is(model: Accumulator, case: Case, scaled, value, fmt: Format) -> bool:
    """Whether ``model`` gives ``value`` on ``case``: in integers, or through ``Accumulator.dot`` where the
    integer path does not reach (an output past FP32)."""
    got = scaled.dot(model) if scaled.shift is not None else None
    if got is None:
        return model.dot(case.a, case.b, case.c, fmt) == value
    return Fraction(got, 1 << scaled.shift) == value


class _Scaled:
    """One case as ``Accumulator.dot`` sees it, in integers: every value in units of 2^-shift, the smallest that
    makes c and the exact products a_i b_i whole (their denominators are powers of two; shift None where one is
    not).  The products are model-independent, so they are made once per case, each with its index and whether
    an operand is subnormal (what ``flush_in`` drops)."""

    def __init__(self, case: Case, fmt: Format):
        tiny = Fraction(2) ** fmt.emin
        c = Fraction(case.c)
        exact = [(i, Fraction(x) * Fraction(y), abs(x) < tiny or abs(y) < tiny)
                 for i, (x, y) in enumerate(zip(case.a, case.b)) if x and y]
        denominators = [c.denominator] + [p.denominator for _, p, _ in exact]
        self.k = len(case.a)
        self.shift = None
        if any(d & (d - 1) for d in denominators):
            return
        self.shift = max(d.bit_length() for d in denominators) - 1
        self.c = int(c * (1 << self.shift))
        self.fp32_max = int(FP32.max_finite) << self.shift
        self.c_subnormal = c != 0 and abs(c) < Fraction(2) ** FP32.emin
        self.products = [(i, int(p * (1 << self.shift)), subnormal) for i, p, subnormal in exact]

    def exponent(self, x: int) -> int:
        """floor(log2 |x|) of the value of a nonzero scaled x."""
        return abs(x).bit_length() - 1 - self.shift

    def dot(self, m: Accumulator):
        """``m.dot`` of this case, step for step, in units of 2^-shift; None past FP32's largest finite value (or
        for a rounding mode that is none of MODES), where ``Accumulator.dot`` gives the answer."""
        if m.align not in MODES or m.out not in MODES:
            return None
        acc = 0 if m.flush_in and self.c_subnormal else self.c
        size = m.group or self.k
        groups = {}
        for i, p, subnormal in self.products:
            if not (m.flush_in and subnormal):
                groups.setdefault(i // size, []).append(p)
        g, last = 0, (self.k - 1) // size
        while g <= last:
            terms = groups.get(g, [])
            quantum = max((abs(t).bit_length() for t in (acc, *terms) if t), default=0) - m.bits  # 2^quantum
            if not terms and (not acc or _whole(acc, quantum) and self.exponent(acc) >= FP32.emin):
                # nothing to add, or a normal accumulator alone that the alignment keeps whole: nothing changes
                # until the next group with a product
                g = min((h for h in groups if h > g), default=last + 1)
                continue
            total = _round_int(acc, quantum, m.align) + sum(_round_int(t, quantum, m.align) for t in terms)
            acc = self.to_fp32(total, m.out, m.flush_out)
            if acc is None:
                return None
            g += 1
        return acc

    def to_fp32(self, x: int, mode: str, flush: bool):
        """``round_to(x, FP32, mode, flush)`` of a scaled x; None past the largest finite value."""
        if x == 0 or flush and self.exponent(x) < FP32.emin:
            return 0
        out = _round_int(x, max(self.exponent(x), FP32.emin) - FP32.mantissa_bits + self.shift, mode)
        return None if abs(out) > self.fp32_max else out


def _whole(x: int, quantum: int) -> bool:
    """Whether x is a multiple of 2^quantum."""
    return quantum <= 0 or not x & ((1 << quantum) - 1)


def _round_int(x: int, quantum: int, mode: str) -> int:
    """``round_quantum`` of integers: x to a multiple of 2^quantum (exact where quantum <= 0)."""
    if quantum <= 0:
        return x
    whole, rest = x >> quantum, x & ((1 << quantum) - 1)  # floor, and what it drops
    if mode == "rz":
        whole += x < 0 and rest != 0
    else:
        half = 1 << (quantum - 1)
        whole += rest > half or (rest == half and whole & 1)
    return whole << quantum


def _bisection(n: int) -> list[int]:
    """0..n-1 in the order a bisection visits them (middle, then the quarters, ...): run over a sweep of
    thresholds, each case halves the models still in."""
    order, spans = [], [(0, n)]
    while spans:
        lo, hi = spans.pop(0)
        if lo < hi:
            mid = (lo + hi) // 2
            order.append(mid)
            spans += [(lo, mid), (mid + 1, hi)]
    return order


def verdict(models: list[Accumulator], claimed_mantissa_bits: int) -> str:
    """``holds`` if every consistent model keeps the claimed mantissa bits, ``refuted`` if none does, else
    ``undecided``; ``no model fits`` if the outputs match no model of the grid."""
    if not models:
        return "no model fits"
    kept = {m.mantissa_bits for m in models}
    if kept == {claimed_mantissa_bits}:
        return "holds"
    return "refuted" if claimed_mantissa_bits not in kept else "undecided"


def summary(models: list[Accumulator]) -> dict:
    """One numerics-table row from the consistent models: each property's value, or ``a|b`` where the cases
    leave it undecided; empty if no model fits."""
    if not models:
        return {}
    fields = {"mantissa_bits": lambda m: m.mantissa_bits, "alignment": lambda m: m.align,
              "group": lambda m: m.group or "k", "output_rounding": lambda m: m.out,
              "subnormal_inputs": lambda m: "flushed" if m.flush_in else "kept",
              "subnormal_outputs": lambda m: "flushed" if m.flush_out else "kept"}
    return {name: "|".join(str(v) for v in sorted({get(m) for m in models}, key=str)) for name, get in fields.items()}
