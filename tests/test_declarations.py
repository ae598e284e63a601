"""What each probe declares it derives is true: derive emits, for a probe's own measurements, only quantities
it declares, and every declared quantity is in the vocabulary."""
import pytest

from analysis.derive import derive
from analysis.quantities import QUANTITIES
from fakes import DEVICE, simulated_probes
from probes import runner


def test_every_declared_quantity_is_in_the_vocabulary():
    for probe in simulated_probes():
        assert set(probe.quantities) <= set(QUANTITIES), (probe.id, set(probe.quantities) - set(QUANTITIES))


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_derive_emits_for_each_probe_only_what_it_declares(tmp_path, profile):
    probes = simulated_probes()
    run, meta = runner.new_run(tmp_path, DEVICE, {}, probes, profile, {}, 0, ["test"])
    meta = runner.execute(run, meta, probes, isolate=False)
    measurements = run.read_measurements()
    declared = {p.id: set(p.quantities) for p in probes}
    for probe in probes:
        own = set(derive(meta, measurements[measurements["probe"] == probe.id])["quantity"])
        assert own <= declared[probe.id], (probe.id, own - declared[probe.id])
    together = set(derive(meta, measurements)["quantity"])
    assert together <= set().union(*declared.values()), together - set().union(*declared.values())
