"""Build the reference datasets (analysis/reference/*.csv) from ../shared/reference, reproducibly.

Two kinds of rows:

* computed here from raw benchmark outputs (marker [I]: computed from read values):
  - latency plateaus and capacities from the single-warp random pointer chases of RRZE-HPC/gpu-benches
    (``gpu-latency__*.txt``) and of Luo et al.'s code (``hopper-benchmark/random_latency__*.txt``), fitted
    with ``analysis.plateaus.fit_staircase``, the fit gpuatlas applies to its own chases; plateaus in order
    are L1, near L2, the far plateau (when four or more: a chain past one partition, whose accesses are
    far-partition hits mixed with misses, so ``l2.far_plateau_cycles``, not the far hits' latency) and DRAM
    (the last); its knees are the L1 capacity, the L2 partition and the far reach (where one SM's chase
    turns from L2 hits to HBM misses);
  - L2 bandwidth and L1 bandwidth: the first plateau of the same fit applied to seconds per byte
    (``gpu-l2-cache__*.txt``, ``gpu-cache__*.txt``); L2 capacity: the miss model fitted to the gpu-l2-cache
    sweep (``analysis.capacity.fit_capacity``, as gpuatlas fits its own bw.l2 sweep); L1 bandwidth where
    no gpu-cache file exists: the stride-1 row of ``gpu-strides__*.txt``;
  - DRAM read / write / copy bandwidth: the best rate over gpu-stream's occupancy sweep (``gpu-stream__*.txt``);
* transcribed from the curated tables of ``PUBLISHED.md`` (datasheet peaks, tensor-core rates, figures of
  other suites), each with its source and marker ([R] read in a primary file, [R2] read in a secondary
  compilation, [I] arithmetic on read values), in ``TRANSCRIBED`` below.

Values are in the vocabulary's SI units, rounded to 6 significant digits so that a rebuild on another
machine writes the same bytes. ``write_references()`` rewrites every CSV; ``python -m analysis.reference_build``
does the same from the command line.
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.capacity import fit_capacity
from analysis.plateaus import fit_staircase
from analysis.quantities import QUANTITIES
from analysis.references import PROBE, REFERENCE_COLUMNS, REFERENCE_DIR
from analysis.stats import median_ci

#: ../shared/reference as seen from the repository root (/work/main -> /work/shared/reference).
SHARED_REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"

KiB, MiB, MHz, GIGA, TERA = 1024, 2**20, 1e6, 1e9, 1e12

GB_REPO = "RRZE-HPC/gpu-benches (mirror te42kyfo/gpu-benches @1c36d50)"
HB_REPO = "HPMLL/NVIDIA-Hopper-Benchmark @ded6f57"
PUB = "../shared/reference/PUBLISHED.md"

#: SM counts the per-SM bandwidths divide by (PUBLISHED.md §1a MT multiProcessorCount [R]; §3 header and
#: ../shared/reference/README.md for the H100 PCIe).
SM_COUNT = {"a100_80": 108, "h100_pcie": 114}


# -- readers of the raw files ---------------------------------------------------------------------------
def read_chase(path: Path) -> pd.DataFrame:
    """``iters clock_MHz footprint_kB total_ms cycles_per_access`` rows after a ``clock: ...`` line.

    Footprints are KiB (gpu-latency/main.cu prints bytes / 1024, truncated); seconds per access are
    total_ms / iters (total_ms equals ns per access only when iters = 1e6).
    """
    table = np.loadtxt(path, skiprows=1, ndmin=2)
    return pd.DataFrame({"iters": table[:, 0], "clock_hz": table[:, 1] * MHz, "footprint_bytes": table[:, 2] * KiB,
                         "seconds": table[:, 3] * 1e-3 / table[:, 0], "cycles": table[:, 4]})


_SIZE_BW = re.compile(r"^\s*(?:\d+ kB\s+)?(\d+) kB\s+\d+ms\s+[\d.]+%\s+([\d.]+) GB/s")


def read_bandwidth_sweep(path: Path) -> pd.DataFrame:
    """gpu-cache (``size kB, time, spread, GB/s``) or gpu-l2-cache (``per-block kB, size kB, ...``) rows:
    data-set bytes (KiB as printed, bytes / 1024) and effective bandwidth in B/s (GB = 10^9 B)."""
    rows = [(float(m[1]) * KiB, float(m[2]) * GIGA) for m in map(_SIZE_BW.match, path.read_text().splitlines()) if m]
    return pd.DataFrame(rows, columns=["bytes", "bytes_per_s"])


_STREAM = re.compile(r"^\s*(\d+)\s+(\d+)\s+[\d.]+ %\s+\|\s+GB/s:\s+(.*)$")
STREAM_KERNELS = ("init", "read", "scale", "triad", "3pt", "5pt")


def read_stream(path: Path) -> pd.DataFrame:
    """gpu-stream rows per block size (2 blocks per SM): B/s of each kernel (GB = 10^9 B; gpu-stream/main.cu
    counts every array a kernel streams: init writes 1, read reads 1, scale reads 1 and writes 1)."""
    rows = []
    for m in map(_STREAM.match, path.read_text().splitlines()):
        if m:
            rates = [float(v) * GIGA for v in m[3].split()]
            rows.append({"block_size": int(m[1]), "threads": int(m[2]), **dict(zip(STREAM_KERNELS, rates))})
    return pd.DataFrame(rows)


def read_clock(path: Path) -> float:
    """The SM clock (Hz) of a ``clock: <MHz ...>`` first line (one value per sample, all equal)."""
    first = path.read_text().splitlines()[0]
    clocks = {float(v) for v in first.removeprefix("clock:").split()}
    if len(clocks) != 1:
        raise ValueError(f"{path}: the run reported several clocks {sorted(clocks)} MHz")
    return clocks.pop() * MHz


def read_strides(path: Path) -> dict[str, float]:
    """gpu-strides: B/cycle/SM of the stride-1 float and double rows (one block on one SM)."""
    found = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "stride" and parts[2] == "1":
            found[parts[0]] = float(parts[5])
    return found


# -- rows ------------------------------------------------------------------------------------------------
def _sig(x: float) -> float:
    return float(f"{x:.6g}") if x is not None and math.isfinite(x) else math.nan


def row(quantity: str, value: float, method: str, note: str, source: str,
        ci: tuple[float, float] = (math.nan, math.nan)) -> dict:
    return {"quantity": quantity, "value": _sig(value), "unit": QUANTITIES[quantity][0], "ci_low": _sig(ci[0]),
            "ci_high": _sig(ci[1]), "method": method, "probe": PROBE, "note": note, "source": source}


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / KiB:.0f} KiB"


@dataclass
class Curve:
    """A raw file and how to cite it."""

    path: Path
    source: str
    what: str  # the GPU as the source names it, and the caveat about its SKU


def chase_rows(curve: Curve, suite: str, published: dict[str, str]) -> list[dict]:
    """Clock, latency plateaus (cycles), DRAM latency (s) and knees (bytes) of one published chase.

    ``published`` maps a quantity to context for its note (the published size a knee is compared with).
    """
    t = read_chase(curve.path)
    clocks = t["clock_hz"].unique()
    if clocks.size != 1:
        raise ValueError(f"{curve.path}: the chase ran at several clocks {clocks / MHz} MHz")
    clock = float(clocks[0])
    fit = fit_staircase(t["footprint_bytes"], t["cycles"])
    p = fit.plateaus
    if len(p) < 3:
        raise ValueError(f"{curve.path}: {len(p)} plateaus, expected L1, L2 and DRAM")
    mhz = f"{clock / MHz:.0f} MHz"
    method = f"{suite} random pointer chase (one block), {mhz}; analysis.plateaus.fit_staircase"
    cycles_note = (f"[I] computed from the raw file; cycles = wall time x the {mhz} SM clock the benchmark "
                   f"reported; {curve.what}")
    level_ci = "plateau median, bootstrap 95% CI over its footprints"
    rows = [row("clock.sm_hz", clock, f"{suite}: SM clock the benchmark reported during the chase",
                f"[R] clock column of the raw file (not a measured busy-SM clock); {curve.what}", curve.source)]

    def plateau(quantity, q, which):
        rows.append(row(quantity, q.latency, f"{method} ({level_ci})",
                        f"{cycles_note}; {which} plateau over {_mib(q.lo_bytes)}..{_mib(q.hi_bytes)}",
                        curve.source, (q.ci_low, q.ci_high)))

    plateau("l1.latency_cycles", p[0], "first")
    plateau("l2.latency_cycles", p[1], "near-L2 (second)")
    if len(p) >= 4:
        plateau("l2.far_plateau_cycles", p[2], "far-L2 (third: far hits mixed with misses)")
    dram = p[-1]
    largest = t.loc[t["footprint_bytes"].idxmax()]
    plateau("dram.latency_cycles", dram, f"DRAM (last; the largest chain, {_mib(largest['footprint_bytes'])}, "
            f"took {largest['cycles']:.1f} cycles)")
    span = t[(t["footprint_bytes"] >= dram.lo_bytes) & (t["footprint_bytes"] <= dram.hi_bytes)]
    med, lo, hi = median_ci(span["seconds"])
    rows.append(row("dram.latency_ns", med, f"{suite} random pointer chase, {mhz}: total time / iterations "
                    "over the DRAM plateau's footprints (median, bootstrap 95% CI)",
                    f"[I] computed from the raw file (host-timed kernel, launch included, 1e6+ loads); "
                    f"{_mib(dram.lo_bytes)}..{_mib(dram.hi_bytes)}; {curve.what}", curve.source, (lo, hi)))

    knee = ("knee of the staircase fit: footprint where latency first reaches the geometric mean of the two "
            "plateaus (gpuatlas's definition); no CI: one sample per footprint")
    names = ["l1.capacity_bytes", "l2.partition_bytes"] + (["l2.far_reach_bytes"] if len(p) >= 4 else [])
    for quantity, value in zip(names, fit.knees_bytes):
        rows.append(row(quantity, value, f"{suite} random pointer chase, {mhz}; {knee}",
                        f"[I] computed from the raw file; a knee, not a size: a random chase's ramp and "
                        f"set aliasing (RRZE-HPC/gpu-benches#8) move it; {published[quantity]}; {curve.what}", curve.source))
    return rows


def _bandwidth_plateau(path: Path):
    """First plateau of the staircase fit of seconds per byte against the data-set size."""
    t = read_bandwidth_sweep(path)
    first = fit_staircase(t["bytes"], 1.0 / t["bytes_per_s"]).plateaus[0]
    return 1.0 / first.latency, (1.0 / first.ci_high, 1.0 / first.ci_low), first


def l2_bandwidth_row(curve: Curve, note: str) -> dict:
    value, ci, p = _bandwidth_plateau(curve.path)
    return row("l2.bandwidth_bytes_per_s", value,
               "gpu-benches gpu-l2-cache: all SMs sum a buffer that fits in L2 (double loads); first plateau "
               "of fit_staircase on seconds per byte (bootstrap 95% CI over its data-set sizes)",
               f"[I] computed from the raw file (GB/s read as 10^9 B/s); plateau {_mib(p.lo_bytes)}.."
               f"{_mib(p.hi_bytes)}; {note}; {curve.what}", curve.source, ci)


def l2_capacity_row(curve: Curve, size_bytes: float, size: str) -> dict:
    """The L2 capacity of a gpu-l2-cache sweep from the miss model (``analysis.capacity.fit_capacity``, as
    gpuatlas fits its own bw.l2 sweep), from ``size_bytes`` / 8 up; ``size`` states the published L2 size."""
    t = read_bandwidth_sweep(curve.path)
    floor = size_bytes / 8
    fit = fit_capacity(t["bytes"], t["bytes_per_s"], min_footprint_bytes=floor)
    if fit is None:
        raise ValueError(f"{curve.path}: the sweep does not fall from the L2 to HBM")
    t = t.sort_values("bytes")
    fitted = t[t["bytes"] >= floor]
    held = fitted["bytes"][fitted["bytes"] < fitted.loc[fitted["bytes_per_s"] < 0.9 * fit.cache_bytes_per_s,
                                                       "bytes"].min()].max()
    hbm = t.loc[t["bytes"] >= 4 * size_bytes, "bytes_per_s"].median()  # the curve's own HBM rate
    fallen = t.loc[t["bytes_per_s"] <= 1.1 * hbm, "bytes"].min()
    return row("l2.capacity_bytes", fit.capacity_bytes,
               "gpu-benches gpu-l2-cache: all SMs sum a buffer (double loads) of growing size; miss model fitted "
               "to the sweep (analysis.capacity.fit_capacity, gpuatlas's method): an L2 of C bytes re-read over a "
               "footprint F keeps a fraction h = min(1, C/F) resident, bandwidth(F) = 1 / (h / B_L2 + (1 - h) / "
               "B_HBM); 95% CI the profile interval, residuals within an F-test of the best (one sample per "
               "data-set size: no repeats to bootstrap)",
               f"[I] computed from the raw file; the model under-reads a cliff-shaped curve: this one keeps 90% "
               f"of the fitted L2 rate up to {_mib(held)} and is within 10% of its HBM rate (median beyond 4x "
               f"the L2: {hbm / TERA:.2f} TB/s) from {_mib(fallen)}, where the model expects a gradual fall "
               f"from C, so the fit places C below the cliff and below the L2's size; {size}; fitted L2 "
               f"{fit.cache_bytes_per_s / TERA:.2f} TB/s, miss (HBM) {fit.miss_bytes_per_s / TERA:.2f} TB/s; "
               f"sweep {_mib(t['bytes'].min())}..{_mib(t['bytes'].max())}, fitted over its {len(fitted)} sizes "
               f"from L2/8 ({_mib(fitted['bytes'].min())}..{_mib(fitted['bytes'].max())}); {curve.what}",
               curve.source, fit.ci)


def l1_strides_row(path: Path, source: str, what: str) -> dict:
    """L1 bandwidth per SM: gpu-strides' stride-1 double row (one block on one SM, B/clk/SM as printed)."""
    found = read_strides(path)
    return row("l1.bandwidth_bytes_per_clk_sm", found["double"],
               "gpu-benches gpu-strides: one block on one SM reads an L1-resident buffer at stride 1, double "
               "loads; bytes per SM clock as the benchmark printed",
               f"[R] read in the raw file; float loads {found['float']:g} B/clk/SM; one SM only, not every SM "
               f"at once; {what}", source)


