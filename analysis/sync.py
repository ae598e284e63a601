"""Shared-memory atomics and barriers (``exec.smem_atomics``, ``exec.barriers``).

* ``exec.smem_atomics`` -- shared atom.add latency (one thread's dependent chain: clock64 cycles of a chain
  twice as long less one as long, per atomic) and one SM's adds per clock with a full block on one word, one
  per warp, or one per thread.  int32 is ATOMS.ADD; fp32 is a compare-and-swap loop on sm_90, so its rows
  are that loop's.
* ``exec.barriers`` -- cycles per barrier of each kind in a dependent loop (same differencing): named
  barriers against participating warps and barrier ids in use, store + fence per scope, a cooperative grid
  barrier against blocks per SM, an mbarrier phase against warps, and a cluster barrier (with and
  without its release fence) against cluster size.
"""
from __future__ import annotations

import pandas as pd

from gpuatlas.analysis.family import Family
from gpuatlas.analysis.quantities import derived_row, home_partition_rows
from gpuatlas.analysis.stats import median_ci, select

SMEM_ATOMICS_PROBE, BARRIERS_PROBE = "exec.smem_atomics", "exec.barriers"
SMEM_ATOMIC_SASS = {"i32": "ATOMS.ADD", "f32": "LDS + FADD + ATOMS.CAST.SPIN, retried"}
DIFFERENCED = ("clock64 cycles of a loop twice as long less one as long, per {} (median, bootstrap 95% CI)")


def smem_atomics_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    for dtype, sass in SMEM_ATOMIC_SASS.items():
        lat = select(measurements, SMEM_ATOMICS_PROBE, "latency", dtype=dtype, mode="latency")
        if len(lat):
            rows.append(derived_row(f"atomic.shared.add_{dtype}_latency_cycles", *median_ci(lat["value"]),
                                    f"one thread's chain of atom.shared.add.{dtype} ({sass}), each operand the "
                                    "previous return, at one word: " + DIFFERENCED.format("atomic"),
                                    SMEM_ATOMICS_PROBE, f"{len(lat)} samples"))
        for mode in ("same", "warp", "distinct"):
            thr = select(measurements, SMEM_ATOMICS_PROBE, "ops_per_clk_sm", dtype=dtype, mode=mode)
            if len(thr):
                rows.append(derived_row(f"atomic.shared.add_{dtype}_ops_per_clk_sm_{mode}", *median_ci(thr["value"]),
                                        f"red.shared.add.{dtype} ({sass}) from every thread of one full block "
                                        f"({mode}): adds / the block's clock64 cycles between barriers (median, "
                                        "bootstrap 95% CI)", SMEM_ATOMICS_PROBE,
                                        f"{len(thr)} samples at {thr['sm_clock_hz'].median() / 1e9:.3f} GHz"))
    return rows


#: (quantity, kind, which n: "min", "max" or a number, what one step is)
BARRIER_ROWS = (
    ("sync.named_barrier_cycles_one_warp", "named_partial", "min", "bar.sync 1, 32 x n (the block's first n warps)"),
    ("sync.named_barrier_cycles_all_warps", "named_partial", "max", "bar.sync 1, 32 x n (the block's first n warps)"),
    ("sync.named_barrier_cycles_16_ids", "named_ids", 16, "bar.sync id, blockDim / n (warps split over n ids)"),
    ("sync.fence_none_cycles", "fence_none", 1, "volatile global store"),
    ("sync.fence_cta_cycles", "fence_cta", 1, "volatile global store + __threadfence_block"),
    ("sync.fence_gpu_cycles", "fence_gpu", 1, "volatile global store + __threadfence"),
    ("sync.fence_sys_cycles", "fence_sys", 1, "volatile global store + __threadfence_system"),
    ("sync.grid_sync_cycles_one_block_per_sm", "grid", "min", "grid barrier of a cooperative launch, n blocks per SM"),
    ("sync.grid_sync_cycles_full", "grid", "max", "grid barrier of a cooperative launch, n blocks per SM"),
    ("sync.mbarrier_cycles_one_warp", "mbarrier", "min", "mbarrier arrive + try_wait.parity, a block of n warps"),
    ("sync.mbarrier_cycles_all_warps", "mbarrier", "max", "mbarrier arrive + try_wait.parity, a block of n warps"),
    *((f"sync.cluster_barrier_cycles_c{c}", "cluster", c, "barrier.cluster.arrive + wait, a cluster of n blocks")
      for c in (2, 4, 8, 16)),
    *((f"sync.cluster_barrier_relaxed_cycles_c{c}", "cluster_relaxed", c,
       "barrier.cluster.arrive.relaxed + wait (no release fence), a cluster of n blocks") for c in (2, 4, 8, 16)),
)


def barrier_curve(measurements: pd.DataFrame, kind: str) -> pd.Series:
    """Median cycles per barrier of ``kind`` at each n."""
    frame = select(measurements, BARRIERS_PROBE, "latency", kind=kind)
    return frame.groupby("n")["value"].median() if len(frame) else pd.Series(dtype=float)


#: Fences that wait for their store's home L2 partition: measured at many addresses, split near and far.
HOME_FENCES = ("fence_gpu", "fence_sys")


