"""Drawing the report's figures: each laid out once at LAYOUT_DPI and written as SVG, every core drawing (forked
workers that derive the families first, then draw), text extents measured once for all the figures."""
from __future__ import annotations

import io
import os
import time
from contextlib import ExitStack, contextmanager

from gpuatlas.analysis.derive import FAMILIES, family
from gpuatlas.analysis.report_figures import figure_specs, uses_derived
from gpuatlas.analysis.stats import split_by_probe

#: Resolution at which a figure's text is measured to lay it out: the SVG is vector, but Agg measures text in
#: whole pixels, so a finer grid places labels and margins closer to their true extents.
LAYOUT_DPI = 200


def draw_figures(meta, measurements, derived, which):
    """Yield (spec, laid-out matplotlib Figure) for every figure of ``which`` whose probe the run measured;
    the caller closes them."""
    import matplotlib as mpl

    measured = set(measurements["probe"].unique())
    for spec in which:
        if spec.probe in measured or spec.probe is None:
            with mpl.rc_context({"figure.dpi": LAYOUT_DPI}):
                ax = spec.draw(meta, measurements, derived)
                if ax is None:  # nothing of its kind in this run (an NVML trace, say)
                    continue
                ax.figure.tight_layout()
            # laid out once: a layout engine left on the figure would make every savefig lay it out again
            ax.figure.set_layout_engine(None)
            yield spec, ax.figure


#: Text extents measured by the figures a process has drawn, by (renderer kind, its dpi, the rc settings that
#: measuring reads): see ``shared_text_metrics``.
_TEXT_METRICS: dict = {}
#: The rc settings, beside the font properties, that decide a string's measured extent.
_TEXT_RC = ("text.hinting", "text.usetex", "mathtext.fontset", "mathtext.fallback", "mathtext.default",
            "mathtext.rm", "mathtext.it", "mathtext.bf", "mathtext.sf", "mathtext.tt", "mathtext.cal")


@contextmanager
def shared_text_metrics():
    """Within the block, a string's measured extent (width, height, descent) is measured once per kind of
    renderer and dpi and reused by every later figure: matplotlib keeps its cache per renderer, and each figure
    lays itself out (Agg) and saves (SVG) through renderers of its own, so every figure measured its tick
    labels afresh.  The extent depends on the string, its font properties, math mode, the renderer's kind and
    dpi and the rc settings of _TEXT_RC (read as the block begins), which together key the cache."""
    import matplotlib as mpl
    import matplotlib.text as mtext
    from matplotlib.backends.backend_mixed import MixedModeRenderer

    rc = tuple(mpl.rcParams[key] for key in _TEXT_RC)

    def metrics_function(renderer):
        measuring = renderer._renderer if isinstance(renderer, MixedModeRenderer) else renderer
        table = _TEXT_METRICS.setdefault((type(measuring), getattr(measuring, "dpi", None), rc), {})

        def metrics(text, fontprop, ismath, dpi):
            key = (text, fontprop, ismath, dpi)
            if key not in table:
                table[key] = renderer.get_text_width_height_descent(text, fontprop, ismath)
            return table[key]
        return metrics

    original = getattr(mtext, "_get_text_metrics_function", None)
    if original is None:  # a matplotlib without the private hook: measure per figure, as matplotlib does
        yield
        return
    mtext._get_text_metrics_function = metrics_function
    try:
        yield
    finally:
        mtext._get_text_metrics_function = original


def figure_svg(fig) -> bytes:
    """The laid-out figure as SVG bytes, text kept as text and no date, so rebuilds are byte-identical."""
    import matplotlib as mpl

    with mpl.rc_context({"svg.hashsalt": "gpuatlas", "svg.fonttype": "none"}):
        svg = io.BytesIO()
        fig.savefig(svg, format="svg", metadata={"Date": None})
    return svg.getvalue()


