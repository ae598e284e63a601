"""The compute probes' host code end to end on a CPU: CuPy replaced by numpy arrays, each kernel by a numpy
emulation of what its .cu source computes, launched through a stand-in that checks every argument against
the kernel's C signature (parsed from the preprocessed source).  A probe that passes a wrong dtype, sizes a
buffer wrongly or misreads a result fails here before it reaches a GPU."""
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from gpuatlas.probes.families import compute
from gpuatlas.probes.families.compute import wgmma
from gpuatlas.probes.kit.cuda import KERNEL_DIR
from gpuatlas.probes.kit.harness import Budget, Context

pytestmark = pytest.mark.skipif(shutil.which("cpp") is None, reason="needs the C preprocessor")

CLOCK_HZ, SMS, BLOCKS_PER_SM = 1.98e9, 2, 2
#: C parameter type -> (numpy dtype of the argument or of the array's elements, is a pointer)
C_TYPES = {"float": (np.float32, False), "double": (np.float64, False), "int": (np.int32, False),
           "unsigned int": (np.uint32, False), "long long": (np.int64, False),
           "float*": (np.float32, True), "double*": (np.float64, True), "Half2*": (np.uint32, True),
           "unsigned int*": (np.uint32, True), "unsigned long long*": (np.uint64, True),
           "long long*": (np.int64, True), "uint4*": (None, True)}


def signatures(filename: str) -> dict[str, list[str]]:
    # preprocessed as for sm_90, the target the host logic here is exercised for
    text = subprocess.run(["cpp", "-P", "-D__CUDA_ARCH__=900", f"-I{KERNEL_DIR.kit}", str(KERNEL_DIR / filename)], capture_output=True,
                          text=True, check=True).stdout
    out = {}
    for m in re.finditer(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\)\s*)?(\w+)\(([^)]*)\)', text):
        params = [re.sub(r"\s+", " ", p).strip() for p in m.group(2).split(",")]
        out[m.group(1)] = [re.sub(r"^const ", "", p.rsplit(" ", 1)[0]).replace(" *", "*") + ("*" if "*" in p.rsplit(" ", 1)[1] else "")
                           for p in params]
    return out


SIGNATURES = {**signatures("compute.cu"), **signatures("wgmma.cu")}


class Array(np.ndarray):
    def get(self):
        return np.array(self)


def as_device(a):
    return np.ascontiguousarray(a).view(Array)


class Clock:
    now = 0.0


class Event:
    def record(self, stream=None):
        self.t = Clock.now

    def synchronize(self):
        pass


def fake_cupy():
    cuda = types.SimpleNamespace(
        Event=Event, get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3, get_current_stream=lambda: None,
        driver=types.SimpleNamespace(occupancyMaxActiveBlocksPerMultiprocessor=lambda h, t, s: BLOCKS_PER_SM))
    return types.SimpleNamespace(
        cuda=cuda, asarray=as_device, empty=lambda n, dtype: as_device(np.empty(n, dtype)),
        zeros=lambda n, dtype: as_device(np.zeros(n, dtype)), empty_like=lambda a: as_device(np.empty_like(a)),
        uint64=np.uint64, int64=np.int64, float32=np.float32)


def fma_steps(x, a, b, n, dtype):
    for _ in range(n):
        x = (x.astype(np.float64) * np.float64(a) + np.float64(b)).astype(dtype)
    return x


