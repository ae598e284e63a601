"""The SM clock (probes/families/clock.py): the simulated GPU's clock, every repeat."""
from __future__ import annotations

from fakes import CLOCK_HZ
from gpuatlas.probes.kit.harness import Sample


def _clock(ctx, busy_sms):
    return [Sample("sm_clock", CLOCK_HZ, "Hz", r, CLOCK_HZ, "globaltimer") for r in range(5)]


#: probe id -> its fake.
FAKES = {"clock.sm": _clock}
