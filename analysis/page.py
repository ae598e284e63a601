"""A report page: one self-contained HTML file (figures inlined as data URIs, links only to its own anchors)
and its Markdown twin (which links the SVG files written beside it).

A page is a list of sections, (heading, content).  Content is a DataFrame (a table), a list of lines, a figure
("figure", spec, svg), figures side by side ("figures", [(spec, svg), ...]), a figure with sections beside it
("beside", (spec, svg), sections), a small bar chart the page draws itself ("bars", [(label, [(part, count,
colour), ...]), ...]), or a Part: a chapter of such
sections under one heading, which an appendix part collapses in a <details> element on screen (print opens it).
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from gpuatlas.analysis.results import atomic_write_bytes, atomic_write_text


class Part(NamedTuple):
    """A chapter: its sections, whether it is an appendix (collapsed on screen), and whether its tables are
    wide (printed on landscape pages)."""
    sections: list
    appendix: bool = False
    wide: bool = False


def _figures_of(sections) -> list:
    """Every (spec, svg) of the sections, in page order."""
    out = []
    for _, content in sections:
        if isinstance(content, Part):
            out += _figures_of(content.sections)
        elif isinstance(content, tuple) and content[0] == "figure":
            out.append(content[1:])
        elif isinstance(content, tuple) and content[0] == "figures":
            out += list(content[1])
        elif isinstance(content, tuple) and content[0] == "beside":
            out += [content[1], *_figures_of(content[2])]
    return out


def _anchor(heading: str, taken: set) -> str:
    base = "".join(c if c.isalnum() else "-" for c in heading.lower()).strip("-")
    while "--" in base:
        base = base.replace("--", "-")
    anchor, n = base, 2
    while anchor in taken:
        anchor, n = f"{base}-{n}", n + 1
    taken.add(anchor)
    return anchor


def _md_link(cell: str) -> str:
    """A figure's file named in a table cell becomes a link to it."""
    return f"[{cell}]({cell})" if re.fullmatch(r"[a-z0-9-]+\.svg", cell) else cell


