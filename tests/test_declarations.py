"""What each probe declares it derives is true: derive emits, for a probe's own measurements, only quantities
it declares, and every declared quantity is in the vocabulary."""
import importlib
import os
import sys

import pandas as pd
import pytest

from analysis import repro
from analysis.derive import derive
from analysis.quantities import QUANTITIES
from analysis.results import DERIVED_COLUMNS, atomic_write_parquet
from fakes import DEVICE, simulated_probes
from gpuatlas.machinery import runner
from gpuatlas.machinery import workers


def test_every_declared_quantity_is_in_the_vocabulary():
    for probe in simulated_probes():
        assert set(probe.quantities) <= set(QUANTITIES), (probe.id, set(probe.quantities) - set(QUANTITIES))


def simulated_measurements(tmp_path, probes, profile):
    """Every config of every probe one simulated GPU runs, measured into the rows the runner writes
    (``workers.samples_frame``) and read back as a run's measurements.parquet is read: the frame a run of
    ``profile`` gives, without the runner's part file per config (the runner is tested in test_runs)."""
    run, meta = runner.new_run(tmp_path, DEVICE, {}, probes, profile, {}, 0, ["test"])
    ctx = runner.Context(device=DEVICE, budget=runner.Budget.for_profile(profile), seed=meta["seed"])
    frames = [pd.concat([workers.samples_frame(meta, p.id, c, p.func(ctx, **c)) for c in p.configs(DEVICE, profile)],
                        ignore_index=True) for p in measured_probes(probes, profile)]
    atomic_write_parquet(run.measurements_path, pd.concat(frames, ignore_index=True))
    return meta, run.read_measurements()


def measured_probes(probes, profile: str) -> list:
    """The probes a run of ``profile`` measures on the simulated GPU (not skipped, with configs: a full-only
    probe's quick sweep is empty)."""
    cc = tuple(int(x) for x in DEVICE["compute_capability"].split("."))
    return [p for p in probes if runner.skip_reason(p, cc) is None and p.configs(DEVICE, profile)]


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
    assert set(measurements["probe"]) == {p.id for p in measured_probes(probes, meta["profile"])} != set()
    declared = set().union(*(p.quantities for p in probes))
    together = set(derive(meta, measurements)["quantity"])
    assert together and together <= declared, together - declared


# -- the families: one declaration each, found by themselves ----------------------------------------------

def test_each_family_emits_only_its_own_quantities_in_family_order(measured):
    from analysis.family import families
    from analysis.stats import split_by_probe

    meta, measurements = measured
    rows, emitted = [], {}
    with split_by_probe(measurements):
        for name, family in families().items():
            made = (family.rows(measurements, meta["device"], rows) if family.reads_rows
                    else family.rows(measurements, meta["device"]))
            emitted[name] = {row["quantity"] for row in made}
            assert emitted[name] <= set(family.quantities), (name, emitted[name] - set(family.quantities))
            rows += made
    derived = derive(meta, measurements)  # the families' rows, then the repro step (analysis.repro)
    pd.testing.assert_frame_equal(repro.attach(pd.DataFrame(rows, columns=list(DERIVED_COLUMNS)),
                                               meta["device"]["name"]), derived)
    # negative control: the check tells the families apart; credited to any other family, their rows fail it
    assert sum(bool(e) for e in emitted.values()) > 5
    for name, own in emitted.items():
        assert not any(own <= set(f.quantities) for other, f in families().items() if other != name and own)


