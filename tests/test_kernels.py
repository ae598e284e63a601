"""Kernels compiled without a GPU: resources and the instructions that make each the probe it claims to be
(CUDA files for sm_90; every file on every target is tests/test_new_gpu.py's), and the other backends' builds
for the targets a run may meet: one representative Numba kernel (the L2-only chase) assembled by ptxas for
sm_80, sm_90, sm_100 and sm_120, and the Triton matmul compiled for targets 80 and 90 -- one kernel per
target rather than all of them, to keep the suite short."""
import re

import pytest

from gpuatlas.probes.kit.cuda import compile_cubin, ptx_to_cubin, resource_usage, sass

LDG = re.compile(r"(LDG\.E\.64[A-Z0-9.]*) (R\d+), (?:desc\[\w+\])?\[(R\d+)\.64\]")  # sm_90 on: a desc[] operand
LDS = re.compile(r"(LDS) (R\d+), \[(R\d+)\]")


def timed_region(sass_text: str) -> list[str]:
    """Instructions between the first and last clock64 read (CS2R ... SR_CLOCKLO)."""
    lines = [re.sub(r"\s+", " ", l.split(";")[0]).strip() for l in sass_text.splitlines()
             if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    clocks = [i for i, l in enumerate(lines) if "SR_CLOCKLO" in l]
    assert len(clocks) >= 2, "a clock64-timed kernel reads the clock before and after"
    return lines[clocks[0]:clocks[-1] + 1]


def assert_dependent_chain(region: list[str], opcode: str, at_least: int, pattern=LDG) -> None:
    """Each load's address register is the previous load's destination: one load in flight at a time."""
    loads = [pattern.search(l).groups() for l in region if pattern.search(l)]
    assert len(loads) >= at_least, f"expected an unrolled chain of >= {at_least} loads, got {len(loads)}"
    assert {op for op, _, _ in loads} == {opcode}
    for (_, dest, _), (_, _, addr) in zip(loads, loads[1:]):
        assert addr == dest, f"load from {addr} does not depend on the previous load into {dest}"


@pytest.fixture(scope="module")
def chase_cubin():
    return compile_cubin("chase.cu")


def test_chase_kernels_use_few_registers_and_no_local_memory(chase_cubin):
    usage = resource_usage(chase_cubin[1])
    for name in ("chase_default", "chase_cg", "chase_cg_every_sm", "touch"):
        assert usage[name]["spill_stores"] == usage[name]["stack_bytes"] == 0
        assert usage[name]["registers"] <= 40


@pytest.mark.parametrize("kernel, opcode", [("chase_default", "LDG.E.64"), ("chase_cg", "LDG.E.64.STRONG.GPU"),
                                            ("chase_cg_every_sm", "LDG.E.64.STRONG.GPU")])
def test_chase_is_a_dependent_load_chain_of_the_named_flavour(chase_cubin, kernel, opcode):
    code = sass(chase_cubin[0])[kernel]
    region = timed_region(code)
    assert_dependent_chain(region, opcode, at_least=32)
    timers = [i for i, l in enumerate(code.splitlines()) if "SR_GLOBALTIMERLO" in l]
    clocks = [i for i, l in enumerate(code.splitlines()) if "SR_CLOCKLO" in l]
    assert timers[0] < clocks[0] and clocks[-1] < timers[-1], "%globaltimer brackets the clock64 region"


def test_lay_chain_stores_each_element_once_with_no_local_memory(chase_cubin):
    """The chain layer (fill_chain on the GPU): a grid-stride loop of two index loads and one 64-bit store per
    element, nothing spilled."""
    usage = resource_usage(chase_cubin[1])["lay_chain"]
    assert usage["spill_stores"] == usage["stack_bytes"] == 0
    ops = [re.sub(r"\s+", " ", l.split(";")[0]).split()[1] for l in sass(chase_cubin[0])["lay_chain"].splitlines()
           if re.search(r"/\*[0-9a-f]{4}\*/", l) and not l.split("*/")[1].strip().startswith("@")]
    assert "STG.E.64" in ops and not any(op.startswith("STL") for op in ops)
    assert "SR_CLOCKLO" not in sass(chase_cubin[0])["lay_chain"], "the layer is untimed set-up"


def test_shared_chase_is_a_dependent_lds_chain(chase_cubin):
    code = sass(chase_cubin[0])["chase_shared"]
    assert_dependent_chain(timed_region(code), "LDS", at_least=32, pattern=LDS)


def _reads_both_clocks(code: str) -> bool:
    return "SR_CLOCKLO" in code and "SR_GLOBALTIMERLO" in code


def test_clock_witness_reads_both_clocks():
    cubin, log = compile_cubin("clock.cu")
    code = sass(cubin)["clock_witness"]
    assert _reads_both_clocks(code)
    assert resource_usage(log)["clock_witness"]["stack_bytes"] == 0
    # negative control: a kernel that reads no timer fails the check
    assert not _reads_both_clocks(sass(compile_cubin("launch.cu")[0])["empty_kernel"])


def test_launch_probe_kernel_is_empty():
    cubin, _ = compile_cubin("launch.cu")
    ops = {re.sub(r"\s+", " ", l.split(";")[0]).split()[1] for l in sass(cubin)["empty_kernel"].splitlines()
           if re.search(r"/\*[0-9a-f]{4}\*/", l)}
    assert ops <= {"LDC", "EXIT", "BRA", "NOP"}, ops  # LDC: the stack-pointer prologue every kernel has


@pytest.mark.parametrize("flavour, opcode", [("default", "LDG.E.64"), ("cg", "LDG.E.64.STRONG.GPU")])
def test_numba_chase_compiles_to_the_same_chain(flavour, opcode):
    from numba import cuda, types

    from gpuatlas.probes.families.chase_numba import make_chase_kernel
    from gpuatlas.probes.kit.numba_kit import gpu_primitives

    kernel = make_chase_kernel(cuda, *gpu_primitives(flavour))
    ptx, _ = cuda.compile_ptx(kernel.py_func, (types.uint64[:], types.uint64, types.int64, types.int64,
                                               types.uint64[:]), cc=(9, 0))
    cubin, log = ptx_to_cubin(ptx)
    (code,) = sass(cubin).values()
    assert_dependent_chain(timed_region(code), opcode, at_least=32)
    assert "0 bytes stack frame" in log


def assemble(ptx: str, arch: str) -> tuple[bytes, str]:
    """ptx_to_cubin, or a skip that names the target where the installed ptxas does not know it."""
    import subprocess

    try:
        return ptx_to_cubin(ptx, arch)
    except subprocess.CalledProcessError as error:
        if "is not defined for option 'gpu-name'" in (error.stderr or ""):
            pytest.skip(f"the installed ptxas cannot assemble for {arch}: {error.stderr.strip()}")
        raise


@pytest.mark.parametrize("cc", [(8, 0), (9, 0), (10, 0), (12, 0)], ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
def test_numba_ptx_assembles_to_the_dependent_chain_on_every_target(cc):
    from numba import cuda, types

    from gpuatlas.probes.families.chase_numba import make_chase_kernel
    from gpuatlas.probes.kit.numba_kit import gpu_primitives

    arch = f"sm_{cc[0]}{cc[1]}"
    kernel = make_chase_kernel(cuda, *gpu_primitives("cg"))
    ptx, _ = cuda.compile_ptx(kernel.py_func, (types.uint64[:], types.uint64, types.int64, types.int64,
                                               types.uint64[:]), cc=cc)
    assert f".target {arch}" in ptx
    cubin, log = assemble(ptx, arch)
    (code,) = sass(cubin).values()
    assert_dependent_chain(timed_region(code), "LDG.E.64.STRONG.GPU", at_least=32)
    assert "0 bytes stack frame" in log


@pytest.mark.parametrize("capability, mma", [(80, "mma.sync"), (90, "wgmma.mma_async")])
def test_triton_matmul_builds_each_targets_tensor_core_path(capability, mma):
    """A 64 x 64 x 64 bf16 tile: Ampere's warp-level mma.sync on target 80, Hopper's wgmma on 90."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from gpuatlas.probes.kit import triton_kernels

    signature = {**dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), "*bf16"),
                 **dict.fromkeys(("M", "N", "K", "stride_am", "stride_bk", "stride_cm"), "i32"),
                 **dict.fromkeys(("stride_ak", "stride_bn", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K",
                                  "GROUP_M"), "constexpr")}
    constants = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64,
                 "GROUP_M": 1}
    kernel = triton.compile(ASTSource(fn=triton_kernels.matmul_kernel, signature=signature, constexprs=constants),
                            target=GPUTarget("cuda", capability, 32), options={"num_warps": 4, "num_stages": 2})
    ptx, code = kernel.asm["ptx"], "".join(sass(kernel.asm["cubin"]).values())
    other = ({"mma.sync", "wgmma.mma_async"} - {mma}).pop()
    assert mma in ptx and other not in ptx
    assert re.search(r"\bHMMA\b" if capability == 80 else r"\bHGMMA\b", code)


def test_a_cubin_is_compiled_once_into_the_cache_under_what_it_is_built_from(tmp_path, monkeypatch):
    import gpuatlas.probes.kit.cuda as cuda

    monkeypatch.setattr(cuda, "CUBIN_CACHE", tmp_path)
    want = compile_cubin("wgmma.cu", "sm_90a")[0]
    compiles = []
    real = cuda.compile_source
    monkeypatch.setattr(cuda, "compile_source", lambda *args: (compiles.append(args), real(*args))[1])
    code = cuda.source("wgmma.cu")
    first = cuda.cubin_file(code, "wgmma.cu", "sm_90a")
    assert cuda.cubin_file(code, "wgmma.cu", "sm_90a") == first and len(compiles) == 1  # the second is a hit
    assert first.read_bytes() == want
    # the negative controls: other source, other target, each its own file and compile
    assert cuda.cubin_file(code + "\n", "wgmma.cu", "sm_90a") != first
    other = cuda.cubin_file(cuda.source("clock.cu"), "clock.cu", "sm_90")
    assert other.name.startswith("clock.sm_90.") and len(compiles) == 3
    assert sorted(p.name.split(".")[1] for p in tmp_path.iterdir()) == ["sm_90", "sm_90a", "sm_90a"]