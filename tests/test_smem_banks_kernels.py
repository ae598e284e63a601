"""The bank-conflict kernels (CuPy's smem_banks.cu and the Numba twin) compiled for sm_90 without a GPU:
each issues the shared loads it claims -- LDS, LDS.64 or LDS.128 -- as a dependent chain (latency) or as
independent loads from one address (throughput), between the clock reads, with no local memory."""
import re

import pytest

from gpuatlas.probes.kit.cuda import compile_cubin, ptx_to_cubin, resource_usage, sass
import importlib

smem_banks = importlib.import_module("gpuatlas.probes.families.smem_banks")
ACCESS_BYTES, FORMS = smem_banks.ACCESS_BYTES, smem_banks.FORMS

OPCODE = {4: "LDS", 8: "LDS.64", 16: "LDS.128"}
SHARED_LOAD = re.compile(r"\b(LDS(?:\.\w+)*) (R\d+), \[(R\d+)\]")


def instructions(sass_text: str) -> list[str]:
    return [re.sub(r"\s+", " ", l.split(";")[0]).strip() for l in sass_text.splitlines()
            if re.search(r"/\*[0-9a-f]{4}\*/", l)]


def timed_loads(sass_text: str) -> list[tuple[str, str, str]]:
    """(opcode, destination, address register) of every shared load between the clock64 reads, which the
    %globaltimer reads must bracket."""
    lines = instructions(sass_text)
    clocks = [i for i, l in enumerate(lines) if "SR_CLOCKLO" in l]
    timers = [i for i, l in enumerate(lines) if "SR_GLOBALTIMERLO" in l]
    assert len(clocks) == 2 and timers[0] < clocks[0] and clocks[-1] < timers[-1]
    region = lines[clocks[0]:clocks[1]]
    assert not [l for l in region if re.search(r"\b(LDG|LDL|STL|LD|ST)\b", l)], "only shared loads are timed"
    return [m.groups() for l in region if (m := SHARED_LOAD.search(l))]


def assert_is_the_claimed_probe(sass_text: str, access: int, form: str) -> None:
    loads = timed_loads(sass_text)
    assert {op for op, _, _ in loads} == {OPCODE[access]}, "every timed load has the access width"
    if form == "latency":
        assert len(loads) >= smem_banks.CHAIN_UNROLL
        for (_, dest, _), (_, _, address) in zip(loads, loads[1:]):
            assert address == dest, f"load from {address} does not depend on the previous load into {dest}"
    else:
        assert len(loads) >= smem_banks.loads_per_trip(form, access)
        (address,) = {address for _, _, address in loads}  # every load reads the lane's one address
        written = {int(dest[1:]) + k for _, dest, _ in loads for k in range(access // 4)}
        assert int(address[1:]) not in written, "no load's address comes from a load: all independent"


@pytest.fixture(scope="module")
def cubin():
    return compile_cubin("smem_banks.cu")


@pytest.mark.parametrize("access", ACCESS_BYTES)
@pytest.mark.parametrize("form", FORMS)
def test_cupy_kernel_issues_the_claimed_shared_loads(cubin, access, form):
    name = f"smem_{form}_{access}"
    assert_is_the_claimed_probe(sass(cubin[0])[name], access, form)
    usage = resource_usage(cubin[1])[name]
    assert usage["stack_bytes"] == usage["spill_stores"] == 0


@pytest.mark.parametrize("access", ACCESS_BYTES)
@pytest.mark.parametrize("form", FORMS)
def test_numba_kernel_issues_the_same_shared_loads(access, form):
    from numba import cuda, types

    numba_twin = importlib.import_module("gpuatlas.probes.families.smem_banks.smem_banks_numba")
    kernel = numba_twin.make_banks_kernel(cuda, access, form, *numba_twin.gpu_primitives(access))
    signature = (types.int32, types.int32, types.int32, types.int32, types.uint32, types.uint64[:],
                 types.uint32[:])
    ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    compiled, log = ptx_to_cubin(ptx)
    (code,) = sass(compiled).values()
    assert_is_the_claimed_probe(code, access, form)
    assert "0 bytes stack frame" in log