def l1_bandwidth_row(curve: Curve, sms: int, clock_hz: float, note: str) -> dict:
    value, ci, p = _bandwidth_plateau(curve.path)
    per = sms * clock_hz
    return row("l1.bandwidth_bytes_per_clk_sm", value / per,
               "gpu-benches gpu-cache: one block per SM re-reads a buffer that fits in L1; first plateau of "
               f"fit_staircase on seconds per byte, divided by {sms} SMs x {clock_hz / MHz:.0f} MHz",
               f"[I] computed from the raw file: the file states no clock; {clock_hz / MHz:.0f} MHz (the "
               f"chase's clock) and {sms} SMs (PUBLISHED.md [R]) assumed; aggregate plateau "
               f"{value / TERA:.2f} TB/s over {_mib(p.lo_bytes)}..{_mib(p.hi_bytes)}; {note}; {curve.what}",
               curve.source, (ci[0] / per, ci[1] / per))


def stream_rows(curve: Curve) -> list[dict]:
    t = read_stream(curve.path)
    rows = []
    for quantity, kernel, what in (("dram.read_bandwidth_bytes_per_s", "read", "read kernel: loads one array"),
                                   ("dram.write_bandwidth_bytes_per_s", "init", "init kernel: stores one array"),
                                   ("dram.copy_bandwidth_bytes_per_s", "scale",
                                    "scale kernel a[i] = 1.2*b[i]: bytes read plus written")):
        best = t.loc[t[kernel].idxmax()]
        top = " (the largest block size: it may not have saturated)" if best["block_size"] == t["block_size"].max() else ""
        rows.append(row(quantity, best[kernel],
                        f"gpu-benches gpu-stream, {what}, 1 GiB arrays of doubles; best rate over the sweep of "
                        "block sizes 32..1024 at 2 blocks per SM",
                        f"[I] max of the raw file's column (GB/s read as 10^9 B/s), at block size "
                        f"{int(best['block_size'])}{top}; {curve.what}", curve.source))
    return rows


