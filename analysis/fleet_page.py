"""The fleet page, made for a thousand boards: the boards with the most outliers (quantities and mechanism
groups) first, then every outlier, each judged quantity's distribution over the boards (z, outliers marked and
named) and a page per flagged board, linked, not inlined.  It reads the fleet summary (``fleet.csv``, ``fleet.json``) only.
"""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np
import pandas as pd

from gpuatlas.analysis.board_text import pct, rule_line, spread_text, z_text
from gpuatlas.analysis.boards import distribution, is_group
from gpuatlas.analysis.results import atomic_write_bytes, atomic_write_text
from gpuatlas.analysis.units import fmt_value

#: Rows of the tables that could grow with the fleet (the whole screen is in fleet.csv).
TOP_BOARDS, MAX_OUTLIER_ROWS = 25, 200
#: Robust z drawn up to this many thresholds; larger ones sit at the edge.
Z_SHOWN = 4

_CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}
th,td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
td.out{background:#fde0dc;font-weight:bold}img{max-width:100%}h2{margin-top:1.4em}p.lead{font-size:1.05em}"""


def board_file(board: str) -> str:
    return "boards/" + "".join(c if c.isalnum() or c in "-_" else "_" for c in board) + ".html"


def _table(frame: pd.DataFrame, links: dict | None = None, marked: str | None = None) -> str:
    """An HTML table; ``links`` maps a column to each row's href; cells of column ``marked`` are highlighted."""
    links = links or {}
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for i, row in enumerate(frame.itertuples(index=False)):
        cells = []
        for c, v in zip(frame.columns, row):
            text = html.escape("" if pd.isna(v) else str(v))
            if c in links and links[c][i]:
                text = f'<a href="{html.escape(links[c][i])}">{text}</a>'
            cells.append(f'<td class="out">{text}</td>' if c == marked and text else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _md_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [["" if pd.isna(v) else str(v) for v in r]
                                                  for r in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    lines.insert(1, "|" + "---|" * len(frame.columns))
    return "\n".join(lines)


def top_boards(compared: pd.DataFrame) -> pd.DataFrame:
    """Boards by how many quantities and groups flag them (most first), with those and their deviations."""
    flagged = compared[compared["outlier"].astype(bool)].copy()
    if flagged.empty:
        return pd.DataFrame(columns=["board", "gpu", "outliers", "quantities", "run"])
    flagged["_abs"] = flagged["z"].abs()
    flagged = flagged.sort_values("_abs", ascending=False)
    g = flagged.groupby(["board", "gpu"], sort=False)
    table = pd.DataFrame({"outliers": g.size(),
                          "quantities": g.apply(lambda f: ", ".join(f"{q} {pct(d)}" for q, d in
                                                                    zip(f["quantity"][:4], f["deviation"][:4]))
                                                + (f", and {len(f) - 4} more" if len(f) > 4 else ""),
                                                include_groups=False),
                          "run": g["run_id"].first(), "_z": g["_abs"].max()}).reset_index()
    return table.sort_values(["outliers", "_z"], ascending=False).drop(columns="_z")


def _rows(compared: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(label, that quantity's boards) per judged model and quantity or group, most flagged first."""
    several = compared["gpu"].nunique() > 1
    rows = []
    for (gpu, quantity), f in compared.groupby(["gpu", "quantity"], sort=False):
        if f["threshold"].isna().all() or not f["z"].abs().gt(0).any():
            continue
        n = int(f["outlier"].astype(bool).sum())
        sigma, median = f["sigma"].iat[0], f["median"].iat[0]
        spread = spread_text(sigma, median, quantity) and f"  σ {spread_text(sigma, median, quantity)}"
        rows.append((n, f"{gpu}: {quantity}" if several else quantity, spread, f))
    rows.sort(key=lambda r: (-r[0], r[1]))
    return [(label + spread, f) for _, label, spread, f in rows]


def strip_figure(rows: list[tuple[str, pd.DataFrame]], name_outliers: bool, every_board: bool) -> bytes:
    """Each row one quantity or group: its boards' z, outliers red (and named); every board a grey dot, or (for
    many rows) the range as a line, the quartiles as a bar and only boards beyond |z| = 3 as dots; the
    threshold as red ticks (a group's on its slow side only).  PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = 0.9 + 0.24 * len(rows)
    fig, ax = plt.subplots(figsize=(11, height), dpi=80)
    rng = np.random.default_rng(0)
    thresholds = np.array([f["threshold"].iat[0] for _, f in rows], float)
    edge = Z_SHOWN * np.nanmax(thresholds)
    z = np.clip(np.concatenate([f["z"].to_numpy(float) for _, f in rows]), -edge, edge)
    out = np.concatenate([f["outlier"].astype(bool).to_numpy() for _, f in rows])
    y = np.concatenate([np.full(len(f), k) for k, (_, f) in enumerate(rows)])
    dots = ~out if every_board else ~out & (np.abs(z) > 3)
    if not every_board:
        quantiles = np.array([np.nanquantile(np.clip(f["z"].to_numpy(float), -edge, edge), [0, 0.25, 0.75, 1])
                              for _, f in rows])
        ax.hlines(np.arange(len(rows)), quantiles[:, 0], quantiles[:, 3], color="0.6", lw=0.8)
        ax.hlines(np.arange(len(rows)), quantiles[:, 1], quantiles[:, 2], color="0.35", lw=5)
    jitter = y + (rng.uniform(-0.28, 0.28, len(y)) if every_board else 0)
    ax.scatter(z[dots], jitter[dots], s=3 if every_board else 6, color="0.45", alpha=0.5, linewidths=0)
    ax.scatter(z[out], y[out], s=30, color="#c0392b", zorder=3)
    rows_y = np.arange(len(rows))
    two_sided = np.array([not is_group(f["quantity"].iat[0]) for _, f in rows])
    ax.scatter(np.r_[-thresholds, thresholds[two_sided]], np.r_[rows_y, rows_y[two_sided]], marker="|", s=60,
               color="#c0392b", lw=1)
    if name_outliers:  # one label per row: its outliers by |z|, the first three named
        for k, (_, f) in enumerate(rows):
            named = f[f["outlier"].astype(bool)].assign(_abs=f["z"].abs()).sort_values("_abs", ascending=False)
            if named.empty:
                continue
            zz = float(np.clip(named["z"].iat[0], -edge, edge))
            text = ", ".join(named["board"][:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
            right = zz < 0
            ax.annotate(text, (zz, k), xytext=(8 if right else -8, 0), textcoords="offset points", fontsize=7,
                        color="#c0392b", ha="left" if right else "right", va="center",
                        bbox={"fc": "white", "ec": "none", "alpha": 0.85, "pad": 0.5})
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xscale("symlog", linthresh=5)
    ax.set_xlim(-edge * 1.3, edge * 1.3)
    ax.set_xlabel(f"z = (board - centre) / σ (the model's boards, or its panel: analysis/boards.py); a group: its "
                  f"members' mean z\nlinear within ±5, beyond ±{edge:.3g} at the edge; red ticks: the threshold",
                  fontsize=8)
    ax.grid(axis="x", color="0.9")
    # margins from the labels' length (DejaVu Sans: under 0.6 em a character), not tight_layout's extra draw
    left = (0.6 * 7 * max(len(label) for label, _ in rows) + 12) / 72
    fig.subplots_adjust(left=min(left / 11, 0.6), right=0.98, top=1 - 0.1 / height, bottom=0.62 / height)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _figure(out_dir: Path, stem: str, png: bytes, caption: str) -> str:
    atomic_write_bytes(out_dir / f"{stem}.png", png)
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            f'<figcaption>{html.escape(caption)} <a href="{stem}.png">{stem}.png</a></figcaption></figure>')


def board_page(summary: dict, board: pd.DataFrame, out: Path, fleet_name: str) -> None:
    """One board's page: its flagged quantities, then every quantity against its model's boards."""
    label = board["board"].iat[0]
    meta = next((b for b in summary["boards"] if b["board"] == label), {})
    board = board.assign(_abs=board["z"].abs()).sort_values(["outlier", "_abs"], ascending=False)
    shown = pd.DataFrame({"quantity": board["quantity"], "value": [fmt_value(v, u) for v, u in
                                                                   zip(board["value"], board["unit"])],
                          "centre": [fmt_value(v, u) for v, u in zip(board["median"], board["unit"])],
                          "deviation": [pct(v) for v in board["deviation"]], "z": [z_text(v) for v in board["z"]],
                          "boards": board["boards"], "outlier": ["outlier" if o else "" for o in board["outlier"]]})
    facts = " · ".join(f"{k}: {html.escape(str(meta.get(k)))}" for k in ("uuid", "gpu", "run_id", "pci_bus_id")
                       if meta.get(k))
    body = (f"<p><a href='../index.html'>fleet {html.escape(fleet_name)}</a> · {facts}</p>"
            f"<p>The run is under runs/{html.escape(str(meta.get('run_id', '')))}/; its full report: "
            f"<code>gpuatlas report runs/{html.escape(str(meta.get('run_id', '')))}</code>.</p>"
            + _table(shown, marked="outlier"))
    _page(out, f"board {label} in fleet {fleet_name}", body)


def _page(path: Path, title: str, body: str) -> None:
    atomic_write_text(path, f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>\n")


def render_fleet_page(folder: Path, summary: dict, compared: pd.DataFrame, out_dir: Path) -> Path:
    """``index.html`` (self-contained), ``index.md``, the figures and one page per flagged board."""
    out_dir.mkdir(parents=True, exist_ok=True)
    name = Path(folder).name
    compared = compared.assign(outlier=compared["outlier"].astype(bool)) if len(compared) else compared
    flagged = compared[compared["outlier"]] if len(compared) else compared
    models = pd.Series([b["gpu"] for b in summary["boards"]]).value_counts()
    top = top_boards(compared) if len(compared) else top_boards(pd.DataFrame(columns=["outlier", "z"]))
    screened = _rows(compared) if len(compared) else []
    lead = (f"{len(summary['boards'])} boards ({', '.join(f'{n} {g}' for g, n in models.items())}); "
            f"{len(screened)} quantities and groups judged; {top['board'].nunique()} boards stand out in "
            f"{len(flagged)} board-quantities and board-groups. Rule: {rule_line(summary)} (analysis/boards.py).")
    md = [f"# gpuatlas: fleet of {len(summary['boards'])} boards ({name})", "", lead, ""]
    body = [f"<p class='lead'>{html.escape(lead)}</p>"]

    head = "Outliers: the boards with the most outlier quantities and groups"
    md += [f"## {head}", ""]
    body.append(f"<h2>{html.escape(head)}</h2>")
    if len(top):
        shown = top.head(TOP_BOARDS)
        md += [_md_table(shown), ""]
        body.append(_table(shown, {"board": [board_file(b) for b in shown["board"]]}, marked="outliers"))
        if len(top) > TOP_BOARDS:
            body.append(f"<p>{len(top) - TOP_BOARDS} more boards with outliers: fleet.csv, fleet.json.</p>")
        rows = flagged.assign(_abs=flagged["z"].abs()).sort_values("_abs", ascending=False).head(MAX_OUTLIER_ROWS)
        table = pd.DataFrame({"board": rows["board"], "quantity": rows["quantity"],
                              "value": [fmt_value(v, u) for v, u in zip(rows["value"], rows["unit"])],
                              "centre": [fmt_value(v, u) for v, u in zip(rows["median"], rows["unit"])],
                              "deviation": [pct(v) for v in rows["deviation"]],
                              "z": [z_text(v) for v in rows["z"]], "threshold": rows["threshold"].round(2),
                              "rule": rows["rule"]})
        head = f"Every outlier ({len(flagged)}" + (f", the {MAX_OUTLIER_ROWS} largest shown)" if
                                                   len(flagged) > MAX_OUTLIER_ROWS else ")")
        md += [f"## {head}", "", _md_table(table), ""]
        body += [f"<h2>{html.escape(head)}</h2>", _table(table, {"board": [board_file(b) for b in table["board"]]})]
        (out_dir / "boards").mkdir(exist_ok=True)
        for label, board in compared[compared["board"].isin(set(top["board"]))].groupby("board"):
            board_page(summary, board, out_dir / board_file(label), name)
    else:
        md += ["No board stands out.", ""]
        body.append("<p>No board stands out.</p>")

    with_outliers = [r for r in screened if r[1]["outlier"].any()]
    if with_outliers:
        caption = "The quantities and groups with outliers: every board's z; outliers red and named."
        body += ["<h2>The quantities with outliers, over the boards</h2>",
                 _figure(out_dir, "outlier-quantities", strip_figure(with_outliers, True, True), caption)]
        md += ["## The quantities with outliers, over the boards", "", "![](outlier-quantities.png)", ""]
    if screened:
        caption = (f"Every judged quantity and group ({len(screened)}): the boards' z, their range (line), "
                   "quartiles (bar), boards beyond |z| = 3 (grey dots) and outliers (red).")
        body += ["<h2>Every judged quantity over the boards</h2>",
                 _figure(out_dir, "screened-quantities", strip_figure(screened, False, False), caption)]
        md += ["## Every judged quantity over the boards", "", "![](screened-quantities.png)", ""]
    table = distribution(compared) if len(compared) else pd.DataFrame()
    if len(table):
        shown = pd.DataFrame({"gpu": table["gpu"], "quantity": table["quantity"], "boards": table["boards"],
                              **{c: [fmt_value(v, u) for v, u in zip(table[c], table["unit"])]
                                 for c in ("median", "min", "q25", "q75", "max")},
                              "σ / median": [spread_text(s, m, q) for s, m, q in
                                             zip(table["sigma"], table["median"], table["quantity"])],
                              "outliers": table["outliers"]})
        shown = shown.iloc[np.argsort(-table["outliers"].to_numpy(), kind="stable")]
        head = ("Each quantity over the boards (σ: 1.4826 MAD of the model's boards, or its panel's standard "
                "deviation; groups: their members' mean z)")
        body += [f"<h2>{html.escape(head)}</h2>", _table(shown)]
        md += [f"## {head}", "", _md_table(shown), ""]
    files = (f"fleet.csv (the screen: one row per board and quantity or group:<name>), fleet.json (boards, the "
             f"rule per model, outliers), dataset/ "
             f"(every run's measurements, partitioned by run_id), runs/ (the runs: `gpuatlas report runs/RUN_ID` "
             f"renders one board's full report)")
    body += ["<h2>Files</h2>", f"<p>{html.escape(files)}</p>"]
    md += ["## Files", "", files, ""]
    _page(out_dir / "index.html", f"gpuatlas: fleet of {len(summary['boards'])} boards ({name})", "".join(body))
    atomic_write_text(out_dir / "index.md", "\n".join(md))
    return out_dir / "index.html"
