"""The probe kit: one sampler, one clock-sample builder, one steps_for, and families that borrow nothing."""
import ast
import re
from pathlib import Path

import pytest

from gpuatlas.probes.kit import samplers as kit
from gpuatlas.probes.kit.harness import Budget, Context

PROBES = Path(__file__).resolve().parent.parent / "probes"
KIT, FAMILIES_DIR = PROBES / "kit", PROBES / "families"


def _ctx(sm_clock_max_hz=2e9):
    return Context({"sm_count": 4, "sm_clock_max_hz": sm_clock_max_hz}, Budget())


def test_steps_for_sizes_a_sample_and_rounds_to_the_unroll():
    assert kit.steps_for(1e-7, 32) == 10016  # 1 ms / 100 ns = 10000 steps, rounded up to 32
    assert kit.steps_for(1.0, 32) == 1024, "at least `low` steps"
    assert kit.steps_for(1e-15, 1) == 1 << 21, "at most `high` steps"
    assert kit.steps_for(1e-7, 1, sample_s=2e-3) == 20000
    assert kit.steps_for(1e-7, 32) != 10000, "negative control: 10000 is not a multiple of 32"


def test_clock_samples_from_globaltimer_and_from_a_measured_clock():
    ctx = _ctx()
    lat, time = kit.clock_samples(ctx, 4000.0, 100, 3, "clock64", ns=2000.0)
    assert (lat.value, lat.sm_clock_hz, lat.timer, lat.repeat) == (40.0, 2e9, "clock64", 3)
    assert (time.value, time.timer) == (pytest.approx(20e-9), "globaltimer")
    lat, time = kit.clock_samples(ctx, 4000.0, 100, 0, "clock64", hz=2e9)
    assert time.value == pytest.approx(20e-9) and time.timer == "clock64"
    slow = kit.clock_samples(ctx, 1000.0, 100, 0, "clock64", ns=2000.0)  # 0.5 GHz of a 2 GHz part
    assert {s.flag for s in slow} == {"throttled"} and {s.flag for s in (lat, time)} == {""}


def test_chain_latency_differences_two_trip_counts(monkeypatch):
    """A fake chain costing a fixed overhead plus 7 cycles a step: the difference of T and 2T trips is 7 a step
    whatever the overhead; a chain under a cycle a step is impossible and flagged invalid."""
    from gpuatlas.probes.kit import chains

    ctx = _ctx()
    monkeypatch.setattr(ctx, "sm_clock", lambda: 2e9)
    calls = []

    def chain(trips: int) -> float:
        calls.append(trips)
        return 5000.0 + 7.0 * trips * 32

    sample = chains.chain_latency(ctx, chain, 16, 32, 3)
    assert calls == [16, 32], "T trips, then 2T"
    assert (sample.metric, sample.value, sample.unit, sample.repeat, sample.timer, sample.flag) == (
        "latency", 7.0, "cycles", 3, "clock64", "")
    assert sample.value != (5000.0 + 7.0 * 32 * 32) / (32 * 32), "negative control: one trip count keeps the overhead"
    flat = chains.chain_latency(ctx, lambda trips: 5000.0 + 0.5 * trips * 32, 16, 32, 0, hz=1e9)
    assert (flat.value, flat.flag, flat.sm_clock_hz) == (0.5, "invalid", 1e9)
    slow = chains.chain_latency(ctx, chain, 16, 32, 0, hz=0.5e9)
    assert slow.flag == "throttled"
    assert chains.chain_latency(ctx, chain, 16, 32, 0, hz=0.5e9, power_limited=True).flag == ""
    budget = chains.config_budget(ctx, 0.01, 0.001)
    assert (budget.time_s, budget.warmup_s, budget.max_repeats) == (0.01, 0.001, ctx.budget.max_repeats)
    samples = chains.chain_latency_samples(ctx, chain, 16, 32, budget=budget)
    assert samples and {s.value for s in samples} == {7.0}


