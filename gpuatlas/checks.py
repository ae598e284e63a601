"""The command line's checks of its arguments and output paths, made before any work: a bad value or a folder
that cannot be written is named in one line (a ``UsageError``, or argparse's own error) before a run is read,
a figure drawn or a GPU asked for."""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from gpuatlas.analysis.errors import UsageError


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above zero")
    return value


def gpu_list(text: str) -> str:
    """An argparse type: ``all``, or distinct GPU indices separated by commas (checked against the visible GPUs
    once one answers)."""
    if text.strip() == "all":
        return text
    indices = [raw.strip() for raw in text.split(",")]
    bad = [raw for raw in indices if not raw.isdigit()]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad[0]!r} is not a GPU index: give 'all' or indices such as 0,1")
    if len(set(map(int, indices))) < len(indices):
        raise argparse.ArgumentTypeError(f"{text!r} names a GPU twice")
    return text


def writable_folder(path: str | Path, flag: str) -> Path:
    """``path`` as a folder to write into: one that exists and can be written, or one that can be made (its
    nearest existing ancestor is a folder that can be written).  Nothing is created."""
    path = Path(path)
    existing = _nearest_existing(path, flag)
    where = f"{flag} {path}" + ("" if existing == path.absolute() else f": {existing}")
    if not existing.is_dir():
        raise UsageError(f"{where} is a file, not a folder: give a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{where} cannot be written (no permission, or a read-only file system): give a "
                         "folder you can write")
    return path


def _nearest_existing(path: Path, flag: str) -> Path:
    """``path`` or its nearest ancestor that exists; a folder this user may not look into is named."""
    for folder in (path.absolute(), *path.absolute().parents):
        try:
            os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError:
            raise UsageError(f"{flag} {path}: {folder} cannot be reached (no permission)") from None
        return folder
    return Path(path.absolute().anchor)


def writable_file(path: str | Path, flag: str, suffixes: tuple[str, ...] = ()) -> Path:
    """``path`` as a file to write: not a folder, in a folder that exists and can be written, and (where
    ``suffixes`` are given) named with one of them."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder: give a file name")
    if suffixes and path.suffix.lower().lstrip(".") not in suffixes:
        raise UsageError(f"{flag} {path}: name the file with one of the suffixes "
                         f"{', '.join('.' + s for s in suffixes)}")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path} cannot be written (no permission, or a read-only file system)")
    return path


def figure_suffixes() -> tuple[str, ...]:
    """The file types matplotlib saves (png, svg, pdf, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(FigureCanvasBase.get_supported_filetypes())


def check_axis_values(overrides: dict, probes: list, device: dict) -> None:
    """A numeric axis (sizes, counts, strides) takes numbers: ``-a footprint_bytes=abc`` is refused.  Whether an
    axis is numeric is read from the probes' own sweeps sized for ``device`` (any GPU's description: sizes
    move with the GPU, types do not)."""
    from gpuatlas.probes.registry import PROFILES

    for name, values in overrides.items():
        declared = []
        for probe in probes:
            if name not in probe.axes:
                continue
            for profile in PROFILES:
                sweep = probe.sweeps[profile](device)
                configs = sweep if isinstance(sweep, list) else [{name: v} for v in sweep.get(name, ())]
                declared += [c[name] for c in configs if name in c]
        numeric = declared and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in declared)
        words = [v for v in values if isinstance(v, str)]
        if numeric and words:
            raise UsageError(f"-a {name}: {words[0]!r} is not a number; {name} takes numbers "
                             "(e.g. 4096, 4KiB, 64MiB, 1.5)")


def checked_sources(sources: list[str]) -> list[dict]:
    """Each source checked without reading its measurements: a reference's name, a run's run.json; returns
    the runs' metadata."""
    from gpuatlas.analysis.references import is_reference, reference_path
    from gpuatlas.analysis.results import RunDir

    for source in sources:
        if is_reference(source):
            reference_path(source)
    return [RunDir(Path(source)).read_meta() for source in sources if not is_reference(source)]


def checked_run_request(args, reference_device: dict | None) -> dict:
    """Every argument of ``run`` checked before a GPU is asked for: the profile, the probes, the sweep
    overrides (their values' types too, read from ``reference_device``, the committed run's GPU where it is
    installed, else from this GPU's), the run to resume and the folder to write; returns the overrides."""
    from gpuatlas.analysis.results import RunDir
    from gpuatlas.probes.registry import PROFILES, parse_override, select

    if args.profile not in PROFILES:
        raise UsageError(f"unknown profile {args.profile!r}: choose one of {', '.join(PROFILES)}")
    if args.resume:
        for flag, given, why in (("--axis", args.axis, "it keeps the sweep it started with"),
                                 ("--probe", args.probe, "it measures the probes it started with")):
            if given:
                raise UsageError(f"{flag} cannot change a run being resumed: {why}")
        if args.gpus:
            raise UsageError("--gpus starts a new node run: resume each board's run with --resume RUN_DIR")
        try:
            RunDir(Path(args.resume)).read_meta()
        except UsageError as exc:
            raise UsageError(f"--resume: {exc}") from None
        writable_folder(args.resume, "--resume")
        return {}
    probes = select(args.probe)
    overrides = dict(parse_override(text, probes) for text in args.axis or ())
    writable_folder(args.out, "--out")
    device = reference_device
    if overrides and device is None:  # no committed run installed: the GPU's own description, before a run is made
        from gpuatlas.machinery.device import device_properties

        device = device_properties()
    check_axis_values(overrides, probes, device)
    if device is not None:
        check_profile_measures(probes, args.profile, device)
    return overrides


def check_profile_measures(probes: list, profile: str, device: dict) -> None:
    """A selection whose every probe measures only in the full profile (sustained windows) is refused in the
    quick one, rather than made into a run with nothing in it."""
    node = dict(device, gpu_count=max(device.get("gpu_count", 1), *(p.min_gpus for p in probes)))  # GPUs enough
    if all(not p.configs(node, profile) and p.configs(node, "full") for p in probes):
        raise UsageError(f"{', '.join(p.id for p in probes)} measure only in the full profile: "
                         "add --profile full")