def test_the_vocabulary_is_every_familys_declaration_and_refuses_an_id_declared_twice():
    from analysis.family import Family, families, merged

    found = families()
    assert list(QUANTITIES) == [q for family in found.values() for q in family.quantities]
    assert [family.order for family in found.values()] == sorted(family.order for family in found.values())
    assert list(found)[:2] == ["analysis.clock", "analysis.launch"]
    a = Family(order=1, rows=lambda m, device: [], quantities={"x.a": ("s", "a"), "x.b": ("B", "b")})
    b = Family(order=2, rows=lambda m, device: [], quantities={"x.c": ("1", "c")})
    assert list(merged({"one": a, "two": b})) == ["x.a", "x.b", "x.c"]
    with pytest.raises(ValueError, match="'x.b' is declared by both one and three"):  # negative control
        merged({"one": a, "three": Family(order=3, rows=b.rows, quantities={"x.b": ("B", "again")})})


def _module(folder, name: str, text: str):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(text)


def test_a_probe_module_is_found_by_its_run_order_and_refused_without_one(tmp_path, monkeypatch):
    """Discovery imports every module of probes.families and orders those that declare a probe by their
    RUN_ORDER; a module that declares none (a family's shared part) needs none."""
    import probes.families
    from probes import registry
    from probes.registry import probe_modules

    today = probe_modules()
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(probes.families, "__path__", [*probes.families.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    declared = ('from probes.registry import probe\n\n@probe("widget.rate", sweeps={"quick": dict, "full": dict}, '
                'axes={})\ndef widget(ctx): ...\n')

    def found(widget: str):
        _module(tmp_path, "widget", widget)
        sys.modules.pop("probes.families.widget", None)
        registry._REGISTRY.pop("widget.rate", None)
        importlib.invalidate_caches()
        return probe_modules.__wrapped__()

    _module(tmp_path, "kit_like", "RUN_ORDER = 1\n")  # declares no probe: not a probe module
    try:
        assert found(declared + "\nRUN_ORDER = 15\n") == (today[0], "probes.families.widget", *today[1:])
        with pytest.raises(ValueError, match="probes.families.widget declares probes but no RUN_ORDER"):
            found(declared)
        with pytest.raises(ValueError, match="same RUN_ORDER"):
            found(declared + "\nRUN_ORDER = 10\n")
    finally:
        for name in ("probes.families.widget", "probes.families.kit_like"):
            sys.modules.pop(name, None)


#: A new family's two Python files: the probe module (probes/families/widget.py) and its analysis module
#: (analysis/widget.py), run between the clock and the launch probes.
WIDGET_PROBE = '''
from probes.kit.harness import Sample
from probes.registry import probe

RUN_ORDER = 15


@probe("widget.rate", sweeps={"quick": lambda device: {"n": [1]}, "full": lambda device: {"n": [1, 2]}},
       axes={"n": "copies"}, quantities=("widget.rate_hz",))
def widget(ctx, n: int) -> list:
    """A widget's rate (Hz): a known constant, so the round trip has a known answer."""
    return [Sample("rate", 7.0 * n, "Hz", r, None, "none") for r in range(5)]
'''
WIDGET_FAMILY = '''
from analysis.family import Family
from analysis.quantities import derived_row
from analysis.stats import median_ci, select


def widget_rows(measurements, device):
    values = select(measurements, "widget.rate", "rate", n=1)["value"]
    return [derived_row("widget.rate_hz", *median_ci(values), "median", "widget.rate")] if len(values) else []


FAMILY = Family(order=15, rows=widget_rows, quantities={"widget.rate_hz": ("Hz", "a widget's rate, one copy")})
'''
#: Run in a fresh interpreter (the vocabulary and derive's families are gathered once): with the folder
#: holding the two files on the packages' paths (as if they were dropped into probes/families/ and analysis/), or not;
#: the clock and launch probes measured by their fakes, the widget by itself (it needs no GPU).
WIDGET_RUN = '''
import sys, tempfile
from pathlib import Path
import pandas as pd
import analysis, probes.families
if sys.argv[1] == "with":
    probes.families.__path__.append(sys.argv[2] + "/probes")
    analysis.__path__.append(sys.argv[2] + "/analysis")
from analysis.derive import derive
from analysis.quantities import QUANTITIES
from analysis.results import atomic_write_parquet
from fakes import DEVICE, FAKES
from gpuatlas.machinery import runner
from gpuatlas.machinery import workers
from probes.registry import all_probes

probes_ = all_probes()
print("order", list(probes_)[:3])
print("vocabulary", QUANTITIES.get("widget.rate_hz"))
chosen = [p for p in probes_.values() if p.id in ("clock.sm", "widget.rate", "launch.overhead")]
run, meta = runner.new_run(Path(tempfile.mkdtemp()), DEVICE, {}, chosen, "quick", {}, 0, ["test"])
ctx = runner.Context(device=DEVICE, budget=runner.Budget.for_profile("quick"), seed=meta["seed"])
frames = [workers.samples_frame(meta, p.id, c, FAKES.get(p.id, p.func)(ctx, **c))
          for p in chosen for c in p.configs(DEVICE, "quick")]
atomic_write_parquet(run.measurements_path, pd.concat(frames, ignore_index=True))
derived = derive(meta, run.read_measurements())
print("derived", list(derived["quantity"]), list(derived["value"]))
'''


def _widget_run(tmp_path, mode: str) -> dict[str, str]:
    import subprocess
    import sys

    from conftest import REPO

    out = subprocess.run([sys.executable, "-c", WIDGET_RUN, mode, str(tmp_path)], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}"})
    assert out.returncode == 0, out.stderr
    return dict(line.split(" ", 1) for line in out.stdout.splitlines())


def test_a_new_family_needs_only_its_own_files(tmp_path):
    """The recipe of docs/adding-a-probe.md: a probe module and a family module, dropped beside the others,
    are measured in their run order and derived in their family order, their quantity in the vocabulary,
    with no other file edited (the fake and the kernel test are the other files a GPU probe brings)."""
    _module(tmp_path / "probes", "widget", WIDGET_PROBE)
    _module(tmp_path / "analysis", "widget", WIDGET_FAMILY)
    found = _widget_run(tmp_path, "with")
    assert found["order"] == "['clock.sm', 'widget.rate', 'launch.overhead']"
    assert found["vocabulary"] == "('Hz', \"a widget's rate, one copy\")"
    assert found["derived"].startswith("['clock.sm_hz', 'widget.rate_hz', 'launch.overhead_s'")
    assert ", 7.0, " in found["derived"]  # the widget's known rate, between the clock's and the launch's
    # negative control: the same run without the two files knows no widget
    bare = _widget_run(tmp_path, "without")
    assert bare["vocabulary"] == "None" and "widget" not in bare["order"] + bare["derived"]
    assert bare["derived"].startswith("['clock.sm_hz', 'launch.overhead_s'")


def _shown_files(doc: str) -> list[tuple[str, str]]:
    """(path, code) of every code block in a section whose heading names a file."""
    import re

    shown = []
    for section in re.split(r"^## ", doc, flags=re.MULTILINE)[1:]:
        named = re.search(r"`([\w/.]+\.\w+)`", section.split("\n", 1)[0])
        shown += [(named.group(1), code) for code in re.findall(r"```\w*\n(.*?)```", section, re.S)] if named else []
    return shown


def test_the_recipe_shows_its_five_files_as_they_are():
    from conftest import REPO

    doc = (REPO / "docs" / "adding-a-probe.md").read_text()
    shown = _shown_files(doc)
    assert [path for path, _ in shown] == ["probes/kit/clock.cu", "probes/families/clock.py", "tests/fakes.py",
                                           "tests/test_kernels.py", "analysis/clock.py"]
    for path, code in shown:
        assert code in (REPO / path).read_text(), path
    # negative control: the family's block with another order is not in analysis/clock.py
    edited = doc.replace("FAMILY = Family(order=10,", "FAMILY = Family(order=20,")
    assert _shown_files(edited)[-1][1] not in (REPO / "analysis" / "clock.py").read_text()
