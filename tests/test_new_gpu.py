"""A new GPU just works, proven on CPU: every kernel file compiles for sm_80, sm_89, sm_90, sm_100 and sm_120,
and the architecture-specific ones for sm_90a (or is known not to, for the reason that instruction is missing
there), and every probe sizes its sweep from the recorded properties of an A100 40 GB, an L4, an H100 PCIe, a
B200 and an RTX 5090 (tests/fixtures/devices.json), within each device's memory and shared memory, with the
Hopper-only probes skipped and their reasons stated where the device lacks what they need; the H200's sweeps
are exactly those its committed runs recorded."""
import json
from pathlib import Path

import fakes
import pytest

from gpuatlas.analysis.occupancy import ALLOCATION
from gpuatlas.machinery.runner import skip_reason
from gpuatlas.probes.families import chase
from gpuatlas.probes.families import hopper
from gpuatlas.probes.families import occupancy
from gpuatlas.probes.families.bandwidth import dram
from gpuatlas.probes.families.bandwidth import full_occupancy_warps, stride_layout
from gpuatlas.probes.families.hopper import tma
from gpuatlas.probes.kit import samplers as kit
from gpuatlas.probes.kit.cuda import KERNEL_DIR, compile_cubin, sass
from gpuatlas.probes.registry import all_probes
from tests_support import cubin_kernels

ROOT = Path(__file__).resolve().parents[1]
DEVICES = {k: v for k, v in json.loads((ROOT / "tests/fixtures/devices.json").read_text()).items()
           if not k.startswith("_")}
ARCHS = ("sm_80", "sm_89", "sm_90", "sm_100", "sm_120")
KERNEL_FILES = [p.name for p in KERNEL_DIR.files()]
#: The files a run builds for the architecture-specific sm_90a as well: the kernels of probes with a max_cc.
SPECIFIC_FILES = sorted({f for p in all_probes().values() if p.max_cc is not None for f in p.kernels
                         if f.endswith(".cu")})
TARGETS = [(f, a) for f in KERNEL_FILES for a in ARCHS] + [(f, "sm_90a") for f in SPECIFIC_FILES]
#: (file, target) -> why it cannot build there: the instructions it is made of do not exist on that target.
ABSENT = {
    **{("hopper.cu", a): "thread-block clusters, cp.async.bulk (TMA) and DPX start at sm_90"
       for a in ("sm_80", "sm_89")},
    **{("barriers_sm90.cu", a): "mbarrier.try_wait and thread-block-cluster barriers start at sm_90"
       for a in ("sm_80", "sm_89")},
    **{(f, a): "wgmma.mma_async exists on sm_90a only (an architecture-specific target)"
       for f in ("wgmma.cu", "wgmma_latency.cu", "tensor_units.cu", "numerics_wgmma.cu") for a in ARCHS},
}
#: Probes each device must skip for its compute capability (their reasons name the capability they need).
HOPPER_ONLY = {"hopper.dsmem_latency", "hopper.dsmem_bandwidth", "hopper.tma_latency", "hopper.tma_tensor",
               "hopper.copy_bandwidth", "hopper.dpx", "compute.wgmma", "exec.wgmma_latency",
               "compute.tensor_units", "numerics.wgmma"}
WGMMA_ONLY = {"compute.wgmma", "exec.wgmma_latency", "compute.tensor_units", "numerics.wgmma"}
SKIPPED = {"a100-40gb": HOPPER_ONLY, "l4": HOPPER_ONLY, "h100-pcie": set(), "b200": WGMMA_ONLY,
           "rtx-5090": WGMMA_ONLY}


@pytest.mark.parametrize("filename, arch", TARGETS)
def test_every_kernel_file_compiles_for_every_target(filename, arch):
    if (filename, arch) in ABSENT:
        with pytest.raises(RuntimeError, match="NVRTC failed"):  # negative control: the reason still holds
            compile_cubin(filename, arch)
        pytest.skip(f"{filename} on {arch}: {ABSENT[filename, arch]}")
    cubin, _ = compile_cubin(filename, arch)
    assert cubin.startswith(b"\x7fELF") and cubin_kernels(cubin), f"{filename} built no kernel for {arch}"


