"""The hierarchy report: one self-contained HTML file (figures inlined) and a Markdown twin.

Order: the reconstructed hierarchy table, the derived quantities, the lecture's claims judged, the figures
(latency staircase, launch overhead), CuPy vs Numba agreement, then device, clocks, software, probe status
and warnings.
"""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import pandas as pd

from analysis import claims, execution, figures
from analysis.compare import display
from analysis.latency import frontend_agreement
from analysis.results import atomic_write_bytes, atomic_write_text
from analysis.roofline import gap_explanation, roofline_table
from analysis.stats import SPREAD_WARNING, unstable_configs
from analysis.units import fmt_bytes, fmt_value

#: Probe families still to come, named in the report where their columns are empty.
PENDING = {"bandwidth": "issue #4", "capacity": "issue #3"}


def hierarchy_table(meta: dict, derived: pd.DataFrame) -> pd.DataFrame:
    """Level, capacity, latency in cycles and time, bandwidth, sharing scope; measured values with CIs.

    Time is cycles over the SM clock measured in the run (HBM's is read from %globaltimer directly)."""
    device = meta["device"]
    d = derived.set_index("quantity")
    clock = d["value"].get("clock.sm_hz")

    def measured(quantity: str, pending: str) -> str:
        if quantity not in d.index:
            return pending if pending.startswith("not in this run") else f"not measured ({pending})"
        r = d.loc[quantity]
        return f"{fmt_value(r['value'], r['unit'])} [{fmt_value(r['ci_low'], r['unit'])}, {fmt_value(r['ci_high'], r['unit'])}]"

    def as_time(quantity: str) -> str:
        if quantity not in d.index or not clock:
            return "-"
        return fmt_value(d.loc[quantity, "value"] / clock, "s")

    pending = f"not in this run: bw probes, {PENDING['bandwidth']}"
    rows = [
        ("Shared memory", f"{fmt_bytes(device['smem_per_sm_bytes'])}/SM (driver)",
         measured("smem.latency_cycles", "issue #3"), as_time("smem.latency_cycles"),
         measured("smem.bandwidth_bytes_per_clk_sm", pending), "one block"),
        ("L1", measured("l1.capacity_bytes", "full profile"), measured("l1.latency_cycles", "issue #3"),
         as_time("l1.latency_cycles"), measured("l1.bandwidth_bytes_per_clk_sm", pending), "one SM"),
        ("L2, near partition", measured("l2.partition_bytes", "full profile"), measured("l2.latency_cycles", "issue #3"),
         as_time("l2.latency_cycles"), "-", "the SMs beside it"),
        ("L2, far partition", ("one SM's reach " if "l2.far_reach_bytes" in d.index else "")
         + measured("l2.far_reach_bytes", "needs a single far plateau in the full profile's chase"),
         measured("l2.far_latency_cycles", "full profile"), as_time("l2.far_latency_cycles"), "-", "whole GPU"),
        ("L2, every SM reading", measured("l2.capacity_bytes", "bw.l2 sweep past the L2")
         + f"; driver {fmt_bytes(device['l2_bytes'])}", "-", "-", measured("l2.bandwidth_bytes_per_s", pending),
         "whole GPU"),
        ("HBM", f"{fmt_bytes(device['total_memory_bytes'])} (driver)", measured("dram.latency_cycles", "issue #3"),
         measured("dram.latency_ns", "issue #3"),
         measured("dram.read_bandwidth_bytes_per_s", pending).replace("]", "] read", 1), "whole GPU"),
    ]
    for quantity, level in (("dram.near_latency_cycles", "HBM, address homed by the near L2 partition"),
                            ("dram.far_latency_cycles", "HBM, address homed by the far L2 partition")):
        if quantity in d.index:
            rows.append((level, "-", measured(quantity, ""), as_time(quantity), "-", "whole GPU"))
    return pd.DataFrame(rows, columns=["level", "capacity (95% CI)", "latency (cycles, 95% CI)", "latency (time)",
                                       "bandwidth", "shared by"])