# -- transcribed values (PUBLISHED.md) -------------------------------------------------------------------
def _mt(file: str, section: str) -> str:
    return f"caps-tum/mt4g sample_results/{file}.json, via {PUB} {section}"


#: mt4g's line size is a capacity-in-lines method (its L1 line-size benchmark chases arrays of 1/2 to 3/2 the
#: L1 size at strides from the fetch granularity up and finds where the stride moves the capacity), so it is
#: gpuatlas's l1.line_bytes; its fetch granularity is the smallest stride at which every access of a cold
#: chase misses: a fill block, gpuatlas's l1.fill_bytes / l2.dram_fetch_bytes, never a line.
MT_LINE = ("mt4g line-size probe: capacity counted in lines (chases around the cache size at strides from its "
           "fill block up)")
MT_LINE_NOTE = "[I] method read in caps-tum/mt4g's L1 line-size benchmark source"
MT_L1_FILL = "mt4g L1 fetch-granularity p-chase: the block the L1 fills per miss"
MT_L2_FETCH = "mt4g L2 fetch-granularity p-chase (one cold pass, ld.global.ca)"
MT_L2_FETCH_NOTE = ("[I] mt4g does not say whether its cold pass misses to HBM or hits lines the array's copy left "
                    "in the L2: if it hits, this is the L1's fill block, not the L2's fetch from HBM")


