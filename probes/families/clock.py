"""The SM clock under two loads: one busy SM, and every SM busy (the clock probes run at).

Each block spins on ``%globaltimer`` and counts ``clock64`` cycles meanwhile (clock.cu); cycles / ns is the
effective clock.  This is the figure cycle counts are converted with, not the datasheet's boost clock.
"""
from __future__ import annotations

from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.registry import probe

_SWEEP = lambda device: {"busy_sms": ["one", "all"]}  # noqa: E731


@probe("clock.sm", sweeps={"quick": _SWEEP, "full": _SWEEP},
       axes={"busy_sms": "one SM spinning, or every SM"}, quantities=("clock.sm_hz",), kernels=("clock.cu",))
def sm_clock(ctx, busy_sms: str) -> list[Sample]:
    """Effective SM clock (Hz): clock64 cycles per %globaltimer second while SMs spin."""
    blocks = 1 if busy_sms == "one" else ctx.device["sm_count"]

    def sample(repeat: int) -> list[Sample]:
        hz = ctx.sm_clock(blocks=blocks, spin_s=2e-3)
        return [Sample("sm_clock", hz, "Hz", repeat, hz, "globaltimer", ctx.throttle_flag(hz))]

    return repeat_until_stable(sample, "sm_clock", ctx.budget)
