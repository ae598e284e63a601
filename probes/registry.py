"""The probe registry: each probe declares its parameter sweeps as data, so ``gpuatlas list`` needs no GPU.

A sweep is a function of the device's own properties (the ``device`` block of run.json) that returns the
axes of one profile, ``{"footprint_bytes": [...], "flavour": [...]}``; configs are their cartesian product.
No GPU model's numbers appear in a sweep: sizes come from ``l2_bytes``, ``smem_per_sm_bytes``, ``sm_count``.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import math
import pkgutil
from dataclasses import dataclass
from typing import Callable

from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.results import MEASUREMENT_COLUMNS
from gpuatlas.probes.kit import versions

PROFILES = ("quick", "full")


@dataclass(frozen=True)
class Probe:
    id: str
    func: Callable
    sweeps: dict  # profile -> (device dict -> {axis: values})
    axes: dict  # axis -> plain-language description of its values
    quantities: tuple = ()
    backend: str = "cupy"
    kernels: tuple = ()  # kernel files (found as the kit finds them), hashed into the probe version
    min_cc: tuple = (7, 0)
    min_gpus: int = 1  # GPUs the run must see (link and collective probes need a peer)
    #: The newest compute capability the probe runs on: an architecture-specific target (sm_90a's wgmma) runs
    #: on its own architecture only.
    max_cc: tuple | None = None

    @property
    def summary(self) -> str:
        return (inspect.getdoc(self.func) or "").split("\n\n")[0].replace("\n", " ")

    @property
    def version(self) -> str:
        """Hash of what the probe's samples depend on: results of different versions never mix."""
        return versions.version(self.func, self.kernels)

    def configs(self, device: dict, profile: str, overrides: dict | None = None) -> list[dict]:
        """A sweep returns axes (a cartesian product) or an explicit list of configs (zipped axes).

        An override replaces an axis of a product; on an explicit list it keeps the configs it names."""
        if profile not in self.sweeps:
            raise UsageError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)}")
        sweep = self.sweeps[profile](device)
        overrides = {k: v for k, v in (overrides or {}).items() if k in self.axes}
        if isinstance(sweep, list):
            return [c for c in sweep if all(c[k] in v for k, v in overrides.items())]
        axes = {**sweep, **overrides}
        names = list(axes)
        return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


_REGISTRY: dict[str, Probe] = {}


def probe(probe_id: str, *, sweeps: dict, axes: dict, **kw) -> Callable:
    """Register ``func(ctx, **params) -> list[Sample]`` as a probe with declared sweeps."""
    missing = set(PROFILES) - set(sweeps)
    if missing:
        raise ValueError(f"probe {probe_id} lacks profiles {sorted(missing)}")
    clash = set(axes) & set(MEASUREMENT_COLUMNS)
    if clash:
        raise ValueError(f"probe {probe_id}: axis names {sorted(clash)} collide with result columns")

    def register(func: Callable) -> Callable:
        _REGISTRY[probe_id] = Probe(probe_id, func, sweeps, axes, **kw)
        return func

    return register


def all_probes() -> dict[str, Probe]:
    modules = probe_modules()
    return {pid: _REGISTRY[pid] for pid in sorted(_REGISTRY, key=lambda pid: _order(pid, modules))}


@functools.lru_cache(maxsize=None)
def probe_modules() -> tuple[str, ...]:
    """Every module of the ``gpuatlas.probes.families`` package that declares a probe, imported, in the order a run
    measures them: the families' order (``gpuatlas.analysis.family``: each family names the probe modules it measures,
    in its ``probe_modules``), so the one ordering a family declares places both its runs and its rows."""
    import gpuatlas.probes.families
    from gpuatlas.analysis.family import families

    found = [info.name for info in pkgutil.walk_packages(gpuatlas.probes.families.__path__, "gpuatlas.probes.families.")
             if importlib.import_module(info.name)
             and any(p.func.__module__ == info.name for p in _REGISTRY.values())]
    owner: dict[str, str] = {}
    for family_name, family in families().items():
        for module in family.probe_modules:
            name = f"gpuatlas.probes.families.{module}"
            if name not in found:
                raise ValueError(f"{family_name} measures {module!r}, which is no module of "
                                 "gpuatlas.probes.families that declares a probe")
            if name in owner:
                raise ValueError(f"{name} is measured by both {owner[name]} and {family_name}: name it in one "
                                 "family's probe_modules")
            owner[name] = family_name
    orphans = sorted(set(found) - set(owner))
    if orphans:
        raise ValueError(f"{orphans} declare probes but no family measures them: name each in its family's "
                         "probe_modules (analysis/<family>.py's FAMILY)")
    return tuple(owner)