def _mt_geometry(file: str, section: str, where: str, l2: bool) -> list[dict]:
    """mt4g's line and fetch-granularity results, each under the id of what its method measures."""
    source = _mt(file, section)
    rows = [row("l1.line_bytes", 128, MT_LINE, f"[R]{where}; {MT_LINE_NOTE}", source),
            row("l1.fill_bytes", 32, MT_L1_FILL, f"[R]{where}", source)]
    if l2:
        rows += [row("l2.line_bytes", 128, MT_LINE.replace("line-size", "L2 line-size"),
                     f"[R]{where}; [I] the same method as mt4g's L1 line size assumed (its L2 line-size "
                     "source not read)", source),
                 row("l2.dram_fetch_bytes", 32, MT_L2_FETCH, f"[R]{where}; {MT_L2_FETCH_NOTE}", source)]
    return rows


AS_UB = f"ShihengCao/AMALi hardware/NVIDIA_A100_80GB/stat.txt (Accel-Sim GPU_Microbenchmark tuner output), via {PUB}"
AS_UB_NOTE = ("A100 80GB PCIe ([I] from its 1512 MHz memory clock), not SXM4; SM clock not stated; a per-SM "
              "cycle count of the GA100 SM, expected the same on SXM4 [I]")
PC2 = (f"upb-pc2.atlassian.net wiki 'NVIDIA A100 40GB with NVLINK' (datasheet transcription), via {PUB} §1a; "
       "also glennklockwood.com/garden/processors/A100")
PC2_NOTE = ("[R] NVIDIA datasheet theoretical peak, not a measurement; read for the A100 40GB SXM4, same SMs and "
            "clock as the 80GB SXM4 [I]")
GL = f"glennklockwood.com/garden/processors/h100 (cites NVIDIA datasheet), via {PUB} §2a"
GL_NOTE = "[R] NVIDIA datasheet theoretical peak (dense), not a measurement"
DENSE_TC = "datasheet dense tensor-core peak"

