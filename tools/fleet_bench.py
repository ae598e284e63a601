"""A synthetic fleet, gathered: what ``gpuatlas fleet --gather`` costs at N boards and what the outlier screen
finds (not a timed test: run it by hand, on a quiet machine, and commit its output).

    python3 -m tools.fleet_bench --boards 1000 --work /tmp/fleet-bench --out reports/fleet-synthetic

Each synthetic board is the committed quick run (``reports/h200-quick``) under its own UUID and run id.  Its
derived.csv values (with their CIs) are scaled by 1 + s_q ε_q, ε_q standard normal, drawn independently per
board and quantity, and s_q the quantity's board-to-board spread in the committed panel table
(analysis/board-spread.csv, the quick run's model: the relative standard deviation of the panel's boards).
Independent draws are the conservative choice for the group screen's margin: a board drawn low in one HBM
rate is not drawn low in the others, so no healthy board imitates a slow one.  A quantity the table lacks
is not spread.

Slow boards are faithful: one board in SLOW_EVERY has every quantity of the ``hbm`` group (analysis/boards.py
GROUPS: the HBM-bound rates) at (1 - SLOW) of its healthy draw, another every quantity of the ``tensor``
group (the tensor rates per second a clock held down under load scales).  The measurements are the quick
run's file as it is (the screen reads derived.csv, and the gather's cost does not depend on the values).

Reported: the first gather's wall time and peak memory (its own process), a re-gather with nothing new and with
one new run, the page's render time, the screen's precision and recall against the injected boards (by board,
by board and group, by board and quantity) and its margins, and two ways to query the dataset without loading
it (pyarrow filters, DuckDB when installed).
"""
from __future__ import annotations

import argparse
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

from gpuatlas.analysis.boards import GROUP_PREFIX, group_of  # noqa: E402
from gpuatlas.analysis.repro import SPREAD_TABLE, read_spread_table  # noqa: E402
from gpuatlas.analysis.results import RunDir  # noqa: E402

SOURCE = REPO / "reports" / "h200-quick"
#: One board in SLOW_EVERY is slow in each injected group, by the fraction SLOW (default of --slow).
SLOW_EVERY, SLOW = 100, 0.05
SLOW_GROUPS = ("hbm", "tensor")


def source_run() -> RunDir:
    return RunDir(next(p for p in sorted(SOURCE.iterdir()) if (p / "run.json").is_file()))


def board_spread(model: str) -> tuple[pd.Series, str]:
    """quantity -> relative board-to-board standard deviation of ``model``'s panel (analysis/board-spread.csv),
    and which panel."""
    table = read_spread_table()
    own = table[table["model"] == model]
    if own.empty:
        raise SystemExit(f"fleet_bench: error: {SPREAD_TABLE.name} has no panel of {model}")
    where = f"{own['panel'].iat[0]} ({int(own['boards'].max())} boards), {SPREAD_TABLE.relative_to(REPO)}"
    return own.set_index("quantity")["spread"].rename("sigma"), where


def build_fleet(work: Path, n: int, sigma: pd.Series, seed: int = 0, start: int = 0,
                slow: float = SLOW) -> dict[str, list[str]]:
    """Runs ``start .. start + n - 1`` of the synthetic fleet under ``work/runs``; returns the injected boards'
    labels per injected group.  Board i is the same board whatever ``n`` (its draws are seeded by i)."""
    src = source_run()
    meta, derived = src.read_meta(), src.read_derived()
    spread = derived["quantity"].map(sigma).fillna(0.0).to_numpy()
    members = {g: derived["quantity"].map(group_of).eq(g).to_numpy() for g in SLOW_GROUPS}
    injected: dict[str, list[str]] = {g: [] for g in SLOW_GROUPS}
    for i in range(start, start + n):
        rng = np.random.default_rng([seed, i])
        label = f"{i:04x}{rng.bytes(2).hex()}"  # the board's label (gpuatlas.analysis.boards.board_label): unique
        uuid = f"GPU-{label}-{rng.bytes(2).hex()}-{rng.bytes(2).hex()}-{rng.bytes(2).hex()}-{rng.bytes(6).hex()}"
        run_id = f"{meta['run_id']}-b{i:05d}"
        scale = 1 + spread * rng.standard_normal(len(derived))
        slot = i % SLOW_EVERY
        for k, group in enumerate(SLOW_GROUPS):
            if slot == (k + 1) * SLOW_EVERY // (len(SLOW_GROUPS) + 1):
                scale = np.where(members[group], scale * (1 - slow), scale)
                injected[group].append(label)
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
RENDER = ("import sys; from pathlib import Path; from gpuatlas.analysis.board_pages import render_boards; "
          "render_boards(Path(sys.argv[1]), 'fleet', Path(sys.argv[1]) / 'report')")
