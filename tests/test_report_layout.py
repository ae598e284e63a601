"""The report reads like a paper: a summary under the title, chapters that open with their figures, the big
tables in appendices; counts print as integers, an absent interval as "n/a", and a quantity the run resolved
is never called "not measured"."""
import re
from html import unescape

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis import chapters
from gpuatlas.analysis.render import derived_table
from gpuatlas.analysis.report_figures import FigureSpec, declared_figures
from gpuatlas.analysis.shown import fmt_interval, fmt_measured, fmt_value


def row(quantity, value, low, high, unit="1", **extra):
    return {"quantity": quantity, "value": value, "ci_low": low, "ci_high": high, "unit": unit, "method": "m",
            "probe": "p", "note": "", **extra}


def test_counts_print_as_integers_and_an_absent_interval_as_na():
    assert fmt_value(32.0, "1") == "32" and fmt_value(14922.127576, "1") == "14922"
    assert fmt_value(4.129, "1") == "4.129", "a fitted non-integer below 1000 keeps its digits"
    assert fmt_value(30.4 * 2**20, "B") == "30.4 MiB" and fmt_value(2.5e-6, "s") == "2.5 µs"
    assert fmt_interval(32.0, 32.0, "1") == "n/a" and fmt_interval(np.nan, np.nan, "cycles") == "n/a"
    assert fmt_interval(16.0, 20.0, "1") == "[16, 20]"
    assert fmt_measured(272.68, 272.65, 272.73, "cycles") == "272.7 cycles [272.6, 272.7]"
    assert fmt_measured(23.0, 23.0, 23.0, "cycles") == "23 cycles [n/a]"


def test_the_derived_table_shows_the_repeat_run_interval_where_the_run_has_one():
    plain = pd.DataFrame([row("l2.ways", 16.0, 16.0, 20.0), row("smem.banks", 32.0, 32.0, 32.0)])
    assert "repro interval" not in derived_table(plain) and not chapters.has_repro(plain)
    assert "no repro interval" in chapters.reproducibility(plain)
    repro = pd.DataFrame([row("a", 10.0, 9.9, 10.1, repro_low=9.0, repro_high=11.0),  # wider than its CI
                          row("b", 10.0, 9.0, 11.0, repro_low=9.9, repro_high=10.1),  # narrower
                          row("c", 10.0, 9.0, 11.0, repro_low=np.nan, repro_high=np.nan)])
    table = derived_table(repro)
    assert list(table["repro interval"]) == ["[9, 11]", "[9.9, 10.1]", "n/a"]
    assert chapters.reproducibility(repro).startswith("Reproducibility: 1 of 2 quantities")
    assert "repro interval" in chapters.key_table(repro, ["a", "b", "missing"]) and \
        list(chapters.key_table(repro, ["a", "b", "missing"])["quantity"]) == ["a", "b"]


def test_every_figure_has_its_place_in_the_summary_or_a_chapter():
    layout = chapters.placed(declared_figures())
    placed = [stem for stems in layout.values() for stem in stems]
    assert sorted(placed) == sorted(spec.stem for spec in declared_figures()) and len(placed) == len(set(placed))
    assert list(layout) == [chapters.SUMMARY] + [chapter.title for chapter in chapters.CHAPTERS]
    assert layout[chapters.SUMMARY][0] == "atlas" and layout["Execution"][-2:] == ["clock-power", "power-trace"]


def test_a_figure_is_placed_after_the_one_it_names_and_refused_without_a_place():
    def spec(stem, chapter="Execution", after=""):
        return FigureSpec(stem, None, "t", "c", None, chapter, after)

    specs = [spec("a"), spec("c", after="b"), spec("b", after="a"), spec("d", after="a"), spec("s", "Summary")]
    assert chapters.placed(specs)["Execution"] == ["a", "b", "c", "d"] and chapters.placed(specs)["Summary"] == ["s"]
    with pytest.raises(ValueError, match="name no chapter"):  # negative controls
        chapters.placed([spec("a", "Appendix Z")])
    with pytest.raises(ValueError, match="not in their chapter"):
        chapters.placed([spec("a"), spec("b", "Geometry", after="a")])
    with pytest.raises(ValueError, match="in a circle"):
        chapters.placed([spec("a", after="b"), spec("b", after="a")])


@pytest.fixture(scope="module")
def page(committed_report):
    html_path, derived = committed_report
    return html_path.read_text(), derived


def _parts(html: str, kind: str) -> dict:
    """{title: body} of each <section class=kind> of the page."""
    return {unescape(title): body for title, body in
            re.findall(rf'<section class="{kind}(?: wide)?"><h2 id="[^"]+">([^<]+)</h2>(.*?)</section>', html, re.DOTALL)}


