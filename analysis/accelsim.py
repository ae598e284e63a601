"""A run's ``gpgpusim.config`` and ``trace.config`` for Accel-Sim, built from its derived.csv and run.json.

Every option carries a trailing comment naming where its value comes from: ``measured`` (the derived
quantities it is computed from, each as ``id = value unit [CI]``, and the arithmetic), ``driver`` (a
property in run.json's device block), ``default`` (a documented value no probe measures) or, as a comment
line, ``not set`` (why not: the simulator's own default then applies).  Accel-Sim's definitions: latencies
in core cycles; ``-gpgpu_l2_rop_latency`` = L2 hit - L1 hit; ``-dram_latency`` = DRAM - L2 hit; an opcode's
initiation interval = 32 lanes / its lanes per clock per scheduler (gpuatlas.analysis.accelsim_sm: the SM's options).
docs/accel-sim.md explains each option.
"""
from __future__ import annotations

import math

import pandas as pd

from gpuatlas.analysis.accelsim_options import KNOWN
from gpuatlas.analysis.accelsim_run import Option, Run, measured, missing, whole
from gpuatlas.analysis.accelsim_sm import core_options, opcode_options, trace_options

#: The CUDA C++ Programming Guide's shared-memory carve-outs (KiB) per compute capability.
CARVEOUTS_KIB = {"7.0": (0, 8, 16, 32, 64, 96), "7.5": (32, 64), "8.0": (0, 8, 16, 32, 64, 100, 132, 164),
                 "8.6": (0, 8, 16, 32, 64, 100), "8.7": (0, 8, 16, 32, 64, 100, 132, 164),
                 "8.9": (0, 8, 16, 32, 64, 100),
                 "9.0": (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)}
#: The MSHR and queue fields of the simulator's tested configs from Volta on (dl1's MSHR entries are replaced by
#: l1.mshr_per_sm where the run measured it).
DL1_QUEUES, DL2_QUEUES = "A:512:8,16:0,32", "A:192:4,32:0,32"
#: A memory bus this wide or wider is HBM (GDDR buses stop at 512 bits): 128-bit channels, else GDDR6's 16.
HBM_BUS_BITS, HBM_CHANNEL_BITS, GDDR_CHANNEL_BITS = 1024, 128, 16
#: The simulator's DRAM atom (one L2 sector) where the run measured no L2 sector.
SECTOR_BYTES = 32
SUB_PARTITIONS = 2  # L2 slices per memory channel in the simulator's configs from Volta on

#: Options no probe measures and no property gives, and why they are left to the simulator's default.
NOT_SET = {
    "-dram_dual_bus_interface": "a DRAM interface choice no probe sees",
    "-gpgpu_dram_timing_opt": "DRAM timings (tCCD, tRRD, tRCD, ...) are not visible to a kernel's clock",
    "-gpgpu_mem_addr_mapping": "the address-to-channel/bank map is not measured",
    "-gpgpu_mem_address_mask": "the address-to-channel/bank map is not measured",
    "-gpgpu_num_reg_banks": "register-file bank conflicts are not probed",
    "-gpgpu_reg_file_port_throughput": "register-file ports are not probed",
    "-gpgpu_operand_collector_num_units_gen": "a model structure with no counterpart a probe measures",
    "-gpgpu_operand_collector_num_in_ports_gen": "a model structure with no counterpart a probe measures",
    "-gpgpu_operand_collector_num_out_ports_gen": "a model structure with no counterpart a probe measures",
    "-gpgpu_enable_specialized_operand_collector": "a model structure with no counterpart a probe measures",
    "-gpgpu_pipeline_widths": "pipeline-register widths are a model choice, not a measured quantity",
    "-gpgpu_inst_fetch_throughput": "instruction fetch width is not probed (geometry.icache times the "
                                    "instruction caches, not the fetch width)",
    "-gpgpu_l1_banks": "the L1's bank count is not measured (its bytes per clock are: "
                       "l1.bandwidth_bytes_per_clk_sm)",
    "-gpgpu_l1_cache_write_ratio": "the share of the L1 reserved for stores is not measured",
    "-gpgpu_perf_sim_memcpy": "a simulation-speed switch, not hardware",
    "-icnt_flit_size": "the interconnect's flit is not visible to a probe",
    "-specialized_unit_3": "specialized units are assigned in Accel-Sim's per-architecture opcode map, which "
                           "this export does not write",
    "-specialized_unit_4": "specialized units are assigned in Accel-Sim's per-architecture opcode map, which "
                           "this export does not write",
    "-trace_opcode_latency_initiation_spec_op_3": "follows -specialized_unit_3, not set",
    "-trace_opcode_latency_initiation_spec_op_4": "follows -specialized_unit_4, not set",
}
#: The options that go to trace.config; the rest go to gpgpusim.config.
TRACE_OPTIONS = tuple(name for name in KNOWN if name.startswith("-trace_opcode_"))


