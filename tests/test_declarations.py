"""What each probe declares it derives is true: derive emits, for a probe's own measurements, only quantities
it declares, and every declared quantity is in the vocabulary."""
import os
import sys

import pandas as pd
import pytest

from gpuatlas.analysis import repro
from gpuatlas.analysis.derive import derive
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.results import DERIVED_COLUMNS, MEASUREMENT_COLUMNS, atomic_write_parquet
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


@pytest.fixture(scope="module")
def derived(measured):
    """derive() of every simulated probe's measurements in the profile, made once for the tests that read it."""
    return derive(*measured)


@pytest.mark.parametrize("probe", simulated_probes(), ids=lambda probe: probe.id)
def test_derive_emits_for_each_probe_only_what_it_declares(measured, probe):
    meta, measurements = measured
    own = set(derive(meta, alone(measurements, probe.id))["quantity"])
    assert own <= set(probe.quantities), own - set(probe.quantities)


def alone(measurements: pd.DataFrame, probe_id: str) -> pd.DataFrame:
    """The samples of ``probe_id`` as a run of that probe alone reads them back: the contract's columns and the
    probe's own parameters (a run's frame has the columns of the probes it ran)."""
    rows = measurements[measurements["probe"] == probe_id]
    return rows[[c for c in rows.columns if c in MEASUREMENT_COLUMNS or rows[c].notna().any()]]


def test_derive_emits_for_all_probes_together_only_what_they_declare(measured, derived):
    meta, measurements = measured
    probes = simulated_probes()
    assert set(measurements["probe"]) == {p.id for p in measured_probes(probes, meta["profile"])} != set()
    declared = set().union(*(p.quantities for p in probes))
    together = set(derived["quantity"])
    assert together and together <= declared, together - declared


# -- the families: one declaration each, found by themselves ----------------------------------------------

def test_each_family_emits_only_its_own_quantities_in_family_order(measured, derived):
    from gpuatlas.analysis.family import families
    from gpuatlas.analysis.stats import split_by_probe

    meta, measurements = measured
    rows, emitted = [], {}
    with split_by_probe(measurements):
        for name, family in families().items():
            made = (family.rows(measurements, meta["device"], rows) if family.reads_rows
                    else family.rows(measurements, meta["device"]))
            emitted[name] = {row["quantity"] for row in made}
            assert emitted[name] <= set(family.quantities), (name, emitted[name] - set(family.quantities))
            rows += made
    # derive() is the families' rows, then the repro step (gpuatlas.analysis.repro)
    pd.testing.assert_frame_equal(repro.attach(pd.DataFrame(rows, columns=list(DERIVED_COLUMNS)),
                                               meta["device"]["name"]), derived)
    # negative control: the check tells the families apart; credited to any other family, their rows fail it
    assert sum(bool(e) for e in emitted.values()) > 5
    for name, own in emitted.items():
        assert not any(own <= set(f.quantities) for other, f in families().items() if other != name and own)


def test_the_vocabulary_is_every_familys_declaration_and_refuses_an_id_declared_twice():
    from gpuatlas.analysis.family import Family, families, merged

    found = families()
    assert list(QUANTITIES) == [q for family in found.values() for q in family.quantities]
    assert [family.order for family in found.values()] == sorted(family.order for family in found.values())
    assert list(found)[:2] == ["gpuatlas.analysis.clock", "gpuatlas.analysis.launch"]
    a = Family(order=1, rows=lambda m, device: [], quantities={"x.a": ("s", "a"), "x.b": ("B", "b")})
    b = Family(order=2, rows=lambda m, device: [], quantities={"x.c": ("1", "c")})
    assert list(merged({"one": a, "two": b})) == ["x.a", "x.b", "x.c"]
    with pytest.raises(ValueError, match="'x.b' is declared by both one and three"):  # negative control
        merged({"one": a, "three": Family(order=3, rows=b.rows, quantities={"x.b": ("B", "again")})})


