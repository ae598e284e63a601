"""The options GPGPU-Sim (Accel-Sim's simulator core) accepts in ``gpgpusim.config`` and ``trace.config``, as far
as gpuatlas writes them, and a parser that holds a config to the simulator's grammar.

Known options: the names Accel-Sim's microbenchmark tuner writes into ``gpgpusim.config``
(accel-sim/accel-sim-framework, release branch @2260456e, util/tuner/GPU_Microbenchmark/ubench/**, as
collected in ``../shared/reference/accel-sim-tuner-options.txt``; ``-ptx_opcode_latency_tesnor`` is spelled
so in the simulator).  Each gets the shape of its value.

Grammar (GPGPU-Sim's ``option_parser.cc``: a config file is read line by line, everything from ``#`` to the
end of a line dropped, the rest split on whitespace into ``-name value`` pairs; an unknown name stops the
simulator).  Cache strings follow the ``sscanf`` of ``cache_config::init`` in ``gpu-cache.h``::

    <kind>:<sets>:<line bytes>:<ways>,<replacement>:<write>:<allocate>:<write allocate>:<set index>,
    <mshr kind>:<mshr entries>:<mshr max merge>,<miss queue>:<result fifo>[,<data port width>]

kind N (normal) or S (sectored); replacement L (LRU) or F (FIFO); write R (read only), B (write back),
T (write through), E (write evict) or L (local write back, global write through); allocate m (on miss),
f (on fill) or s (streaming); write allocate N (none), W (write allocate), F (fetch on write) or L (lazy
fetch on read); set index H (Fermi hash), P (IPOLY hash), C (custom), L (linear) or X (bitwise XOR);
mshr kind F (texture FIFO), T (sector texture FIFO), A (associative) or S (sector associative).
"""
from __future__ import annotations

import re

_INT = r"\d+"
_CACHE = (r"[NS]:\d+:\d+:\d+,[LF]:[RBTEL]:[mfs]:[NWFL]:[HPCLX],[FTAS]:\d+:\d+,\d+:\d+(,\d+)?")
#: Value shapes: a regular expression the whole value token must match.
SHAPES = {
    "int": _INT,
    "bool": r"[01]",
    "ints": r"\d+(,\d+)*",
    "pair": r"\d+,\d+",  # trace.config's "<latency>,<initiation interval>"
    "ptx_int": r"\d+(,\d+){5}",  # <ADD,MAX,MUL,MAD,DIV,SHFL>
    "ptx_float": r"\d+(,\d+){4}",  # <ADD,MAX,MUL,MAD,DIV>
    "cache": _CACHE,
    "clocks": r"\d+(\.\d+)?(:\d+(\.\d+)?){3}",  # <core>:<interconnect>:<L2>:<DRAM> MHz
    "threads": r"\d+:\d+",  # <threads per SM>:<warp size>
    "token": r"\S+",
}

