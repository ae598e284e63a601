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


@pytest.fixture(scope="module", params=["quick", "full"])
def measured(request, tmp_path_factory):
    """``(meta, measurements)`` of every simulated probe in each profile, made once for this file."""
    return simulated_measurements(tmp_path_factory.mktemp(request.param), simulated_probes(), request.param)


@pytest.mark.parametrize("probe", simulated_probes(), ids=lambda probe: probe.id)
def test_derive_emits_for_each_probe_only_what_it_declares(measured, probe):
    meta, measurements = measured
    own = set(derive(meta, measurements[measurements["probe"] == probe.id])["quantity"])
    assert own <= set(probe.quantities), own - set(probe.quantities)


def test_derive_emits_for_all_probes_together_only_what_they_declare(measured):
    meta, measurements = measured
    probes = simulated_probes()
    cc = tuple(int(x) for x in DEVICE["compute_capability"].split("."))
    assert set(measurements["probe"]) == {p.id for p in probes if runner.skip_reason(p, cc) is None} != set()
    declared = set().union(*(p.quantities for p in probes))
    together = set(derive(meta, measurements)["quantity"])
    assert together and together <= declared, together - declared
