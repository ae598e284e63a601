"""Shared-memory banks (probes/families/smem_banks/, column_read.py): 32 banks of 4-byte words, and a
matrix column read directly or through shared memory."""
from __future__ import annotations

from fakes import CLOCK_HZ
from gpuatlas.probes.kit.harness import Sample


def bank_ways(stride_words, access_bytes, offset_words=0):
    """The simulated shared memory: 32 banks of 4-byte words, one 128-byte bank row per phase (a warp of
    4-byte loads at once, of 8-byte loads in halves, of 16-byte loads in quarters).  Lane l reads the
    ``access_bytes`` at (l x stride + offset) x access_bytes; a bank asked for k distinct words in a phase
    takes k passes (lanes reading the same word share it).  Returns the worst k."""
    lanes_per_phase = min(32, 128 // access_bytes)
    worst = 0
    for first in range(0, 32, lanes_per_phase):
        words_of_bank = {}
        for lane in range(first, first + lanes_per_phase):
            start = (lane * stride_words + offset_words) * access_bytes
            for word in range(start // 4, (start + access_bytes) // 4):
                words_of_bank.setdefault(word % 32, set()).add(word)
        worst = max(worst, max(len(words) for words in words_of_bank.values()))
    return worst


def _banks(ctx, access_bytes, stride_words, offset_words=0, form="latency", layout="plain"):
    ways = 1 if layout != "plain" else bank_ways(stride_words, access_bytes, offset_words)
    base, per_way = (23.0, 2.0) if form == "latency" else (1.0, 1.0)
    return [Sample("cycles_per_access", base + per_way * (ways - 1), "cycles", r, CLOCK_HZ, "clock64")
            for r in range(5)]


def _column(ctx, matrix_side, method):
    useful = 4e11 if method == "direct" else 2e12
    return [Sample("useful_bandwidth", useful, "B/s", r, CLOCK_HZ, "cuda_event") for r in range(5)]


#: probe id -> its fake.
FAKES = {"smem.banks": _banks, "smem.banks_fix": _banks, "smem.banks_numba": _banks, "smem.column_read": _column}