def test_fp8_mma_is_left_out_below_sm89_and_built_from_it():
    below = cubin_kernels(compile_cubin("compute.cu", "sm_80")[0])
    assert "mma_bf16" in below and "mma_e4m3" not in below
    assert "mma_e4m3" in cubin_kernels(compile_cubin("compute.cu", "sm_89")[0])


@pytest.mark.parametrize("arch", ("sm_80", "sm_120"))
def test_the_cubins_sections_name_the_kernels_cuobjdump_disassembles(arch):
    """The tests above read a cubin's kernels from its ELF sections, which is what cuobjdump lists."""
    cubin = compile_cubin("compute.cu", arch)[0]
    assert cubin_kernels(cubin) == set(sass(cubin)) and len(cubin_kernels(cubin)) >= 8
    assert cubin_kernels(compile_cubin("launch.cu", arch)[0]) == {"empty_kernel"}  # another cubin, its own kernel


def _cc(device: dict) -> tuple:
    return tuple(int(x) for x in device["compute_capability"].split("."))


@pytest.fixture(scope="module")
def probes():
    return all_probes()


@pytest.mark.parametrize("name", DEVICES)
def test_the_right_probes_are_skipped_with_their_reason(name, probes):
    device = DEVICES[name]
    skipped = {}
    for pid, probe in probes.items():
        reason = skip_reason(probe, _cc(device))
        if reason and "compute capability" in reason:
            skipped[pid] = reason
    assert set(skipped) == SKIPPED[name]
    for pid, reason in skipped.items():
        assert str(_cc(device)) in reason and ("(9, 0)" in reason), reason


@pytest.mark.parametrize("profile", ("quick", "full"))
@pytest.mark.parametrize("name", DEVICES)
def test_every_sweep_fits_the_device(name, profile, probes):
    """Every probe the device runs has configs, and each fits its memory and shared memory."""
    device = DEVICES[name]
    memory, optin = device["total_memory_bytes"], device["smem_per_block_optin_bytes"]
    buffer_cap = kit.MEMORY_FRACTION * memory
    for pid, probe in probes.items():
        if skip_reason(probe, _cc(device)) and pid in SKIPPED[name]:
            continue
        if probe.min_gpus > 1:  # a peer to measure against: a one-GPU run records it as skipped
            assert "one GPU" in skip_reason(probe, _cc(device), gpus=1), pid
            continue
        configs = probe.configs(device, profile)
        if profile == "quick" and not probe.sweeps["quick"](device) and probe.configs(device, "full"):
            continue  # a full-only probe: its quick sweep is empty on every device
        assert configs, f"{pid} has no config on {name}"
        for c in configs:
            what = f"{pid} {c} on {name}"
            if "footprint_bytes" in c:
                cap = {"chase.smem": device["smem_per_block_bytes"],  # the TLB's chase alone reaches further,
                       "chase.tlb": chase.TLB_MEMORY_FRACTION * memory}.get(pid, buffer_cap)  # guarded at run time
                assert 0 < c["footprint_bytes"] <= cap, what
            if "matrix_side" in c:
                assert 3 * c["matrix_side"] ** 2 * 4 <= buffer_cap, what
            if pid == "bw.stride":
                layout = stride_layout(device, c["element_bytes"], c["stride_elements"], c["level"],
                                       full_occupancy_warps(device))
                assert layout["span_bytes"] <= buffer_cap, what
            if pid == "occupancy.throughput":
                regs = occupancy.kernel_registers(device, c["load_bytes"], c["ilp"])
                plan = occupancy.plan_residency(device, c["resident_warps_per_sm"], regs)
                assert plan.dynamic_smem_bytes <= optin, what
                tiles = occupancy.footprint_tiles(device, c["level"], c["load_bytes"], c["ilp"])
                assert tiles * occupancy.tile_bytes(c["load_bytes"], c["ilp"]) <= buffer_cap, what
            if pid == "hopper.tma_latency":
                slots, slot = hopper.latency_slots(device, c["copy_bytes"], c["level"])
                assert slots * slot <= buffer_cap and c["copy_bytes"] <= optin, what
            if pid == "hopper.tma_tensor":
                rows = tma.tensor_shape(device, c["level"])
                assert rows * tma.TENSOR_COLS * 4 <= buffer_cap, what
                assert c["box_cols"] * c["box_rows"] * 4 + 128 <= optin, what
            if pid == "hopper.copy_bandwidth":
                chunks = hopper.stream_footprint(device, c["chunk_bytes"], c["level"])
                assert chunks * c["chunk_bytes"] <= buffer_cap, what
                assert c["chunk_bytes"] * hopper.STAGES + hopper.STREAM_STATIC_SMEM <= optin, what
            if pid == "hopper.dsmem_bandwidth":
                assert hopper.DSMEM_BUFFER_BYTES <= optin, what
    assert dram.dram_vectors(device, kit.HBM_FOOTPRINT_L2, 256, 8) * 16 <= buffer_cap