def test_families_that_read_rows_order_last_and_no_two_share_an_order(monkeypatch):
    import gpuatlas.analysis.family
    from gpuatlas.analysis.family import Family

    def family(order, reads_rows=False):
        return Family(order, lambda *a: [], {}, reads_rows=reads_rows)

    def found(**declared):
        monkeypatch.setattr(gpuatlas.analysis.family, "declared", lambda what: declared)
        return list(gpuatlas.analysis.family.families.__wrapped__())

    assert found(b=family(2), a=family(1), late=family(3, True)) == ["a", "b", "late"]
    with pytest.raises(ValueError, match=r"\['b'\] order after a family that reads rows"):  # negative controls
        found(a=family(1), late=family(2, True), b=family(3))
    with pytest.raises(ValueError, match="declare the same order"):
        found(a=family(1), b=family(1))


def _module(folder, name: str, text: str):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(text)


def test_a_run_measures_each_familys_probe_modules_in_family_order_and_refuses_an_orphan(tmp_path, monkeypatch):
    """Discovery imports every module of gpuatlas.probes.families; those that declare a probe run in the order of the
    families that name them (each family's probe_modules, in the order it lists them).  A module no family
    names, one two families name, or a name no module answers is an error."""
    import gpuatlas.analysis.family
    import gpuatlas.probes.families
    from gpuatlas.analysis.family import Family
    from gpuatlas.probes import registry
    from gpuatlas.probes.registry import probe_modules

    today, found = probe_modules(), gpuatlas.analysis.family.families()
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(gpuatlas.probes.families, "__path__", [*gpuatlas.probes.families.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    _module(tmp_path, "widget", 'from gpuatlas.probes.registry import probe\n\n'
                                '@probe("widget.rate", sweeps={"quick": dict, "full": dict}, axes={})\n'
                                'def widget(ctx): ...\n')
    _module(tmp_path, "kit_like", "SHARED = 1\n")  # declares no probe: not a probe module, named by no family
    first, second = list(found.values())[:2]

    def run_order(*extra: tuple[int, tuple]):
        """probe_modules afresh, with families ``extra`` (order, probe_modules) beside today's."""
        families = {**found, **{f"gpuatlas.analysis.widget{i}": Family(order, lambda m, device: [], {},
                                                                       probe_modules=mods)
                                for i, (order, mods) in enumerate(extra)}}
        monkeypatch.setattr(gpuatlas.analysis.family, "families", lambda: dict(sorted(families.items(),
                                                                              key=lambda item: item[1].order)))
        return probe_modules.__wrapped__()

    try:
        between = (first.order + second.order) / 2  # whatever numbers the families use, none is reserved
        widget = "gpuatlas.probes.families.widget"
        assert run_order((between, ("widget",))) == (*today[:len(first.probe_modules)], widget,
                                                      *today[len(first.probe_modules):])
        with pytest.raises(ValueError, match=r"\['gpuatlas.probes.families.widget'\] declare probes but no family "
                                             "measures"):
            run_order()
        with pytest.raises(ValueError, match="measured by both"):
            run_order((between, ("widget",)), (max(f.order for f in found.values()) + 1, ("widget",)))
        with pytest.raises(ValueError, match="'kit_like', which is no module"):
            run_order((between, ("widget", "kit_like")))
    finally:
        for name in ("gpuatlas.probes.families.widget", "gpuatlas.probes.families.kit_like"):
            sys.modules.pop(name, None)


#: A new family's files, each in its own place: the probe module (probes/families/widget.py), its analysis
#: module with a quantity, a figure and a claim (analysis/widget.py), and its fake (tests/fakes/widget.py).
#: Its order lies between the first two families' (ORDER, filled in by the test): no slot is kept free for it.
WIDGET_PROBE = """
from gpuatlas.probes.kit.harness import Sample
from gpuatlas.probes.registry import probe


@probe("widget.rate", sweeps={"quick": lambda device: {"n": [1]}, "full": lambda device: {"n": [1, 2]}},
       axes={"n": "copies"}, quantities=("widget.rate_hz",))
def widget(ctx, n: int) -> list:
    \"\"\"A widget's rate (Hz), measured on the GPU (here only its fake runs).\"\"\"
    raise RuntimeError("no GPU in this test: the fake measures")
"""
WIDGET_FAMILY = """
from gpuatlas.analysis.claims.model import Claim, quantity
from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row
from gpuatlas.analysis.report_figures import FigureSpec
from gpuatlas.analysis.stats import median_ci, select


def widget_rows(measurements, device):
    values = select(measurements, "widget.rate", "rate", n=1)["value"]
    return [derived_row("widget.rate_hz", *median_ci(values), "median", "widget.rate")] if len(values) else []


def widget_figure(measurements):
    import matplotlib.pyplot as plt

    ax = plt.figure(figsize=(3, 2)).gca()
    frame = measurements[measurements["probe"] == "widget.rate"]
    ax.plot(frame["n"], frame["value"], "o")
    ax.set_title("Widget rate")
    return ax


FAMILY = Family(order=ORDER, probe_modules=("widget",), rows=widget_rows,
                quantities={"widget.rate_hz": ("Hz", "a widget's rate, one copy")})
FIGURES = (FigureSpec("widget-rate", "widget.rate", "Widget rate", "A widget's rate against its copies.",
                      lambda meta, m, d: widget_figure(m), chapter="Execution", after="power-trace"),)
CLAIMS = (Claim("§7.10", "a widget runs at 7 Hz", 7.0, "Hz", quantity("widget.rate_hz"), "widget.rate, one copy",
                id="7.10.widget_rate", quote=("widget",), figure="widget-rate"),)
"""
WIDGET_FAKE = """
from fakes import CLOCK_HZ
from gpuatlas.probes.kit.harness import Sample

#: The simulated widget: 7 Hz a copy.
RATE_HZ = 7.0


def _widget(ctx, n):
    return [Sample("rate", RATE_HZ * n, "Hz", r, CLOCK_HZ, "none") for r in range(5)]


FAKES = {"widget.rate": _widget}
"""
#: Run in a fresh interpreter (the families, figures, claims and fakes are gathered once): with the folders
#: holding the three files on their packages' paths (as if dropped into probes/families/, analysis/ and
#: tests/fakes/), or not; the clock, launch and widget probes measured by their fakes, derived, judged and
#: rendered as a report.
WIDGET_RUN = """
import sys, tempfile
from pathlib import Path
import pandas as pd
import gpuatlas.analysis, fakes, gpuatlas.probes.families
if sys.argv[1] == "with":
    gpuatlas.probes.families.__path__.append(sys.argv[2] + "/probes")
    gpuatlas.analysis.__path__.append(sys.argv[2] + "/analysis")
    fakes.__path__.append(sys.argv[2] + "/fakes")
from gpuatlas.analysis import chapters
from gpuatlas.analysis.claims import judge
from gpuatlas.analysis.derive import derive
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.render import render
from gpuatlas.analysis.report_figures import declared_figures
from gpuatlas.analysis.results import atomic_write_parquet
from fakes import DEVICE, simulated_probes
from gpuatlas.machinery import runner, workers
from gpuatlas.probes.registry import all_probes

print("order", list(all_probes())[:3])
print("vocabulary", QUANTITIES.get("widget.rate_hz"))
chosen = [p for p in simulated_probes() if p.id in ("clock.sm", "widget.rate", "launch.overhead")]
run, meta = runner.new_run(Path(tempfile.mkdtemp()), DEVICE, {}, chosen, "quick", {}, 0, ["test"])
ctx = runner.Context(device=DEVICE, budget=runner.Budget.for_profile("quick"), seed=meta["seed"])
frames = [workers.samples_frame(meta, p.id, c, p.func(ctx, **c)) for p in chosen for c in p.configs(DEVICE, "quick")]
atomic_write_parquet(run.measurements_path, pd.concat(frames, ignore_index=True))
measurements = run.read_measurements()
derived = derive(meta, measurements)
print("derived", list(derived["quantity"]), list(derived["value"]))
print("execution", chapters.placed(declared_figures())["Execution"][-2:])
claim = judge(derived, DEVICE).set_index("id").loc["7.10.widget_rate"] if sys.argv[1] == "with" else None
print("claim", None if claim is None else (claim["verdict"], claim["measured"]))
page = render(meta, measurements, derived, Path(tempfile.mkdtemp()))
print("report", sorted(p.name for p in page.parent.glob("*.svg")), "7.10.widget_rate" in page.read_text())
"""


def _widget_run(tmp_path, mode: str) -> dict[str, str]:
    import subprocess

    from conftest import REPO

    out = subprocess.run([sys.executable, "-c", WIDGET_RUN, mode, str(tmp_path)], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}"})
    assert out.returncode == 0, out.stderr
    return dict(line.split(" ", 1) for line in out.stdout.splitlines())


def test_a_new_family_with_a_figure_and_a_claim_needs_only_its_own_files(tmp_path):
    """The recipe of docs/adding-a-probe.md: a probe module, its family's analysis module (a quantity, a figure
    and a claim) and its fake, dropped beside the others, are measured in their family's order, derived, drawn
    in their chapter and judged, with no other file edited (a GPU probe also brings its kernel and the
    kernel's test)."""
    from gpuatlas.analysis.family import families

    first, second = [family.order for family in families().values()][:2]
    _module(tmp_path / "probes", "widget", WIDGET_PROBE)
    _module(tmp_path / "analysis", "widget", WIDGET_FAMILY.replace("ORDER", str((first + second) / 2)))
    _module(tmp_path / "fakes", "widget", WIDGET_FAKE)
    found = _widget_run(tmp_path, "with")
    assert found["order"] == "['clock.sm', 'widget.rate', 'launch.overhead']"
    assert found["vocabulary"] == "('Hz', \"a widget's rate, one copy\")"
    assert found["derived"].startswith("['clock.sm_hz', 'widget.rate_hz', 'launch.overhead_s'")
    assert ", 7.0, " in found["derived"]  # the fake's rate, between the clock's and the launch's
    assert found["execution"] == "['power-trace', 'widget-rate']"
    assert found["claim"] == "('holds', '7 Hz')"
    assert "'widget-rate.svg'" in found["report"] and found["report"].endswith(" True")
    # negative control: the same run without the three files knows no widget
    bare = _widget_run(tmp_path, "without")
    assert bare["vocabulary"] == "None" and "widget" not in bare["order"] + bare["derived"] + bare["report"]
    assert bare["derived"].startswith("['clock.sm_hz', 'launch.overhead_s'") and bare["claim"] == "None"


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
    assert [path for path, _ in shown] == ["probes/kit/clock.cu", "probes/families/clock.py", "tests/fakes/clock.py",
                                           "tests/test_kernels.py", "analysis/clock.py"]
    for path, code in shown:
        assert code in (REPO / path).read_text(), path
    # negative control: the family's block with another order is not in analysis/clock.py
    edited = doc.replace("FAMILY = Family(order=10,", "FAMILY = Family(order=20,")
    assert edited != doc
    assert _shown_files(edited)[-1][1] not in (REPO / "analysis" / "clock.py").read_text()


def test_the_recipes_figure_and_claim_are_what_the_report_takes():
    """Section 6's declarations, run as a family module would run them: the figure is placed where it says,
    the claim measures the family's quantity."""
    import re

    from conftest import REPO

    from gpuatlas.analysis import chapters
    from gpuatlas.analysis.claims import CLAIMS
    from gpuatlas.analysis.claims.model import Claim, quantity
    from gpuatlas.analysis.report_figures import FigureSpec, declared_figures

    doc = (REPO / "docs" / "adding-a-probe.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", doc.split("## 6. ", 1)[1], re.S)
    declared = {"FigureSpec": FigureSpec, "Claim": Claim, "quantity": quantity, "clock_figure": lambda m: None}
    exec(code, declared)
    (figure,), (claim,) = declared["FIGURES"], declared["CLAIMS"]
    assert chapters.placed((*declared_figures(), figure))["Execution"][-2:] == ["power-trace", figure.stem]
    assert claim.measure({"clock.sm_hz": (1.9e9, 1.8e9, 2e9)}, {}) == (1.9e9, 1.8e9, 2e9)
    assert claim.figure == figure.stem and claim.id not in {c.id for c in CLAIMS}
    with pytest.raises(ValueError, match="not in their chapter"):  # negative control: a place that is no place
        chapters.placed((*declared_figures(), figure._replace(after="l1-sets")))
