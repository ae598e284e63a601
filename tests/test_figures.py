"""Report figures are legible: no two text labels overprint, reference levels are labelled apart."""
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from gpuatlas.analysis.figures import _level_labels  # noqa: E402
from gpuatlas.analysis.report_figures import declared_figures, figure_specs  # noqa: E402
from gpuatlas.analysis.units import plain_log_axis  # noqa: E402

STEMS = [spec.stem for spec in declared_figures()]
#: Words that name a unit (or say the axis is a pure ratio or a count) in an axis label or its tick labels.
UNIT_WORDS = re.compile(r"\b(cycles?|B|bytes|KiB|MiB|GiB|TiB|[kMGTP]?B/s|[kMGTP]?FLOP/s|FLOP/B|FLOP|[mµn]?s|"
                        r"[kMG]?Hz|W|warps?|elements|programs|blocks|lines|threads|instructions|ops|tokens|"
                        r"ratio|fraction|count|claims|misses|passes|probes?|SMs?|ways|per cent|%|x|µs)(?![A-Za-z])")


def axes_without_units(fig) -> list[str]:
    """Each drawn axis whose tick labels are bare numbers while neither they nor its label name a unit."""
    if fig.stale:  # tick labels are laid out by a draw (the overlap test's, where it ran first)
        fig.canvas.draw()
    missing = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        for axis in (ax.xaxis, ax.yaxis):
            ticks = [t.get_text() for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            if not axis.get_visible() or not ticks:
                continue
            if not all(re.match(r"[−-]?(\d|1/)", t) for t in ticks):
                continue  # ticks that name categories (§7.3, FP32 FFMA), not numbers
            if any(UNIT_WORDS.search(t) for t in ticks):
                continue  # the ticks carry their unit (64 MiB, 2x)
            if not UNIT_WORDS.search(axis.get_label_text()):
                missing.append(f"{ax.get_title() or fig.get_suptitle()!r} {axis.axis_name}: "
                               f"{axis.get_label_text()!r}")
    return missing


def _colour(artist):
    """The RGB an artist is drawn in: a line's colour, a patch's or a collection's face (else edge)."""
    from matplotlib.collections import Collection
    from matplotlib.colors import to_rgb
    from matplotlib.container import Container
    from matplotlib.lines import Line2D

    if isinstance(artist, Container):
        return _colour(next(a for a in artist.get_children() if a is not None))
    if isinstance(artist, Line2D):
        return to_rgb(artist.get_color())
    if isinstance(artist, Collection):
        faces = artist.get_facecolor()
        return tuple(faces[0][:3]) if len(faces) and faces[0][3] > 0 else tuple(artist.get_edgecolor()[0][:3])
    return to_rgb(artist.get_facecolor())


def _style(artist) -> tuple:
    """What tells a legend's entry from another: colour, and for a plain line its dash and marker."""
    from matplotlib.lines import Line2D

    colour = tuple(round(c, 3) for c in _colour(artist))
    if isinstance(artist, Line2D):
        dash = artist.get_linestyle() if artist.get_linestyle() not in ("None", "", " ") else "none"
        marker = artist.get_marker() if artist.get_marker() not in (None, "None", "", " ") else "none"
        return colour, dash, marker
    return (colour,)


def legend_mismatches(fig) -> list[str]:
    """Each legend entry drawn unlike the artist it names: the artist with its label in the same axes or, for a
    proxy entry, any artist of the axes drawn in its style."""
    from matplotlib.container import Container
    from matplotlib.lines import Line2D

    bad = []
    legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend()] + [(None, g) for g in fig.legends]
    for ax, legend in legends:
        artists = [a for a in (ax.get_children() + ax.containers if ax else
                               [c for a in fig.axes for c in a.get_children() + a.containers])]
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            label = text.get_text()
            named = [a for a in artists if getattr(a, "get_label", lambda: None)() == label]
            if named:
                target = named[0]
                plain = isinstance(target, Line2D) and isinstance(handle, Line2D)
                ok = (_style(handle) == _style(target)) if plain else (
                    tuple(round(c, 3) for c in _colour(handle)) == tuple(round(c, 3) for c in _colour(target)))
            else:
                ok = any(not isinstance(a, Container) and type(a) is type(handle) and _style(a) == _style(handle)
                         for a in artists if a is not handle)
            if not ok:
                bad.append(label)
    return bad


