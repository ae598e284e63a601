"""The report's figures, each declared by its family beside the code that draws it (a module-level
``FIGURES = (FigureSpec(...), ...)``, found as ``gpuatlas.analysis.family`` finds a family): its file stem, the probe
whose data it needs, its heading and caption, how it is drawn, and its place (its chapter, and the figure it
follows there: ``gpuatlas.analysis.chapters`` lays them out)."""
from __future__ import annotations

from typing import Callable, NamedTuple

from gpuatlas.analysis.family import declared


class FigureSpec(NamedTuple):
    """One report figure: its file stem, the probe whose data it needs (None: any), its heading and caption,
    how to draw it from (meta, measurements, derived) -> Axes (None when the run has nothing to draw), its
    chapter (a title of ``gpuatlas.analysis.chapters.CHAPTERS``, or "Summary"), the stem of the figure it follows
    there ("" opens the chapter; figures that follow one figure come in the order they are found), and
    ``shown(measurements)``, where given, says whether a run gets the figure at all."""
    stem: str
    probe: str | None
    title: str
    caption: str
    draw: Callable | None
    chapter: str = ""
    after: str = ""
    shown: Callable | None = None


def declared_figures() -> tuple[FigureSpec, ...]:
    """Every figure a module under analysis/ declares in its ``FIGURES``, in the modules' name order; a stem
    declared twice is an error."""
    specs = tuple(spec for figures in declared("FIGURES").values() for spec in figures)
    stems = [spec.stem for spec in specs]
    twice = sorted({stem for stem in stems if stems.count(stem) > 1})
    if twice:
        raise ValueError(f"figures {twice} are declared twice: give each its own stem")
    return specs


def figure_specs(measurements) -> tuple:
    """Every figure spec of the report that applies to these measurements (``shown``; the NVML ones only for
    a run that recorded telemetry)."""
    return tuple(spec for spec in declared_figures() if spec.shown is None or spec.shown(measurements))


def drawn_figures(measurements) -> list[str]:
    """Names of the SVGs a report of these measurements holds: every figure whose probe the run measured."""
    measured = set(measurements["probe"].unique())
    return [f"{spec.stem}.svg" for spec in figure_specs(measurements) if spec.probe in measured or spec.probe is None]


def uses_derived(spec: FigureSpec) -> bool:
    """Whether the spec's draw reads its third argument, the derived quantities."""
    import dis

    code = spec.draw.__code__
    name = code.co_varnames[2]
    return name in code.co_cellvars or any(name in (i.argval if isinstance(i.argval, tuple) else (i.argval,))
               for i in dis.get_instructions(spec.draw) if i.opname.startswith("LOAD_FAST"))
