"""The report in a paper's order: a one-screen summary (the atlas, the compute peaks beside the roofline, the
lecture's verdicts, how reproducible the numbers are, the warnings), chapters that each open with their
figures and a short table of key quantities, and appendices holding the big tables."""
from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from gpuatlas.analysis import claims, execution, repro
from gpuatlas.analysis.page import Part
from gpuatlas.analysis.quantities import QUANTITIES
from gpuatlas.analysis.report_figures import declared_figures
from gpuatlas.analysis.shown import fmt_interval, fmt_value


class Chapter(NamedTuple):
    """A chapter: its title and the quantities of its key table (its figures name it: ``FigureSpec.chapter``)."""
    title: str
    key: tuple


#: The summary, above every chapter: its first figure (the atlas) with the verdicts and numbers beside it,
#: then the others (the compute peaks, the roofline) as a row.
SUMMARY = "Summary"

CHAPTERS = (
    Chapter("Memory hierarchy", ()),
    Chapter("Geometry",
            ("l1.line_bytes", "l1.sector_bytes", "l1.ways", "l1.sets", "l1.unified_bytes",
             "l1.capacity_bytes_at_carveout", "l2.ways", "l2.sets", "l2.partition_interleave_bytes",
             "l2.far_home_fraction", "l2.sm_sides", "tlb.page_bytes", "const.l1.capacity_bytes",
             "const.l15.capacity_bytes")),
    Chapter("Bandwidth and coalescing",
            ("dram.read_bandwidth_bytes_per_s", "dram.write_bandwidth_bytes_per_s", "dram.copy_bandwidth_bytes_per_s",
             "l2.bandwidth_bytes_per_s", "smem.bandwidth_bytes_per_clk_sm", "l1.bandwidth_bytes_per_clk_sm",
             "smem.banks", "smem.bank_width_bytes", "smem.conflict_cycles_per_way", "coalescing.block_bytes",
             "coalescing.efficiency_stride32_fp32", "occupancy.warps_to_saturate_dram_ilp1",
             "littles.bytes_in_flight", "decode.m1_bandwidth_bytes_per_s")),
    Chapter("Compute and tensor cores",
            ("fp64.peak_flops", "fp32.peak_flops", "fp16.peak_flops", "int32.peak_ops", "fp32.latency_cycles",
             "tc.bf16.mma_sync_peak_flops", "tc.bf16.peak_flops", "tc.bf16.sustained_flops", "tc.fp8.peak_flops",
             "matmul.cublas_bf16_flops", "matmul.triton_bf16_flops", "roofline.tiled_fraction_of_peak",
             "waves.programs_per_wave", "fusion.softmax_speedup")),
    Chapter("Execution",
            ("sm.schedulers", "sm.issue_per_clk_per_scheduler", "divergence.throughput_fraction_32way",
             "tc.bf16.mma_sync_latency_cycles", "launch.overhead_s", "launch.graph_overhead_s",
             "sync.syncthreads_cycles", "sync.grid_sync_cycles_full", "icache.l0.capacity_bytes",
             "icache.l1.capacity_bytes")),
    Chapter("Hopper's units", ()),
)


def placed(specs) -> dict[str, list[str]]:
    """Chapter title (the summary first, then CHAPTERS') -> its figures' stems in order: each figure after the
    one it names (``FigureSpec.after``), a figure's followers in the order ``specs`` holds them, depth first.
    A figure in no known chapter, or after a figure not in its chapter, is an error."""
    titles = [SUMMARY] + [chapter.title for chapter in CHAPTERS]
    layout = {}
    for title in titles:
        mine = [spec for spec in specs if spec.chapter == title]
        stems = {spec.stem for spec in mine}
        lost = [spec.stem for spec in mine if spec.after and spec.after not in stems]
        if lost:
            raise ValueError(f"figures {lost} follow a figure that is not in their chapter, {title!r}")
        order: list[str] = []

        def follow(after: str) -> None:
            for spec in mine:
                if spec.after == after and spec.stem not in order:
                    order.append(spec.stem)
                    follow(spec.stem)
        follow("")
        if len(order) < len(mine):
            raise ValueError(f"figures {sorted(stems - set(order))} of {title!r} follow each other in a circle")
        layout[title] = order
    homeless = [spec.stem for spec in specs if spec.chapter not in titles]
    if homeless:
        raise ValueError(f"figures {homeless} name no chapter of the report: one of {titles}")
    return layout