AZ_H200 = f"Azure/AI-benchmarking-guide Azure_Results/ND_H200_v5_results.md, via {PUB} §5"
H200_SPEC = f"lzwjava.github.io/nvidia-h200-gpu-specs-en (H200 vs H100 SXM: 'Identical'), via {PUB} §5"
H200_SAME = "[R] the H200's compute peaks are the H100 SXM's (same GH100, 132 SMs); dense value from §2a [I]"
_H100_SXM_PEAKS = [
    row("fp32.peak_flops", 66.9 * TERA, "datasheet FP32 peak (132 SMs x 128 x 2 x 1.98 GHz)", GL_NOTE, GL),
    row("fp64.peak_flops", 33.5 * TERA, "datasheet FP64 peak (CUDA cores, not FP64 tensor 66.9 TFLOPS)",
        f"{GL_NOTE}; datasheet rounds to 34", GL),
    row("tc.bf16.peak_flops", 989.4 * TERA, f"{DENSE_TC} (1978.9 sparse)",
        f"{GL_NOTE}; = 132 SMs x 1.83 GHz x 4096 FLOP/clk/SM (NVIDIA/cudnn-frontend PR#650)", GL),
    row("tc.fp16.peak_flops", 989.4 * TERA, f"{DENSE_TC} (1978.9 sparse)",
        f"{GL_NOTE}; = 132 SMs x 1.83 GHz x 4096 FLOP/clk/SM (NVIDIA/cudnn-frontend PR#650)", GL),
    row("tc.tf32.peak_flops", 494.7 * TERA, f"{DENSE_TC} (989.4 sparse)",
        f"{GL_NOTE}; the source's column labels are misaligned, dense/sparse assignment [I]", GL),
    row("tc.fp8.peak_flops", 1978.9 * TERA, f"{DENSE_TC} (3957.8 sparse)",
        f"{GL_NOTE}; FP8 dense = 2x FP16 (NVIDIA/cudnn-frontend PR#650)", GL),
]

def _clustered(source: str, values: dict, what: str) -> list[dict]:
    """Luo et al.'s per-access latencies: each access of a pointer chase timed alone and the times clustered
    (arXiv 2501.12084 Table 4), the like-for-like comparator of gpuatlas's chase.access clusters."""
    return [row(quantity, value, f"Luo et al. per-access pointer-chase latency, clustered ({kind})",
                f"[R2] secondary compilation, primary table not opened; {what}", source)
            for quantity, (value, kind) in values.items()]


ET_C = "yaroslavvb/et-soc1-prototyping docs/reports/sources/2026-09-18-gpu-on-chip-communication.md (ET-C)"
ET_C_A100, ET_C_H800 = f"{ET_C}, L25 Table 4, via {PUB} §1b", f"{ET_C}, L25 Table 4, via {PUB} §4"