def latency_options(run: Run) -> list[Option]:
    """The memory latencies in core cycles, as Accel-Sim defines them."""
    return [
        measured(run, "-gpgpu_l1_latency", ("l1.latency_cycles",), lambda l1: whole(l1), "rounded"),
        measured(run, "-gpgpu_smem_latency", ("smem.latency_cycles",), lambda s: whole(s), "rounded"),
        measured(run, "-gpgpu_l2_rop_latency", ("l2.latency_cycles", "l1.latency_cycles"),
                  lambda l2, l1: whole(l2 - l1), "L2 hit - L1 hit, rounded (the near partition's hit: "
                  "the simulator has one L2 latency" + (f"; far partition {run.cite('l2.far_latency_cycles')}"
                                                        if run.has("l2.far_latency_cycles") else "") + ")"),
        measured(run, "-dram_latency", ("dram.latency_cycles", "l2.latency_cycles"),
                  lambda dram, l2: whole(dram - l2), "DRAM - L2 hit, rounded (the cold-path chase past the L2, "
                  "every access a miss)"),
        measured(run, "-gpgpu_kernel_launch_latency", ("launch.overhead_s", "clock.sm_hz"),
                  lambda s, hz: whole(s * hz), "back-to-back empty launches' interval x the SM clock, rounded"),
    ]


def _channels(run: Run) -> tuple[int, int, str]:
    """(channels, bytes per channel, why) from the driver's memory bus width."""
    bits = int(run.device["memory_bus_bits"])
    width = HBM_CHANNEL_BITS if bits >= HBM_BUS_BITS else GDDR_CHANNEL_BITS
    kind = "HBM (a bus this wide is not GDDR)" if bits >= HBM_BUS_BITS else "GDDR6"
    return bits // width, width // 8, f"memory_bus_bits = {bits} / {width}-bit channels of {kind}"


def memory_options(run: Run) -> list[Option]:
    """Memory channels, DRAM bus and clock domains, and the L2 as dl2."""
    d = run.device
    n_mem, bus_bytes, why = _channels(run)
    sector = run.value("l2.sector_bytes") if run.has("l2.sector_bytes") else SECTOR_BYTES
    sector_why = run.cite("l2.sector_bytes") if run.has("l2.sector_bytes") else (
        f"the simulator's {SECTOR_BYTES}-byte sector (no l2.sector_bytes in this run)")
    out = [Option("-gpgpu_n_mem", str(n_mem), "driver", why),
           Option("-gpgpu_dram_buswidth", str(bus_bytes), "driver", f"bytes per channel: {why}"),
           Option("-gpgpu_n_mem_per_ctrlr", "1", "default", "one channel per controller, as the channels above"),
           Option("-gpgpu_n_sub_partition_per_mchannel", str(SUB_PARTITIONS), "default",
                  "two L2 slices per channel, as the simulator's configs from Volta on"),
           Option("-gpgpu_dram_burst_length", str(whole(sector / bus_bytes)), "default" if sector == SECTOR_BYTES
                  else "measured", f"one DRAM atom = one L2 sector / channel bytes: {sector_why}")]
    mem_hz = float(d["memory_clock_hz"])
    out.append(measured(run, "-dram_data_command_freq_ratio", ("dram.read_bandwidth_bytes_per_s",),
                         lambda bw: 2 ** max(0, round(math.log2(bw / (n_mem * bus_bytes * mem_hz)))),
                         f"transfers per memory clock: the read bandwidth over channels x bytes x memory_clock_hz "
                         f"= {mem_hz:.6g} (driver), to the nearest power of two"))
    if run.has("clock.sm_hz"):
        core = run.value("clock.sm_hz") / 1e6
        out.append(Option("-gpgpu_clock_domains", f"{core:.1f}:{core:.1f}:{core:.1f}:{mem_hz / 1e6:.1f}", "measured",
                          f"core, interconnect and L2 at {run.cite('clock.sm_hz')} (the simulator's configs clock "
                          f"the interconnect and L2 with the core); DRAM at the driver's memory_clock_hz"))
    else:
        out.append(missing("-gpgpu_clock_domains", "clock.sm_hz"))
    if n_mem & (n_mem - 1):
        out.append(Option("-gpgpu_memory_partition_indexing", "0", "driver",
                          f"linear: {n_mem} channels is not a power of two, where the IPOLY hash does not apply"))
    else:
        out.append(Option("-gpgpu_memory_partition_indexing", None, "not set",
                          "the channel hash is not measured (l2.partition_interleave_bytes is the partitions' "
                          "interleave, not the channels')"))
    out.append(_dl2(run, n_mem))
    return out