def has_repro(derived: pd.DataFrame) -> bool:
    """Whether the run carries repro intervals (derived.csv's repro_low/repro_high: where another board of the
    model is expected to read, the CI widened by the model panel's board-to-board spread)."""
    return {"repro_low", "repro_high"} <= set(derived.columns) and derived["repro_low"].notna().any()


def key_table(derived: pd.DataFrame, quantities) -> pd.DataFrame:
    """The chapter's key quantities the run has: what each is, its value, 95% CI and repro interval."""
    rows = derived.set_index("quantity").reindex([q for q in quantities if q in set(derived["quantity"])])
    table = pd.DataFrame({
        "quantity": rows.index,
        "what it is": [QUANTITIES[q][1].split(";")[0] if q in QUANTITIES else "" for q in rows.index],
        "value": [fmt_value(v, u) for v, u in zip(rows["value"], rows["unit"])],
        "95% CI": [fmt_interval(lo, hi, u) for lo, hi, u in zip(rows["ci_low"], rows["ci_high"], rows["unit"])]})
    if has_repro(derived):
        table["repro interval"] = [fmt_interval(lo, hi, u)
                                   for lo, hi, u in zip(rows["repro_low"], rows["repro_high"], rows["unit"])]
    return table


def reproducibility(derived: pd.DataFrame) -> str:
    """How reproducible the numbers are: quantities whose repro interval is wider than their CI."""
    if not has_repro(derived):
        return ("Reproducibility: this run carries no repro interval (no repro_low/repro_high in its "
                "derived.csv), so each 95% CI is one run's sampling alone.")
    wide = repro.beyond_ci(derived)
    return (f"Reproducibility: {len(wide)} of {int(derived['repro_low'].notna().sum())} quantities move between "
            "boards of this model by more than their 95% CI (Appendix F names them and what moves each).")


def reproducibility_chapter(derived: pd.DataFrame) -> list:
    """The quantities another board reads further off than this run's CI says, widest first, with the cause
    measured for each (gpuatlas.analysis.repro.CAUSES)."""
    if not has_repro(derived):
        return []
    wide = repro.beyond_ci(derived)
    table = pd.DataFrame({
        "quantity": wide["quantity"],
        "value": [fmt_value(v, u) for v, u in zip(wide["value"], wide["unit"])],
        "95% CI": [fmt_interval(lo, hi, u) for lo, hi, u in zip(wide["ci_low"], wide["ci_high"], wide["unit"])],
        "repro interval": [fmt_interval(lo, hi, u)
                           for lo, hi, u in zip(wide["repro_low"], wide["repro_high"], wide["unit"])],
        "what moves it": wide["cause"]})
    source = derived.attrs.get("repro_source") or "analysis/repro.py says how"
    text = [f"The repro interval is where another board of this model is expected to read (95%): the CI widened "
            f"by the board-to-board spread of the model's panel ({source}). These {len(table)} quantities move "
            "between boards by more than half again their CI."]
    return [("What the interval says", text), ("Quantities the board moves more than the CI says", table)]


def summary_lines(meta: dict, derived: pd.DataFrame, warnings: list[str]) -> list[str]:
    ok = sum(s["status"] == "ok" for s in meta["probes"].values())
    return [(f"{len(derived)} quantities derived from {ok} of {len(meta['probes'])} probes measured without "
             f"error (profile {meta['profile']})."),
            reproducibility(derived),
            f"Warnings: {len(warnings)} (listed in the last appendix)."]


#: Each verdict's colour in the summary's chart; a verdict not named here is drawn in grey-blue.
VERDICT_COLOURS = {"holds": "#55A868", "deviates": "#C44E52", "undecided": "#DD8452", "cannot be tested": "#8C8C8C",
                   "not measured": "#D9D9D9"}


