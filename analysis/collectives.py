"""NCCL collectives' bandwidth as nccl-tests defines it (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md).

``algbw = S / t`` with S the operation's size as nccl-tests prints it: the buffer for all-reduce and
broadcast, the whole gathered (all-gather) or scattered (reduce-scatter) buffer of n chunks.  ``busbw``
scales algbw by what each rank's link must carry, so it compares with the link's peak whatever the rank
count n: 2(n-1)/n for all-reduce (a reduce-scatter then an all-gather), (n-1)/n for all-gather and
reduce-scatter (each rank receives the n-1 chunks it lacks), 1 for broadcast.
"""
from __future__ import annotations

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def bus_factor(collective: str, ranks: int) -> float:
    if ranks < 1:
        raise ValueError(f"a collective needs at least one rank, not {ranks}")
    factors = {"all_reduce": 2 * (ranks - 1) / ranks, "all_gather": (ranks - 1) / ranks,
               "reduce_scatter": (ranks - 1) / ranks, "broadcast": 1.0}
    if collective not in factors:
        raise ValueError(f"unknown collective {collective!r}: one of {', '.join(COLLECTIVES)}")
    return factors[collective]


def algbw(size_bytes: float, seconds: float) -> float:
    return size_bytes / seconds


def busbw(collective: str, size_bytes: float, seconds: float, ranks: int) -> float:
    return algbw(size_bytes, seconds) * bus_factor(collective, ranks)