def _order(probe_id: str, modules: tuple[str, ...]) -> tuple:
    module = _REGISTRY[probe_id].func.__module__
    return (modules.index(module) if module in modules else len(modules), probe_id)


def select(names: list[str] | None) -> list[Probe]:
    """Probes named exactly or by prefix (``chase`` selects ``chase.latency`` and ``chase.latency_numba``)."""
    probes = all_probes()
    if not names:
        return list(probes.values())
    chosen = []
    for name in names:
        hits = [p for pid, p in probes.items() if pid == name or pid.startswith(name + ".")
                or pid.startswith(name + "_")]
        if not hits:
            raise UsageError(f"unknown probe {name!r}: `gpuatlas list` shows the probes "
                             f"({', '.join(probes)})")
        chosen += [p for p in hits if p not in chosen]
    return chosen


def parse_override(text: str, probes: list[Probe]) -> tuple[str, list]:
    """Parse ``-a axis=v1,v2,...`` against the selected probes' axes."""
    name, sep, values = text.partition("=")
    name = name.strip()
    known = sorted({a for p in probes for a in p.axes})
    if not sep or not name or not values.strip():
        raise UsageError(f"malformed sweep override {text!r}: write AXIS=V1,V2,... (axes: {', '.join(known)})")
    if name not in known:
        raise UsageError(f"unknown axis {name!r} in {text!r}: the selected probes sweep {', '.join(known)}")
    parsed = []
    for raw in values.split(","):
        raw = raw.strip()
        if not raw:
            raise UsageError(f"malformed sweep override {text!r}: empty value")
        parsed.append(_parse_value(raw, text))
    return name, parsed


_SUFFIX = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "K": 2**10, "M": 2**20, "G": 2**30}


def _parse_value(raw: str, text: str):
    for suffix, scale in _SUFFIX.items():
        if raw.endswith(suffix) and raw[: -len(suffix)].replace(".", "", 1).isdigit():
            return int(float(raw[: -len(suffix)]) * scale)
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        value = float(raw)
    except ValueError:
        return raw
    if not math.isfinite(value):
        raise UsageError(f"malformed sweep override {text!r}: {raw} is not a finite number")
    return value


# -- axis helpers used by sweeps ------------------------------------------------------------------

def quick_and_full(configs: Callable) -> dict:
    """Sweeps from one function of the device with a ``quick`` switch: its quick configs and its full ones."""
    return {"quick": lambda device: configs(device, quick=True), "full": configs}


def geom(lo: int, hi: int, per_octave: int, jitter_seed: int | None = None, align: int = 1) -> list[int]:
    """Log-spaced integers from ``lo`` to ``hi`` inclusive, ``per_octave`` per doubling, multiples of ``align``.

    With ``jitter_seed`` each interior point moves by up to a third of a step (seeded, so reproducible), so
    that a swept curve does not alias with power-of-two structure in the hardware.
    """
    import numpy as np

    n = max(2, int(round(math.log2(hi / lo) * per_octave)) + 1)
    exps = np.linspace(math.log2(lo), math.log2(hi), n)
    if jitter_seed is not None:
        step = exps[1] - exps[0]
        jitter = np.random.default_rng(jitter_seed).uniform(-step / 3, step / 3, n)
        jitter[[0, -1]] = 0
        exps = exps + jitter
    values = sorted({max(align, int(round(2**e / align)) * align) for e in exps})
    return values