#: Every option Accel-Sim's tuner sets, with the shape of its value.
KNOWN = {
    "-dram_data_command_freq_ratio": "int", "-dram_dual_bus_interface": "bool", "-dram_latency": "int",
    "-gpgpu_adaptive_cache_config": "bool", "-gpgpu_cache:dl1": "cache", "-gpgpu_cache:dl2": "cache",
    "-gpgpu_clock_domains": "clocks", "-gpgpu_coalesce_arch": "int", "-gpgpu_compute_capability_major": "int",
    "-gpgpu_compute_capability_minor": "int", "-gpgpu_dram_burst_length": "int", "-gpgpu_dram_buswidth": "int",
    "-gpgpu_dram_timing_opt": "token", "-gpgpu_dual_issue_diff_exec_units": "bool",
    "-gpgpu_enable_specialized_operand_collector": "bool", "-gpgpu_gmem_skip_L1D": "bool",
    "-gpgpu_inst_fetch_throughput": "int", "-gpgpu_kernel_launch_latency": "int", "-gpgpu_l1_banks": "int",
    "-gpgpu_l1_cache_write_ratio": "int", "-gpgpu_l1_latency": "int", "-gpgpu_l2_rop_latency": "int",
    "-gpgpu_max_insn_issue_per_warp": "int", "-gpgpu_mem_addr_mapping": "token", "-gpgpu_mem_address_mask": "int",
    "-gpgpu_memory_partition_indexing": "int", "-gpgpu_n_clusters": "int", "-gpgpu_n_cores_per_cluster": "int",
    "-gpgpu_n_mem": "int", "-gpgpu_n_mem_per_ctrlr": "int", "-gpgpu_n_sub_partition_per_mchannel": "int",
    "-gpgpu_num_dp_units": "int", "-gpgpu_num_int_units": "int", "-gpgpu_num_reg_banks": "int",
    "-gpgpu_num_sched_per_core": "int", "-gpgpu_num_sfu_units": "int", "-gpgpu_num_sp_units": "int",
    "-gpgpu_num_tensor_core_units": "int", "-gpgpu_occupancy_sm_number": "int",
    "-gpgpu_operand_collector_num_in_ports_gen": "int", "-gpgpu_operand_collector_num_out_ports_gen": "int",
    "-gpgpu_operand_collector_num_units_gen": "int", "-gpgpu_perf_sim_memcpy": "bool",
    "-gpgpu_pipeline_widths": "ints", "-gpgpu_ptx_force_max_capability": "int",
    "-gpgpu_reg_file_port_throughput": "int", "-gpgpu_registers_per_block": "int",
    "-gpgpu_shader_core_pipeline": "threads", "-gpgpu_shader_cta": "int", "-gpgpu_shader_registers": "int",
    "-gpgpu_shmem_option": "ints", "-gpgpu_shmem_per_block": "int", "-gpgpu_shmem_size": "int",
    "-gpgpu_shmem_sizeDefault": "int", "-gpgpu_smem_latency": "int", "-gpgpu_sub_core_model": "bool",
    "-gpgpu_tensor_core_avail": "bool", "-gpgpu_unified_l1d_size": "int", "-icnt_flit_size": "int",
    "-ptx_opcode_initiation_dp": "ptx_float", "-ptx_opcode_initiation_fp": "ptx_float",
    "-ptx_opcode_initiation_int": "ptx_int", "-ptx_opcode_initiation_sfu": "int",
    "-ptx_opcode_initiation_tensor": "int", "-ptx_opcode_latency_dp": "ptx_float",
    "-ptx_opcode_latency_fp": "ptx_float", "-ptx_opcode_latency_int": "ptx_int", "-ptx_opcode_latency_sfu": "int",
    "-ptx_opcode_latency_tesnor": "int", "-specialized_unit_3": "token", "-specialized_unit_4": "token",
    "-trace_opcode_latency_initiation_dp": "pair", "-trace_opcode_latency_initiation_int": "pair",
    "-trace_opcode_latency_initiation_sfu": "pair", "-trace_opcode_latency_initiation_sp": "pair",
    "-trace_opcode_latency_initiation_spec_op_3": "pair", "-trace_opcode_latency_initiation_spec_op_4": "pair",
    "-trace_opcode_latency_initiation_tensor": "pair",
}


class ConfigError(ValueError):
    """A config the simulator would refuse: an unknown option, a value missing or of the wrong shape."""


def strip_comment(line: str) -> str:
    """The line without its comment (``#`` to the end of the line), as the simulator reads it."""
    return line.split("#", 1)[0]


def parse(text: str) -> list[tuple[str, str]]:
    """``(name, value)`` of every option in a config's text, in order; ConfigError where the simulator's parser
    would stop (an unknown name, a name without a value, a value not of its option's shape, a name set twice)."""
    tokens = " ".join(strip_comment(line) for line in text.splitlines()).split()
    if len(tokens) % 2:
        raise ConfigError(f"an option without a value (last token {tokens[-1]!r})")
    options, seen = [], set()
    for name, value in zip(tokens[::2], tokens[1::2]):
        if name not in KNOWN:
            raise ConfigError(f"unknown option {name!r}")
        if name in seen:
            raise ConfigError(f"{name} is set twice")
        if not re.fullmatch(SHAPES[KNOWN[name]], value):
            raise ConfigError(f"{name} {value!r} is not a {KNOWN[name]} value")
        seen.add(name)
        options.append((name, value))
    return options


CACHE_FIELDS = ("kind", "sets", "line_bytes", "ways", "replacement", "write", "allocate", "write_allocate",
                "set_index", "mshr_kind", "mshr_entries", "mshr_max_merge", "miss_queue", "result_fifo",
                "data_port_width")


def cache_fields(value: str) -> dict:
    """A cache string's fields by name (numbers as int), in the positions ``cache_config::init`` reads them."""
    if not re.fullmatch(_CACHE, value):
        raise ConfigError(f"{value!r} is not a cache configuration string")
    parts = re.split(r"[:,]", value)
    return {name: int(part) if part.isdigit() else part for name, part in zip(CACHE_FIELDS, parts)}