def _md_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [["" if pd.isna(v) else _md_link(str(v)) for v in row]
                                                  for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    lines.insert(1, "|" + "---|" * len(frame.columns))
    return "\n".join(lines)


class _Writer:
    """Builds the HTML body, its contents list and the Markdown together, numbering figures as they come."""

    def __init__(self, numbers: dict, out_dir: Path):
        self.numbers, self.out_dir = numbers, out_dir
        self.md, self.body, self.toc, self.taken = [], [], [], set()

    def figure(self, spec, svg, grow: bool = False) -> str:
        atomic_write_bytes(self.out_dir / f"{spec.stem}.svg", svg)
        caption = f"Figure {self.numbers[spec.stem]}. {spec.title}. {spec.caption}"
        self.md += [f"![{spec.title}]({spec.stem}.svg)", "", f"*{caption}*", ""]
        self.taken.add(spec.stem)
        # a data URI, not inline <svg>: each figure keeps its own ids and style sheet out of the page's
        # in a row, each figure takes room in proportion to its drawn width
        width = re.search(rb'<svg[^>]* width="([\d.]+)pt"', svg) if grow else None
        style = f' style="flex-grow:{float(width.group(1)):.0f}"' if width else ""
        return (f'<figure id="{spec.stem}"{style}><img alt="{html.escape(spec.title)}" src="data:image/svg+xml;base64,'
                f'{base64.b64encode(svg).decode()}"><figcaption>{html.escape(caption)}</figcaption></figure>')

    def table(self, frame: pd.DataFrame) -> str:
        self.md += [_md_table(frame), ""]
        table = frame.to_html(index=False, na_rep="", classes="data", border=0)
        if "verdict" in frame:
            table = table.replace("<td>deviates</td>", '<td class="deviates">deviates</td>')
        return re.sub(r"<td>([a-z0-9-]+)\.svg</td>", self._figure_cell, table)

    def _figure_cell(self, match) -> str:
        """A figure named in a table cell: a link to it on this page, or its name where this page lacks it."""
        stem = match.group(1)
        if stem in self.numbers:
            return f'<td><a href="#{stem}">Figure {self.numbers[stem]}</a></td>'
        return f"<td>{stem} (not drawn from this run)</td>"

    def bars(self, rows) -> str:
        """A small chart drawn by the page itself: per row (label, [(part, count, colour), ...]) a bar of its
        parts' counts, to one scale, with the counts written in."""
        self.md += [f"- {label}: " + ", ".join(f"{part} {n}" for part, n, _ in parts) for label, parts in rows]
        self.md.append("")
        longest = max((sum(n for _, n, _ in parts) for _, parts in rows), default=1) or 1
        colours = {part: colour for _, parts in rows for part, _, colour in parts}
        key = "".join(f'<span><i style="background:{c}"></i>{html.escape(p)}</span>' for p, c in colours.items())
        body = "".join(
            f"<tr><th>{html.escape(label)}</th><td><div>"
            + "".join(f'<span style="width:{100 * n / longest:.2f}%;background:{colour}" '
                      f'title="{html.escape(part)}: {n}">{n}</span>' for part, n, colour in parts)
            + "</div></td></tr>" for label, parts in rows)
        return f'<div class="bars"><p class="key">{key}</p><table>{body}</table></div>'

    def content(self, content) -> str:
        if isinstance(content, pd.DataFrame):
            return self.table(content)
        if isinstance(content, tuple) and content[0] == "figure":
            return self.figure(*content[1:])
        if isinstance(content, tuple) and content[0] == "figures":
            return '<div class="row">' + "".join(self.figure(*f, grow=True) for f in content[1]) + "</div>"
        if isinstance(content, tuple) and content[0] == "bars":
            return self.bars(content[1])
        if isinstance(content, tuple) and content[0] == "beside":
            _, (spec, svg), sections = content
            figure = self.figure(spec, svg, grow=True)  # first, in the Markdown too
            inner, _ = self.sections(sections, 3)
            return f'<div class="row">{figure}<div class="aside">{"".join(inner)}</div></div>'
        self.md += [f"- {line}" for line in content] + [""]
        return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in content) + "</ul>"

    def sections(self, sections, level: int = 2) -> list[str]:
        """The sections as HTML; each heading (a figure's is its caption) enters the contents list."""
        out, toc = [], []
        for heading, content in sections:
            if isinstance(content, Part):
                anchor = _anchor(heading, self.taken)
                self.md += [f"{'#' * level} {heading}", ""]
                inner, inner_toc = self.sections(content.sections, level + 1)
                toc.append(f'<li><a href="#{anchor}">{html.escape(heading)}</a>'
                           + (f"<ol>{''.join(inner_toc)}</ol>" if inner_toc and not content.appendix else "")
                           + "</li>")
                head = f'<h{level} id="{anchor}">{html.escape(heading)}</h{level}>'
                inner = "".join(inner)
                wide = " wide" if content.wide else ""
                out.append(f'<section class="appendix{wide}">{head}<details><summary>show</summary>{inner}</details>'
                           f"</section>" if content.appendix else
                           f'<section class="chapter{wide}">{head}{inner}</section>')
                continue
            if isinstance(content, tuple) and content[0] in ("figure", "figures", "beside"):  # captions head them
                stems = [content[1][0]] if content[0] == "beside" else (
                    [content[1]] if content[0] == "figure" else [f[0] for f in content[1]])
                toc += [f'<li><a href="#{s.stem}">{html.escape(s.title)}</a></li>' for s in stems]
                out.append(self.content(content))
                continue
            anchor = _anchor(heading, self.taken)
            toc.append(f'<li><a href="#{anchor}">{html.escape(heading)}</a></li>')
            self.md += [f"{'#' * level} {heading}", ""]
            out.append(f'<h{level} id="{anchor}">{html.escape(heading)}</h{level}>' + self.content(content))
        return out, toc


