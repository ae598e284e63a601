"""Triton kernels compiled ahead: the plan is what the Triton probes launch (each probe run on faked torch tensors
under a driver that owns no GPU, every launch stopped before compiling and recorded as Triton's binder
specializes it), and a kernel compiled ahead is found in Triton's cache by the probe's own launch."""
import json
import sys
import types

import pytest

import fakes
from gpuatlas.machinery import triton_ahead, workers
from gpuatlas.probes.kit.harness import Budget, Context
from gpuatlas.probes.registry import all_probes

triton = pytest.importorskip("triton")
from triton import knobs  # noqa: E402
from triton.runtime.driver import driver  # noqa: E402


class dtype:  # noqa: N801 -- named like torch's, which Triton's specialization reads by its text
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


BFLOAT16, FLOAT32 = dtype("bfloat16"), dtype("float32")


class FakeTensor:
    """A contiguous CUDA tensor as a Triton launch sees it: dtype, shape, strides, a 512-byte-aligned address."""
    address = 1 << 20

    def __init__(self, shape, dtype=BFLOAT16):
        self.shape, self.dtype = tuple(shape), dtype
        FakeTensor.address += 1 << 30
        self.pointer = FakeTensor.address

    def data_ptr(self):
        return self.pointer

    def stride(self, dim):
        out = 1
        for size in self.shape[dim + 1:]:
            out *= size
        return out


def fake_torch():
    module = types.ModuleType("torch")
    module.bfloat16, module.float32 = BFLOAT16, FLOAT32
    module.full = lambda shape, value, device=None, dtype=BFLOAT16: FakeTensor(shape, dtype)
    module.matmul = lambda a, b, out=None: None
    return module


@pytest.fixture
def recorded(monkeypatch):
    """Triton launches recorded (kernel name and specialization: signature, constexprs, alignment and
    divisibility attributes, compile options), neither compiled nor launched."""
    from gpuatlas.probes.families import fusion, lecture, matmul
    from gpuatlas.probes.kit import torch_kit

    launches = []

    def hook(*, fn, compile, **_):
        data = json.loads(compile["specialization_data"])
        data.pop("key")
        launches.append((fn.name, json.dumps(data, sort_keys=True)))
        return True  # skip the compile: the launch returns without running

    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", hook)
    monkeypatch.setattr(driver, "_active", triton_ahead.CompileOnlyDriver(90))
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    square = lambda ctx, side: tuple(FakeTensor((side, side)) for _ in range(3))  # noqa: E731
    for module in (torch_kit, matmul):
        monkeypatch.setattr(module, "operands", square)
        monkeypatch.setattr(module, "check_product", lambda *a, **k: 0.0)
        monkeypatch.setattr(module, "measure_flops", lambda *a, **k: [])
    monkeypatch.setattr(torch_kit, "random_bf16", lambda shape, seed: FakeTensor(shape))
    monkeypatch.setattr(torch_kit, "torch_timer", lambda *a: None)
    monkeypatch.setattr(matmul, "torch_stream", lambda: None)
    monkeypatch.setattr(matmul, "launch_seconds", lambda *a, **k: 1.0)
    monkeypatch.setattr(fusion, "check_softmax", lambda *a: None)
    monkeypatch.setattr(fusion, "_graph", lambda run: run)
    monkeypatch.setattr(fusion, "bandwidth_bound", lambda *a: None)
    for module in (fusion, lecture):
        monkeypatch.setattr(module, "repeat_until_stable", lambda *a, **k: [])
    return launches


def launch_plan(probe, configs) -> None:
    """The plan's launches of ``configs`` through Triton's binder, as the compile jobs make them."""
    for job in triton_ahead.triton_jobs(probe, configs, fakes.DEVICE):
        if job[0] == "triton":
            name, args, kwargs = job[1:4]
            getattr(sys.modules["gpuatlas.probes.kit.triton_kernels"], name).warmup(*args, grid=(1,), **dict(kwargs))


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_the_plan_is_what_each_triton_probe_launches(recorded, profile):
    import gpuatlas.probes.kit.triton_kernels  # noqa: F401 -- what the plan's launches name

    probes = [p for p in all_probes().values() if p.backend == "triton"]
    assert set(triton_ahead.PLANS) <= {p.id for p in probes}
    ctx = Context(device=fakes.DEVICE, budget=Budget(), seed=1)
    for probe in probes:
        configs = probe.configs(fakes.DEVICE, profile)
        recorded.clear()
        for params in configs:
            probe.func(ctx, **params)
        launched = set(recorded)
        recorded.clear()
        launch_plan(probe, configs)
        assert set(recorded) == launched, probe.id
        assert bool(launched) == (probe.id in triton_ahead.PLANS), probe.id  # decode launches cuBLAS only


