"""The commands behind ``gpuatlas``: list, run, report, compare, fleet, export, doctor (``gpuatlas.cli`` parses
the command line and calls one of them).

Every argument and output path is checked before a GPU is asked for, a run is read or a figure drawn; a bad one
raises ``UsageError``.  ``list``, ``report`` and ``compare`` never import CuPy.
"""
from __future__ import annotations

import sys
from pathlib import Path

from gpuatlas.analysis.errors import UsageError
from gpuatlas import COMMITTED_RUN
from gpuatlas.checks import checked_run_request, checked_sources, figure_suffixes, writable_file, writable_folder

#: The committed H200 run: the default for ``gpuatlas report`` and the reference device for ``list``.
DEFAULT_RUN = COMMITTED_RUN


def _console():
    """Rich output that wraps at a terminal's width, and not at all into a file or a pipe."""
    from rich.console import Console

    console = Console(highlight=False)
    console.soft_wrap = not console.is_terminal
    return console


def _reference_device() -> dict | None:
    """The committed run's device, which ``list`` sizes sweeps for (None where the run is not installed)."""
    from gpuatlas.analysis.results import RunDir

    return RunDir(DEFAULT_RUN).read_meta()["device"] if (DEFAULT_RUN / "run.json").is_file() else None


def cmd_list(args) -> int:
    from gpuatlas.probes.registry import PROFILES, select

    console = _console()
    device = _reference_device()
    if device:
        console.print(f"config counts as sized for the committed {device['name']}; a run sizes sweeps from its GPU\n")
    for p in select(args.probe):
        sized = {prof: p.configs(device, prof) for prof in PROFILES} if device else {}
        counts = ", ".join(f"{prof} {len(sized[prof])}" if device else f"{prof}: sized at run time"
                           for prof in PROFILES)
        console.print(f"[bold]{p.id}[/]  ({p.backend}; configs: {counts})")
        console.print(f"    {p.summary}")
        full = sized.get("full", [])
        for name, doc in p.axes.items():
            swept = f" (full: {_axis_values(full, name)})" if full else ""
            console.print(f"    [dim]{name}[/]{swept}: {doc}", highlight=False)
    return 0


def _axis_values(configs: list[dict], name: str) -> str:
    """The values a sweep gives one axis: each of a few, else how many and their range (bytes read as such)."""
    from gpuatlas.analysis.units import fmt_bytes

    values = {c[name] for c in configs if c.get(name) is not None}
    if not values:
        return "none"
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    show = (fmt_bytes if name.endswith("_bytes") else (lambda v: f"{v:g}")) if numbers else str
    ordered = sorted(values) if numbers else sorted(values, key=str)
    if len(ordered) <= 6:
        return ", ".join(show(v) for v in ordered)
    return f"{len(ordered)} values, {show(ordered[0])} .. {show(ordered[-1])}" if numbers else f"{len(ordered)} values"