def drawn_texts(fig) -> list[tuple[str, object]]:
    """(text, window extent) of every Text the renderer actually draws (visible, non-empty, inside the view:
    tick labels beyond the axis limits are never drawn and are not counted)."""
    seen, original = [], Text.draw

    def record(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            seen.append((self.get_text(), self.get_window_extent(renderer)))

    Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        Text.draw = original
    return seen


def overlaps(fig, tolerance_px: float = 0.5) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose boxes intersect by more than ``tolerance_px`` in both directions."""
    texts = drawn_texts(fig)
    hits = []
    for i, (a, box_a) in enumerate(texts):
        for b, box_b in texts[i + 1:]:
            dx = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            dy = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if dx > tolerance_px and dy > tolerance_px:
                hits.append((a, b))
    return hits


def test_the_overlap_check_sees_two_labels_on_one_spot():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.text(0.5, 0.5, "L1 32")
    ax.text(0.5, 0.51, "smem 23")
    assert overlaps(fig) == [("L1 32", "smem 23")]
    plt.close(fig)


def test_close_levels_are_labelled_apart_where_plain_labels_collide():
    levels = [(23.0, "smem 23"), (32.0, "L1 32"), (629.0, "HBM 629")]

    def draw(label):
        fig, ax = plt.subplots(figsize=(6, 4))
        for value, _ in levels:
            ax.axhline(value)
        ax.set_ylim(0, 700)
        label(ax)
        fig.tight_layout()
        return fig

    naive = draw(lambda ax: [ax.annotate(text, (1.01, value), xycoords=("axes fraction", "data"))
                             for value, text in levels])
    assert overlaps(naive), "negative control: labels at the levels' own heights overprint"
    nudged = draw(lambda ax: _level_labels(ax, levels))
    assert overlaps(nudged) == []
    plt.close("all")


def test_every_report_figure_is_drawn_from_the_committed_run(committed_figures, committed_run):
    """Every figure whose probe the committed run measured (a probe newer than that run is drawn by its own
    module's tests on simulated data until the run is re-measured)."""
    measured = set(committed_run[1]["probe"].unique())
    expected = {spec.stem for spec in figure_specs(committed_run[1]) if spec.probe in measured or spec.probe is None}
    assert set(committed_figures) == expected and {"latency-staircase", "clock-power"} <= expected


@pytest.mark.parametrize("stem", STEMS)
def test_no_two_labels_of_a_report_figure_overlap(committed_figures, stem):
    fig = committed_figures.get(stem)
    if fig is None:
        pytest.skip(f"the committed run has no data for {stem}")
    assert overlaps(fig) == [], stem


@pytest.mark.parametrize("stem", STEMS)
def test_no_report_figure_draws_mathtext(committed_figures, stem):
    """Every drawn label is plain text: a mathtext label ($10^{3}$, a log axis's default) costs a parse each
    time it is drawn, which made up a sixth of the figures' drawing."""
    fig = committed_figures.get(stem)
    if fig is None:
        pytest.skip(f"the committed run has no data for {stem}")
    assert [text for text, _ in drawn_texts(fig) if "$" in text] == [], stem


def test_the_mathtext_check_sees_a_default_log_axis():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 1000], [1, 2])
    ax.set_xscale("log")  # negative control: matplotlib's default log ticks are mathtext
    assert any("$" in text for text, _ in drawn_texts(fig))
    plain_log_axis(ax.xaxis)
    assert not any("$" in text for text, _ in drawn_texts(fig))
    plt.close(fig)