def test_a_plan_that_drifts_is_caught(recorded):
    """The negative control: one stage more than the probe uses is another kernel in Triton's eyes."""
    import gpuatlas.probes.kit.triton_kernels  # noqa: F401

    probe = all_probes()["matmul.lecture_tile"]
    configs = probe.configs(fakes.DEVICE, "quick")
    for params in configs:
        probe.func(Context(device=fakes.DEVICE, budget=Budget(), seed=1), **params)
    launched = set(recorded)
    recorded.clear()
    name, args, kwargs = triton_ahead.matmul_launch(4096, 4096, 4096, 256, 256, 64, 1, 8, 3)
    getattr(sys.modules["gpuatlas.probes.kit.triton_kernels"], name).warmup(*args, grid=(1,), **kwargs)
    assert set(recorded).isdisjoint(launched)


def test_compile_jobs_carry_the_triton_plan_and_the_utilities_once():
    probes = list(all_probes().values())
    todo = {p.id: p.configs(fakes.DEVICE, "quick") for p in probes}
    jobs = workers.compile_jobs(probes, fakes.DEVICE, todo)
    triton_jobs = [job for job in jobs if job[0] == "triton"]
    assert jobs.count(("triton-utils",)) == 1
    assert len(triton_jobs) == len(set(triton_jobs)) and {job[4] for job in triton_jobs} == {90}
    assert {job[1] for job in triton_jobs} == {"matmul_kernel", "row_max_kernel", "exp_sum_kernel",
                                               "normalize_kernel", "softmax_kernel"}
    lecture = triton_ahead.matmul_launch(4096, 4096, 4096, 256, 256, 64, 1, 8, 2)
    assert ("triton", lecture[0], lecture[1], tuple(sorted(lecture[2].items())), 90) in triton_jobs
    none_left = workers.compile_jobs(probes, fakes.DEVICE, {**todo, **{pid: [] for pid in triton_ahead.PLANS}})
    assert not [job for job in none_left if job[0].startswith("triton")]


def test_a_kernel_compiled_ahead_is_found_by_the_probe_s_launch(tmp_path, monkeypatch):
    """Compiled by the compile job's path into a fresh cache, then launched as fusion.py does (torch-like
    tensors, its keyword order) with the compiler's first stage made to fail: the launch finds it on disk."""
    from triton.compiler import compiler

    from gpuatlas.probes.kit import triton_kernels

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    name, args, kwargs = triton_ahead._softmax(types.SimpleNamespace(NUM_WARPS=8),
                                               [{"variant": "fused", "matrix_side": 4096}], fakes.DEVICE)[0]
    triton_ahead.compile_kernel(name, args, tuple(sorted(kwargs.items())), 90)
    assert list(tmp_path.rglob("softmax_kernel.cubin"))

    def no_compile(*a, **k):
        raise AssertionError("compiled again: Triton's cache missed")

    monkeypatch.setattr(compiler.ASTSource, "make_ir", no_compile)
    monkeypatch.setattr(driver, "_active", triton_ahead.CompileOnlyDriver(90))
    triton_kernels.softmax_kernel.device_caches.clear()  # no in-memory hit: the disk must answer
    x, y = FakeTensor((4096, 4096)), FakeTensor((4096, 4096))
    assert triton_kernels.softmax_kernel.warmup(x, y, x.stride(0), 4096, BLOCK=4096, num_warps=8, grid=(4096,))
    triton_kernels.softmax_kernel.device_caches.clear()
    with pytest.raises(AssertionError, match="cache missed"):  # the negative control: another num_warps
        triton_kernels.softmax_kernel.warmup(x, y, x.stride(0), 4096, BLOCK=4096, num_warps=4, grid=(4096,))


def test_first_use_jobs_read_ahead_without_a_gpu(tmp_path):
    """Numba's job compiles PTX for the device's capability (no GPU here); the readahead job asks for files
    that exist and skips those that do not."""
    from gpuatlas.machinery import first_use

    pytest.importorskip("numba")
    first_use.numba_ptx(90)
    library = tmp_path / "libcublasLt.so.13"
    library.write_bytes(b"\0" * 4096)
    assert first_use.readahead([library, tmp_path / "missing.so"]) == 1
    probes = list(all_probes().values())
    jobs = workers.compile_jobs(probes, fakes.DEVICE, {p.id: p.configs(fakes.DEVICE, "quick") for p in probes})
    assert jobs.count(("numba-ptx", 90)) == 1 and jobs.count(("torch-readahead",)) == 1