def barrier_rows(measurements: pd.DataFrame) -> list[dict]:
    rows = []
    for quantity, kind, which, what in BARRIER_ROWS:
        frame = select(measurements, BARRIERS_PROBE, "latency", kind=kind)
        if frame.empty:
            continue
        if kind in HOME_FENCES and len(select(measurements, BARRIERS_PROBE, "address_offset", kind=kind)):
            rows += home_partition_rows(quantity.removesuffix("_cycles"), frame,
                                        f"{what}, at random lines of an L2-sized span, one per sample: "
                                        + DIFFERENCED.format("barrier").replace("(median,", "(mean over the "
                                                                                 "addresses,"), BARRIERS_PROBE)
            continue
        n = frame["n"].min() if which == "min" else frame["n"].max() if which == "max" else which
        values = frame[frame["n"] == n]["value"]
        if values.empty:
            continue
        curve = barrier_curve(measurements, kind)
        note = f"n = {int(n)}; by n: " + ", ".join(f"{int(k)}: {v:.1f}" for k, v in curve.items())
        rows.append(derived_row(quantity, *median_ci(values), f"{what}: " + DIFFERENCED.format("barrier"),
                                BARRIERS_PROBE, note))
    return rows


def sync_rows(measurements: pd.DataFrame) -> list[dict]:
    """Derived rows of ``exec.smem_atomics`` and ``exec.barriers`` present in ``measurements``."""
    if "probe" not in measurements:
        return []
    return smem_atomics_rows(measurements) + barrier_rows(measurements)


_QUANTITIES: dict[str, tuple[str, str]] = {}
for _type, _how in (("i32", "ATOMS.ADD"), ("f32", "a compare-and-swap loop on sm_90: LDS, FADD, ATOMS.CAST.SPIN")):
    _QUANTITIES[f"atomic.shared.add_{_type}_latency_cycles"] = ("cycles", f"shared atom.add.{_type} ({_how}) "
                                                                          "latency: one thread's chain, each add's "
                                                                          "operand the previous one's return, one word")
    for _mode, _what in (("same", "every thread of one full block on one word"),
                         ("warp", "one word per warp (32 threads adding to it)"),
                         ("distinct", "every thread on its own word, no bank conflict")):
        _QUANTITIES[f"atomic.shared.add_{_type}_ops_per_clk_sm_{_mode}"] = (
            "1/cycle", f"shared red.add.{_type} ({_how}) per clock of one SM, {_what}")
_QUANTITIES.update({
    "sync.named_barrier_cycles_one_warp": ("cycles", "one bar.sync 1, 32 (a named barrier of one warp) in a loop"),
    "sync.named_barrier_cycles_all_warps": ("cycles", "one bar.sync 1, count of every warp of the largest block"),
    "sync.named_barrier_cycles_16_ids": ("cycles", "one bar.sync id, blockDim / 16 with the largest block's warps "
                                                   "split over 16 barrier ids at once"),
    "sync.fence_none_cycles": ("cycles", "one volatile global store of one thread's loop, no fence (the fences' "
                                         "baseline)"),
    "sync.fence_cta_cycles": ("cycles", "one volatile global store + __threadfence_block (MEMBAR.SC.CTA)"),
    "sync.fence_gpu_cycles": ("cycles", "one volatile global store + __threadfence (MEMBAR.SC.GPU)"),
    "sync.fence_sys_cycles": ("cycles", "one volatile global store + __threadfence_system (MEMBAR.SC.SYS)"),
    **{f"sync.fence_{f}_{side}_cycles": ("cycles", f"one volatile global store + {call} ({sass}) to an address "
                                                   f"{where}")
       for f, call, sass in (("gpu", "__threadfence", "MEMBAR.SC.GPU"), ("sys", "__threadfence_system",
                                                                         "MEMBAR.SC.SYS"))
       for side, where in (("near", "homed in the SM's near L2 partition"), ("far", "homed across the chip"))},
    "sync.grid_sync_cycles_one_block_per_sm": ("cycles", "one grid-wide barrier of a cooperative launch, one block "
                                                         "per SM"),
    "sync.grid_sync_cycles_full": ("cycles", "one grid-wide barrier of a cooperative launch, as many blocks per SM "
                                             "as the SM holds"),
    "sync.mbarrier_cycles_one_warp": ("cycles", "one mbarrier phase (arrive + try_wait.parity) of a one-warp block"),
    "sync.mbarrier_cycles_all_warps": ("cycles", "one mbarrier phase (arrive + try_wait.parity) of the largest "
                                                 "block"),
})
for _size in (2, 4, 8, 16):
    _QUANTITIES[f"sync.cluster_barrier_cycles_c{_size}"] = ("cycles", "one barrier.cluster.arrive + wait of a "
                                                                      f"cluster of {_size} blocks")
    _QUANTITIES[f"sync.cluster_barrier_relaxed_cycles_c{_size}"] = ("cycles", "one barrier.cluster.arrive.relaxed + "
                                                                              f"wait of a cluster of {_size} blocks "
                                                                              "(no release fence)")
FAMILY = Family(order=130, probe_modules=("smem_atomics", "barriers"),
                rows=lambda m, device: sync_rows(m), quantities=_QUANTITIES)
