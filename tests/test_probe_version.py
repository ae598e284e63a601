"""A probe's version hashes the code its samples depend on: its function, the helpers and kit it calls, its
kernels; nothing else in the module."""
import importlib
import sys

from gpuatlas.probes.kit.versions import version_sources
from gpuatlas.probes.registry import Probe, all_probes

KIT = '''
def kit(x):
    return 2 * x


def kit_unused(x):
    return 3 * x
'''
PROBE = '''
import vkit

KERNEL = "vk.cu"


def helper(x):
    return x + 1


def unrelated():
    return 2


def measure(ctx, n):
    """Measures n."""
    return vkit.kit(helper(n)) + len(KERNEL)
'''


def test_the_version_follows_called_helpers_and_kernels_and_ignores_the_rest(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    (tmp_path / "vkit.py").write_text(KIT)
    (tmp_path / "vprobe.py").write_text(PROBE)
    (tmp_path / "vk.cu").write_text('#include "vcommon.cuh"\n__global__ void k() {}\n')
    (tmp_path / "vcommon.cuh").write_text("__device__ int one() { return 1; }\n")
    try:
        modules = [importlib.import_module("vkit"), importlib.import_module("vprobe")]

        def version_after(path, old, new):
            file = tmp_path / path
            text = file.read_text()
            assert old in text
            file.write_text(text.replace(old, new))
            for module in modules:
                importlib.reload(module)
            return Probe("v.probe", sys.modules["vprobe"].measure, {}, {}).version

        v0 = version_after("vprobe.py", "", "")
        assert version_after("vprobe.py", "return 2\n", "return 22  # edited\n") == v0, "an unrelated function"
        assert version_after("vprobe.py", '"""Measures n."""', '"""Measures n, now documented."""') == v0
        assert version_after("vprobe.py", "import vkit\n", "import vkit  # the kit\n\n# more comment\n") == v0
        assert version_after("vkit.py", "3 * x", "33 * x") == v0, "a kit function the probe does not call"
        v1 = version_after("vprobe.py", "x + 1", "x + 11")
        assert v1 != v0, "a helper in the probe's module"
        v2 = version_after("vkit.py", "2 * x", "22 * x")
        assert v2 != v1, "a kit function it calls through its module"
        v3 = version_after("vk.cu", "void k()", "void k2()")
        assert v3 != v2, "its kernel file"
        v4 = version_after("vcommon.cuh", "return 1", "return 11")
        assert v4 != v3, "a header its kernel includes"
        assert {"vk.cu", "vcommon.cuh"} <= set(version_sources(sys.modules["vprobe"].measure))
    finally:
        for name in ("vkit", "vprobe"):
            sys.modules.pop(name, None)


def test_a_borrowed_helper_and_the_shared_kit_are_part_of_a_probes_version():
    sources = version_sources(all_probes()["occupancy.throughput"].func)
    assert "gpuatlas.probes.kit.samplers.bandwidth_samples" in sources, "the kit's sampler that occupancy calls"
    assert {"gpuatlas.probes.kit.harness.calibrate", "occupancy.cu", "bandwidth.cu"} <= set(sources)
    assert "gpuatlas.probes.families.bandwidth.bw_dram" not in sources, "a probe it does not call"


def test_module_state_does_not_move_a_version(monkeypatch):
    """A cache a probe fills while it runs (the chain kit's L2-flush buffer, telemetry's recorder) or a global its
    code rebinds is module state, not code: the version is the same before and after; a public constant it reads
    is code."""
    from gpuatlas.probes.kit import chain
    from gpuatlas.probes.families import chase_l2
    from gpuatlas.probes.families.smem_banks import smem_banks_numba
    from gpuatlas.probes.kit import telemetry
    from gpuatlas.probes.registry import all_probes

    probes = all_probes()
    before = {pid: probes[pid].version for pid in ("chase.access", "compute.wgmma", "smem.banks_numba")}
    monkeypatch.setitem(chain._FLUSH, 1, object())
    monkeypatch.setattr(telemetry, "_RECORDER", object())
    monkeypatch.setattr(smem_banks_numba, "cuda", object())  # rebound by make_banks_kernel (``global cuda``)
    assert {pid: probes[pid].version for pid in before} == before
    monkeypatch.setattr(chase_l2, "RECORDED_ACCESSES", chase_l2.RECORDED_ACCESSES + 1)
    assert probes["chase.access"].version != before["chase.access"]


def test_moving_code_between_modules_keeps_the_version_and_editing_it_does_not(tmp_path, monkeypatch):
    """A module split moves functions without changing what runs: the version stays; the same split with one
    edited line moves it (the negative control)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    one = '''
STEPS = 4


def helper(x):
    return x + STEPS


def measure(ctx, n):
    return helper(n)
'''
    moved_helper = '''
STEPS = 4


def helper(x):
    return x + STEPS
'''
    moved_probe = '''
from mkit import helper


def measure(ctx, n):
    return helper(n)
'''

    def version(files: dict) -> str:
        for name, text in files.items():
            (tmp_path / f"{name}.py").write_text(text)
        for name in ("mone", "mkit", "mprobe"):
            sys.modules.pop(name, None)
        module = importlib.import_module("mprobe" if "mprobe" in files else "mone")
        return Probe("m.probe", module.measure, {}, {}).version

    imported_inside = moved_probe.replace("from mkit import helper\n", "").replace(
        "    return helper(n)", "    from mkit import helper\n\n    return helper(n)")
    try:
        v0 = version({"mone": one})
        assert version({"mkit": moved_helper, "mprobe": moved_probe}) == v0
        assert version({"mkit": moved_helper, "mprobe": imported_inside}) == v0, "imported in the function"
        assert version({"mkit": moved_helper.replace("x + STEPS", "x * STEPS"), "mprobe": imported_inside}) != v0
        assert version({"mkit": moved_helper.replace("x + STEPS", "x - STEPS"), "mprobe": moved_probe}) != v0
        assert version({"mkit": moved_helper.replace("STEPS = 4", "STEPS = 5"), "mprobe": moved_probe}) != v0
    finally:
        for name in ("mone", "mkit", "mprobe"):
            sys.modules.pop(name, None)


def test_a_cached_helper_is_part_of_the_version(tmp_path, monkeypatch):
    """A helper behind functools.lru_cache (a kernel builder) is code the samples depend on."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    text = '''
import functools


@functools.lru_cache(maxsize=None)
def build(n):
    return n + 1


def measure(ctx, n):
    return build(n)
'''

    def version(source: str) -> str:
        (tmp_path / "cprobe.py").write_text(source)
        sys.modules.pop("cprobe", None)
        return Probe("c.probe", importlib.import_module("cprobe").measure, {}, {}).version

    try:
        assert version(text) != version(text.replace("n + 1", "n + 2"))
        assert version(text) == version(text.replace("    return n + 1", "    return n + 1  # comment"))
    finally:
        sys.modules.pop("cprobe", None)


def test_all_versions_parse_each_source_file_once(monkeypatch):
    """The versions of all probes parse each source file once, whole, however many probes share its functions
    (the kit every probe calls).  Negative control: reading each function's own source (inspect.getsource, then
    ast.parse of that text, as the registry once did) parses texts that are no file's, and the kit's functions
    again for every probe that reaches them."""
    import ast
    from pathlib import Path

    from gpuatlas.probes.kit import samplers as kit
    from gpuatlas.probes.kit import parsed as parsed_files, versions

    probes = all_probes()
    before = {pid: p.version for pid, p in probes.items()}  # imports everything the versions reach first
    files = {Path(m.__file__).read_text() for m in list(sys.modules.values())
             if str(getattr(m, "__file__", None)).endswith(".py")}
    parsed = []
    parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda source, *a, **kw: parsed.append(source) or parse(source, *a, **kw))
    monkeypatch.setattr(parsed_files, "PARSED", {})
    for cached in (parsed_files.source_of, versions._syntax, versions._rebound):
        cached.cache_clear()
    assert {pid: p.version for pid, p in probes.items()} == before
    assert parsed.count(Path(kit.__file__).read_text()) == 1, "the kit, which every probe reaches"
    assert len(parsed) == len(set(parsed)), "a source parsed twice"
    assert all(source in files for source in parsed), "a text that is not a whole file"


DECLARED = '''
def probe(**declaration):
    return lambda func: func


SIZES = (1, 2)


@probe(sweeps={"full": SIZES},  # what it measures
       quantities=("a.cycles",), axes={"n": "the size"}, kernels=())
def measure(ctx, n):
    return n
'''


def test_a_probes_declared_ids_and_axis_words_leave_its_version_and_its_sweep_moves_it(tmp_path, monkeypatch):
    """A new derived id (or reworded axis) is a declaration, not a measurement: committed runs stay current.
    What the decorator makes the probe measure (its sweep, its kernels) still moves the version."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    file = tmp_path / "vdeclared.py"
    file.write_text(DECLARED)
    module = importlib.import_module("vdeclared")

    def version_after(old, new):
        text = file.read_text()
        assert old in text
        file.write_text(text.replace(old, new))
        importlib.reload(module)
        return Probe("v.declared", module.measure, {}, {}).version

    v0 = version_after("", "")
    assert version_after('quantities=("a.cycles",)', 'quantities=("a.cycles", "a.near_cycles",\n'
                                                     '                   "a.far_cycles")') == v0
    assert version_after('"the size"', '"the size of the chain, in elements"') == v0
    assert version_after("# what it measures", "# what it sweeps") == v0
    assert version_after('{"full": SIZES}', '{"full": SIZES[:1]}') != v0, "the sweep is measured behaviour"
    assert version_after("kernels=()", 'kernels=("x.cu",)') != v0
