"""Energy per operation (probes/families/energy/): NVML's energy counter over each op's window on a board of
known power."""
from __future__ import annotations

import numpy as np

from fakes import CLOCK_HZ, DEVICE
from gpuatlas.probes.kit.harness import Sample

#: energy.per_operation: a board drawing ENERGY_IDLE_W at rest, plus each op's energy per unit of work at its
#: rate while its kernel runs.  NVML's counter integrates the true power, is updated every COUNTER_PERIOD_S (at
#: a random phase) to the energy up to COUNTER_DELAY_S before the update, in whole mJ; the host reads it every
#: ENERGY_POLL_S.  Tensor work runs at the power cap (its readings carry the SW power cap reason).
ENERGY_IDLE_W, COUNTER_PERIOD_S, COUNTER_DELAY_S, ENERGY_POLL_S = 85.0, 0.02, 0.005, 1.05e-3
ENERGY_OPS = {"fp32": (5e13, 6e-12, "FLOP"), "bf16": (7e14, 0.6e-12, "FLOP"), "fp8": (1.3e15, 0.35e-12, "FLOP"),
              "hbm": (4e12, 60e-12, "B"), "l2": (1e13, 15e-12, "B"), "smem": (3e13, 4e-12, "B")}
ENERGY_WINDOW_S, ENERGY_LAUNCH_S = 1.1, 0.02


def energy_window(op, period_s=COUNTER_PERIOD_S, stuck=False, seed=0):
    """One energy.per_operation window of ``op`` (``idle``: no kernel) on the simulated board."""
    rng = np.random.default_rng([seed, list(("idle", *ENERGY_OPS)).index(op)])
    rate, joule, unit = ENERGY_OPS.get(op, (0.0, 0.0, ""))
    launches = 0 if op == "idle" else int(np.ceil(ENERGY_WINDOW_S / ENERGY_LAUNCH_S))
    start = 20e-6
    end = start + launches * ENERGY_LAUNCH_S if launches else ENERGY_WINDOW_S
    busy_w = joule * rate

    def energy_j(t):  # since the window's start; the counter's origin is far in the past
        return 5e4 + ENERGY_IDLE_W * t + busy_w * np.clip(np.minimum(t, end) - start, 0, None)

    phase = rng.uniform(0, period_s)
    polls = np.arange(0.0, end + ENERGY_POLL_S, ENERGY_POLL_S) + rng.uniform(0, 2e-4)
    last_update = np.floor((polls - phase) / period_s) * period_s + phase
    counter = np.floor(energy_j(last_update - COUNTER_DELAY_S) * 1e3)
    if stuck:
        counter[:] = counter[0]
    keep = sorted({0, polls.size - 1} | {j for i in np.flatnonzero(np.diff(counter)) for j in (i, i + 1)})
    samples = [Sample("energy_before_mj", counter[0], "mJ", 0, None, "nvml"),
               Sample("energy_after_mj", counter[-1], "mJ", 0, None, "nvml"),
               Sample("host_window_s", polls[-1], "s", 0, None, "monotonic"),
               Sample("energy_poll_s", ENERGY_POLL_S, "s", 0, None, "monotonic")]
    for r, i in enumerate(keep):
        samples += [Sample("energy_t_s", polls[i], "s", r, None, "monotonic"),
                    Sample("energy_mj", counter[i], "mJ", r, None, "nvml")]
    capped = op in ("bf16", "fp8")
    hz = 0.8 * CLOCK_HZ if capped else CLOCK_HZ
    if launches:
        per_launch = rate * ENERGY_LAUNCH_S
        samples += [Sample("launch_end_s", (i + 1) * ENERGY_LAUNCH_S, "s", i, hz, "cuda_event")
                    for i in range(launches)]
        samples += [Sample("work_per_launch", per_launch, unit, 0, hz, "config"),
                    Sample("rate", rate, f"{unit}/s", 0, hz, "cuda_event"),
                    Sample("per_clk_sm", rate / DEVICE["sm_count"] / hz, f"{unit}/cycle", 0, hz, "cuda_event")]
    for i, t in enumerate(np.arange(0.005, polls[-1], 0.01)):
        power = ENERGY_IDLE_W + (busy_w if start <= t <= end else 0.0)
        samples += [Sample("trace_t_s", t, "s", i, None, "nvml"),
                    Sample("trace_power_w", power * (1 + 0.01 * rng.standard_normal()), "W", i, None, "nvml"),
                    Sample("trace_sm_clock_hz", hz if launches else 0.5 * CLOCK_HZ, "Hz", i, None, "nvml"),
                    Sample("trace_clock_event_reasons", 0x4 if capped and start <= t <= end else 0, "1", i, None,
                           "nvml"),
                    Sample("trace_temperature_c", 50.0, "C", i, None, "nvml")]
    return samples


def _energy(ctx, op):
    return energy_window(op)


#: probe id -> its fake.
FAKES = {"energy.per_operation": _energy}