def test_bandwidth_samples_flags_what_the_device_cannot_do(monkeypatch):
    """The sampler with a timer that reports 1 ms per launch: 1 MB per launch is 1 GB/s."""
    class Timer:
        def __init__(self, launch, min_sample_s):
            pass

        def seconds_per_launch(self):
            return 1e-3

    calls = []
    monkeypatch.setattr(kit, "EventTimer", Timer)
    ctx = _ctx()
    ctx.sm_clock = lambda: 2e9
    out = kit.bandwidth_samples(ctx, None, lambda: calls.append("reset"), lambda: calls.append("verify"), 1e6,
                                sample_s=1e-3, bound=2e9, per_clk_too=True)
    assert calls[:2] == ["reset", "verify"]
    first = [s for s in out if s.repeat == 0]
    assert [s.metric for s in first] == ["bandwidth", "bytes_per_clk_sm"]
    assert first[0].value == 1e9 and first[1].value == pytest.approx(1e9 / 4 / 2e9)
    assert {s.flag for s in out} == {""}
    over = kit.bandwidth_samples(ctx, None, lambda: None, lambda: None, 1e6, sample_s=1e-3, bound=0.5e9)
    assert {s.flag for s in over} == {"invalid"}, "negative control: above the bound"


def test_bounds_come_from_the_device_properties():
    device = {"memory_clock_hz": 1e9, "memory_bus_bits": 1024, "sm_count": 2, "sm_clock_max_hz": 1e9}
    assert kit.dram_peak_bytes_per_s(device) == 1e9 * 1024 / 8 * 2
    assert kit.bandwidth_bound(device, "l2") == 2 * 1e9 * kit.MAX_BYTES_PER_CLK_SM
    assert kit.bandwidth_bound({}, "dram") is None


def _module_name(path: Path) -> str:
    parts = path.relative_to(PROBES.parent).with_suffix("").parts
    return ".".join(("gpuatlas", *(parts[:-1] if parts[-1] == "__init__" else parts)))  # as imported


def family_of(path: Path) -> str | None:
    """The family a module under probes/families belongs to: its own name, or its package's (a family's units
    and shared part live in one package); None for a module elsewhere."""
    parts = path.relative_to(PROBES).parts
    return parts[1].removesuffix(".py") if parts[0] == "families" and len(parts) > 1 else None


#: Every family module, found in its folder: probes/families/<family>.py or probes/families/<family>/*.py.
FAMILY_MODULES = sorted(p for p in FAMILIES_DIR.rglob("*.py") if family_of(p) is not None)
FAMILIES = sorted({family_of(p) for p in FAMILY_MODULES})


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names)


def _may_import(path: Path, module: str) -> bool:
    """A family module imports the kit, the registry and its own family; nothing else of the project."""
    family = family_of(path)
    own = f"gpuatlas.probes.families.{family}"
    return (not module.startswith("gpuatlas") or module == "gpuatlas.probes.registry"
            or module.startswith(("gpuatlas.analysis", "gpuatlas.probes.kit")) or module == own
            or module.startswith(own + "."))


def _borrowed(path: Path) -> list:
    """(module, names) a module imports from a family module other than itself."""
    return [(m, names) for m, names in _imports(path)
            if m.startswith("gpuatlas.probes.families") and m != _module_name(path)]


def test_the_family_list_is_every_probe_module():
    """The folders say what is a family: every module that declares a probe is in one, and the kit declares none."""
    from gpuatlas.probes.registry import all_probes

    declaring = {p.func.__module__ for p in all_probes().values()}
    assert declaring == {_module_name(p) for p in FAMILY_MODULES} & declaring
    assert {"chase", "chase_l2", "geometry", "lecture", "execution", "fusion", "matmul", "hopper"} <= set(FAMILIES)
    assert not any(m.startswith("gpuatlas.probes.kit") for m in declaring)


def test_no_probe_module_borrows_another_ones_private_names():
    private = {str(p): [(m, [n for n in names if n.startswith("_")]) for m, names in _borrowed(p)]
               for p in sorted(KIT.glob("*.py")) + FAMILY_MODULES}
    assert not {k: v for k, v in private.items() if any(names for _, names in v)}


@pytest.mark.parametrize("path", FAMILY_MODULES, ids=lambda p: str(p.relative_to(FAMILIES_DIR)))
def test_the_measuring_families_import_only_the_kit(path):
    assert [m for m, _ in _imports(path) if not _may_import(path, m)] == []


