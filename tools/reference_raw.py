"""Readers of the published raw benchmark outputs under ../shared/reference (RRZE-HPC/gpu-benches and Luo
et al.'s random_latency files), each into SI units: bytes, seconds, Hz and B/s (GB = 10^9 B, kB as printed,
bytes / 1024).  ``tools.reference_build`` fits what they read.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

KiB, MHz, GIGA = 1024, 1e6, 1e9


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
