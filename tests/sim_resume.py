"""Resume a simulated run in-process (tests/test_reliability.py kills this at random)."""
import dataclasses
import sys
import time
from pathlib import Path

import fakes
from gpuatlas.analysis.results import RunDir
from gpuatlas.machinery import runner


def slowed(func):
    """The simulated physics, 20 ms slower per config, so that a kill lands inside a run."""
    def measure(ctx, **params):
        time.sleep(0.02)
        return func(ctx, **params)
    return measure


run = RunDir(Path(sys.argv[1]))
meta = run.read_meta()
probes = {p.id: dataclasses.replace(p, func=slowed(p.func)) for p in fakes.simulated_probes()}
print("resuming", flush=True)  # imported: a kill from now on lands in the run
runner.execute(run, meta, [probes[pid] for pid in meta["probes"]], isolate=False)