def test_copy_bandwidth_keeps_the_chunks_whose_stages_fit_the_opt_in_limit(probes):
    """A 99 KiB opt-in (cc 8.9, 12.0) cannot hold four 32 KiB stages; 227 KiB (cc 9.0, 10.0) holds them all."""
    chunks = {name: {c["chunk_bytes"] for c in probes["hopper.copy_bandwidth"].configs(DEVICES[name], "full")}
              for name in ("rtx-5090", "b200")}
    assert max(chunks["rtx-5090"]) * hopper.STAGES <= DEVICES["rtx-5090"]["smem_per_block_optin_bytes"]
    assert chunks["b200"] - chunks["rtx-5090"] == {max(hopper.CHUNK_BYTES)}


def test_the_h200s_sweeps_are_the_configs_its_committed_runs_recorded(probes):
    """Sizing from the device's limits leaves every H200 config as it was measured: both committed profiles."""
    import pandas as pd

    from gpuatlas.analysis.results import config_key

    for run in (ROOT / "reports/h200", *sorted((ROOT / "reports/h200-quick").glob("2*"))):
        meta = json.loads((run / "run.json").read_text())
        recorded = pd.read_parquet(run / "measurements.parquet", columns=["probe", "config"]).groupby("probe")["config"]
        for pid, configs in recorded.agg(set).items():
            assert {config_key(c) for c in probes[pid].configs(meta["device"], meta["profile"])} == configs, pid


@pytest.mark.parametrize("cc", sorted(occupancy.REGISTERS))
def test_the_stream_kernels_registers_are_what_ptxas_builds_for_each_target(cc):
    from gpuatlas.probes.kit.cuda import resource_usage

    usage = resource_usage(compile_cubin("occupancy.cu", f"sm_{cc[0]}{cc[1]}")[1])
    assert {k: usage[occupancy.kernel_name(*k)]["registers"] for k in occupancy.REGISTERS[cc]} == \
        occupancy.REGISTERS[cc]


def occupancy_header_units(function: str) -> dict[int, int]:
    """major version -> value of one of cuda_occupancy.h's per-major switch functions (the installed CUDA
    runtime wheel's copy of NVIDIA's occupancy calculator)."""
    import re

    import nvidia

    headers = [h for d in nvidia.__path__ for h in Path(d).glob("*/include/cuda_occupancy.h")]
    if not headers:
        pytest.skip("cuda_occupancy.h is not installed (the nvidia-cuda-runtime wheel)")
    body = headers[0].read_text().split(f"cudaOcc{function}(")[1].split("\n}\n")[0]
    units = {}
    for cases, value in re.findall(r"((?:case \d+:\s*)+)value = (\d+);", body):
        units.update({int(c): int(value) for c in re.findall(r"case (\d+):", cases)})
    return units