@pytest.mark.parametrize("name, n", [(None, None), ("deep", 3), ("deep", 12), ("dark", 5), ("viridis", 7), ("husl", 12)])
def test_the_figures_palettes_are_seaborns(name, n):
    """The palettes kept as constants (so a figure does not import seaborn) give seaborn's colours."""
    import seaborn

    from gpuatlas.analysis.figures import color_palette

    assert color_palette(name, n) == [tuple(c) for c in seaborn.color_palette(name, n)]
    other = "dark" if name != "dark" else "deep"
    assert color_palette(name, n) != [tuple(c) for c in seaborn.color_palette(other, n)], "negative control"


def test_only_figures_that_read_the_derived_quantities_wait_for_them():
    """A figure whose draw never reads the derived quantities is started before they are derived."""
    from gpuatlas.analysis.report_figures import FigureSpec, uses_derived

    def spec(draw):
        return FigureSpec("x", None, "title", "caption", draw)

    assert uses_derived(spec(lambda meta, m, d: (m, d)))
    assert not uses_derived(spec(lambda meta, m, d: (meta, m))), "negative control: d never read"
    assert uses_derived(spec(lambda meta, m, derived: (lambda: derived)())), "read inside a closure"
    assert not uses_derived(next(s for s in declared_figures() if s.stem == "divergence"))
    assert uses_derived(next(s for s in declared_figures() if s.stem == "latency-staircase"))


def _labelled_svg(dpi: int) -> bytes:
    """A small figure with a title, labels and ticks, laid out at ``dpi`` and saved as the report saves."""
    from gpuatlas.analysis import figure_job

    with matplotlib.rc_context({"figure.dpi": dpi}):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([1, 10, 100], [3, 1, 2])
        ax.set_title("bandwidth against footprint")
        ax.set_xlabel("footprint (bytes)")
        ax.set_ylabel("cycles per load")
        fig.tight_layout()
    fig.set_layout_engine(None)
    svg = figure_job.figure_svg(fig)
    plt.close(fig)
    return svg


def test_shared_text_metrics_draw_what_matplotlib_draws(monkeypatch):
    """Extents measured by earlier figures (at another dpi, under another hinting) never reach a later one."""
    from gpuatlas.analysis import figure_job

    monkeypatch.setattr(figure_job, "_TEXT_METRICS", {})
    plain = {dpi: _labelled_svg(dpi) for dpi in (100, 200)}
    with matplotlib.rc_context({"text.hinting": "no_hinting"}):
        unhinted = _labelled_svg(100)
    assert plain[100] != unhinted
    for order in ((200, 100, 100, 200), (100, 200)):
        for dpi in order:
            with figure_job.shared_text_metrics():
                assert _labelled_svg(dpi) == plain[dpi]
    with matplotlib.rc_context({"text.hinting": "no_hinting"}), figure_job.shared_text_metrics():
        assert _labelled_svg(100) == unhinted
    assert len(figure_job._TEXT_METRICS) == 5  # Agg at 100 and 200 dpi, SVG, and Agg at 100 dpi unhinted, SVG unhinted


def test_shared_text_metrics_is_a_no_op_on_a_matplotlib_without_the_hook(monkeypatch):
    """matplotlib 3.8 (which pyproject allows) has no _get_text_metrics_function: figures are then drawn as
    matplotlib draws them and no extent is cached.  Simulated: the hook removed, and the caller measuring
    through the renderer as 3.8's does."""
    import matplotlib.text as mtext

    from gpuatlas.analysis import figure_job

    plain = _labelled_svg(100)
    monkeypatch.setattr(figure_job, "_TEXT_METRICS", {})
    monkeypatch.delattr(mtext, "_get_text_metrics_function")
    monkeypatch.setattr(mtext, "_get_text_metrics_with_cache",
                        lambda renderer, text, fontprop, ismath, dpi:
                        renderer.get_text_width_height_descent(text, fontprop, ismath))
    with figure_job.shared_text_metrics():
        assert _labelled_svg(100) == plain
    assert figure_job._TEXT_METRICS == {} and not hasattr(mtext, "_get_text_metrics_function")


