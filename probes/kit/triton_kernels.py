"""Triton kernels of the matmul and fusion probes (imported only when those probes run, or compiled by tests).

* ``matmul_kernel`` -- Triton tutorial 03: one program per BLOCK_M x BLOCK_N tile of C, a K-loop of tl.dot
  into an fp32 accumulator, one bf16 store.  GROUP_M > 1 launches programs in supergroups of GROUP_M tile
  rows (L2 reuse across programs); GROUP_M = 1 is plain row-major order, the lecture's §7.8 model.  Shapes
  must be multiples of the blocks (the host checks), so no masks.
* softmax, one program per row (the row of ``cols`` <= BLOCK elements lives in registers):
  ``row_max_kernel``, ``exp_sum_kernel`` (writes the intermediate exp(x - max) and the row sum) and
  ``normalize_kernel`` are the unfused three; ``softmax_kernel`` is the fused one (one load, one store).
"""
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % group_m
    pid_n = (pid % group) // group_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.bfloat16))


@triton.jit
def row_max_kernel(x_ptr, max_ptr, stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
    tl.store(max_ptr + row, tl.max(x, axis=0))


@triton.jit
def exp_sum_kernel(x_ptr, max_ptr, e_ptr, sum_ptr, stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.load(max_ptr + row))
    tl.store(e_ptr + row * stride + offs, e.to(tl.bfloat16), mask=offs < cols)
    tl.store(sum_ptr + row, tl.sum(e, axis=0))


@triton.jit
def normalize_kernel(e_ptr, sum_ptr, y_ptr, stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    e = tl.load(e_ptr + row * stride + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + offs, (e / tl.load(sum_ptr + row)).to(tl.bfloat16), mask=offs < cols)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + offs, (e / tl.sum(e, axis=0)).to(tl.bfloat16), mask=offs < cols)