def derived_table(derived: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "quantity": derived["quantity"],
        "value": [fmt_value(v, u) for v, u in zip(derived["value"], derived["unit"])],
        "95% CI": [f"[{fmt_value(lo, u)}, {fmt_value(hi, u)}]"
                   for lo, hi, u in zip(derived["ci_low"], derived["ci_high"], derived["unit"])],
        "method": derived["method"], "note": derived["note"].fillna(""),
    })


def banks_agreement_table(measurements: pd.DataFrame) -> pd.DataFrame:
    """smem.banks against its Numba twin at every config both measured: median cycles and their ratio."""
    keys = ["access_bytes", "stride_words", "form"]
    frame = measurements[measurements["probe"].isin(["smem.banks", "smem.banks_numba"])
                         & (measurements["offset_words"].fillna(0) == 0)]
    if frame.empty:
        return pd.DataFrame()
    table = frame.groupby(keys + ["probe"])["value"].median().unstack("probe").dropna()
    if table.shape[1] < 2:
        return pd.DataFrame()
    ratio = table["smem.banks_numba"] / table["smem.banks"]
    summary = ratio.groupby(level=["access_bytes", "form"]).agg(["count", "min", "max"]).reset_index()
    return pd.DataFrame({"access": summary["access_bytes"].astype(int).astype(str) + " B", "form": summary["form"],
                         "configs": summary["count"], "Numba/CuPy min": summary["min"].map("{:.4f}".format),
                         "Numba/CuPy max": summary["max"].map("{:.4f}".format)})


def agreement_table(measurements: pd.DataFrame) -> pd.DataFrame:
    table = frontend_agreement(measurements)
    return pd.DataFrame({
        "footprint": table["footprint_bytes"].map(fmt_bytes), "flavour": table["flavour"],
        "CuPy footprint": table["cupy_footprint"].map(fmt_bytes),
        "CuPy (cycles)": table["cupy"].map(lambda v: f"{v:.1f}"),
        "Numba (cycles)": table["numba"].map(lambda v: f"{v:.1f}"),
        "Numba / CuPy": table["ratio"].map(lambda v: f"{v:.3f}"),
    })


def roofline_display(table: pd.DataFrame) -> pd.DataFrame:
    """The roofline table with units."""
    return pd.DataFrame({
        "M = N = K": table["matrix_side"], "BLOCK": table["block"], "intensity (FLOP/B)": table["intensity"],
        "predicted": [fmt_value(v, "FLOP/s") if pd.notna(v) else "-" for v in table["predicted_flops"]],
        "bound": table["bound"].replace("", "-"),
        "measured": [f"{fmt_value(v, 'FLOP/s')} [{fmt_value(lo, 'FLOP/s')}, {fmt_value(hi, 'FLOP/s')}]"
                     for v, lo, hi in zip(table["measured_flops"], table["ci_low"], table["ci_high"])],
        "measured / predicted": ["-" if pd.isna(r) else f"{r:.2f}" for r in table["measured_over_predicted"]]})


def warnings(meta: dict, measurements: pd.DataFrame) -> list[str]:
    out = []
    for pid, state in meta["probes"].items():
        if state["status"] != "ok":
            out.append(f"{pid}: {state['status']}" + (f" ({state['error']})" if state.get("error") else ""))
    flagged = measurements[measurements["flag"].fillna("") != ""]
    for (probe, flag), group in flagged.groupby(["probe", "flag"]):
        out.append(f"{probe}: {len(group)} of {int((measurements['probe'] == probe).sum())} samples flagged "
                   f"{flag} and left out of fits")
    unstable = unstable_configs(measurements)
    for probe, group in unstable.groupby("probe", sort=False):
        worst = group.iloc[0]
        out.append(f"{probe}: {len(group)} configs spread more than {SPREAD_WARNING:.0%} (relative IQR); worst "
                   f"{worst['config']} {worst['metric']} at {worst['rel_iqr']:.1%}")
    return out