#: Figures started first: the most panels (or a fit to redo), so that no long one is left for the pool's end.
DRAWN_FIRST = ("clock-power", "instruction-latency-throughput", "occupancy-throughput", "bandwidth-footprint",
               "l1-sets", "power-trace")

#: What a figure worker draws from: its job's (specs, meta, measurements), handed over as it forks, so the
#: frames are shared, not pickled.
_JOB: dict = {}


def _adopt(specs, meta, measurements) -> None:
    import gc

    # what the worker inherits (modules, the frames) lives as long as it does: the collector need not scan it
    gc.freeze()
    _JOB.update(specs=specs, meta=meta, measurements=measurements)


def _draw_one(spec_index: int, derived) -> tuple[int, bytes | None, float]:
    import matplotlib.pyplot as plt

    started = time.perf_counter()
    with shared_text_metrics():
        drawn = list(draw_figures(_JOB["meta"], _JOB["measurements"], derived, [_JOB["specs"][spec_index]]))
        if not drawn:
            return spec_index, None, time.perf_counter() - started
        (_, fig), = drawn
        svg = figure_svg(fig)
    plt.close(fig)
    return spec_index, svg, time.perf_counter() - started


def _derive_one(index: int) -> list[dict]:
    return family(index, _JOB["measurements"], _JOB["meta"]["device"])


class FigureJob:
    """Every figure the run has data for, drawn on every core by forked workers (in turn, in this process,
    where the platform does not fork).  Made from the measurements alone, it starts the derive families
    (``family_rows``) and then the figures that need no derived quantity at once, so the workers derive and draw
    while the caller waits; ``results(derived)`` draws the rest and gathers them all."""

    def __init__(self, meta, measurements, progress=None):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        measured = set(measurements["probe"].unique())
        specs = [spec for spec in figure_specs(measurements) if spec.probe in measured or spec.probe is None]
        order = sorted(range(len(specs)), key=lambda i: specs[i].stem not in DRAWN_FIRST)
        self.specs, self.progress, self.done = specs, progress, {}
        self.waiting = [i for i in order if uses_derived(specs[i])]
        now = [i for i in order if i not in self.waiting]
        workers = min(len(specs), os.cpu_count() or 1)
        self.pool, self.futures, self.families = None, [], []
        # the measurements split by probe once, before the workers fork: they derive and draw from its parts
        self.split = ExitStack()
        self.split.enter_context(split_by_probe(measurements))
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            import scipy.optimize  # noqa: F401  the workers' fits import it: once here, not once in each

            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                            initializer=_adopt, initargs=(specs, meta, measurements))
            self.families = [self.pool.submit(_derive_one, i) for i in range(len(FAMILIES))]
            self.futures = [self.pool.submit(_draw_one, i, None) for i in now]
        else:
            _adopt(specs, meta, measurements)
            self.waiting = now + self.waiting

    def family_rows(self) -> list[list[dict]]:
        """Each derive family's rows, in FAMILIES order, as the workers made them (none without workers)."""
        return [future.result() for future in self.families]

    def _record(self, i, svg, seconds) -> None:
        self.done[i] = svg
        if self.progress:
            self.progress(f"figure {len(self.done)}/{len(self.specs)}: {self.specs[i].stem} ({seconds:.1f} s)")

    def results(self, derived) -> dict:
        """stem -> (spec, SVG) of every figure drawn, in report order; ``progress`` gets a line per figure
        as it is done."""
        from concurrent.futures import as_completed

        try:
            if self.pool is None:
                for i in self.waiting:
                    self._record(*_draw_one(i, derived))
            else:
                self.futures += [self.pool.submit(_draw_one, i, derived) for i in self.waiting]
                for future in as_completed(self.futures):
                    self._record(*future.result())
        finally:
            self.close()
        specs = self.specs
        return {specs[i].stem: (specs[i], self.done[i]) for i in sorted(self.done) if self.done[i] is not None}

    def close(self) -> None:
        """Let the workers go: a figure not yet begun is dropped, one being drawn is left to end on its own."""
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
        self.split.close()
        _JOB.clear()