def cmd_run(args) -> int:
    overrides = checked_run_request(args, _reference_device())  # before anything is asked of a GPU
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from gpuatlas.analysis.stats import SPREAD_WARNING, unstable_configs
    from gpuatlas.machinery import runner
    from gpuatlas.probes.kit.harness import Budget
    from gpuatlas.machinery.workers import start_lanes

    console = _console()
    if args.gpus:
        from gpuatlas.node import parse_gpus, run_node, visible_devices

        return run_node(args, parse_gpus(args.gpus, visible_devices()), Path(args.out), say=console.print)[1]
    progress = Progress(TextColumn("{task.description:<22}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                        TimeElapsedColumn(), console=console, transient=True)
    tasks = {}

    def on_config(probe, params):
        if probe.id not in tasks:
            tasks[probe.id] = progress.add_task(probe.id, total=None)
        progress.advance(tasks[probe.id])

    def on_probe(probe, state):
        task = tasks.pop(probe.id, None)
        if task is not None:
            progress.remove_task(task)
        mark = {"ok": "[green]ok[/]", "skipped": "[yellow]skipped[/]"}.get(state["status"], "[red]FAILED[/]")
        line = f"{mark} {probe.id}: {state['configs_done']}/{state['configs_total']} configs in {state['seconds']:.1f} s"
        if state.get("error"):
            line += f" -- {state['error']}"
        elif state["configs_done"]:
            unstable = unstable_configs(run.read_probe(probe.id))
            if len(unstable):
                line += (f" [yellow]({len(unstable)} configs spread more than {SPREAD_WARNING:.0%}; "
                         "see the report's warnings)[/]")
        console.print(line, highlight=False)

    workers = {}  # started as soon as a GPU answers: their imports overlap reading the device and its probes

    def start_workers(probes, profile):
        workers.update(start_lanes(probes, Budget.for_profile(profile)))

    try:
        run, meta, probes = runner.prepare(args.probe, args.profile, Path(args.out),
                                           Path(args.resume) if args.resume else None, overrides, args.seed,
                                           on_gpu=start_workers)
    except BaseException:
        for worker in workers.values():
            worker.stop(kill=True)
        raise
    console.print(f"measuring {meta['gpu']} into {run.path} (profile {meta['profile']})")
    with progress:
        meta = runner.execute(run, meta, probes, on_config=on_config, on_probe=on_probe, timeout_s=args.probe_timeout,
                              workers=workers)
    failed = [pid for pid, s in meta["probes"].items() if s["status"] == "failed"]
    console.print(f"run written to {run.path}" + (f"; failed probes: {', '.join(failed)}" if failed else ""))
    console.print(f"next: gpuatlas report {run.path}")
    return 1 if failed else 0


def _progress(line: str) -> None:
    """A progress line on stderr, so stdout keeps only the report's paths."""
    print(f"report: {line}", file=sys.stderr, flush=True)


def _derived_with_figures(run, read=None):
    """``(meta, measurements, derived, figures)`` of a run, read (unless ``read`` holds its meta and
    measurements), checked and derived as ``derived_for`` does, with its report's figures (a started FigureJob):
    its workers, forked holding the one read of the measurements, derive the families and then draw the figures
    that need no derived quantity."""
    from gpuatlas.analysis.derive import derive, read_checked
    from gpuatlas.analysis.render import FigureJob
    from gpuatlas.analysis.stats import one_chunk

    meta, measurements = read_checked(run, read)
    measurements = one_chunk(measurements)  # before the workers fork: each masks it many times
    figures = FigureJob(meta, measurements, _progress)
    try:  # the figure workers derive the families first, then draw
        derived = derive(meta, measurements, parallel=figures.pool is None,
                         families=figures.family_rows if figures.pool else None)
        return meta, measurements, derived, figures
    except BaseException:
        figures.close()
        raise


def _print_pdf(args, page: Path) -> None:
    if args.pdf:
        from gpuatlas.analysis.page import print_pdf

        _console().print(f"pdf: {print_pdf(page)}")


def cmd_report(args) -> int:
    import gc
    from concurrent.futures import ThreadPoolExecutor

    from gpuatlas.analysis.references import is_reference
    from gpuatlas.analysis.results import RunDir
    from gpuatlas.analysis.stats import one_chunk

    out_root = writable_folder(args.out, "--out")
    if not args.runs and not (DEFAULT_RUN / "run.json").is_file():
        raise UsageError(f"no run given, and the committed run is not at {DEFAULT_RUN} (it ships with the "
                         "source tree, not an installed wheel): give a run directory")
    sources = args.runs or [str(DEFAULT_RUN)]
    if args.pdf:
        from gpuatlas.analysis.page import check_pdf_printer

        check_pdf_printer()
    boards = [s for s in sources if (Path(s) / "node.json").is_file() or (Path(s) / "fleet.json").is_file()]
    for folder in boards:
        writable_folder(out_root / Path(folder).name, "--out")
    if boards:  # a node or fleet folder: its page, from its summary files
        from gpuatlas.analysis.board_pages import render_boards

        for folder in boards:
            kind = "node" if (Path(folder) / "node.json").is_file() else "fleet"
            _console().print(f"{kind} page: {render_boards(Path(folder), kind, Path(args.out) / Path(folder).name)}")
        sources = [s for s in sources if s not in boards]
        if not sources:
            return 0
    if all(is_reference(source) for source in sources):
        raise UsageError("report renders runs: give at least one run directory (a ref:NAME stands beside "
                         "runs on the comparison page; `gpuatlas compare` sets references side by side)")
    measured = [source for source in sources if not is_reference(source)]
    runs = [RunDir(Path(source)) for source in measured]
    metas = checked_sources(sources)  # every source, and every folder to write, before any work
    for folder in [*(meta["run_id"] for meta in metas), *(["comparison"] if len(sources) > 1 else [])]:
        writable_folder(out_root / folder, "--out")
    meta = metas[0]
    gc.disable()  # what the imports make lives as long as the process: nothing for the collector to find
    try:
        with ThreadPoolExecutor(1) as reader:  # the first run's parquet decodes (without the GIL) while these import
            measurements = reader.submit(lambda: one_chunk(runs[0].read_measurements()))
            from gpuatlas.analysis.compare import comparison, run_label
            from gpuatlas.analysis.render import render, render_comparison

            read = [(meta, measurements.result())]
    finally:
        gc.enable()
    loaded, derived_runs = [], {}
    try:
        for source, run in zip(measured, runs):  # validate and derive every run before writing anything
            loaded.append(_derived_with_figures(run, read.pop() if read else None))
            meta, _, derived, _ = loaded[-1]
            _progress(f"derived {len(derived)} quantities of {source}")
            derived_runs[source] = run_label(meta, source, derived)
        table = comparison(sources, loaded=derived_runs) if len(sources) > 1 else None
        console = _console()
        by_gpu: dict[str, dict] = {}
        for meta, measurements, derived, figures in loaded:
            by_gpu.setdefault(meta["gpu"], {})[meta["run_id"]] = derived
            page = render(meta, measurements, derived, out_root / meta["run_id"], figures=figures)
            console.print(f"report: {page} (and {page.with_suffix('.md').name} beside it)")
            _print_pdf(args, page)
        if table is not None:
            page = render_comparison(table, by_gpu, out_root / "comparison")
            console.print(f"comparison: {page}")
            _print_pdf(args, page)
    finally:
        for *_, figures in loaded:
            figures.close()
    return 0


def cmd_compare(args) -> int:
    import shutil

    from gpuatlas.analysis.compare import common_only, comparison, left_out, resolve_baseline
    from gpuatlas.analysis.compare_figure import plot
    from gpuatlas.analysis.compare_text import csv_table, render_text

    if args.plot:
        writable_file(args.plot, "--plot", figure_suffixes())
    checked_sources(args.runs)
    long = comparison(args.runs)
    shown = long if args.all else common_only(long)
    if shown.empty:
        raise UsageError(f"no quantity is on every side of this comparison: --all shows the "
                         f"{long['quantity'].nunique()} quantities some of them have")
    baseline = resolve_baseline(shown, args.baseline)
    if args.plot:
        plot(shown, Path(args.plot), baseline)
    if args.csv:
        sys.stdout.write(csv_table(shown, baseline).to_csv(index=False))
    else:
        sys.stdout.write(render_text(shown, shutil.get_terminal_size().columns, baseline, args.pairwise,
                                     left_out(long, shown)))
    if args.plot:
        print(f"figure: {args.plot}", file=sys.stderr)
    return 0


def cmd_fleet(args) -> int:
    from gpuatlas.fleet import gather, run_fleet, spool_default

    fleet = writable_folder(args.out, "--out")
    if args.gather:
        gather(fleet, say=_console().print)
        return 0
    if args.address is None:
        raise UsageError("gpuatlas fleet needs --address (a Ray cluster: host:port, or 'local' to start one "
                         "here), or --gather to gather runs already in the folder")
    summary = run_fleet(fleet, args.probe, args.profile, args.seed, spool_default(),
                        None if args.address == "local" else args.address, say=_console().print)
    return 1 if summary["lost_tasks"] else 0


def cmd_doctor(args) -> int:
    from rich.text import Text

    from gpuatlas.machinery.doctor import run_checks

    checks = run_checks()
    console = _console()
    console.print("gpuatlas doctor", style="bold")
    for c in checks:  # Text, never markup: a fix such as `pip install -e '.[gpu]'` is printed as written
        mark, style = {True: ("ok", "green"), False: ("FAIL", "red"), None: ("skip", "yellow")}[c.ok]
        console.print(Text.assemble((f"{mark:<5}", style), f"{c.name}: {c.detail}"), soft_wrap=True)
        if c.fix:
            console.print(Text(f"      fix: {c.fix}"), soft_wrap=True)
    bad = [c.name for c in checks if c.required and not c.ok]
    console.print(Text("everything gpuatlas needs works here" if not bad else
                       f"not ready to run probes: {', '.join(bad)} (see each fix above)"), soft_wrap=True)
    return 1 if bad else 0


def cmd_export(args) -> int:
    """``export accel-sim``: the run's gpgpusim.config and trace.config for Accel-Sim."""
    from gpuatlas.analysis.accelsim import export

    for path in export(args.run, args.out):
        print(f"export: {path}")
    return 0