QUERY_ARROW = ("import sys, pyarrow.dataset as ds; d = ds.dataset(sys.argv[1] + '/dataset', partitioning='hive'); "
               "t = d.to_table(columns=['run_id', 'value'], filter=(ds.field('probe') == 'bw.dram') & "
               "(ds.field('metric') == 'bandwidth')).to_pandas(); print(t.groupby('run_id')['value'].median().size)")
QUERY_DUCKDB = ("import sys, duckdb; print(len(duckdb.sql(f\"SELECT run_id, median(value) FROM read_parquet("
                "'{sys.argv[1]}/dataset/*/*.parquet', hive_partitioning = true) WHERE probe = 'bw.dram' AND "
                "metric = 'bandwidth' GROUP BY run_id\").fetchall()))")


def score(fleet: Path, injected: dict[str, list[str]]) -> dict:
    """Precision and recall of the screen against the injected boards: by board, by board and group, by board
    and quantity (an injected board's flagged quantity is true when its group was injected); and the margins:
    the injected boards' group z against the healthy boards', each quantity's |z| against its threshold."""
    table = pd.read_csv(fleet / "fleet.csv")
    groups = table["quantity"].str.startswith(GROUP_PREFIX)
    flagged = table[table["outlier"]]
    truth_groups = {(b, GROUP_PREFIX + g) for g, boards in injected.items() for b in boards}
    found_groups = {(b, q) for b, q in zip(flagged["board"], flagged["quantity"]) if q.startswith(GROUP_PREFIX)}
    slow_in = {b: g for g, boards in injected.items() for b in boards}
    found_pairs = {(b, q) for b, q in zip(flagged["board"], flagged["quantity"]) if not q.startswith(GROUP_PREFIX)}
    true_pairs = {(b, q) for b, q in found_pairs if group_of(q) is not None and group_of(q) == slow_in.get(b)}
    boards_true, boards_found = set(slow_in), set(flagged["board"])
    group_rows = table[groups]
    is_injected = [(b, q) in truth_groups for b, q in zip(group_rows["board"], group_rows["quantity"])]
    injected_rows = group_rows[is_injected]
    healthy_rows = group_rows[[not x for x in is_injected]]
    quantities = table[~groups & ~table["board"].isin(boards_true)]

    def ratio(a, b):
        return round(len(a) / len(b), 4) if b else None

    return {"boards_flagged": len(boards_found), "boards_injected": len(boards_true),
            "precision_boards": ratio(boards_found & boards_true, boards_found),
            "recall_boards": ratio(boards_found & boards_true, boards_true),
            "precision_groups": ratio(found_groups & truth_groups, found_groups),
            "recall_groups": ratio(found_groups & truth_groups, truth_groups),
            "board_quantities_flagged": len(found_pairs),
            "precision_quantities": ratio(true_pairs, found_pairs),
            "false_alarms": sorted(f"{b} {q}" for b, q in (found_groups - truth_groups) | (found_pairs - true_pairs))[:20],
            "group_threshold": {q.removeprefix(GROUP_PREFIX): round(float(f["threshold"].min()), 2)
                                for q, f in group_rows.groupby("quantity")},
            "injected_group_z_max": {q.removeprefix(GROUP_PREFIX): round(float(f["z"].max()), 2)
                                     for q, f in injected_rows.groupby("quantity")},
            "healthy_group_z_min": {q.removeprefix(GROUP_PREFIX): round(float(f["z"].min()), 2)
                                    for q, f in healthy_rows.groupby("quantity")},
            "healthy_quantity_largest_z_over_threshold": round(float(
                (quantities["z"].abs() / quantities["threshold"]).replace(np.inf, np.nan).max()), 3),
            "quantity_threshold": round(float(table.loc[~groups, "threshold"].min()), 2),
            "rule": sorted(set(table["rule"])),
            "board_quantities": int((~groups).sum()), "board_groups": int(groups.sum()),
            "quantities": int(table.loc[~groups, "quantity"].nunique())}


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
            ("spread", f"{r['spread_from']}; each board and quantity drawn independently"),
            ("injected", f"1 board in {r['slow_every']} with every quantity of a group {r['slow']:.0%} low, for "
                         + ", ".join(f"{g} ({len(q)} quantities)" for g, q in r["injected_quantities"].items())
                         + f": {sc['boards_injected']} boards"),
            ("rule", ", ".join(sc["rule"]) + " (analysis/boards.py)"),
            ("screen, boards", f"{sc['boards_flagged']} flagged; precision {sc['precision_boards']}, recall "
                               f"{sc['recall_boards']}"),
            ("screen, board-groups", f"{sc['board_groups']} judged; precision {sc['precision_groups']}, "
                                     f"recall {sc['recall_groups']}"),
            ("screen, board-quantities", f"{sc['board_quantities']} judged; {sc['board_quantities_flagged']} flagged, "
                                         f"precision {sc['precision_quantities']}"),
            ("margins, groups (z; slow below -threshold)",
             "; ".join(f"{g}: threshold {sc['group_threshold'][g]}, the injected boards' highest "
                       f"{sc['injected_group_z_max'].get(g)}, the healthy boards' lowest {sc['healthy_group_z_min'][g]}"
                       for g in sc["group_threshold"])),
            ("margins, quantities", f"threshold {sc['quantity_threshold']}; the healthy boards' largest absolute z is "
                                    f"{sc['healthy_quantity_largest_z_over_threshold']} of its threshold")]
    return "| | tools/fleet_bench.py |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=Path("/tmp/fleet-bench"), help="where the fleet is built")
    ap.add_argument("--out", type=Path, help="write bench.json and bench.md here")
    ap.add_argument("--markdown", type=Path, help="only print the table of this bench.json")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=float, default=SLOW, help="how far below the model the slow boards are")
    ap.add_argument("--screen-only", action="store_true", help="build and screen (fleet.csv) only: no gather")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())), end="")
        return 0
    if args.boards < SLOW_EVERY or args.work.exists() and any(args.work.iterdir()):
        ap.error(f"--boards must be at least {SLOW_EVERY}, and --work a new or empty folder")
    load = os.getloadavg()
    source = source_run().read_meta()
    sigma, panel = board_spread(source["gpu"])
    t0 = time.perf_counter()
    injected = build_fleet(args.work, args.boards, sigma, args.seed, slow=args.slow)
    built = time.perf_counter() - t0
    quantities = source_run().read_derived()["quantity"]
    head = {"boards": args.boards, "seed": args.seed, "source_run": source["run_id"], "spread_from": panel,
            "slow": args.slow, "slow_every": SLOW_EVERY,
            "injected_quantities": {g: {q: round(float(sigma.get(q, 0.0)), 5) for q in quantities
                                        if group_of(q) == g} for g in SLOW_GROUPS}}
    if args.screen_only:
        from gpuatlas.analysis.boards import run_dirs, write_summary

        write_summary(args.work, run_dirs(args.work / "runs"), "fleet")
        print(json.dumps({**head, "screen": score(args.work, injected)}, indent=2))
        return 0
    first = timed(GATHER, str(args.work))
    again = timed(GATHER, str(args.work))
    for group, boards in build_fleet(args.work, 1, sigma, args.seed, start=args.boards, slow=args.slow).items():
        injected[group] += boards
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
