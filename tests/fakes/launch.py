"""The launch overhead (probes/families/launch.py): a fixed interval per launch, less through a graph."""
from __future__ import annotations

from fakes import CLOCK_HZ
from gpuatlas.probes.kit.harness import Sample


def _launch(ctx, mode):
    per = 2e-6 if mode == "plain" else 7e-7
    return [s for r in range(5) for s in (Sample("launch_interval", per, "s", r, CLOCK_HZ, "cuda_event"),
                                           Sample("host_call", per, "s", r, CLOCK_HZ, "perf_counter"))]


#: probe id -> its fake.
FAKES = {"launch.overhead": _launch}