def _ways_gap(run: Run) -> str:
    """Why the L2's ways are a default: undecided (with its candidates) or not measured."""
    if "l2.ways" not in run.rows:
        return "no l2.ways"
    r = run.rows["l2.ways"]
    return f"l2.ways undecided between {r.ci_low:.0f} and {r.ci_high:.0f}"


def _dl2(run: Run, n_mem: int) -> Option:
    """The L2 per slice: the driver's L2 over the slices, in power-of-two sets (the simulator's set index
    masks the address) of the measured associativity where it fits, else in as many ways as hold the L2."""
    name, slices = "-gpgpu_cache:dl2", n_mem * SUB_PARTITIONS
    line = run.value("l2.line_bytes") if run.has("l2.line_bytes") else 128
    total = int(run.device["l2_bytes"])
    parts = [f"driver l2_bytes = {total} over {slices} slices"]
    parts.append(run.cite("l2.line_bytes") if run.has("l2.line_bytes") else "line 128 B default (no l2.line_bytes)")
    ways = run.value("l2.ways") if run.has("l2.ways") else 16
    sets = 2 ** max(0, round(math.log2(total / (slices * line * ways))))
    fitted = whole(total / (slices * line * sets))
    parts.append(f"sets {sets}: the power of two nearest the driver's L2 in "
                 + (run.cite("l2.ways") if run.has("l2.ways") else f"16 ways (default: {_ways_gap(run)})")
                 + (f"; ways {fitted} so that the slices hold the L2" if fitted != ways else ""))
    for q in ("l2.capacity_bytes", "l2.partition_bytes"):
        if run.has(q):
            parts.append(f"measured capacity {run.cite(q)}")
    write_alloc = "L" if not run.has("l2.write_allocates") or run.value("l2.write_allocates") >= 0.5 else "N"
    parts.append("write back; write allocate " + (run.cite("l2.write_allocates") if run.has("l2.write_allocates")
                                                  else "lazy (default)"))
    parts.append(f"MSHR and queue fields {DL2_QUEUES} from the simulator's tested configs (not measured)")
    value = f"S:{sets}:{int(line)}:{fitted},L:B:m:{write_alloc}:L,{DL2_QUEUES}"
    return Option(name, value, "measured", "; ".join(parts))


