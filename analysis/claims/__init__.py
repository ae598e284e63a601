"""The lecture's quantitative claims (../shared/lecture/gpu-hardware-lecture.txt), judged against a run.

The lecture describes an H100 SXM.  Claims are judged as mechanisms, not datasheets:

* a claim about a device property (SMs, L2 size) is compared with this GPU's driver-reported property;
* a latency in cycles or a ratio is compared as is (cycles and ratios do not depend on the part);
* a figure the lecture derived from its datasheet inputs (bytes in flight, warps needed, the per-SM share of
  HBM) is recomputed from this run's measured inputs and shown beside the lecture's;
* a claim whose quantity this run did not measure says so, and names what would measure it.

Every number of the lecture's "Numbers worth memorizing" table and of §7.1-7.13 that can be judged is a claim
with an id and a kind -- measured, recomputed (the lecture's formula with this run's inputs, shown in the row),
property (the driver's) or reference (``ref:`` data) -- the lecture's exact words, the unit convention its
number is read in and its precision word, whose one tolerance (``model.PRECISION``) sets the band the claim is
judged against.  A verdict comes from the claim's whole interval (``verdict``); why a GPU deviates is said
from its own data (``mechanisms``).  A number this hardware cannot test says why; a measurement that is not
like for like with the lecture's says so instead of a verdict.

Modules: ``model`` (the claim, the precision table, the measures), ``numbers`` (the lecture's table),
``lecture_a`` (§7.1-7.5), ``lecture_b`` (§7.6-7.13), ``catalogue`` (all of them, in order, with the claims a
family declares beside its analysis: ``CLAIMS`` there), ``mechanisms``, ``verdict``.
"""
from gpuatlas.analysis.claims.catalogue import all_claims
from gpuatlas.analysis.claims.model import PRECISION, Claim, band, first_of, product, quantity, ratio, tolerance
from gpuatlas.analysis.claims.verdict import VERDICTS, _inputs, decide, intervals, judge, summary, tolerance_text

__all__ = ["CLAIMS", "PRECISION", "VERDICTS", "Claim", "_inputs", "all_claims", "band", "decide", "first_of",
           "intervals", "judge", "product", "quantity", "ratio", "summary", "tolerance", "tolerance_text"]


def __getattr__(name: str):
    if name == "CLAIMS":  # every claim: the lecture's and the families', gathered on first use
        return all_claims()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