TRANSCRIBED: dict[str, list[dict]] = {
    "a100-sxm4-80gb": [
        row("smem.latency_cycles", 29.03, "Accel-Sim GPU_Microbenchmark shared_lat (shared-memory pointer chase)",
            f"[R] shared_lat 29.03 cycles; {AS_UB_NOTE}; Luo et al. (A100 PCIe) 29.0 [R2]", f"{AS_UB} §1b"),
        row("smem.bandwidth_bytes_per_clk_sm", 127.9, "Accel-Sim GPU_Microbenchmark shared_bw_64",
            f"[R] shared_bw 127.8, shared_bw_64 127.9 B/clk/SM (theoretical 32 banks x 4 B = 128); {AS_UB_NOTE}",
            f"{AS_UB} §1d"),
        row("smem.conflict_cycles_per_way", 2.0, "Sun et al. TPDS'23 (arXiv 2206.02874) Table 10: ld.shared.u32 "
            "latency at 1/2/4/8-way conflicts 23.0/25.0/29.0/37.0 cycles",
            "[R2] secondary compilation, primary table not opened; (25-23)/1 = (29-23)/3 = (37-23)/7 = 2 cycles "
            "per extra way [I]; A100 SKU and clock not stated",
            f"yaroslavvb/et-soc1-prototyping docs/reports/sources/2026-09-18-gpu-on-chip-communication.md "
            f"(ET-C), via {PUB} §1e"),
        *_mt_geometry("NVIDIA A100-PCIE-40GB", "§1c",
                      " measured on an A100-PCIE-40GB, not SXM4; the same GA100 SM and memory system [I]", l2=True),
        row("fp32.latency_cycles", 4.09, "Accel-Sim GPU_Microbenchmark lat_float (dependent FP32 chain)",
            f"[R] lat_float; {AS_UB_NOTE}; Abdelkhalik et al. mad.rn.f32 dependent: 4 [R2]", f"{AS_UB} §1b"),
        row("fp32.peak_flops", 19.5 * TERA, "datasheet FP32 peak (CUDA cores)", PC2_NOTE, PC2),
        row("fp64.peak_flops", 9.7 * TERA, "datasheet FP64 peak (CUDA cores, not FP64 tensor 19.5 TFLOPS)",
            PC2_NOTE, PC2),
        row("tc.bf16.peak_flops", 312 * TERA, f"{DENSE_TC} (624 sparse)",
            f"{PC2_NOTE}; A100 has no wgmma: mma.sync is its tensor-core path", PC2),
        row("tc.fp16.peak_flops", 312 * TERA, f"{DENSE_TC} (624 sparse)",
            f"{PC2_NOTE}; A100 has no wgmma: mma.sync is its tensor-core path", PC2),
        row("tc.tf32.peak_flops", 156 * TERA, f"{DENSE_TC} (312 sparse)",
            f"{PC2_NOTE}; A100 has no wgmma: mma.sync is its tensor-core path", PC2),
    ],
    "a100-pcie": [
        *_clustered(ET_C_A100, {"l2.far_latency_cycles": (356.6, "far-partition hit"),
                                "dram.near_latency_cycles": (474.9, "near-partition miss"),
                                "dram.far_latency_cycles": (622.7, "far-partition miss")},
                    "A100 PCIe (Luo et al.'s test GPU; 1395 MHz per their chase file [I]); near hit 208.0"),
        row("smem.latency_cycles", 29.0, "Luo et al. shared-memory pointer chase (arXiv 2402.13499 Table IV / "
            "2501.12084 Table 3)",
            "[R2] secondary compilation, primary table not opened; same A100 PCIe as the chase file; clock "
            "1395 MHz per the chase file [I]",
            f"yaroslavvb/et-soc1-prototyping docs/reports/sources/2026-09-18-a100-memory-hierarchy.md (ET-A), "
            f"via {PUB} §1b"),
        *_mt_geometry("NVIDIA A100-PCIE-40GB", "§1c", " A100-PCIE-40GB", l2=True),
    ],
    "h100-sxm": [
        row("clock.sm_hz", 1980 * MHz, "cudaDeviceProp.clockRate in mt4g's output",
            "[R] the maximum SM clock, not a measured clock; NVIDIA's tensor peaks assume 1830 MHz, FP32/FP64 "
            "1980 MHz (glennklockwood.com)", _mt("NVIDIA H100 80GB HBM3", "§2a")),
        row("smem.latency_cycles", 30, "mt4g shared-memory p-chase, median (p50)",
            "[R] mean 29.9; cycles of the in-kernel clock, SM clock during the run not stated (max 1980 MHz)",
            _mt("NVIDIA H100 80GB HBM3", "§2b")),
        row("l1.latency_cycles", 38, "mt4g L1 p-chase (default loads)",
            "[R] SM clock during the run not stated (max 1980 MHz); markdewing/AI_kernels: 40 [R] (clocks "
            "not locked)", _mt("NVIDIA H100 80GB HBM3", "§2b")),
        row("l2.latency_cycles", 222, "mt4g L2 p-chase, median (p50)",
            "[R] mean 219.3; near and far partitions not separated; SM clock not stated (max 1980 MHz); "
            "markdewing/AI_kernels: 291 [R]", _mt("NVIDIA H100 80GB HBM3", "§2b")),
        row("dram.latency_cycles", 864, "mt4g main-memory p-chase, median (p50)",
            "[R] mean 834.5, p95 1126; SM clock not stated (max 1980 MHz); markdewing/AI_kernels: 700 [R]",
            _mt("NVIDIA H100 80GB HBM3", "§2b")),
        row("l1.capacity_bytes", 238848, "mt4g probe of the L1 size (233.25 KiB)",
            "[R] a size probe, not a latency knee: compare with care against gpuatlas knees",
            _mt("NVIDIA H100 80GB HBM3", "§2b")),
        *_mt_geometry("NVIDIA H100 80GB HBM3", "§2b", "", l2=False),
        row("l2.capacity_bytes", 52428800, "mt4g l2.size (50 MiB = 52428800 B, as given in bytes)",
            "[R] the L2 size, not a fitted capacity: the miss-model fit of an all-SM read sweep (gpuatlas's "
            "l2.capacity_bytes) reads below the size", _mt("NVIDIA H100 80GB HBM3", "§2a")),
        row("l2.partition_bytes", 26214400, "mt4g segmentSize (25 MiB = 26214400 B, as given in bytes)",
            "[R] the size of one of the two L2 segments, not a latency knee",
            _mt("NVIDIA H100 80GB HBM3", "§2a")),
        row("dram.read_bandwidth_bytes_per_s", 3.18 * TERA, "BabelStream (CUDA) Dot: reads two arrays, no stores",
            "[R] 3.18 TB/s read as 10^12 B/s; Azure ND H100 v5 (SXM5); Dot includes a reduction; on the A100 "
            "SXM4 it matches gpu-stream's read kernel (1.75 vs 1.77 TB/s) [I]",
            f"samuel-bohman/AI-benchmarking-guide (fork of Azure/AI-benchmarking-guide) "
            f"Azure_Results/ND_H100_v5_results.md, via {PUB} §2b"),
        row("dram.copy_bandwidth_bytes_per_s", 2.90 * TERA, "BabelStream (CUDA) Copy: bytes read plus written",
            "[R] 2.90 TB/s read as 10^12 B/s; Azure ND H100 v5 (SXM5); 87% of the 3.35 TB/s datasheet [I]",
            f"samuel-bohman/AI-benchmarking-guide (fork of Azure/AI-benchmarking-guide) "
            f"Azure_Results/ND_H100_v5_results.md, via {PUB} §2b"),
        *_H100_SXM_PEAKS,
    ],
    "h100-pcie": [],
    "h200": [
        row("dram.read_bandwidth_bytes_per_s", 4.48 * TERA, "BabelStream (CUDA) Dot: reads two arrays, no stores",
            f"[R] 4.48 TB/s read as 10^12 B/s; Azure ND H200 v5 (H200 SXM); Dot includes a reduction; gpu-stream's "
            f"read kernel peaks at 2756 GB/s at its largest block size, short of saturation ({PUB} §5 [R])", AZ_H200),
        row("dram.copy_bandwidth_bytes_per_s", 4.01 * TERA, "BabelStream (CUDA) Copy: bytes read plus written",
            f"[R] 4.01 TB/s read as 10^12 B/s; Azure ND H200 v5 (H200 SXM); 84% of the 4.8 TB/s spec [I]; "
            f"gpu-stream's scale kernel: 3165 GB/s ({PUB} §5 [R])", AZ_H200),
        *[row(r["quantity"], r["value"], r["method"], f"{H200_SAME}; {r['note']}", f"{H200_SPEC}; {r['source']}")
          for r in _H100_SXM_PEAKS],
    ],
    "h800-pcie": [
        *_clustered(ET_C_H800, {"l2.far_latency_cycles": (414.1, "far-partition hit")},
                    "H800 PCIe at 1755 MHz (L25 Table 2 [R2]); near hit 258.0 (147.0 ns), far 236.0 ns"),
        row("smem.latency_cycles", 29, "Luo et al. shared-memory pointer chase (arXiv 2501.12084 Table 3)",
            "[R2] secondary compilation, primary table not opened; H800 PCIe at 1755 MHz (L25 Table 2 [R2])",
            f"yaroslavvb/et-soc1-prototyping docs/reports/sources/2026-09-18-gpu-on-chip-communication.md "
            f"(ET-C), via {PUB} §4"),
    ],
}