def l1_options(run: Run) -> list[Option]:
    """The unified L1 / shared memory, and the L1 as dl1."""
    d = run.device
    smem_kib = int(d["smem_per_sm_bytes"]) // 1024
    carve = CARVEOUTS_KIB.get(str(d["compute_capability"]))
    out = [Option("-gpgpu_shmem_size", str(d["smem_per_sm_bytes"]), "driver", "smem_per_sm_bytes"),
           Option("-gpgpu_shmem_sizeDefault", str(d["smem_per_sm_bytes"]), "driver", "smem_per_sm_bytes"),
           Option("-gpgpu_shmem_per_block", str(d["smem_per_block_bytes"]), "driver",
                  f"smem_per_block_bytes (opt-in up to {d.get('smem_per_block_optin_bytes', 'n/a')})")]
    if carve and carve[-1] == smem_kib:
        out.append(Option("-gpgpu_shmem_option", ",".join(map(str, carve)), "default",
                          f"the CUDA C++ Programming Guide's carve-outs (KiB) for compute capability "
                          f"{d['compute_capability']}, ending at the driver's smem_per_sm_bytes"))
    else:
        out.append(Option("-gpgpu_shmem_option", f"0,{smem_kib}", "driver",
                          "no carve-out table for this compute capability: none or the driver's whole "
                          "smem_per_sm_bytes"))
    out.append(measured(run, "-gpgpu_unified_l1d_size", ("l1.unified_bytes",), lambda b: int(b // 1024),
                         "KiB; a lower bound by its method"))
    out.append(measured(run, "-gpgpu_adaptive_cache_config", ("l1.shared_trade_ratio",),
                         lambda r: int(r >= 0.5), "1: the L1 gives up about a byte per byte of shared memory "
                         "(one array); 0 if it gives up less than half"))
    out.append(measured(run, "-gpgpu_gmem_skip_L1D", ("l1.latency_cycles",), lambda _: 0,
                         "0: plain global loads hit in the L1 (the through-L1 chase has an L1 plateau)"))
    out.append(_dl1(run))
    return out


def _dl1(run: Run) -> Option:
    """The L1 at its largest (no shared memory): 4 sets, as the simulator's configs from Volta on lay dl1 out
    (it rescales the ways to the carve-out when the adaptive cache config is on), line and sector measured."""
    name = "-gpgpu_cache:dl1"
    needed = ("l1.capacity_bytes", "l1.line_bytes")
    if not run.has(*needed):
        return missing(name, *(q for q in needed if not run.has(q)))
    line = int(run.value("l1.line_bytes"))
    sets = 4
    ways = whole(run.value("l1.capacity_bytes") / (sets * line))
    sectored = run.has("l1.sector_bytes") and run.value("l1.sector_bytes") < line
    keeps = not run.has("l1.keeps_stored_lines") or run.value("l1.keeps_stored_lines") >= 0.5
    parts = [run.cite("l1.capacity_bytes"), run.cite("l1.line_bytes"),
             f"{sets} sets (the simulator's dl1 layout from Volta on) x {ways} ways = capacity / (sets x line)"]
    if run.has("l1.ways"):
        parts.append(f"the hardware's own sets and ways: {run.cite('l1.ways')}"
                     + (f", {run.cite('l1.sets')}" if run.has("l1.sets") else ""))
    parts.append((run.cite("l1.sector_bytes") + (": sectored" if sectored else ": one sector per line"))
                 if run.has("l1.sector_bytes") else "not sectored (no l1.sector_bytes)")
    parts.append("write through; write allocate " + (run.cite("l1.keeps_stored_lines")
                                                     if run.has("l1.keeps_stored_lines") else "lazy (default)"))
    queues = DL1_QUEUES
    if run.has("l1.mshr_per_sm"):  # the MSHR entries: distinct-line misses one SM keeps in flight, measured
        kind, _, rest = DL1_QUEUES.split(":", 2)
        queues = f"{kind}:{whole(run.value('l1.mshr_per_sm'))}:{rest}"
        parts.append(f"MSHR entries {run.cite('l1.mshr_per_sm')}; MSHR kind, merge and queue fields of {queues} "
                     "from the simulator's tested configs")
    else:
        parts.append(f"MSHR and queue fields {DL1_QUEUES} from the simulator's tested configs (l1.mshr_per_sm is "
                     "not measured)")
    value = f"{'S' if sectored else 'N'}:{sets}:{line}:{ways},L:T:m:{'L' if keeps else 'N'}:L,{queues}"
    return Option(name, value, "measured", "; ".join(parts))


def options(meta: dict, derived: pd.DataFrame) -> list[Option]:
    """Every option Accel-Sim's tuner sets, each set from the run or marked not set with the reason."""
    run = Run(meta, derived)
    made = (core_options(run) + l1_options(run) + latency_options(run) + memory_options(run) + opcode_options(run)
            + trace_options(run))
    made += [Option(name, None, "not set", why) for name, why in NOT_SET.items()]
    names = [o.name for o in made]
    if sorted(names) != sorted(KNOWN):
        raise AssertionError(f"options made and known differ: {sorted(set(names) ^ set(KNOWN))}")
    return made


def render(meta: dict, derived: pd.DataFrame) -> dict[str, str]:
    """``{"gpgpusim.config": text, "trace.config": text}`` of a run."""
    made = options(meta, derived)
    head = (f"# {{}} for {meta['gpu']}, from gpuatlas run {meta['run_id']} (derived.csv and run.json).\n"
            "# Each option: measured (the derived quantities it comes from, as id = value unit [95% CI]), driver\n"
            "# (run.json's device block), default (documented, not measured), or a comment line: not set (why).\n")
    files = {}
    for file, keep in (("gpgpusim.config", lambda o: o.name not in TRACE_OPTIONS),
                       ("trace.config", lambda o: o.name in TRACE_OPTIONS)):
        lines = [o.line() for o in made if keep(o)]
        files[file] = head.format(file) + "\n".join(lines) + "\n"
    return files


def export(run_dir, out_dir) -> list:
    """Write the run's gpgpusim.config and trace.config into ``out_dir`` (made if missing); their paths.
    UsageError, before anything is written, for a folder that is not a run or an output folder that cannot
    be written."""
    import os
    from pathlib import Path

    from gpuatlas.analysis.errors import UsageError
    from gpuatlas.analysis.results import RunDir

    run = RunDir(Path(run_dir))
    meta, derived = run.read_meta(), run.read_derived()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file, not a folder: give -o a folder for gpgpusim.config and trace.config")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make {out} ({exc.strerror}): give -o a folder you can write") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"{out} is not writable: give -o a folder you can write")
    written = []
    for name, text in render(meta, derived).items():
        (out / name).write_text(text)
        written.append(out / name)
    return written
