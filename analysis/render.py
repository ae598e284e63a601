"""The hierarchy report: one self-contained HTML file (figures inlined) and a Markdown twin.

In a paper's order (gpuatlas.analysis.chapters): a one-screen summary under the title (the atlas, the compute
peaks beside the roofline, the lecture's verdicts), then chapters that open with their figures
(gpuatlas.analysis.report_figures, each also written as SVG) and a short table of key quantities, then appendices with the big tables: every
derived quantity, the claims one by one, the instruction table, the cross-checks, the device, probes and
warnings.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pandas as pd

from gpuatlas.analysis import telemetry
from gpuatlas.analysis.chapters import claims_chapter, has_repro, report_sections
from gpuatlas.analysis.chase_levels import frontend_agreement
from gpuatlas.analysis.compare_figure import ratio_figure
from gpuatlas.analysis.compare_text import display
from gpuatlas.analysis.errors import UsageError
from gpuatlas.analysis.figure_job import FigureJob, figure_svg
from gpuatlas.analysis.hierarchy import hierarchy_table
from gpuatlas.analysis.hopper import comparison_rows
from gpuatlas.analysis.page import write_page as _write_page
from gpuatlas.analysis.report_figures import FigureSpec
from gpuatlas.analysis.roofline import gap_explanation, roofline_table
from gpuatlas.analysis.shown import fmt_interval, fmt_value
from gpuatlas.analysis.stats import SPREAD_WARNING, unstable_configs
from gpuatlas.analysis.tensor_numerics import numerics_table
from gpuatlas.analysis.units import fmt_bytes


def derived_table(derived: pd.DataFrame) -> pd.DataFrame:
    """Every derived quantity: value, 95% CI ("n/a" where there is none), the repeat-run interval where the run
    has one, method and note."""
    table = pd.DataFrame({
        "quantity": derived["quantity"],
        "value": [fmt_value(v, u) for v, u in zip(derived["value"], derived["unit"])],
        "95% CI": [fmt_interval(lo, hi, u)
                   for lo, hi, u in zip(derived["ci_low"], derived["ci_high"], derived["unit"])],
        "method": derived["method"],
        "note": derived["note"].fillna("").str.replace(r"(\d) us\b", "\\1 µs", regex=True),
    })
    if has_repro(derived):
        table.insert(3, "repro interval", [fmt_interval(lo, hi, u) for lo, hi, u in
                                           zip(derived["repro_low"], derived["repro_high"], derived["unit"])])
    return table


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


def _sections(meta, measurements, derived, figures: FigureJob):
    """(title, content) in report order (gpuatlas.analysis.chapters); the tables are made while ``figures`` is drawn."""
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
    chapters = {"Memory hierarchy": [("Memory hierarchy, reconstructed", hierarchy_table(meta, derived))]}
    roof = roofline_table(measurements, derived)
    if not roof.empty:
        chapters["Compute and tensor cores"] = [
            ("Roofline: square tiles, predicted against measured", roofline_display(roof)),
            ("Roofline: the gap, explained", gap_explanation(roof, device))]
    numerics = numerics_table(derived)
    if not numerics.empty:
        chapters.setdefault("Compute and tensor cores", []).append(
            ("Tensor-core numerics: what the accumulator keeps (numerics.mma_sync, numerics.wgmma)", numerics))
    chapters["Hopper's units"] = hopper_sections(meta, derived)
    cross = []
    agreement = agreement_table(measurements)
    if not agreement.empty:
        cross.append(("Pointer chase: CuPy against Numba", agreement))
    banks = banks_agreement_table(measurements) if "offset_words" in measurements else pd.DataFrame()
    if not banks.empty:
        cross.append(("Bank conflicts: CuPy against Numba", banks))
    run_warnings = warnings(meta, measurements)
    if not telemetry.has_telemetry(measurements):
        chapters["Execution"] = [("Clock and power (NVML)", [
            "this run recorded no NVML telemetry (a run from before results schema 2, or NVML did not answer)"])]
    tables = {"warnings": run_warnings, "derived": derived_table(derived), "chapters": chapters,
              "cross-checks": cross,
              "run": [("Device, clocks and software", facts), ("Probes", status),
                      ("Warnings", run_warnings or ["none"])]}
    figs = {stem: drawn for stem, drawn in figures.results(derived).items()}
    return report_sections(meta, derived, figs, tables)


def claim_sections(derived: pd.DataFrame, device: dict) -> list:
    """The lecture's claims: how many hold, deviate, are undecided or cannot be tested per section, then one table
    per section (in the lecture's order), each deviation naming the figure that shows it."""
    return claims_chapter(derived, device)


def hopper_table(derived: pd.DataFrame) -> pd.DataFrame:
    """Each Hopper unit beside its classic path, as measured in this run, with their ratio."""
    return pd.DataFrame([(name, fmt_value(value, unit), classic, fmt_value(base, unit), f"{ratio:.3g}")
                         for name, _, value, unit, classic, base, ratio in comparison_rows(derived)],
                        columns=["Hopper unit", "measured", "classic path", "classic measured", "unit / classic"])


def hopper_sections(meta, derived) -> list:
    """The Hopper units' tables: each unit against its classic path, or why the run has none."""
    states = {pid: s for pid, s in meta["probes"].items() if pid.startswith("hopper.")}
    if not states:
        return []
    skipped = [f"{pid}: {s['status']}" + (f" ({s['error']})" if s.get("error") else "")
               for pid, s in states.items() if s["status"] != "ok"]
    table = hopper_table(derived)
    sections = [("Hopper units: DSMEM, TMA, DPX against the classic path",
                 table if not table.empty else (skipped or ["no Hopper quantity and classic path both measured"]))]
    if skipped and not table.empty:
        sections.append(("Hopper units not measured", skipped))
    return sections


def _value(derived: pd.DataFrame, quantity: str):
    hit = derived.loc[derived["quantity"] == quantity, "value"]
    return float(hit.iat[0]) if len(hit) else None


def render(meta: dict, measurements: pd.DataFrame, derived: pd.DataFrame, out_dir: Path,
           progress: Callable[[str], None] | None = None, figures: FigureJob | None = None) -> Path:
    """Write ``index.html`` (self-contained), ``index.md`` and each figure as SVG; return the HTML path.
    ``progress`` is called with a line as each figure is done; ``figures``, a FigureJob started earlier on these
    measurements (with its own progress), else one is started here."""
    title = f"gpuatlas: {meta['gpu']} ({meta['run_id']})"
    figures = figures or FigureJob(meta, measurements, progress)
    try:
        sections = _sections(meta, measurements, derived, figures)
    finally:
        figures.close()
    return _write_page(title, sections, out_dir)


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
    """A page comparing several runs and references (``gpuatlas.analysis.compare.comparison``'s long form), grouped by
    level with CIs, ratios and numbered footnotes, and run-to-run spread for GPUs measured more than once."""
    shown, legend, notes = display(long)
    sections = []
    try:
        fig = ratio_figure(long)
    except UsageError:  # no quantity both sides measure alike: the tables say so
        fig = None
    if fig is not None:
        import matplotlib.pyplot as plt

        svg = figure_svg(fig)
        plt.close(fig)
        spec = FigureSpec("ratios", None, "Each GPU against the first",
                          "Every quantity measured alike on both sides, as its ratio to the first GPU's (log axis), "
                          "grouped by level; bars: the ratio's interval from both sides' 95% CIs.", None)
        sections.append(("", ("figure", spec, svg)))
    sections += [("Compared", legend), ("Derived quantities side by side", shown)]
    if notes:
        sections.append(("Notes: caveats, sources, ratios not given", notes))
    for gpu, runs in same_gpu_runs.items():
        if len(runs) > 1:
            sections.append((f"Run-to-run spread: {gpu} ({len(runs)} runs)", spread_table(runs)))
    return _write_page("gpuatlas: comparison", sections, out_dir)
