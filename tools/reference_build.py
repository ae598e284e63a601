"""Build the reference datasets (analysis/reference/*.csv) from ../shared/reference, reproducibly (the raw
files are read by ``tools.reference_raw``).

Two kinds of rows:

* computed here from raw benchmark outputs (marker [I]: computed from read values):
  - latency plateaus and capacities from the single-warp random pointer chases of RRZE-HPC/gpu-benches
    (``gpu-latency__*.txt``) and of Luo et al.'s code (``hopper-benchmark/random_latency__*.txt``), fitted
    with ``gpuatlas.analysis.plateaus.fit_staircase``, the fit gpuatlas applies to its own chases; plateaus in order
    are L1, near L2, the far plateau (when four or more: a chain past one partition, whose accesses are
    far-partition hits mixed with misses, so ``l2.far_plateau_cycles``, not the far hits' latency) and DRAM
    (the last); its knees are the L1 capacity, the L2 partition and the far reach (where one SM's chase
    turns from L2 hits to HBM misses);
  - L2 bandwidth and L1 bandwidth: the first plateau of the same fit applied to seconds per byte
    (``gpu-l2-cache__*.txt``, ``gpu-cache__*.txt``); L2 capacity: the miss model fitted to the gpu-l2-cache
    sweep (``gpuatlas.analysis.capacity.fit_capacity``, as gpuatlas fits its own bw.l2 sweep); L1 bandwidth where
    no gpu-cache file exists: the stride-1 row of ``gpu-strides__*.txt``;
  - DRAM read / write / copy bandwidth: the best rate over gpu-stream's occupancy sweep (``gpu-stream__*.txt``);
* transcribed from the curated tables of ``PUBLISHED.md`` (datasheet peaks, tensor-core rates, figures of
  other suites), each with its source and marker ([R] read in a primary file, [R2] read in a secondary
  compilation, [I] arithmetic on read values), kept as data in ``tools/transcribed.csv``.

Values are in the vocabulary's SI units, rounded to 6 significant digits so that a rebuild on another
machine writes the same bytes. ``write_references()`` rewrites every CSV; ``python -m tools.reference_build``
does the same from the command line.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gpuatlas.analysis.capacity import fit_capacity
from gpuatlas.analysis.plateaus import fit_staircase
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.references import PROBE, REFERENCE_COLUMNS, REFERENCE_DIR
from gpuatlas.analysis.stats import median_ci
from tools.reference_raw import (KiB, MHz, read_bandwidth_sweep, read_chase, read_clock, read_stream,
                                 read_strides)

#: ../shared/reference as seen from the repository root (/work/main -> /work/shared/reference).
SHARED_REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"

MiB, TERA = 2**20, 1e12

GB_REPO = "RRZE-HPC/gpu-benches (mirror te42kyfo/gpu-benches @1c36d50)"
HB_REPO = "HPMLL/NVIDIA-Hopper-Benchmark @ded6f57"
PUB = "../shared/reference/PUBLISHED.md"

#: SM counts the per-SM bandwidths divide by (PUBLISHED.md §1a MT multiProcessorCount [R]; §3 header and
#: ../shared/reference/README.md for the H100 PCIe).
SM_COUNT = {"a100_80": 108, "h100_pcie": 114}


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
    method = f"{suite} random pointer chase (one block), {mhz}; gpuatlas.analysis.plateaus.fit_staircase"
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
    """The L2 capacity of a gpu-l2-cache sweep from the miss model (``gpuatlas.analysis.capacity.fit_capacity``, as
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
               "to the sweep (gpuatlas.analysis.capacity.fit_capacity, gpuatlas's method): an L2 of C bytes "
               "re-read over a "
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
#: The rows read off PUBLISHED.md's curated tables, one per (gpu, quantity), each with its method, its note
#: (marker [R], [R2] or [I], and every caveat) and its source.
TRANSCRIBED_CSV = Path(__file__).with_name("transcribed.csv")


def transcribed(path: Path = TRANSCRIBED_CSV) -> dict[str, list[dict]]:
    """The transcribed rows of ``path``, by reference dataset, in the rows' form (unit from the vocabulary)."""
    out: dict[str, list[dict]] = {}
    for r in pd.read_csv(path, dtype=str, keep_default_na=False).itertuples(index=False):
        out.setdefault(r.gpu, []).append(row(r.quantity, float(r.value), r.method, r.note, r.source))
    return out


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
    published = transcribed()
    tables = {}
    for name, rows in _computed(shared).items():
        rows = rows + published.get(name, [])
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


if __name__ == "__main__":  # python -m tools.reference_build [SHARED_REFERENCE_DIR]
    for written in write_references(shared=sys.argv[1] if len(sys.argv) > 1 else SHARED_REFERENCE):
        print(written)
