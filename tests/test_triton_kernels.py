"""The matmul and softmax Triton kernels compiled for sm_90 without a GPU, specialized as a launch would be
(unit strides constant, 16-divisible pointers and sizes hinted): the instructions that make each the probe it
claims to be, and the shared memory the host's feasibility model predicts."""
import re

import pytest
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from gpuatlas.analysis.roofline import feasible_blocks, smem_budget, tile_smem_bytes
from gpuatlas.probes.families.matmul import TRITON_CONFIGS, library_configs, roofline_warps
from gpuatlas.probes.kit import triton_kernels as tk
from gpuatlas.probes.kit.cuda import sass

SM90 = GPUTarget("cuda", 90, 32)
SIDE = 4096


def compile_like_launch(fn, args: dict, constexprs: dict, num_warps: int, num_stages: int = 3):
    """``args``: name -> (type, value).  Integers equal to 1 become constants and multiples of 16 get the
    divisibility hint, as Triton's JIT specializes a launch; pointers are 16-byte aligned (torch's are)."""
    signature, constants, attrs = {}, dict(constexprs), {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
            continue
        kind, value = args[name]
        if not kind.startswith("*") and value == 1:
            signature[name], constants[name] = "constexpr", 1
            continue
        signature[name] = kind
        if kind.startswith("*") or value % 16 == 0:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constants, attrs=attrs), target=SM90,
                          options={"num_warps": num_warps, "num_stages": num_stages})


def compile_matmul(block_m, block_n, block_k, group_m, num_warps, num_stages):
    ints = {"M": SIDE, "N": SIDE, "K": SIDE, "stride_am": SIDE, "stride_ak": 1, "stride_bk": SIDE, "stride_bn": 1,
            "stride_cm": SIDE, "stride_cn": 1}
    args = {**{p: ("*bf16", 0) for p in ("a_ptr", "b_ptr", "c_ptr")}, **{k: ("i32", v) for k, v in ints.items()}}
    return compile_like_launch(tk.matmul_kernel, args, {"BLOCK_M": block_m, "BLOCK_N": block_n,
                                                        "BLOCK_K": block_k, "GROUP_M": group_m},
                               num_warps, num_stages)


def opcode_count(cubin: bytes, opcode: str) -> int:
    code = "".join(sass(cubin).values())
    return len(re.findall(rf"\b{opcode}\b", code))


@pytest.mark.parametrize("block", feasible_blocks({"smem_per_block_optin_bytes": 232448}))
def test_square_tile_matmul_uses_tensor_cores_and_the_predicted_shared_memory(block):
    kernel = compile_matmul(block, block, block, 1, roofline_warps(block), 2)
    ptx = kernel.asm["ptx"]
    if block >= 64:  # a warpgroup's 64-row tile: Hopper's asynchronous MMA
        assert "wgmma.mma_async" in ptx and opcode_count(kernel.asm["cubin"], "HGMMA") > 0
    else:
        assert "mma.sync" in ptx and opcode_count(kernel.asm["cubin"], "HMMA") > 0
    assert "cp.async" in ptx, "the K-loop's tile loads are pipelined into shared memory"
    assert kernel.metadata.shared <= tile_smem_bytes(block)
    if block >= 64:
        assert kernel.metadata.shared == tile_smem_bytes(block), "two stages of A and B tiles, as the host counts"


@pytest.mark.parametrize("config", TRITON_CONFIGS)
def test_library_configs_are_wgmma_and_fit_as_counted(config, committed_run):
    block_m, block_n, block_k, warps, stages = config
    kernel = compile_matmul(block_m, block_n, block_k, 8, warps, stages)
    assert "wgmma.mma_async" in kernel.asm["ptx"] and opcode_count(kernel.asm["cubin"], "HGMMA") > 0
    assert kernel.metadata.shared == stages * (block_m + block_n) * block_k * 2
    device = committed_run[0]["device"]
    assert config in library_configs(device) and kernel.metadata.shared <= smem_budget(device)


ACCESS = re.compile(r"\b(ld|st)\.global(?:\.[a-z]+\d*)*?(?:\.v(\d))?\.b(\d+)\b")
SOFTMAX_ARGS = {"x_ptr": "*bf16", "e_ptr": "*bf16", "y_ptr": "*bf16", "max_ptr": "*fp32", "sum_ptr": "*fp32"}
WARPS = 8


def global_accesses(fn) -> dict:
    """{'ld'|'st': [bytes per thread of each global access instruction]} of ``fn`` compiled for one 4096-wide
    bf16 row with 8 warps."""
    args = {n: (SOFTMAX_ARGS[n], 0) if n.endswith("_ptr") else ("i32", SIDE) for n in fn.arg_names if n != "BLOCK"}
    ptx = compile_like_launch(fn, args, {"BLOCK": SIDE}, WARPS).asm["ptx"]
    out = {"ld": [], "st": []}
    for op, lanes, bits in ACCESS.findall(ptx):
        out[op].append(int(lanes or 1) * int(bits) // 8)
    return out


ROW_BYTES, THREADS = SIDE * 2, WARPS * 32


def test_global_access_parser_reads_vector_widths():
    assert [m for m in ACCESS.findall("ld.global.v4.b32 {%r1}, [%rd1]; st.global.b16 [%rd2], %rs1;")] == \
        [("ld", "4", "32"), ("st", "", "16")]


def test_fused_softmax_reads_its_row_once_and_writes_it_once():
    access = global_accesses(tk.softmax_kernel)
    assert sum(access["ld"]) * THREADS == ROW_BYTES, "one load stream: the row, nothing else"
    assert sum(access["st"]) * THREADS == ROW_BYTES, "one store: the output row"


def test_unfused_kernels_move_the_rows_the_byte_count_says():
    row_max, exp_sum, normalize = (global_accesses(k) for k in
                                   (tk.row_max_kernel, tk.exp_sum_kernel, tk.normalize_kernel))
    assert sum(row_max["ld"]) * THREADS == ROW_BYTES and row_max["st"] == [4]
    # exp(x - max): the row plus its max in, the intermediate row plus its sum out
    assert sorted(exp_sum["ld"])[0] == 4 and sum(sorted(exp_sum["ld"])[1:]) * THREADS == ROW_BYTES
    assert sorted(exp_sum["st"])[0] == 4 and sum(sorted(exp_sum["st"])[1:]) * THREADS == ROW_BYTES
    assert sorted(normalize["ld"])[0] == 4 and sum(sorted(normalize["ld"])[1:]) * THREADS == ROW_BYTES
    assert sum(normalize["st"]) * THREADS == ROW_BYTES