def _gb(kind: str, gpu: str) -> str:
    return f"{GB_REPO} {kind}/{gpu}.txt; copy at ../shared/reference/gpu-benches/{kind}__{gpu}.txt"


def _hb(gpu: str) -> str:
    return (f"{HB_REPO} RegularUnits/random_latency/{gpu}.txt (code of Luo et al., arXiv 2402.13499 / "
            f"2501.12084); copy at ../shared/reference/hopper-benchmark/random_latency__{gpu}.txt")


def _computed(shared: Path) -> dict[str, list[dict]]:
    gb, hb = shared / "gpu-benches", shared / "hopper-benchmark"
    sxm4 = ("gpu-benches 'a100_80' = A100 SXM4 80GB; SXM4 inferred [I] from the NHR@FAU 'alex' cluster "
            "(PUBLISHED.md §10), not stated")
    a100 = {"l1.capacity_bytes": "unified L1/shared memory is 192 KiB per SM [R]",
            "l2.partition_bytes": "one of two 20 MiB L2 halves (mt4g segmentSize 20971520 B) [R]",
            "l2.far_reach_bytes": "the L2 is 40 MiB (41943040 B) [R]"}
    hopper_pcie = {"l1.capacity_bytes": "unified L1/shared memory is 256 KiB per SM [R]",
                   "l2.partition_bytes": "one of two halves of the 50 MB L2 [R]",
                   "l2.far_reach_bytes": "the L2 is 50 MB [R]"}

    out = {}
    curve = Curve(gb / "gpu-latency__a100_80.txt", _gb("gpu-latency", "a100_80"), sxm4)
    a100_clock = float(read_chase(curve.path)["clock_hz"].iat[0])
    strides = read_strides(gb / "gpu-strides__a100.txt")
    out["a100-sxm4-80gb"] = [
        *chase_rows(curve, "gpu-benches gpu-latency", a100),
        l2_bandwidth_row(Curve(gb / "gpu-l2-cache__a100_80.txt", _gb("gpu-l2-cache", "a100_80"), sxm4),
                         "theoretical 5120 B/clk [R2]"),
        l2_capacity_row(Curve(gb / "gpu-l2-cache__a100_80.txt", _gb("gpu-l2-cache", "a100_80"), sxm4),
                        40 * MiB, a100["l2.far_reach_bytes"]),
        l1_bandwidth_row(Curve(gb / "gpu-cache__a100_80.txt", _gb("gpu-cache", "a100_80"), sxm4),
                         SM_COUNT["a100_80"], a100_clock,
                         f"gpu-strides__a100.txt, one block at stride 1: float {strides['float']:g}, double "
                         f"{strides['double']:g} B/clk/SM (A100 SKU not named)"),
        *stream_rows(Curve(gb / "gpu-stream__a100_80.txt", _gb("gpu-stream", "a100_80"), sxm4)),
    ]
    out["a100-pcie"] = chase_rows(
        Curve(hb / "random_latency__a100_pcie.txt", _hb("a100_pcie"),
              "Luo et al.'s A100 PCIe 40GB (PUBLISHED.md §10), not SXM4"),
        "NVIDIA-Hopper-Benchmark random_latency", a100)
    pcie = "H100 PCIe (114 SMs, 350 W; Chips and Cheese saw 1395 MHz in bandwidth tests), not SXM5"
    h100_clock = float(read_chase(gb / "gpu-latency__h100_pcie.txt")["clock_hz"].iat[0])
    out["h100-pcie"] = [
        *chase_rows(Curve(gb / "gpu-latency__h100_pcie.txt", _gb("gpu-latency", "h100_pcie"), pcie),
                    "gpu-benches gpu-latency", hopper_pcie),
        l2_bandwidth_row(Curve(gb / "gpu-l2-cache__h100_pcie.txt", _gb("gpu-l2-cache", "h100_pcie"), pcie),
                         "Chips and Cheese: >5.5 TB/s near L2, 3.8 TB/s over all 50 MB"),
        l2_capacity_row(Curve(gb / "gpu-l2-cache__h100_pcie.txt", _gb("gpu-l2-cache", "h100_pcie"), pcie),
                        50 * MiB, f"{hopper_pcie['l2.far_reach_bytes']}, taken as 50 MiB (52428800 B, the size "
                        "mt4g reads on the H100 SXM) [I]"),
        l1_bandwidth_row(Curve(gb / "gpu-cache__h100_pcie.txt", _gb("gpu-cache", "h100_pcie"), pcie),
                         SM_COUNT["h100_pcie"], h100_clock, "a lower clock during the run would raise it"),
        *stream_rows(Curve(gb / "gpu-stream__h100_pcie.txt", _gb("gpu-stream", "h100_pcie"), pcie)),
    ]
    h800 = {q: f"{text[:-4]} on the H100 PCIe [R], assumed the same on the H800 PCIe [I]"
            for q, text in hopper_pcie.items()}
    out["h800-pcie"] = chase_rows(
        Curve(hb / "random_latency__h800_pcie.txt", _hb("h800_pcie"),
              "Luo et al.'s H800 PCIe (an H100 PCIe variant; 114 SMs [I]), not H100 SXM5"),
        "NVIDIA-Hopper-Benchmark random_latency", h800)
    out["h100-sxm"] = []
    h200 = "H200 SXM 141GB (132 SMs, 60 MB L2, HBM3e; PUBLISHED.md §5), the GPU gpuatlas measures"
    strides = gb / "gpu-strides__h200.txt"
    l2_curve = Curve(gb / "gpu-l2-cache__h200.txt", _gb("gpu-l2-cache", "h200"), h200)
    out["h200"] = [
        row("clock.sm_hz", read_clock(strides), "gpu-benches gpu-strides: SM clock the benchmark reported",
            f"[R] clock line of the raw file (not a measured busy-SM clock); gpu-roofline/h200.txt reports the "
            f"same (PUBLISHED.md §5); {h200}", _gb("gpu-strides", "h200")),
        l1_strides_row(strides, _gb("gpu-strides", "h200"), h200),
        l2_bandwidth_row(l2_curve, "PUBLISHED.md §5: ~9.7-10.2 TB/s over 5-40 MB, 13.5 TB/s at 1.5 MB [R]"),
        l2_capacity_row(l2_curve, 60 * MiB, "the L2 is 60 MB per torch device properties (deepseek-ai/DeepGEMM#107) "
                        "[R], 60 MiB (62914560 B) as torch counts MB [I]"),
        *[r for r in stream_rows(Curve(gb / "gpu-stream__h200.txt", _gb("gpu-stream", "h200"), h200))
          if r["quantity"] == "dram.write_bandwidth_bytes_per_s"],
    ]
    return out