class Kernel:
    """A launch checks the arguments against the C signature, runs the emulation and advances the clock by
    SECONDS_PER_UNIT per trip (so calibration settles on a few trips)."""

    SECONDS_PER_UNIT = 5e-4

    def __init__(self, name):
        self.name, self.ptr = name, 0
        self.signature = SIGNATURES[name]

    def __call__(self, grid, block, args):
        assert len(args) == len(self.signature), (self.name, args)
        for value, ctype in zip(args, self.signature):
            dtype, pointer = C_TYPES[ctype]
            if pointer:
                assert isinstance(value, Array), (self.name, ctype, type(value))
                assert dtype is None or value.dtype == dtype, (self.name, ctype, value.dtype)
            else:
                assert type(value) is dtype, (self.name, ctype, type(value))
        threads = grid[0] * block[0]
        units = getattr(self, self.name.split("_")[0] if self.name.startswith(("mma", "wgmma")) else self.name)(
            threads, grid[0], *args)
        Clock.now += self.SECONDS_PER_UNIT * units

    @staticmethod
    def _clocks(clocks, blocks, units):
        clocks[0::2] = int(units * 1e6)
        clocks[1::2] = int(units * 1e6 / CLOCK_HZ * 1e9)

    def fp32_fma(self, threads, blocks, init, a, b, trips, out, clocks):
        out[:] = fma_steps(np.array(init), a, b, int(trips) * compute.UNROLL, np.float32)
        self._clocks(clocks, blocks, int(trips))
        return int(trips)

    def fp64_fma(self, threads, blocks, init, a, b, trips, out, clocks):
        out[:] = fma_steps(np.array(init), a, b, int(trips) * compute.UNROLL, np.float64)
        self._clocks(clocks, blocks, int(trips))
        return int(trips)

    def fp16x2_hfma2(self, threads, blocks, init, a, b, trips, out, clocks):
        halves = np.array(init).view(np.float16).reshape(-1, 2)
        ab = np.array([a, b], dtype=np.uint32).view(np.float16).reshape(2, 2).astype(np.float64)
        for _ in range(int(trips) * compute.UNROLL):
            halves = (halves.astype(np.float64) * ab[0] + ab[1]).astype(np.float16)
        out[:] = halves.reshape(-1).view(np.uint32)
        self._clocks(clocks, blocks, int(trips))
        return int(trips)

    def int32_imad(self, threads, blocks, init, a, b, trips, out, clocks):
        x = np.array(init).astype(np.uint64)
        for _ in range(int(trips) * compute.UNROLL):
            x = (x * np.uint64(a) + np.uint64(b)) & np.uint64(0xFFFFFFFF)
        out[:] = x.astype(np.uint32)
        self._clocks(clocks, blocks, int(trips))
        return int(trips)

    def latency_fp32(self, threads, blocks, init, a, b, trips, out, cycles):
        assert threads == 32
        out[:] = fma_steps(np.array(init), a, b, int(trips) * compute.LATENCY_UNROLL, np.float32)
        cycles[0] = int(trips) * compute.LATENCY_UNROLL * 4
        return 0

    def mma(self, threads, blocks, a_words, b_words, trips, out, clocks):
        # warp-independent fragments: every warp's 32 lanes hold the same numbers, trips x an operand mix
        assert a_words.size == 32 * 4 and b_words.size == 32 * compute.MMA_ACC * 2
        lane = (a_words.reshape(32, 4).astype(np.float64).sum(1)[:, None] + b_words.reshape(32, -1)[:, :1]) % 97 + 1
        per_warp = np.repeat(lane, compute.MMA_ACC * 4, axis=1) * int(trips)
        out[:] = np.tile(per_warp.reshape(-1), threads // 32).astype(np.float32)
        self._clocks(clocks, blocks, int(trips))
        return int(trips)

    def wgmma(self, threads, blocks, a_rows, b_rows, groups, out, clocks):
        dtype, n = re.match(r"wgmma_(\w+)_n(\d+)", self.name).groups()
        n = int(n)
        decode = {"bf16": lambda r: (r.view(np.uint16).astype(np.uint32) << 16).view(np.float32),
                  "fp16": lambda r: r.view(np.float16), "tf32": lambda r: r.view(np.float32),
                  "e4m3": compute.e4m3_value}[dtype]
        a = decode(np.array(a_rows)).astype(np.float64).reshape(wgmma.WGMMA_M, -1)
        b = decode(np.array(b_rows)).astype(np.float64).reshape(n, -1)
        d = (int(groups) * wgmma.WGMMA_STEPS * a @ b.T).astype(np.float32)
        t = np.arange(wgmma.WG_THREADS)[:, None]
        i = np.arange(n // 2)[None, :]
        rows = 16 * (t // 32) + (t % 32) // 4 + 8 * ((i % 4) >= 2)
        cols = 8 * (i // 4) + 2 * (t % 4) + (i % 2)
        out[:] = np.tile(d[rows, cols].reshape(-1), blocks)
        self._clocks(clocks, blocks, int(groups))
        return int(groups)


@pytest.fixture
def ctx(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy())
    monkeypatch.setattr(compute, "_kernel", lambda name, arch=None: Kernel(name))
    monkeypatch.setattr(wgmma, "_kernel", Kernel)
    monkeypatch.setattr(Context, "sm_clock", lambda self, *a, **k: CLOCK_HZ)
    device = {"sm_count": SMS, "compute_capability": "9.0", "sm_clock_max_hz": CLOCK_HZ}
    return Context(device=device, budget=Budget(warmup_s=0, min_repeats=3, max_repeats=3, time_s=0.0))


def test_every_kernel_signature_is_parsed():
    assert set(SIGNATURES) >= {"fp32_fma", "fp64_fma", "fp16x2_hfma2", "int32_imad", "latency_fp32", "mma_bf16",
                               "wgmma_e4m3_n256"}
    assert SIGNATURES["wgmma_bf16_n64"] == ["uint4*", "uint4*", "long long", "float*", "unsigned long long*"]
    assert all(t in C_TYPES for sig in SIGNATURES.values() for t in sig)


@pytest.mark.parametrize("op", list(compute.VECTOR_OPS))
def test_vector_probe_runs_checks_and_counts(ctx, op):
    samples = compute.compute_vector(ctx, op)
    per_clk = [s for s in samples if s.metric == "per_clk_sm"]
    assert len(per_clk) == 3 and all(s.sm_clock_hz == pytest.approx(CLOCK_HZ, rel=1e-3) for s in samples[:-1])
    rate = [s.value for s in samples if s.metric == "throughput"][0]
    assert per_clk[0].value == pytest.approx(rate / SMS / CLOCK_HZ, rel=1e-3)
    assert samples[-1].metric == "warps_per_sm" and samples[-1].value == BLOCKS_PER_SM * 8


def test_vector_probe_refuses_a_kernel_that_skips_work(ctx, monkeypatch):
    lazy = Kernel.fp32_fma

    def skips_a_trip(self, threads, blocks, init, a, b, trips, out, clocks):
        return lazy(self, threads, blocks, init, a, b, np.int32(max(0, int(trips) - 1)), out, clocks)

    monkeypatch.setattr(Kernel, "fp32_fma", skips_a_trip)
    monkeypatch.setattr(compute, "_vector_operands", _slow_converging(compute._vector_operands))
    with pytest.raises(RuntimeError, match="differ from the host"):
        compute.compute_vector(ctx, "fp32")


def _slow_converging(make):
    """Operands whose chain is still far from its fixed point after a few trips (a near 1), so a skipped
    trip shows."""
    def operands(rng, op, count):
        init, _, b, _ = make(rng, op, count)
        a = np.float32(0.9999)
        return init, a, b, lambda n: compute.affine_chain(init.astype(np.float64), np.float64(a), np.float64(b), n)
    return operands


def test_latency_probe(ctx):
    samples = compute.compute_latency(ctx, "fp32")
    assert {s.value for s in samples} == {4.0} and {s.metric for s in samples} == {"latency"}


@pytest.mark.parametrize("dtype", compute.TC_DTYPES)
def test_mma_sync_probe(ctx, dtype):
    samples = compute.compute_mma_sync(ctx, dtype)
    assert {s.metric for s in samples} == {"per_clk_sm", "throughput", "warps_per_sm"}


@pytest.mark.parametrize("dtype", compute.TC_DTYPES)
@pytest.mark.parametrize("n", (64, 256))
def test_wgmma_probe_checks_its_layout_against_the_host_matmul(ctx, dtype, n, monkeypatch):
    from gpuatlas.probes.kit import telemetry

    monkeypatch.setattr(wgmma, "QUICK_PLAN", (3, 2, 0.05))  # 3 bursts per operand set, 2 short, 0.05 s
    monkeypatch.setattr(wgmma, "REST_MAX_S", 0.01)
    monkeypatch.setattr(wgmma, "REST_MIN_S", 0.0)
    monkeypatch.setattr(telemetry, "_RECORDER", None)
    monkeypatch.setattr(telemetry, "_nvml_reader", lambda uuid: lambda: (650.0, 1.7e9, 0x4, 60.0))
    signs = []
    real = Kernel.wgmma

    def recording(self, threads, blocks, a_rows, b_rows, groups, out, clocks):
        signs.append(bool((np.array(a_rows) & 0x80).any()) if dtype == "e4m3" else None)
        return real(self, threads, blocks, a_rows, b_rows, groups, out, clocks)

    monkeypatch.setattr(Kernel, "wgmma", recording)
    try:
        samples = wgmma.compute_wgmma(ctx, dtype, n)
    finally:
        telemetry.reset()
    by = {}
    for s in samples:
        by.setdefault(s.metric, []).append(s)
    assert len(by["throughput"]) == 3 and samples[-1].metric == "warpgroups_per_sm"
    if n != max(wgmma.WGMMA_NS):
        assert not [m for m in by if m.startswith(("burst", "sustained", "trace"))]
        return
    # A burst launch is BURST_S / LAUNCH_S times a timed launch's groups; the emulated clock advances with
    # the groups, so every rate (burst, sustained, repeat-timed) is the same and per clock matches it.
    assert [len(by[f"{p}_throughput"]) for p in ("burst", "burst_unit", "burst_short")] == [3, 3, 2]
    assert len(by["burst_unit_rest_s"]) == 3 and all(s.value >= 0 for s in by["burst_rest_s"])
    for prefix in ("burst", "burst_unit"):
        assert by[f"{prefix}_throughput"][0].value == pytest.approx(by["throughput"][0].value, rel=1e-6)
        assert by[f"{prefix}_per_clk_sm"][0].value == pytest.approx(by["per_clk_sm"][0].value, rel=1e-6)
    assert by["sustained_throughput"][0].value == pytest.approx(by["throughput"][0].value, rel=1e-6)
    t = [s.value for s in by["sustained_t_s"]]
    assert t == sorted(t) and t[-1] >= 0.05
    assert {s.value for s in by["trace_power_w"]} == {650.0} and {s.value for s in by["trace_clock_event_reasons"]} == {4}
    assert len(by["trace_t_s"]) == len(by["trace_power_w"]) >= 1
    if dtype == "e4m3":  # the unit set's launches carry no sign bit, the signed set's do
        assert True in signs and False in signs


def test_the_profiles_plans_and_the_unit_operands():
    from gpuatlas.probes.kit.harness import Budget

    assert wgmma.plan(Budget.for_profile("quick")) == wgmma.QUICK_PLAN
    assert wgmma.plan(Budget.for_profile("full")) == wgmma.FULL_PLAN != wgmma.QUICK_PLAN
    rng = np.random.default_rng(5)
    for dtype in compute.TC_DTYPES:
        raw, values = wgmma.unit_operand(rng, dtype, (64, wgmma.ROW_BYTES // compute.TC_SHAPES[dtype][0]))
        assert raw.shape == (64, wgmma.ROW_BYTES) and (values >= 0).all() and (values <= 1).all()
        assert np.median(values) == pytest.approx(0.5, abs=0.1), dtype
    # rounding to nearest (ties to even), against every E4M3 value: a value between two codes goes to the nearer
    table = compute.e4m3_value(np.arange(0x7F))
    mids = (table[:-1] + table[1:]) / 2
    below = wgmma._round_to_e4m3(mids - 1e-9)
    assert np.array_equal(below, np.arange(0x7E)) and np.array_equal(wgmma._round_to_e4m3(mids + 1e-9),
                                                                     np.arange(1, 0x7F))
    assert np.all(wgmma._round_to_e4m3(mids) % 2 == 0), "ties go to the even code"
    assert wgmma._round_to_e4m3(np.array([0.3]))[0] != 0x38, "negative control: 0.3 is not 1.0's code"


def test_wgmma_probe_refuses_a_misread_layout(ctx, monkeypatch):
    real = Kernel.wgmma

    def swapped_halves(self, threads, blocks, a_rows, b_rows, groups, out, clocks):
        rows = np.array(a_rows).reshape(wgmma.WGMMA_M, 2, 16)[:, ::-1].reshape(-1)  # K halves exchanged
        return real(self, threads, blocks, as_device(rows), b_rows, groups, out, clocks)

    monkeypatch.setattr(Kernel, "wgmma", swapped_halves)
    with pytest.raises(RuntimeError, match="layout misread"):
        wgmma.compute_wgmma(ctx, "bf16", 64)


def test_wgmma_refuses_other_architectures(ctx):
    ctx.device["compute_capability"] = "10.0"
    with pytest.raises(RuntimeError, match="sm_90a"):
        wgmma.compute_wgmma(ctx, "bf16", 64)