#: (file name, the probe whose data the figure needs, how to draw it from (meta, measurements, derived)).
FIGURES = (
    ("latency-staircase.png", "chase.latency", lambda meta, m, d: figures.latency_staircase(m, meta["device"], d)),
    ("access-latency.png", "chase.access", lambda meta, m, d: figures.access_latency(m, meta["device"], d)),
    ("tlb-staircase.png", "chase.tlb", lambda meta, m, d: figures.tlb_staircase(m, d)),
    ("line-size.png", "chase.line", lambda meta, m, d: figures.line_size(m)),
    ("bank-conflicts.png", "smem.banks", lambda meta, m, d: figures.bank_conflicts(m)),
    ("coalescing.png", "bw.stride", lambda meta, m, d: figures.coalescing(m)),
    ("bandwidth-footprint.png", "bw.l2", lambda meta, m, d: figures.bandwidth_by_footprint(m, meta["device"], d)),
    ("launch-overhead.png", "launch.overhead", lambda meta, m, d: figures.launch_overhead(m)),
    ("occupancy-throughput.png", "occupancy.throughput",
     lambda meta, m, d: figures.occupancy_throughput(m, meta["device"], d)),
    ("compute-peaks.png", "compute.vector", lambda meta, m, d: figures.compute_peaks(d)),
    ("roofline.png", "matmul.roofline", lambda meta, m, d: figures.roofline(m, d)),
    ("fused-softmax.png", "fusion.softmax", lambda meta, m, d: figures.fusion(m)),
    ("instruction-latency-throughput.png", "exec.inst", lambda meta, m, d: execution.latency_throughput_figure(d)),
    ("warp-scheduling.png", "exec.schedule", lambda meta, m, d: execution.schedule_figure(m, d)),
    ("divergence.png", "exec.diverge", lambda meta, m, d: execution.divergence_figure(m)),
)
#: The "Hopper units" section's figures, in the same form.
HOPPER_FIGURES = (
    ("dsmem-latency.png", "hopper.dsmem_latency", lambda meta, m, d: figures.dsmem_latency(m, d)),
    ("tma-latency.png", "hopper.tma_latency", lambda meta, m, d: figures.tma_latency(m, d)),
    ("copy-bandwidth.png", "hopper.copy_bandwidth", lambda meta, m, d: figures.copy_bandwidth(m, d)),
)


def drawn_figures(measurements) -> list[str]:
    """Names of the figures a report of these measurements holds (main and Hopper sections)."""
    measured = set(measurements["probe"])
    return [name for name, probe, _ in (*FIGURES, *HOPPER_FIGURES) if probe in measured]


