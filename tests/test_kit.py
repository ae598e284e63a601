"""The probe kit: one sampler, one clock-sample builder, one steps_for, and families that borrow nothing."""
import ast
from pathlib import Path

import pytest

from probes import kit
from probes.harness import Budget, Context

PROBES = Path(__file__).resolve().parent.parent / "probes"
#: Modules every family may import from: the kit and the house, not another family.
SHARED = {"probes.kit", "probes.chain", "probes.torch_kit", "probes.numba_kit", "probes.triton_kernels",
          "probes.harness", "probes.cuda", "probes.registry", "probes.telemetry", "probes.device", "probes.doctor"}


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


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names)


def _borrowed(path: Path) -> list:
    """(module, names) a probe module imports from another probe module that is not part of the kit."""
    own = f"probes.{path.stem}"
    return [(m, names) for m, names in _imports(path) if m.startswith("probes.") and m not in SHARED and m != own]


def test_no_probe_module_borrows_another_ones_private_names():
    private = {p.name: [(m, [n for n in names if n.startswith("_")]) for m, names in _borrowed(p)]
               for p in sorted(PROBES.glob("*.py"))}
    assert not {k: v for k, v in private.items() if any(names for _, names in v)}


#: Probe modules of one family share its public parts (HBM's streams share bandwidth.py's kernel loader, the
#: Hopper units hopper.py's mirrors and launch helpers, exec.barriers its cluster launch, the TMA probes the
#: tensor-map encoder, the Numba bank probe the CuPy one's sweep and checks, wgmma the tensor-core operands,
#: bounds and rate sampler of compute.py, tensor_units the same and wgmma's fragment layout, the L2 partition
#: maps the geometry recorder's line stride and record size); nothing else.
OWN_FAMILY = {"dram": {"probes.bandwidth"}, "dsmem": {"probes.hopper"}, "tma": {"probes.hopper", "probes.tensor_map"},
              "dpx": {"probes.hopper"}, "barriers": {"probes.hopper"}, "tensor_units": {"probes.compute", "probes.wgmma"},
              "l2_partition": {"probes.geometry"},
              "smem_banks_numba": {"probes.smem_banks"}, "wgmma": {"probes.compute"}}
#: Every module under probes/ that is not the kit or the house: a family, or a unit of one.
FAMILIES = sorted(p.stem for p in PROBES.glob("*.py")
                  if f"probes.{p.stem}" not in SHARED | {"probes.runner", "probes.__init__"})


def test_the_family_list_is_every_probe_module():
    assert {"chase", "chase_l2", "geometry", "lecture", "execution", "fusion", "matmul", "chase_numba"} <= set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_measuring_families_import_only_the_kit(family):
    assert [m for m, _ in _borrowed(PROBES / f"{family}.py") if m not in OWN_FAMILY.get(family, set())] == []


def test_the_import_check_sees_a_borrowed_private_name(tmp_path):
    """Negative control for the check above: a module that borrows is seen."""
    bad = tmp_path / "bad.py"
    bad.write_text("from probes.bandwidth import _Filled\n")
    assert _borrowed(bad) == [("probes.bandwidth", ["_Filled"])]