def test_the_kit_imports_no_family_and_nothing_above_it():
    for path in sorted(KIT.glob("*.py")):
        assert [m for m, _ in _imports(path) if m.startswith("gpuatlas") and not m.startswith(
            ("gpuatlas.probes.kit", "gpuatlas.probes.registry", "gpuatlas.analysis"))] == [], path


def test_the_import_check_sees_a_borrowed_private_name_and_a_neighbour(tmp_path):
    """Negative controls for the checks above: a module that borrows is seen, and so is a family that imports
    another family, while its own family's parts pass."""
    bad = FAMILIES_DIR / "dram_like.py"
    assert family_of(bad) == "dram_like"
    assert not _may_import(bad, "gpuatlas.probes.families.bandwidth")
    assert _may_import(FAMILIES_DIR / "bandwidth" / "dram.py", "gpuatlas.probes.families.bandwidth")
    assert not _may_import(FAMILIES_DIR / "bandwidth" / "dram.py", "gpuatlas.machinery.device")
    text = tmp_path / "bad.py"
    text.write_text("from gpuatlas.probes.families.bandwidth import _Filled\n")
    assert [(m, n) for m, n in _imports(text)] == [("gpuatlas.probes.families.bandwidth", ["_Filled"])]


_NAMED = re.compile(r"[\"']([\w.-]+\.(?:cuh|cu))[\"']")
#: Kernel files a family launches from another family, by name, with the reason: energy.per_operation holds
#: compute's wgmma kernels for a second to read their energy (one wgmma kernel set, not two copies).
BORROWED = {("energy", "wgmma.cu"): "compute's wgmma kernels, held for a second under NVML's energy counter"}


def test_each_kernel_file_lives_with_the_modules_that_name_it():
    """Kernel file names are unique over the kit and the families (the kit finds a file by its name); a file
    the kit names is the kit's, and one a family names is its own or the kit's."""
    from gpuatlas.probes.kit.cuda import KERNEL_DIR

    files = KERNEL_DIR.files(".cu", ".cuh")
    assert len({p.name for p in files}) == len(files) > 20
    where = {p.name: p.parent for p in files}
    for path in sorted(KIT.glob("*.py")) + FAMILY_MODULES:
        family = family_of(path)
        home = KIT if family is None else (FAMILIES_DIR / family if (FAMILIES_DIR / family).is_dir() else FAMILIES_DIR)
        for name in set(_NAMED.findall(path.read_text())) & set(where):
            assert where[name] in (home, KIT) or (family, name) in BORROWED, (path.name, name, where[name])
    for path in files:  # an include is found beside the including file or in the kit
        for name in re.findall(r'#include\s+"([^"]+)"', path.read_text()):
            assert (path.parent / name).is_file() or (KIT / name).is_file(), (path.name, name)


#: A kernel reading the SM clock itself: the clock() / clock64() builtins or the %clock / %clock64 registers.
_CLOCK_READ = re.compile(r"\bclock(?:64)?\s*\(|%clock")


def clock_reads(text: str) -> list[str]:
    """The lines of kernel source that read the SM clock, // comments left out."""
    return [line.strip() for line in text.splitlines() if _CLOCK_READ.search(line.split("//", 1)[0])]


def test_only_common_cuh_reads_the_sm_clock():
    """Timers in kernel files go through common.cuh's helpers, so every timed region reads the clock the way
    they document (plain or fenced)."""
    files = sorted([*PROBES.rglob("*.cu"), *PROBES.rglob("*.cuh")])
    assert len(files) > 20
    found = {str(p.relative_to(PROBES)): reads for p in files
             if p.name != "common.cuh" and (reads := clock_reads(p.read_text()))}
    assert not found, f"read the clock through common.cuh: {found}"
    # the check itself: it sees the reads common.cuh makes, a builtin call and inline PTX, and no comment
    assert clock_reads((KIT / "common.cuh").read_text())
    assert clock_reads("    const long long c0 = clock64();") == ["const long long c0 = clock64();"]
    assert clock_reads('    asm volatile("mov.u32 %0, %%clock;" : "=r"(t));')
    assert not clock_reads("// reads %clock64, as clock64() does\nconst long long c0 = clock64_plain();\n"
                           "record_clock(clocks, c0, t0);")