def _figures(meta, measurements, derived, which=FIGURES) -> dict[str, bytes]:
    import matplotlib.pyplot as plt

    made = {}
    for name, probe, draw in which:
        if probe in set(measurements["probe"]):
            ax = draw(meta, measurements, derived)
            made[name] = _png(ax.figure)
            plt.close(ax.figure)
    return made


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def _sections(meta, measurements, derived):
    """(title, DataFrame | list[str] | figure name) in report order."""
    device = meta["device"]
    soft = meta.get("software", {})
    facts = pd.DataFrame([
        ("GPU", f"{device['name']} (compute capability {device['compute_capability']}, {device['sm_count']} SMs)"),
        ("SM clock measured", fmt_value(_value(derived, "clock.sm_hz"), "Hz")),
        ("SM clock max (driver)", fmt_value(device.get("sm_clock_max_hz"), "Hz")),
        ("memory", f"{fmt_bytes(device['total_memory_bytes'])}, {device['memory_bus_bits']}-bit bus, "
                   f"clock {fmt_value(device.get('memory_clock_hz'), 'Hz')}"),
        ("L2 / shared per SM / registers per SM", f"{fmt_bytes(device['l2_bytes'])} / "
         f"{fmt_bytes(device['smem_per_sm_bytes'])} / {device['regs_per_sm']}"),
        ("driver / CUDA runtime", f"{device.get('driver', '-')} / {soft.get('cuda_runtime', '-')}"),
        ("software", ", ".join(f"{k} {v}" for k, v in soft.items() if k not in ("cuda_runtime", "cuda_driver"))),
        ("run", f"{meta['run_id']}, profile {meta['profile']}, {meta['started']} to {meta.get('ended') or '-'}"),
        ("command", " ".join(meta.get("argv", []))),
        ("git", f"{(meta.get('git') or {}).get('sha') or '-'}" + (" (dirty)" if (meta.get('git') or {}).get('dirty') else "")),
    ], columns=["", "value"])
    status = pd.DataFrame([(pid, s["status"], f"{s['configs_done']}/{s['configs_total']}", f"{s['seconds']:.1f} s",
                            s.get("error") or "") for pid, s in meta["probes"].items()],
                          columns=["probe", "status", "configs", "time", "error"])
    figs = _figures(meta, measurements, derived)
    sections = [("Memory hierarchy, reconstructed", hierarchy_table(meta, derived)),
                ("Derived quantities", derived_table(derived)),
                ("The lecture's claims, judged", claims.judge(derived, meta["device"]))]
    inst = execution.inst_table(derived)
    if not inst.empty:
        sections.append(("Instruction table: dependent-chain latency and full-SM throughput, by unit", inst))
    sections += [(name.removesuffix(".png").replace("-", " ").capitalize(), ("figure", name, png))
                 for name, png in figs.items()]
    sections += hopper_sections(meta, measurements, derived)
    agreement = agreement_table(measurements)
    if not agreement.empty:
        sections.append(("Pointer chase: CuPy against Numba", agreement))
    roof = roofline_table(measurements, derived)
    if not roof.empty:
        sections += [("Roofline: square tiles, predicted against measured", roofline_display(roof)),
                     ("Roofline: the gap, explained", gap_explanation(roof, device))]
    banks = banks_agreement_table(measurements) if "offset_words" in measurements else pd.DataFrame()
    if not banks.empty:
        sections.append(("Bank conflicts: CuPy against Numba", banks))
    sections += [("Device, clocks and software", facts), ("Probes", status),
                 ("Warnings", warnings(meta, measurements) or ["none"])]
    return sections


def hopper_table(derived: pd.DataFrame) -> pd.DataFrame:
    """Each Hopper unit beside its classic path, as measured in this run, with their ratio."""
    from analysis.hopper import comparison_rows

    return pd.DataFrame([(name, fmt_value(value, unit), classic, fmt_value(base, unit), f"{ratio:.3g}")
                         for name, _, value, unit, classic, base, ratio in comparison_rows(derived)],
                        columns=["Hopper unit", "measured", "classic path", "classic measured", "unit / classic"])


def hopper_sections(meta, measurements, derived) -> list:
    """The "Hopper units" section: the comparison table and its figures, or why the run has none."""
    states = {pid: s for pid, s in meta["probes"].items() if pid.startswith("hopper.")}
    if not states:
        return []
    skipped = [f"{pid}: {s['status']}" + (f" ({s['error']})" if s.get("error") else "")
               for pid, s in states.items() if s["status"] != "ok"]
    table = hopper_table(derived)
    sections = [("Hopper units: DSMEM, TMA, DPX against the classic path",
                 table if not table.empty else (skipped or ["no Hopper quantity and classic path both measured"]))]
    sections += [(name.removesuffix(".png").replace("-", " ").capitalize().replace("Tma", "TMA")
                  .replace("Dsmem", "DSMEM"), ("figure", name, png))
                 for name, png in _figures(meta, measurements, derived, HOPPER_FIGURES).items()]
    if skipped and not table.empty:
        sections.append(("Hopper units not measured", skipped))
    return sections