def test_text_metrics_shared_across_hintings_would_change_a_figure(monkeypatch):
    """Negative control: extents measured with hinting served to a figure drawn without it (a cache keyed
    without the rc settings) change the figure, so the test above sees such a key."""
    from gpuatlas.analysis import figure_job

    monkeypatch.setattr(figure_job, "_TEXT_METRICS", {})
    with matplotlib.rc_context({"text.hinting": "no_hinting"}):
        unhinted = _labelled_svg(100)
        rc = tuple(matplotlib.rcParams[key] for key in figure_job._TEXT_RC)
    with figure_job.shared_text_metrics():
        _labelled_svg(100)
    for kind, dpi, _ in list(figure_job._TEXT_METRICS):
        figure_job._TEXT_METRICS[(kind, dpi, rc)] = figure_job._TEXT_METRICS[(kind, dpi, _)]
    with matplotlib.rc_context({"text.hinting": "no_hinting"}), figure_job.shared_text_metrics():
        assert _labelled_svg(100) != unhinted


@pytest.mark.parametrize("stem", STEMS)
def test_every_axis_of_a_report_figure_has_a_unit(committed_figures, stem):
    fig = committed_figures.get(stem)
    if fig is None:
        pytest.skip(f"the committed run has no data for {stem}")
    assert axes_without_units(fig) == [], stem


def test_the_unit_check_sees_an_axis_of_bare_numbers():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 3], [10, 20, 30])
    ax.set_ylabel("throughput")  # negative control: the roofline's old label
    ax.set_xlabel("footprint (MiB)")
    assert axes_without_units(fig) == ["'' y: 'throughput'"]
    ax.set_ylabel("throughput (FLOP/s)")
    assert axes_without_units(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("stem", STEMS)
def test_every_legend_entry_of_a_report_figure_is_drawn_as_its_line(committed_figures, stem):
    fig = committed_figures.get(stem)
    if fig is None:
        pytest.skip(f"the committed run has no data for {stem}")
    assert legend_mismatches(fig) == [], stem


def test_the_legend_check_sees_a_grey_proxy_for_coloured_lines():
    """Negative control: the coalescing figure's old legend, grey model entries for lines drawn in colour."""
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([1, 2], [1, 2], "o-", color="C0", label="measured")
    ax.plot([1, 2], [1, 1.5], "--", color="C0")
    proxy = Line2D([], [], color="grey", ls="--", label="sector model")
    ax.legend(handles=ax.get_legend_handles_labels()[0] + [proxy])
    assert legend_mismatches(fig) == ["sector model"]
    ax.plot([1, 2], [1, 1.2], "--", color="grey")
    assert legend_mismatches(fig) == []
    ax.legend(handles=[Line2D([], [], color="C1", marker="o", label="measured")])
    assert legend_mismatches(fig) == ["measured"], "an entry unlike the line it names"
    plt.close(fig)


@pytest.fixture(scope="module")
def ratio_figure():
    """`compare --plot`'s figure of the committed run against two references."""
    from conftest import COMMITTED_RUN

    from gpuatlas.analysis.compare import comparison, run_label
    from gpuatlas.analysis.compare_figure import ratio_figure as draw
    from gpuatlas.analysis.results import RunDir

    run = RunDir(COMMITTED_RUN)  # its committed derived.csv: test_committed_run checks it is what derive() gives
    sources = [str(COMMITTED_RUN), "ref:h100-sxm", "ref:a100-sxm4-80gb"]
    loaded = {sources[0]: run_label(run.read_meta(), sources[0], run.read_derived())}
    fig = draw(comparison(sources, loaded=loaded))
    yield fig
    plt.close(fig)


def test_the_comparison_figure_passes_the_checks_with_cis_and_every_point_apart(ratio_figure):
    from matplotlib.container import ErrorbarContainer

    ax = ratio_figure.axes[0]
    assert overlaps(ratio_figure) == [] and axes_without_units(ratio_figure) == []
    assert legend_mismatches(ratio_figure) == []
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2 and any(len(c.lines[2]) and len(c.lines[2][0].get_segments()) for c in bars)
    points = [tuple(xy) for c in bars for xy in c.lines[0].get_xydata()]
    assert len(set(points)) == len(points), "no point drawn on another"
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert len(ticks) >= 4, "ticks enough to read a ratio off"
