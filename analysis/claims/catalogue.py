"""Every claim, in the lecture's order: the "Numbers worth memorizing" table, then §7.1-7.5 and §7.6-7.13, then
those a family declares beside its analysis (a module-level ``CLAIMS = (Claim(...), ...)`` in a module under
analysis/, found as ``gpuatlas.analysis.family`` finds a family), which the verdicts sort into their sections."""
from __future__ import annotations

import functools

from gpuatlas.analysis.claims.lecture_a import SECTIONS_1_TO_5
from gpuatlas.analysis.claims.lecture_b import SECTIONS_6_TO_13
from gpuatlas.analysis.claims.numbers import NUMBERS
from gpuatlas.analysis.family import declared

#: The lecture's claims kept here, section by section.
LECTURE = NUMBERS + SECTIONS_1_TO_5 + SECTIONS_6_TO_13


@functools.lru_cache(maxsize=None)
def all_claims() -> tuple:
    """LECTURE, then every family's CLAIMS in the modules' name order (gathered on first use: a family module
    imports the claim model, so they cannot be gathered while this package loads); an id given twice is an
    error."""
    claims = LECTURE + tuple(claim for declared_claims in declared("CLAIMS").values() for claim in declared_claims)
    ids = [claim.id for claim in claims]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"claim ids {twice} are declared twice: give each its own")
    return claims