def test_the_allocation_table_is_cuda_occupancy_calculators():
    registers, smem = occupancy_header_units("RegAllocationGranularity"), occupancy_header_units(
        "SMemAllocationGranularity")
    assert {cc[0] for cc in ALLOCATION} >= {8, 9, 10, 12}
    for cc, (reg_unit, smem_unit, _) in ALLOCATION.items():
        assert (reg_unit, smem_unit) == (registers[cc[0]], smem[cc[0]]), cc
    for name, device in DEVICES.items():  # every fixture has its own row, no fallback
        assert _cc(device) in ALLOCATION, name


def test_the_fit_check_catches_a_sweep_beyond_the_device(probes):
    """Negative control: the same sweeps on a device with a hundredth of the memory do not all fit."""
    small = {**DEVICES["h100-pcie"], "total_memory_bytes": DEVICES["h100-pcie"]["total_memory_bytes"] // 100}
    cap = kit.MEMORY_FRACTION * small["total_memory_bytes"]
    tlb = probes["chase.tlb"].configs(DEVICES["h100-pcie"], "full")
    assert max(c["footprint_bytes"] for c in tlb) > cap


@pytest.fixture(scope="module", params=sorted(fakes.PARTS))
def part_run(request, tmp_path_factory):
    """A simulated run of another part (tests/fakes/'s PARTS): ``(device, measurements, derived)``."""
    from gpuatlas.analysis.derive import derive
    from gpuatlas.machinery import runner

    device, probes = fakes.part_device(request.param), fakes.part_probes(request.param)
    run, meta = runner.new_run(tmp_path_factory.mktemp(request.param), device, {}, probes, "quick", {}, 0, ["t"])
    meta = runner.execute(run, meta, probes, isolate=False)
    measurements = run.read_measurements()
    return device, measurements, derive(meta, measurements)


def test_a_part_without_wgmma_has_its_tensor_peak_from_mma_sync_and_a_roofline(part_run, tmp_path):
    from gpuatlas.analysis import compute_figures
    from gpuatlas.analysis.claims import judge

    device, measurements, derived = part_run
    row = derived.set_index("quantity").loc["tc.bf16.peak_flops"]
    width = fakes.PARTS[next(k for k in fakes.PARTS if fakes.part_device(k)["name"] == device["name"])]
    assert row["value"] == pytest.approx(width.mma_sync_per_clk["bf16"] * device["sm_count"]
                                         * device["sm_clock_max_hz"], rel=0.01)
    assert row["method"].startswith("the best tensor path that ran: mma.sync") and row["probe"] == "compute.mma_sync"
    compute_figures.roofline(measurements, derived).figure.savefig(tmp_path / "roofline.svg")
    svg = (tmp_path / "roofline.svg").read_text()
    assert f"BF16 peak {row['value'] / 1e12:.0f} TFLOP/s" in svg
    verdicts = judge(derived, device).set_index("id")["verdict"]
    for claim in ("7.7.bf16_peak", "7.8.ridge", "7.4.decode_fraction", "7.7.tensor_over_vector"):
        assert verdicts[claim] != "not measured", claim


def test_a_parts_claims_say_nothing_false_of_it(part_run):
    """The claims sections of another part's run: no sentence names the simulated H200-like part, a memory
    generation, a clock or SM count that is not this part's, and a bus narrower than an HBM stack is not HBM."""
    from gpuatlas.analysis.claims import judge

    device, _, derived = part_run
    table = judge(derived, device)
    text = " ".join(table[["tested by", "reason", "inputs", "tolerance"]].astype(str).agg(" ".join, axis=1))
    others = (fakes.DEVICE["name"], "HBM3", "H200", f"{fakes.CLOCK_HZ / 1e9:.3g} GHz",
              f"{fakes.DEVICE['sm_count']} SMs")
    text = text.replace(f"the lecture's {fakes.DEVICE['sm_count']} SMs", "the lecture's SMs")  # its own, said so
    assert not [w for w in others if w in text]
    assert ("HBM" in text) == (device["memory_bus_bits"] >= 1024)
    assert f"{device['sm_count']} SMs" in text or "SMs" not in text