def verdict_bars(table: pd.DataFrame) -> tuple:
    """The lecture's claims (claims.judge's table) as one bar per section, in the lecture's order:
    ("bars", [(section, [(verdict, count, colour), ...]), ...]), whatever verdicts the table holds."""
    verdicts = [v for v in VERDICT_COLOURS if v in set(table["verdict"])]
    verdicts += [v for v in dict.fromkeys(table["verdict"]) if v not in VERDICT_COLOURS]
    rows = []
    for section, part in table.groupby("section", sort=False):
        counts = part["verdict"].value_counts()
        rows.append((section, [(v, int(counts[v]), VERDICT_COLOURS.get(v, "#7A8FA6")) for v in verdicts
                               if v in counts]))
    return "bars", rows


def report_sections(meta, derived, figs: dict, tables) -> list:
    """(title, content) of the whole report: Summary, the chapters, the appendices.  ``figs``: stem ->
    (spec, svg) of every figure drawn; ``tables``: the report's tables by name (gpuatlas.analysis.render makes them)."""
    def drawn(stems):
        return [figs[s] for s in stems if s in figs]

    table = claims.judge(derived, meta["device"])
    layout = placed(declared_figures())
    # on screen the verdicts and the numbers sit beside the atlas, the peaks beside the roofline (print stacks them)
    aside = [("The lecture judged, section by section", verdict_bars(table)),
             ("In numbers", summary_lines(meta, derived, tables["warnings"]))]
    atlas, *pair = layout[SUMMARY]
    summary = [("", ("beside", figs[atlas], aside))] if atlas in figs else aside
    pair = drawn(pair)
    if pair:
        summary.append(("", ("figures", pair)))
    sections = [("Summary", Part(summary))]
    for chapter in CHAPTERS:  # every figure has its place (placed)
        body = [("", ("figure", *f)) for f in drawn(layout[chapter.title])]
        body += tables["chapters"].get(chapter.title, [])
        key = key_table(derived, chapter.key) if chapter.key else pd.DataFrame()
        if not key.empty:
            body.append((f"{chapter.title}: key quantities", key))
        if body:
            sections.append((chapter.title, Part(body)))
    judged = claims_chapter(derived, meta["device"], table)
    sections.append(("The lecture judged", Part(judged[:1] + [("Deviations", deviations(table))])))
    sections += appendices(meta, derived, judged[1:], tables)
    moved = reproducibility_chapter(derived)
    if moved:
        sections.append(("Appendix F. Reproducibility: what moves between boards", Part(moved, True)))
    return sections


def claims_chapter(derived: pd.DataFrame, device: dict, table: pd.DataFrame | None = None) -> list:
    """The lecture's claims: how many hold, deviate or cannot be tested per section, then one table per section
    (in the lecture's order), each deviation naming the figure that shows it (``table``: claims.judge's, if
    already made)."""
    table = claims.judge(derived, device) if table is None else table
    sections = [("The lecture's claims, judged", claims.summary(table))]
    for name, part in table.groupby("section", sort=False):
        sections.append((f"Claims of {name}", part.drop(columns="section")))
    return sections


def deviations(table: pd.DataFrame) -> pd.DataFrame | list[str]:
    """The claims (claims.judge's table) the run contradicts, in short: what the lecture says, what was
    measured, where it shows."""
    off = table[table["verdict"] == "deviates"]
    if off.empty:
        return ["no claim deviates in this run"]
    return off[["section", "id", "claim", "lecture", "measured", "ratio", "figure"]]


def appendices(meta, derived, claim_tables, tables) -> list:
    inst = execution.inst_table(derived)
    out = [("Appendix A. Every derived quantity", Part([("Derived quantities", tables["derived"])], True)),
           ("Appendix B. The lecture's claims, section by section", Part(claim_tables, True, wide=True))]
    if not inst.empty:
        out.append(("Appendix C. Instruction table",
                    Part([("Instruction table: dependent-chain latency and full-SM throughput, by unit", inst)],
                         True)))
    if tables["cross-checks"]:
        out.append(("Appendix D. Cross-checks", Part(tables["cross-checks"], True)))
    out.append(("Appendix E. The run", Part(tables["run"], True)))
    return out
