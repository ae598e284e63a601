"""The node and fleet pages: a node's boards, outliers and distributions (and its links), a fleet's page."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpuatlas.analysis.board_text import pct, rule_line, spread_text, z_text
from gpuatlas.analysis.boards import distribution, read_summary
from gpuatlas.analysis.fleet_page import render_fleet_page
from gpuatlas.analysis.page import write_page
from gpuatlas.analysis.results import RunDir
from gpuatlas.analysis.units import fmt_value


def boards_sections(summary: dict, compared: pd.DataFrame) -> list:
    """The node page's sections: boards, outliers, distributions."""
    boards = pd.DataFrame(summary["boards"])
    out = [("Boards", boards if len(boards) else ["no finished board run"])]
    outliers = compared[compared["outlier"].astype(bool)] if len(compared) else compared
    if len(outliers):
        shown = pd.DataFrame({"board": outliers["board"], "quantity": outliers["quantity"],
                              "value": [fmt_value(v, u) for v, u in zip(outliers["value"], outliers["unit"])],
                              "centre": [fmt_value(v, u)
                                                   for v, u in zip(outliers["median"], outliers["unit"])],
                              "deviation": [pct(v) for v in outliers["deviation"]],
                              "z": [z_text(v) for v in outliers["z"]]})
        out.append(("Outliers: " + rule_line(summary), shown))
    else:
        out.append(("Outliers", ["none. Rule: " + rule_line(summary)]))
    table = distribution(compared)
    if len(table):
        shown = pd.DataFrame({"gpu": table["gpu"], "quantity": table["quantity"], "boards": table["boards"],
                              **{c: [fmt_value(v, u) for v, u in zip(table[c], table["unit"])]
                                 for c in ("median", "min", "q25", "q75", "max")},
                              "σ / median": [spread_text(s, m, q) for s, m, q in
                                             zip(table["sigma"], table["median"], table["quantity"])],
                              "outliers": table["outlier_boards"].fillna("")})
        out.append(("Each quantity over the boards (σ: 1.4826 MAD, or the panel's standard deviation)", shown))
    return out


def render_boards(folder: Path, kind: str, out_dir: Path) -> Path:
    """The node or fleet page of ``folder`` (from its summary files, and a node's links run) into ``out_dir``."""
    summary, compared = read_summary(folder, kind)
    if kind == "fleet":
        return render_fleet_page(folder, summary, compared, out_dir)
    from gpuatlas.analysis.links import link_sections  # links' sections derive a run, and derive imports every family

    title = f"gpuatlas: {kind} of {len(summary['boards'])} boards ({Path(folder).name})"
    links = [link_sections(RunDir(Path(folder) / "links" / summary["links_run"]))] if summary.get("links_run") else []
    return write_page(title, boards_sections(summary, compared) + [s for part in links for s in part], out_dir)
