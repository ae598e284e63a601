"""Occupancy calculator: resident blocks and warps per SM from a kernel's registers, threads and shared
memory, and which budget binds -- the three budgets of the lecture's §7.5, with the allocation rules of
CUDA's occupancy calculator (CUDA C Programming Guide, "Compute Capabilities"; CUDA Occupancy Calculator).

Device budgets come from run.json's device block; allocation granularities are the architecture's
(``ALLOCATION``, by compute capability).  tests/test_occupancy.py checks every answer against CUDA's own
occupancy API, recorded on the GPU by probes/occupancy_api.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: compute capability -> (registers allocated per warp in units of, shared memory allocated in units of
#: (bytes), shared memory the system reserves per block (bytes)); the units as CUDA's cuda_occupancy.h gives
#: them for each major version, the reserve as the driver reports it (reservedSharedMemPerBlock).  On all of
#: them the register file is split among SM_PARTITIONS schedulers: a warp's registers come from one
#: partition's quarter.
ALLOCATION = {(7, 0): (256, 256, 0), (7, 5): (256, 256, 0), (8, 0): (256, 128, 1024), (8, 6): (256, 128, 1024),
              (8, 9): (256, 128, 1024), (9, 0): (256, 128, 1024), (10, 0): (256, 128, 1024),
              (10, 3): (256, 128, 1024), (12, 0): (256, 128, 1024), (12, 1): (256, 128, 1024)}


SM_PARTITIONS = 4


def allocation(device: dict) -> tuple[int, int, int]:
    """The device's ALLOCATION row: its own compute capability's, else the nearest listed one below it."""
    cc = tuple(int(x) for x in str(device["compute_capability"]).split("."))
    return ALLOCATION[max((k for k in ALLOCATION if k <= cc), default=min(ALLOCATION))]


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float  # resident warps / the SM's maximum
    binding: str  # "registers", "shared memory", "threads", "blocks" (the budget that sets blocks_per_sm)
    limits: dict  # blocks each budget allows


def occupancy(device: dict, registers_per_thread: int, threads_per_block: int,
              smem_per_block_bytes: int = 0) -> Occupancy:
    """Resident blocks per SM: the minimum over the register, shared-memory, thread and block budgets."""
    reg_unit, smem_unit, smem_reserved = allocation(device)
    warp = device.get("warp_size", 32)
    warps_per_block = math.ceil(threads_per_block / warp)
    max_warps = device["max_threads_per_sm"] // warp
    limits = {"threads": max_warps // warps_per_block, "blocks": device["max_blocks_per_sm"]}
    if registers_per_thread:
        regs_per_warp = math.ceil(registers_per_thread * warp / reg_unit) * reg_unit
        warps_by_registers = SM_PARTITIONS * (device["regs_per_sm"] // SM_PARTITIONS // regs_per_warp)
        limits["registers"] = warps_by_registers // warps_per_block
    smem = smem_per_block_bytes + smem_reserved
    if smem_per_block_bytes > device.get("smem_per_block_optin_bytes", device["smem_per_sm_bytes"]):
        limits["shared memory"] = 0
    else:
        limits["shared memory"] = device["smem_per_sm_bytes"] // (math.ceil(smem / smem_unit) * smem_unit)
    if threads_per_block > device.get("max_threads_per_block", 1024):
        limits["threads"] = 0
    binding = min(limits, key=lambda k: (limits[k], ["registers", "shared memory", "threads", "blocks"].index(k)))
    blocks = limits[binding]
    return Occupancy(blocks, blocks * warps_per_block, blocks * warps_per_block / max_warps, binding, limits)
