"""What each probe declares it derives is true: derive emits, for a probe's own measurements, only quantities
it declares, and every declared quantity is in the vocabulary."""
import pandas as pd
import pytest

from analysis.derive import derive
from analysis.quantities import QUANTITIES
from analysis.results import atomic_write_parquet
from fakes import DEVICE, simulated_probes
from probes import runner


def test_every_declared_quantity_is_in_the_vocabulary():
    for probe in simulated_probes():
        assert set(probe.quantities) <= set(QUANTITIES), (probe.id, set(probe.quantities) - set(QUANTITIES))


def simulated_measurements(tmp_path, probes, profile):
    """Every config of every probe one simulated GPU runs, measured into the rows the runner writes
    (``runner.samples_frame``) and read back as a run's measurements.parquet is read: the frame a run of
    ``profile`` gives, without the runner's part file per config (the runner is tested in test_runs)."""
    run, meta = runner.new_run(tmp_path, DEVICE, {}, probes, profile, {}, 0, ["test"])
    ctx = runner.Context(device=DEVICE, budget=runner.Budget.for_profile(profile), seed=meta["seed"])
    cc = tuple(int(x) for x in DEVICE["compute_capability"].split("."))
    frames = [pd.concat([runner.samples_frame(meta, p.id, c, p.func(ctx, **c)) for c in p.configs(DEVICE, profile)],
                        ignore_index=True) for p in probes if runner.skip_reason(p, cc) is None]
    atomic_write_parquet(run.measurements_path, pd.concat(frames, ignore_index=True))
    return meta, run.read_measurements()


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_derive_emits_for_each_probe_only_what_it_declares(tmp_path, profile):
    probes = simulated_probes()
    meta, measurements = simulated_measurements(tmp_path, probes, profile)
    declared = {p.id: set(p.quantities) for p in probes}
    cc = tuple(int(x) for x in DEVICE["compute_capability"].split("."))
    assert set(measurements["probe"]) == {p.id for p in probes if runner.skip_reason(p, cc) is None} != set()
    for probe in probes:
        own = set(derive(meta, measurements[measurements["probe"] == probe.id])["quantity"])
        assert own <= declared[probe.id], (probe.id, own - declared[probe.id])
    together = set(derive(meta, measurements)["quantity"])
    assert together <= set().union(*declared.values()), together - set().union(*declared.values())