def build(shared: Path | str = SHARED_REFERENCE) -> dict[str, pd.DataFrame]:
    """Every reference dataset, by name, from the files under ``shared`` (../shared/reference)."""
    shared = Path(shared)
    if not shared.is_dir():
        raise FileNotFoundError(f"{shared}: the published reference files are not there")
    order = {q: i for i, q in enumerate(QUANTITIES)}
    tables = {}
    for name, rows in _computed(shared).items():
        rows = rows + TRANSCRIBED[name]
        quantities = [r["quantity"] for r in rows]
        if len(set(quantities)) != len(quantities):
            raise ValueError(f"{name}: a quantity appears twice in {quantities}")
        frame = pd.DataFrame(sorted(rows, key=lambda r: order[r["quantity"]]), columns=list(REFERENCE_COLUMNS))
        tables[name] = frame
    return tables


def to_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")


def write_references(out_dir: Path | str = REFERENCE_DIR, shared: Path | str = SHARED_REFERENCE) -> list[Path]:
    """Rebuild every ``<name>.csv`` under ``out_dir`` from ``shared``; returns the files written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in build(shared).items():
        path = out_dir / f"{name}.csv"
        path.write_text(to_csv(frame))
        written.append(path)
    return written


if __name__ == "__main__":  # python -m analysis.reference_build [SHARED_REFERENCE_DIR]
    for written in write_references(shared=sys.argv[1] if len(sys.argv) > 1 else SHARED_REFERENCE):
        print(written)
