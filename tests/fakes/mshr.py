"""Misses in flight (probes/families/mshr.py): miss registers, each request answered after its level's latency,
the answers sharing the SM's port."""
from __future__ import annotations

import numpy as np

from fakes import CLOCK_HZ, LEVELS
from gpuatlas.probes.kit.harness import Sample

#: The simulated SM's misses in flight: MSHRS[load] distinct-line requests held at once, each answered after the
#: level's latency (times a per-SM factor: SMs sit at different distances from the L2), the answers sharing a
#: port of SM_PORT_BYTES per cycle; SOFTNESS rounds the corner where one limit hands over to the next.
MSHRS = {"plain": 256, "cg": 384}
SM_PORT_BYTES, SOFTNESS = 100.0, 4.0
SM_LATENCY_FACTORS = (0.94, 1.0, 1.03, 1.08)


def mshr_lines_per_clk(n: float, latency: float, bytes_per_line: float, registers: float = MSHRS["plain"],
                       port_bytes: float = SM_PORT_BYTES, line_rate: float = float("inf")) -> float:
    """Lines per cycle of n lines kept in flight: each limit alone -- n / latency (Little), registers /
    latency, the port's bytes, a per-line processing rate -- and together a soft minimum (a queue's corner
    is round, never the fit's sharp one)."""
    limits = np.array([n / latency, registers / latency, port_bytes / bytes_per_line, line_rate])
    return float(np.sum(limits ** -SOFTNESS) ** (-1 / SOFTNESS))


def _mshr(ctx, load, source, sectors_per_line, warps, registers=None, port_bytes=SM_PORT_BYTES,
          line_rate=float("inf"), per_sector=False, warp_limit=float("inf"), loads=(1, 2, 4, 8)):
    """``per_sector``: each register holds one 32-byte sector, so a 4-sector line takes four; ``warp_limit``:
    lines one warp may have in flight (a scoreboard's), the rest of its loads waiting."""
    rng = np.random.default_rng([int(warps), int(sectors_per_line), len(load), len(source)])
    per_warp = 32 if int(sectors_per_line) == 1 else 4
    bytes_per_line = 32.0 * int(sectors_per_line)
    registers = MSHRS[load] if registers is None else registers
    registers = registers / int(sectors_per_line) if per_sector else registers
    out, repeat = [], 0
    for per_thread in loads:
        n = int(warps) * per_thread * per_warp
        for _ in range(3):
            for sm, factor in enumerate(SM_LATENCY_FACTORS):
                held = int(warps) * min(per_thread * per_warp, warp_limit)
                rate = mshr_lines_per_clk(held, LEVELS[source] * factor, bytes_per_line, registers, port_bytes,
                                          line_rate) * rng.lognormal(0, 0.02)
                out += [Sample("lines_per_clk", rate, "lines/cycle", repeat, CLOCK_HZ, "clock64"),
                        Sample("pass_cycles", n / rate, "cycles", repeat, CLOCK_HZ, "clock64")]
                out += [Sample(m, float(v), "1", repeat, CLOCK_HZ, "config")
                        for m, v in (("lines_in_flight", n), ("loads_per_thread", per_thread), ("smid", 2 * sm))]
                repeat += 1
    return out + [Sample("bytes_per_line", bytes_per_line, "B", 0, CLOCK_HZ, "config")]


#: probe id -> its fake.
FAKES = {"geometry.mshr": _mshr}