def _value(derived: pd.DataFrame, quantity: str):
    hit = derived.loc[derived["quantity"] == quantity, "value"]
    return float(hit.iat[0]) if len(hit) else None


def _md_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [["" if pd.isna(v) else str(v) for v in row]
                                                  for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    lines.insert(1, "|" + "---|" * len(frame.columns))
    return "\n".join(lines)


def render(meta: dict, measurements: pd.DataFrame, derived: pd.DataFrame, out_dir: Path) -> Path:
    """Write ``index.html`` (self-contained), ``index.md`` and the figures' PNGs; return the HTML path."""
    title = f"gpuatlas: {meta['gpu']} ({meta['run_id']})"
    return _write_page(title, _sections(meta, measurements, derived), out_dir)


def spread_table(runs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Run-to-run spread of each quantity over several runs of one GPU: (max - min) / median."""
    values = pd.DataFrame({label: d.set_index("quantity")["value"] for label, d in runs.items()})
    units = pd.concat([d.set_index("quantity")["unit"] for d in runs.values()]).groupby(level=0).first()
    spread = (values.max(axis=1) - values.min(axis=1)) / values.median(axis=1).abs()
    return pd.DataFrame({"quantity": values.index, "runs": values.notna().sum(axis=1).values,
                         "median": [fmt_value(v, units[q]) for q, v in values.median(axis=1).items()],
                         "min": [fmt_value(v, units[q]) for q, v in values.min(axis=1).items()],
                         "max": [fmt_value(v, units[q]) for q, v in values.max(axis=1).items()],
                         "spread": [f"{v:.2%}" for v in spread.values]})


def render_comparison(long: pd.DataFrame, same_gpu_runs: dict[str, dict[str, pd.DataFrame]], out_dir: Path) -> Path:
    """A page comparing several runs and references (``analysis.compare.comparison``'s long form), grouped by
    level with CIs, ratios and numbered footnotes, and run-to-run spread for GPUs measured more than once."""
    shown, legend, notes = display(long)
    sections = [("Compared", legend), ("Derived quantities side by side", shown)]
    if notes:
        sections.append(("Notes: caveats, sources, ratios not given", notes))
    for gpu, runs in same_gpu_runs.items():
        if len(runs) > 1:
            sections.append((f"Run-to-run spread: {gpu} ({len(runs)} runs)", spread_table(runs)))
    return _write_page("gpuatlas: comparison", sections, out_dir)


def _write_page(title: str, sections, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, body = [f"# {title}", ""], [f"<h1>{html.escape(title)}</h1>"]
    for heading, content in sections:
        md += [f"## {heading}", ""]
        body.append(f"<h2>{html.escape(heading)}</h2>")
        if isinstance(content, pd.DataFrame):
            md += [_md_table(content), ""]
            table = content.to_html(index=False, na_rep="", classes="data", border=0)
            if "verdict" in content:
                table = table.replace("<td>deviates</td>", '<td class="deviates">deviates</td>')
            body.append(table)
        elif isinstance(content, tuple):
            _, name, png = content
            atomic_write_bytes(out_dir / name, png)
            md += [f"![{heading}]({name})", ""]
            body.append(f'<img alt="{html.escape(heading)}" src="data:image/png;base64,'
                        f'{base64.b64encode(png).decode()}">')
        else:
            md += [f"- {line}" for line in content] + [""]
            body.append("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in content) + "</ul>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")
    atomic_write_text(out_dir / "index.md", "\n".join(md))
    atomic_write_text(out_dir / "index.html", page)
    return out_dir / "index.html"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table.data{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.9em}
table.data th,table.data td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
td.deviates{background:#fde0dc;font-weight:bold}img{max-width:100%}h2{margin-top:1.6em}"""