def write_page(title: str, sections, out_dir: Path) -> Path:
    """Write ``index.html`` (self-contained) and ``index.md`` (and each figure as SVG); return the HTML path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    numbers = {spec.stem: n for n, (spec, _) in enumerate(_figures_of(sections), 1)}
    writer = _Writer(numbers, out_dir)
    writer.md += [f"# {title}", ""]
    body, toc = writer.sections(sections)
    # the contents after the first section: under the title, a reader sees that section (the summary) first
    nav = f'<nav class="toc"><h2>Contents</h2><ol>{"".join(toc)}</ol></nav>' if len(toc) > 2 else ""
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>{''.join(body[:1])}{nav}{''.join(body[1:])}"
            f"<script>{_OPEN_FOR_PRINT}</script></body></html>\n")
    atomic_write_text(out_dir / "index.md", "\n".join(writer.md))
    atomic_write_text(out_dir / "index.html", page)
    return out_dir / "index.html"


#: A printed page shows the appendices: every <details> opens before printing.
_OPEN_FOR_PRINT = ("addEventListener('beforeprint',()=>document.querySelectorAll('details').forEach(d=>d.open=true))")

CSS = """body{font-family:system-ui,sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;color:#222}
table.data{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.85em;max-width:100%}
table.data th,table.data td{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top;
overflow-wrap:break-word}table.data td:first-child{white-space:nowrap}
td.deviates{background:#fde0dc;font-weight:bold}img{max-width:100%}h2{margin-top:1.6em}h3{margin-top:1.2em}
figure{margin:0 0 1.5em}figcaption{font-size:0.9em;color:#444;margin-top:0.3em}
div.row{display:flex;gap:1em;align-items:flex-start}div.row figure{flex:1 1 0;min-width:0;margin:0}
div.row div.aside{flex:380 1 0;min-width:0;font-size:0.9em}div.aside h3{margin-top:0;font-size:1.05em}
div.bars table{width:100%;border-collapse:collapse;font-size:0.8em}div.bars th{text-align:left;width:6em;
font-weight:normal;padding:1px 6px 1px 0}div.bars td div{display:flex}div.bars td span{color:#fff;text-align:center;
overflow:hidden;white-space:nowrap;padding:1px 0;print-color-adjust:exact;-webkit-print-color-adjust:exact}
div.bars p.key span{margin-right:1em;font-size:0.8em}div.bars p.key i{display:inline-block;width:0.8em;
height:0.8em;margin-right:0.3em;vertical-align:middle;print-color-adjust:exact;-webkit-print-color-adjust:exact}
nav.toc ol{columns:2}nav.toc ol ol{columns:1;font-size:0.9em}details>summary{cursor:pointer;color:#555}
@media print{details::details-content{content-visibility:visible;display:contents}
div.row{display:block}div.row figure{margin:0 0 1.5em}
body{max-width:none;margin:0;padding:0;font-size:10pt}
h2{break-before:page}section.chapter:first-of-type h2{break-before:avoid}h2,h3{break-after:avoid}
figure,tr{break-inside:avoid}img{max-height:23cm;object-fit:contain}
table.data{font-size:7pt;width:100%}table.data th,table.data td{padding:1px 3px}
@page landscape{size:landscape}section.wide{page:landscape}
details>summary{display:none}nav.toc{display:none}}"""


def check_pdf_printer() -> None:
    """Refuse --pdf before any work where WeasyPrint (the pdf extra) cannot be imported."""
    from gpuatlas.analysis.errors import UsageError

    try:
        import weasyprint  # noqa: F401
    except (ImportError, OSError) as exc:  # OSError: the package is there, the system's Pango is not
        raise UsageError(f"--pdf needs WeasyPrint (pip install 'gpuatlas[pdf]'): {exc}") from None


def print_pdf(page: Path) -> Path:
    """Print the page (its print style sheet: appendices open, figures whole) to index.pdf beside it."""
    import weasyprint

    pdf = page.with_suffix(".pdf")
    weasyprint.HTML(filename=str(page)).write_pdf(str(pdf))
    return pdf