def test_the_committed_report_opens_with_the_atlas_and_each_chapter_with_its_figures(page, committed_report):
    html, _ = page
    markdown = committed_report[0].with_suffix(".md")
    parts = _parts(html, "chapter")
    assert list(parts)[:2] == ["Summary", "Memory hierarchy"] and "The lecture judged" in parts
    assert re.match(r'(<div class="row">)?<figure id="atlas"', parts["Summary"])
    assert html.index('<figure id="atlas"') == html.index("<figure"), "the atlas is the page's first figure"
    for title, body in parts.items():
        if title != "The lecture judged":  # its chart is the summary's
            assert re.match(r"(<div class=\"row\">)?<figure", body), title
    assert html.index('<nav class="toc">') > html.index('<figure id="atlas"'), "the summary under the title"
    md = markdown.read_text()
    assert md.index("## Summary") < md.index("![The atlas") < md.index("### The lecture judged") < md.index(
        "## Memory hierarchy") < md.index("## Appendix A.")


def test_the_appendices_hold_the_big_tables_collapsed(page):
    html, derived = page
    appendices = _parts(html, "appendix")
    assert all(body.startswith("<details>") for body in appendices.values())
    derived_rows = appendices["Appendix A. Every derived quantity"].count("<tr>")  # the header's has a style
    assert derived_rows == len(derived)
    assert "Claims of §7.3" in appendices["Appendix B. The lecture's claims, section by section"]
    assert "Instruction table" in appendices["Appendix C. Instruction table"]
    chapters_html = "".join(_parts(html, "chapter").values())
    assert "<figure" not in "".join(appendices.values()) and "Claims of §7.3" not in chapters_html
    assert max(body.count("<tr>") for body in _parts(html, "chapter").values()) < derived_rows / 4


def test_the_hierarchy_never_calls_a_quantity_of_a_probe_that_ran_not_measured(committed_run):
    from conftest import COMMITTED_RUN

    from gpuatlas.analysis.render import hierarchy_table
    from gpuatlas.analysis.results import RunDir

    meta, _ = committed_run
    table = hierarchy_table(meta, RunDir(COMMITTED_RUN).read_derived())
    cells = " ".join(table.astype(str).to_numpy().ravel())
    assert "not measured" not in cells, "every probe of the committed run ran: a gap is 'not resolved'"
    stopped = {**meta, "probes": {k: {**v, "status": "skipped"} if k == "chase.smem" else v
                                  for k, v in meta["probes"].items()}}
    fewer = RunDir(COMMITTED_RUN).read_derived().query("quantity != 'smem.latency_cycles'")
    assert "not measured (chase.smem skipped)" in " ".join(hierarchy_table(stopped, fewer).astype(str).to_numpy()
                                                          .ravel()), "negative control"


def test_the_comparison_page_opens_with_its_figure(tmp_path):
    from conftest import COMMITTED_RUN

    from gpuatlas.analysis.compare import comparison, run_label
    from gpuatlas.analysis.render import render_comparison
    from gpuatlas.analysis.results import RunDir

    run = RunDir(COMMITTED_RUN)
    sources = [str(COMMITTED_RUN), "ref:h100-sxm"]
    long = comparison(sources, loaded={sources[0]: run_label(run.read_meta(), sources[0], run.read_derived())})
    html = render_comparison(long, {}, tmp_path).read_text()
    body = html[html.index("<body>"):]
    assert re.match(r'<body><h1>[^<]+</h1><figure id="ratios"><img', body)
    assert body.index("Figure 1. Each GPU against the first") < body.index("Derived quantities side by side")
    assert (tmp_path / "ratios.svg").exists() and "![Each GPU against the first](ratios.svg)" in \
        (tmp_path / "index.md").read_text()


def test_the_verdict_chart_draws_whatever_verdicts_the_claims_give(tmp_path):
    from gpuatlas.analysis.page import Part, write_page

    table = pd.DataFrame({"section": ["§7.1", "§7.1", "§7.3", "§7.3", "§7.3"],
                          "verdict": ["holds", "undecided", "deviates", "a verdict added later", "holds"]})
    kind, rows = chapters.verdict_bars(table)
    assert kind == "bars" and [label for label, _ in rows] == ["§7.1", "§7.3"]
    assert {p: n for p, n, _ in rows[1][1]} == {"holds": 1, "deviates": 1, "a verdict added later": 1}
    assert len({c for _, parts in rows for _, _, c in parts}) == 4, "each verdict its own colour"
    page = write_page("t", [("Summary", Part([("verdicts", (kind, rows))]))], tmp_path).read_text()
    assert page.count('title="holds: 1"') == 2 and 'title="a verdict added later: 1"' in page
    assert "- §7.3: holds 1, deviates 1, a verdict added later 1" in (tmp_path / "index.md").read_text()


def test_the_summarys_verdict_chart_counts_the_claims(page):
    from gpuatlas.analysis import claims
    from gpuatlas.analysis.results import RunDir
    from conftest import COMMITTED_RUN

    html, derived = page
    summary = _parts(html, "chapter")["Summary"]
    drawn = re.findall(r'<tr><th>([^<]+)</th><td><div>(.*?)</div></td></tr>', summary)
    judged = claims.judge(derived, RunDir(COMMITTED_RUN).read_meta()["device"])
    counts = judged.groupby(["section", "verdict"], sort=False).size()
    assert [unescape(label) for label, _ in drawn] == list(dict.fromkeys(judged["section"]))
    for label, bars in drawn:
        shown = {unescape(v): int(n) for v, n in re.findall(r'title="([^"]+): (\d+)"', bars)}
        assert shown == counts[unescape(label)].to_dict(), label
