"""Every kernel built by the CUDA 12 toolchain as well, the way a machine on a CUDA 12 driver builds it: NVRTC 12
for each kernel file at its main target, Numba's PTX from NVVM 12 assembled by a CUDA 12 ptxas.  The SASS shows
the instructions each kernel file exists to measure, as the CUDA 13.0 build's does (tests/test_kernels.py)."""
import functools
import importlib.metadata
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpuatlas.probes.kit.cuda import KERNEL_DIR, resource_usage, sass
from tests.test_kernels import LDG, LDS, assert_dependent_chain, timed_region
from tests.test_new_gpu import SPECIFIC_FILES
from tests_support import cubin_kernels

ROOT = Path(__file__).parents[1]
KERNEL_FILES = [p.name for p in KERNEL_DIR.files()]

#: The unit each kernel file is built to exercise, as SASS opcodes: tensor cores (HMMA, IMMA, DMMA; wgmma's
#: HGMMA, IGMMA and FP8 QGMMA), shared-memory atomics (ATOMS), warp match (MATCH), bulk and tensor-map copies
#: (UBLKCP, UTMALDG), cp.async (LDGSTS), mbarriers (SYNCS), cluster barriers (UCGABAR_*), DPX (VIMNMX3).
UNITS = {
    "compute.cu": {"HMMA"},
    "execution.cu": {"HMMA", "IMMA", "DMMA", "ATOMS", "MATCH"},
    "hopper.cu": {"UBLKCP", "UTMALDG", "LDGSTS", "SYNCS", "UCGABAR_ARV", "UCGABAR_WAIT", "VIMNMX3"},
    "barriers_sm90.cu": {"SYNCS", "UCGABAR_ARV", "UCGABAR_WAIT"},
    "smem_atomics.cu": {"ATOMS"},
    "tensor_units.cu": {"HGMMA", "IGMMA", "DMMA"},
    "wgmma.cu": {"HGMMA", "QGMMA"},
    "wgmma_latency.cu": {"HGMMA", "QGMMA"},
}


def cuda12_file(distribution: str, relative: str) -> Path:
    """A file of a CUDA 12 wheel of the test extra (they install beside the CUDA 13 ones, under other paths)."""
    try:
        path = Path(importlib.metadata.distribution(distribution).locate_file(relative))
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{distribution} is not installed: pip install -e '.[test]'")
    assert path.exists(), f"{distribution} has no {relative}"
    return path


@functools.cache
def build12(filename: str) -> tuple[bytes, str, str]:
    """``(cubin, ptxas log, NVRTC version)`` of ``filename`` built at its target by NVRTC 12, in a process of
    its own (tests/nvrtc_lib.py says why), with the options of every build."""
    library = cuda12_file("nvidia-cuda-nvrtc-cu12", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run([sys.executable, str(ROOT / "tests" / "nvrtc_lib.py"), str(library), filename,
                               "sm_90a" if filename in SPECIFIC_FILES else "sm_90", out], capture_output=True, text=True,
                              timeout=100)
        assert done.returncode == 0, done.stderr[-3000:]
        out = Path(out)
        return (out / "cubin").read_bytes(), (out / "log").read_text(encoding="utf-8"), (out / "version").read_text()


def opcodes(sass_text: str) -> set[str]:
    """The opcodes (without modifiers or predicates) of a kernel's SASS."""
    ops = set()
    for line in sass_text.splitlines():
        if "/*" in line and ";" in line and line.strip().startswith("/*"):
            words = line.split("*/", 1)[1].split(";")[0].split()
            words = words[1:] if words and words[0].startswith("@") else words
            if words:
                ops.add(words[0].split(".")[0])
    return ops


def test_the_cuda12_build_is_nvrtc_12_and_cupys_stays_130():
    assert build12("launch.cu")[2].startswith("12.")
    from cupy.cuda import nvrtc

    assert nvrtc.getVersion()[0] == 13, "CuPy compiles with its own NVRTC"


@pytest.mark.parametrize("filename", KERNEL_FILES)
def test_every_kernel_file_builds_with_cuda12_and_keeps_its_units(filename):
    cubin, log, _ = build12(filename)
    assert cubin.startswith(b"\x7fELF")
    usage = resource_usage(log)
    assert usage and cubin_kernels(cubin) == set(usage), "every kernel ptxas built is in the cubin"
    if filename in UNITS:  # disassembled where its instructions are the point
        found = set().union(*map(opcodes, sass(cubin).values()))
        assert UNITS[filename] <= found, f"{filename} lacks {UNITS[filename] - found}"


def test_the_units_check_can_fail():
    """The negative control: a file without tensor cores does not pass as wgmma.cu."""
    found = set().union(*map(opcodes, sass(build12("launch.cu")[0]).values()))
    assert found and not UNITS["wgmma.cu"] <= found


@pytest.mark.parametrize("kernel, opcode", [("chase_default", "LDG.E.64"), ("chase_cg", "LDG.E.64.STRONG.GPU"),
                                            ("chase_cg_every_sm", "LDG.E.64.STRONG.GPU")])
def test_cuda12_chase_is_a_dependent_load_chain_of_the_named_flavour(kernel, opcode):
    assert_dependent_chain(timed_region(sass(build12("chase.cu")[0])[kernel]), opcode, at_least=32)


def test_cuda12_shared_chase_is_a_dependent_lds_chain():
    assert_dependent_chain(timed_region(sass(build12("chase.cu")[0])["chase_shared"]), "LDS", at_least=32,
                           pattern=LDS)


def test_cuda12_clock_witness_reads_both_clocks_and_launch_kernel_is_empty():
    code = sass(build12("clock.cu")[0])["clock_witness"]
    assert "SR_CLOCKLO" in code and "SR_GLOBALTIMERLO" in code
    assert opcodes(sass(build12("launch.cu")[0])["empty_kernel"]) <= {"LDC", "EXIT", "BRA", "NOP"}


def test_numba_chase_ptx_from_nvvm12_assembles_with_cuda12_ptxas_into_the_same_chain():
    nvvm = cuda12_file("nvidia-cuda-nvcc-cu12", "nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so")
    libdevice = cuda12_file("nvidia-cuda-nvcc-cu12", "nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc")
    ptxas = cuda12_file("nvidia-cuda-nvcc-cu12", "nvidia/cuda_nvcc/bin/ptxas")
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "numba_ptx.py"), str(nvvm), str(libdevice), "cg"],
                          capture_output=True, text=True, cwd=ROOT, timeout=100)
    assert done.returncode == 0, done.stderr[-2000:]
    ptx = done.stdout
    assert ".version 8." in ptx, "NVVM 12 wrote it (NVVM 13 writes PTX ISA 9)"
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        built = subprocess.run([str(ptxas), "-arch=sm_90", "-v", str(src), "-o", str(dst)], capture_output=True,
                               text=True)
        assert built.returncode == 0, built.stderr
        (code,) = sass(dst.read_bytes()).values()
    assert_dependent_chain(timed_region(code), "LDG.E.64.STRONG.GPU", at_least=32, pattern=LDG)
    assert "0 bytes stack frame" in built.stdout + built.stderr
