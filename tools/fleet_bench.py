"""A synthetic fleet, gathered: what ``gpuatlas fleet --gather`` costs at N boards and what the outlier screen
finds (not a timed test: run it by hand, on a quiet machine, and commit its output).

    python3 tools/fleet_bench.py --boards 1000 --work /tmp/fleet-bench --out reports/fleet-synthetic

Each synthetic board is the committed quick run (``reports/h200-quick``) under its own UUID and run id.  Its
derived.csv values (with their CIs) are scaled by 1 + σ_q ε, ε standard normal and σ_q the quantity's
board-to-board spread over a panel: the sample standard deviation over |median| of its boards' values (one per
board, the median of its runs), as analysis.repro defines it.  The panel (``--spread``) is ``reports/h200-boards``
by default when it holds at least three boards; ``history`` takes the H200 boards kept in git history
(``reports/h200-dev`` at PANEL_COMMIT) and the committed runs, each quantity over the runs whose probe version
is the quick run's (so the spread is the boards', not the code's).  A quantity with fewer than three boards in
the panel is not spread.  One board in SLOW_EVERY has its HBM read bandwidth at (1 - SLOW) of the quick run's,
another its tensor-core peak rate: a board that far below the model's centre.
The measurements are the quick run's file as it is (the screen reads derived.csv, and the gather's cost does
not depend on the values).

Reported: the first gather's wall time and peak memory (its own process), a re-gather with nothing new and with
one new run, the page's render time, the screen's precision and recall against the injected boards, and two
ways to query the dataset without loading it (pyarrow filters, DuckDB when installed).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.results import RunDir  # noqa: E402

SOURCE = REPO / "reports" / "h200-quick"
PANEL = REPO / "reports" / "h200-boards"
#: The commit whose reports/h200-dev holds full and quick runs on H200 boards other than the committed one.
PANEL_COMMIT, PANEL_FOLDER = "73ac797", "reports/h200-dev"
#: One board in SLOW_EVERY is slow in each injected quantity, by the fraction SLOW (default of --slow).
SLOW_EVERY, SLOW = 100, 0.05
SLOW_QUANTITIES = {"hbm": "dram.read_bandwidth_bytes_per_s", "tensor": "tc.bf16.peak_flops"}


def source_run() -> RunDir:
    return RunDir(next(p for p in sorted(SOURCE.iterdir()) if (p / "run.json").is_file()))


def _panel_runs_from_history() -> list[tuple[dict, pd.DataFrame]]:
    """(run.json, derived) of the runs under PANEL_FOLDER at PANEL_COMMIT, read through git."""
    def show(path):
        return subprocess.run(["git", "-C", str(REPO), "show", f"{PANEL_COMMIT}:{path}"], capture_output=True,
                              check=True).stdout

    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", f"{PANEL_COMMIT}:{PANEL_FOLDER}"],
                           capture_output=True, text=True, check=True).stdout.split()
    runs = []
    for name in names:
        try:
            meta = json.loads(show(f"{PANEL_FOLDER}/{name}/run.json"))
            derived = pd.read_csv(io.BytesIO(show(f"{PANEL_FOLDER}/{name}/derived.csv")))
        except subprocess.CalledProcessError:  # a folder that is not a finished run
            continue
        runs.append((meta, derived))
    return runs


def _committed_runs(folders) -> list[tuple[dict, pd.DataFrame]]:
    runs = []
    for folder in folders:
        for path in [folder] + sorted(folder.iterdir()):
            if (path / "run.json").is_file() and (path / "derived.csv").is_file():
                run = RunDir(path)
                runs.append((run.read_meta(), run.read_derived()))
    return runs


def board_spread(source: dict, which: str) -> tuple[pd.Series, str]:
    """quantity -> relative board-to-board σ over a panel's boards (one value per board, the median of its
    runs; the sample standard deviation over |median|, as analysis.repro defines a panel's spread; three
    boards at least), and which panel: ``panel`` (reports/h200-boards) or ``history`` (the boards in git
    history at the quick run's probe versions)."""
    if which == "panel":
        runs, where = _committed_runs([PANEL]), str(PANEL.relative_to(REPO))
        same_version = None
    else:
        runs = _panel_runs_from_history() + _committed_runs(
            [REPO / "reports" / f for f in ("h200", "h200-repeat", "h200-quick")])
        where = f"{PANEL_FOLDER} at {PANEL_COMMIT} and reports/h200*, at the quick run's probe versions"
        same_version = {p: s["version"] for p, s in source["probes"].items()}
    rows = []
    for meta, derived in runs:
        if same_version is not None:
            kept = {p for p, s in meta["probes"].items() if s.get("version") == same_version.get(p)}
            derived = derived[derived["probe"].isin(kept)]
        rows.append(derived[["quantity", "value"]].assign(board=meta["device"].get("uuid")))
    values = pd.concat(rows).groupby(["quantity", "board"])["value"].median().reset_index()
    g = values.groupby("quantity")["value"]
    sigma = (g.std(ddof=1) / g.median().abs()).where(g.size() >= 3).replace([np.inf, -np.inf], np.nan).fillna(0.0)
    return sigma.rename("sigma"), f"{where} ({values['board'].nunique()} boards)"


def build_fleet(work: Path, n: int, sigma: pd.Series, seed: int = 0, start: int = 0,
                slow: float = SLOW) -> dict[str, list[str]]:
    """Runs ``start .. start + n - 1`` of the synthetic fleet under ``work/runs``; returns the injected boards'
    labels per injected quantity.  Board i is the same board whatever ``n`` (its draws are seeded by i)."""
    src = source_run()
    meta, derived = src.read_meta(), src.read_derived()
    spread = derived["quantity"].map(sigma).fillna(0.0).to_numpy()
    injected: dict[str, list[str]] = {q: [] for q in SLOW_QUANTITIES.values()}
    for i in range(start, start + n):
        rng = np.random.default_rng([seed, i])
        label = f"{i:04x}{rng.bytes(2).hex()}"  # the board's label (analysis.boards.board_label): unique
        uuid = f"GPU-{label}-{rng.bytes(2).hex()}-{rng.bytes(2).hex()}-{rng.bytes(2).hex()}-{rng.bytes(6).hex()}"
        run_id = f"{meta['run_id']}-b{i:05d}"
        scale = 1 + spread * rng.standard_normal(len(derived))
        slot = i % SLOW_EVERY
        for k, quantity in enumerate(SLOW_QUANTITIES.values()):
            if slot == (k + 1) * SLOW_EVERY // (len(SLOW_QUANTITIES) + 1):
                scale = np.where(derived["quantity"] == quantity, 1 - slow, scale)
                injected[quantity].append(label)
        out = work / "runs" / run_id
        out.mkdir(parents=True, exist_ok=True)
        rows = derived.copy()
        for column in ("value", "ci_low", "ci_high"):
            rows[column] = rows[column] * scale
        rows.to_csv(out / "derived.csv", index=False)
        board = dict(meta, run_id=run_id, device=dict(meta["device"], uuid=uuid, pci_bus_id=f"0000:{i // 8:04x}:0{i % 8}"))
        (out / "run.json").write_text(json.dumps(board, indent=1))
        shutil.copyfile(src.measurements_path, out / "measurements.parquet")
    return injected


def timed(code: str, *args) -> dict:
    """Run ``code`` in its own Python process: wall time and CPU time (user + system, s: on a shared machine
    the fairer measure), peak resident memory (GB) and its stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"fleet_bench: error: step failed ({status}): {code}")
    return {"wall_s": time.perf_counter() - t0, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_gb": usage.ru_maxrss / 1e6, "stdout": out.strip()}


GATHER = ("import sys, json; from pathlib import Path; from gpuatlas.fleet import gather; "
          "s = gather(Path(sys.argv[1]), say=lambda *a: None); print(s['partitions_written'])")
RENDER = ("import sys; from pathlib import Path; from analysis.boards import render_boards; "
          "render_boards(Path(sys.argv[1]), 'fleet', Path(sys.argv[1]) / 'report')")
QUERY_ARROW = ("import sys, pyarrow.dataset as ds; d = ds.dataset(sys.argv[1] + '/dataset', partitioning='hive'); "
               "t = d.to_table(columns=['run_id', 'value'], filter=(ds.field('probe') == 'bw.dram') & "
               "(ds.field('metric') == 'bandwidth')).to_pandas(); print(t.groupby('run_id')['value'].median().size)")
QUERY_DUCKDB = ("import sys, duckdb; print(len(duckdb.sql(f\"SELECT run_id, median(value) FROM read_parquet("
                "'{sys.argv[1]}/dataset/*/*.parquet', hive_partitioning = true) WHERE probe = 'bw.dram' AND "
                "metric = 'bandwidth' GROUP BY run_id\").fetchall()))")


def score(fleet: Path, injected: dict[str, list[str]]) -> dict:
    """Precision and recall of the screen against the injected boards, by board and by board-quantity, and the
    margins: the injected boards' smallest |z|, the healthy boards' largest."""
    table = pd.read_csv(fleet / "fleet.csv")
    flagged = table[table["outlier"]]
    truth = {(b, q) for q, boards in injected.items() for b in boards}
    found = set(zip(flagged["board"], flagged["quantity"]))
    boards_true, boards_found = {b for b, _ in truth}, set(flagged["board"])
    inj = table[[(b, q) in truth for b, q in zip(table["board"], table["quantity"])]]
    healthy = table[[(b, q) not in truth for b, q in zip(table["board"], table["quantity"])]]

    def ratio(a, b):
        return round(len(a) / len(b), 4) if b else None

    return {"boards_flagged": len(boards_found), "boards_injected": len(boards_true),
            "precision_boards": ratio(boards_found & boards_true, boards_found),
            "recall_boards": ratio(boards_found & boards_true, boards_true),
            "precision_pairs": ratio(found & truth, found), "recall_pairs": ratio(found & truth, truth),
            "false_alarms": sorted(f"{b} {q}" for b, q in found - truth)[:20],
            "injected_min_abs_z": round(float(inj["z"].abs().min()), 2),
            "healthy_max_abs_z_finite": round(float(healthy["z"].abs().replace(np.inf, np.nan).max()), 2),
            "healthy_max_abs_z_per_injected_quantity": {
                q: round(float(healthy[healthy["quantity"] == q]["z"].abs().max()), 2) for q in injected},
            "injected_abs_z": {q: round(float(inj[inj["quantity"] == q]["z"].abs().min()), 2) for q in injected},
            "threshold": round(float(table["threshold"].min()), 2),
            "board_quantities": len(table), "quantities": int(table["quantity"].nunique())}


def markdown(r: dict) -> str:
    """The result as the table docs/fleet.md shows."""
    first, again, one, sc = r["first_gather"], r["regather_nothing_new"], r["regather_one_new_run"], r["screen"]
    rows = [("runs gathered", f"{r['boards'] - 1} (then one more)"),
            ("machine", f"{r['cpus']} CPUs, load average {r['load_average_before'][0]} before, "
                        f"{r['load_average_after'][0]} after"),
            ("first gather", f"{first['wall_s']} s wall, {first['cpu_s']} s CPU, peak memory {first['peak_gb']} GB, "
                             f"{first['partitions_written']} partitions written"),
            ("re-gather, nothing new", f"{again['wall_s']} s wall, {again['cpu_s']} s CPU, "
                                       f"{again['partitions_written']} partitions written"),
            ("re-gather, one new run", f"{one['wall_s']} s wall, {one['cpu_s']} s CPU ({one['fraction_of_first_wall']:.1%}"
                                       f" and {one['fraction_of_first_cpu']:.1%} of the first), peak memory "
                                       f"{one['peak_gb']} GB, {one['partitions_written']} partition written"),
            ("fleet page alone", f"{r['page_render']['wall_s']} s wall, {r['page_render']['cpu_s']} s CPU"),
            *((f"query: bw.dram per run, {k}", f"{v['wall_s']} s wall, {v['cpu_s']} s CPU, peak memory "
                                               f"{v['peak_gb']} GB ({v['runs']} runs)")
              for k, v in r["query_bw_dram_per_run_median"].items()),
            ("spread", f"{r['spread_from']}; σ of " + ", ".join(f"{q} {s:.2%}" for q, s in
                                                                 r["spread_of_injected"].items())),
            ("injected", f"1 board in {r['slow_every']} {r['slow']:.0%} low in each of "
                         + ", ".join(r["spread_of_injected"]) + f": {sc['boards_injected']} boards"),
            ("screen, boards", f"{sc['boards_flagged']} flagged; precision {sc['precision_boards']}, recall "
                               f"{sc['recall_boards']}"),
            ("screen, board-quantities", f"{sc['board_quantities']} screened; precision {sc['precision_pairs']}, "
                                         f"recall {sc['recall_pairs']}"),
            ("margins (robust z, absolute)", f"the injected boards' smallest {sc['injected_min_abs_z']}; the healthy "
                                             f"boards' largest {sc['healthy_max_abs_z_finite']} (in "
                                             + ", ".join(f"{q} {z}" for q, z in
                                                         sc["healthy_max_abs_z_per_injected_quantity"].items())
                                             + ")"),
            ("threshold", f"{sc['threshold']} (analysis/boards.py)")]
    return "| | tools/fleet_bench.py |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/fleet-bench"), help="where the fleet is built")
    ap.add_argument("--out", type=Path, help="write bench.json and bench.md here")
    ap.add_argument("--markdown", type=Path, help="only print the table of this bench.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=float, default=SLOW, help="how far below the model the slow boards are")
    ap.add_argument("--spread", choices=("panel", "history"), help="whose board-to-board spread (default: the "
                    "panel reports/h200-boards when it has three boards, else history)")
    ap.add_argument("--screen-only", action="store_true", help="build and screen (fleet.csv) only: no gather")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())), end="")
        return 0
    if args.boards < SLOW_EVERY or args.work.exists() and any(args.work.iterdir()):
        ap.error(f"--boards must be at least {SLOW_EVERY}, and --work a new or empty folder")
    load = os.getloadavg()
    source = source_run().read_meta()
    which = args.spread or ("panel" if PANEL.is_dir() and len({m["device"].get("uuid") for m, _ in
                                                                _committed_runs([PANEL])}) >= 3 else "history")
    sigma, panel = board_spread(source, which)
    t0 = time.perf_counter()
    injected = build_fleet(args.work, args.boards, sigma, args.seed, slow=args.slow)
    built = time.perf_counter() - t0
    head = {"boards": args.boards, "seed": args.seed, "source_run": source["run_id"], "spread_from": panel,
            "spread_of_injected": {q: round(float(sigma.get(q, 0.0)), 5) for q in SLOW_QUANTITIES.values()},
            "slow": args.slow, "slow_every": SLOW_EVERY}
    if args.screen_only:
        from analysis.boards import run_dirs, write_summary

        write_summary(args.work, run_dirs(args.work / "runs"), "fleet")
        result = {**head, "screen": score(args.work, injected)}
        print(json.dumps(result, indent=2))
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"screen-{which}-slow{args.slow:g}.json").write_text(json.dumps(result, indent=2) + "\n")
        return 0
    first = timed(GATHER, str(args.work))
    again = timed(GATHER, str(args.work))
    for quantity, boards in build_fleet(args.work, 1, sigma, args.seed, start=args.boards, slow=args.slow).items():
        injected[quantity] += boards
    one_new = timed(GATHER, str(args.work))
    render = timed(RENDER, str(args.work))
    queries = {"pyarrow": timed(QUERY_ARROW, str(args.work))}
    try:
        import duckdb  # noqa: F401
        queries["duckdb"] = timed(QUERY_DUCKDB, str(args.work))
    except ImportError:
        pass
    result = {
        **head, "boards": args.boards + 1, "cpus": os.cpu_count(),
        "load_average_before": [round(v, 2) for v in load],
        "load_average_after": [round(v, 2) for v in os.getloadavg()], "build_s": round(built, 1),
        "first_gather": {"wall_s": round(first["wall_s"], 1), "cpu_s": round(first["cpu_s"], 1),
                         "peak_gb": round(first["peak_gb"], 3), "partitions_written": int(first["stdout"])},
        "regather_nothing_new": {"wall_s": round(again["wall_s"], 1), "cpu_s": round(again["cpu_s"], 1),
                                 "partitions_written": int(again["stdout"])},
        "regather_one_new_run": {"wall_s": round(one_new["wall_s"], 1), "cpu_s": round(one_new["cpu_s"], 1),
                                 "peak_gb": round(one_new["peak_gb"], 3), "partitions_written": int(one_new["stdout"]),
                                 "fraction_of_first_wall": round(one_new["wall_s"] / first["wall_s"], 3),
                                 "fraction_of_first_cpu": round(one_new["cpu_s"] / first["cpu_s"], 3)},
        "page_render": {"wall_s": round(render["wall_s"], 1), "cpu_s": round(render["cpu_s"], 1)},
        "query_bw_dram_per_run_median": {k: {"wall_s": round(v["wall_s"], 1), "cpu_s": round(v["cpu_s"], 1),
                                             "peak_gb": round(v["peak_gb"], 3),
                                             "runs": int(v["stdout"])} for k, v in queries.items()},
        "screen": score(args.work, injected),
        "injected": injected,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench.json").write_text(text + "\n")
        (args.out / "bench.md").write_text(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
