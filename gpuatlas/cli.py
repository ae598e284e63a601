"""The ``gpuatlas`` command line: its parser, and ``main``, which runs one command of ``gpuatlas.commands``.

Bad input ends in one line on stderr and exit code 2; nothing already measured is touched.  ``list``,
``report`` and ``compare`` never import CuPy and work on a machine without a GPU.
"""
from __future__ import annotations

import argparse
import os
import sys

from gpuatlas.analysis.errors import UsageError
from gpuatlas.checks import gpu_list, positive_seconds
from gpuatlas.commands import (cmd_compare, cmd_doctor, cmd_export, cmd_fleet, cmd_list, cmd_report,
                               cmd_run)

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the fix, and exit code 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"gpuatlas: error: {message} (see `{self.prog} --help`)\n")

    def parse_args(self, args=None, namespace=None):
        """Unknown options are named before a missing command: `gpuatlas --frobnicate` says --frobnicate."""
        args, unknown = self.parse_known_args(args, namespace)
        if unknown:
            self.error(f"unrecognized argument{'s' if len(unknown) > 1 else ''}: {' '.join(unknown)}")
        if args.command is None:
            self.error("name a command: list, run, report, compare or doctor")
        return args


class _TwoOrMore(argparse.Action):
    """A positional list that needs at least two entries (a comparison of one run compares nothing)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if len(values) < 2:
            parser.error(f"compare needs two or more runs or ref:NAME, got one ({values[0]}); "
                         f"for one run's numbers use `gpuatlas report {values[0]}`")
        setattr(namespace, self.dest, values)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpuatlas", description="Reconstruct a GPU's hardware from measurements.")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    s = sub.add_parser("list", help="the probes, their sweeps and config counts (no GPU needed)")
    s.add_argument("-p", "--probe", action="append", help="only this probe (or prefix); repeatable")
    s.set_defaults(func=cmd_list)

    s = sub.add_parser("run", help="measure probes into a new run directory (or finish one)")
    s.add_argument("--profile", default="quick", help="quick (default; seconds) or full (dense sweeps)")
    s.add_argument("-p", "--probe", action="append", help="only this probe (or prefix); repeatable")
    s.add_argument("-a", "--axis", action="append", metavar="AXIS=V1,V2",
                   help="override one axis of the sweep, e.g. footprint_bytes=4KiB,64MiB")
    s.add_argument("--out", default="results", help="folder that receives the run directory (default results/)")
    s.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted run: only missing configs are measured")
    s.add_argument("--seed", type=int, default=0, help="seed of the chase permutations and sweep jitter")
    s.add_argument("--probe-timeout", type=positive_seconds, default=900.0, metavar="S",
                   help="seconds a probe may run before it is killed and recorded as hung (default 900)")
    s.add_argument("--gpus", type=gpu_list, metavar="all|0,1,...",
                   help="measure these GPUs at once, one worker each (its own run directory), then the links "
                        "between them and a node summary")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("report", help="render HTML + Markdown reports (default: the committed H200 run); "
                                      "with several runs or ref:NAME also a comparison page with run-to-run spread")
    s.add_argument("runs", nargs="*", metavar="RUN_DIR|ref:NAME",
                   help="run directories made by `gpuatlas run` (default: the committed H200 run), node or fleet "
                        "folders, and ref:NAME references to set beside the runs on the comparison page")
    s.add_argument("--out", default="gpuatlas-report", help="folder for the reports (default gpuatlas-report/)")
    s.add_argument("--pdf", action="store_true", help="also print each page to index.pdf beside it, as a paper "
                                                      "(needs WeasyPrint: pip install 'gpuatlas[pdf]')")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("compare", help="derived quantities of runs and published references side by side, "
                                       "grouped by level, with CIs, ratios and footnoted sources and caveats")
    s.add_argument("runs", nargs="+", action=_TwoOrMore, metavar="RUN_DIR|ref:NAME",
                   help="two or more run directories, or published references: " + ", ".join(
                       f"ref:{n}" for n in __import__("gpuatlas.analysis.references", fromlist=["x"]).list_references()))
    s.add_argument("--baseline", metavar="NAME",
                   help="ratios against this run or reference (a run id, ref:NAME or part of a label; default: "
                        "the first)")
    s.add_argument("--pairwise", action="store_true", help="ratios of every pair, not only against the baseline")
    view = s.add_mutually_exclusive_group()
    view.add_argument("--all", action="store_true",
                      help="every quantity, also those only some of the GPUs have (by default only the quantities "
                           "every one has, with a line counting the rest)")
    view.add_argument("--common", action="store_true", help="the default view (kept for older scripts)")
    s.add_argument("--csv", action="store_true",
                   help="print the long form (one row per GPU and quantity) as CSV instead of a table")
    s.add_argument("--plot", metavar="PATH", help="also save a figure of the ratios to the baseline (.png, .svg, "
                                                  ".pdf)")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("fleet", help="every GPU of a Ray cluster, one Ray task each, gathered into one Parquet "
                                     "dataset and a fleet report with the outlier boards (pip install '.[fleet]')")
    s.add_argument("--address", help="the Ray cluster (host:port, or 'local' to start one on this machine)")
    s.add_argument("--profile", default="quick", help="quick (default) or full")
    s.add_argument("-p", "--probe", action="append", help="only this probe (or prefix); repeatable")
    s.add_argument("--seed", type=int, default=0, help="seed of the chase permutations and sweep jitter")
    s.add_argument("--out", default="fleet", help="the fleet folder (default fleet/); run again to resume")
    s.add_argument("--gather", action="store_true",
                   help="measure nothing: gather the runs under OUT/runs (e.g. from a Slurm job array)")
    s.set_defaults(func=cmd_fleet)

    s = sub.add_parser("export", help="a simulator configuration from a run's measurements: "
                                      "`export accel-sim RUN_DIR` writes gpgpusim.config and trace.config")
    s.add_argument("format", choices=["accel-sim"], help="the simulator (accel-sim)")
    s.add_argument("run", metavar="RUN_DIR", help="a run directory (with derived.csv and run.json)")
    s.add_argument("-o", "--out", default="gpuatlas-accel-sim",
                   help="folder for the config files (default gpuatlas-accel-sim/)")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("doctor", help="can this machine run gpuatlas? each backend checked, with fixes")
    s.set_defaults(func=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed in one line
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"gpuatlas: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        print(f"gpuatlas: interrupted; finished configs are saved: continue with `gpuatlas run --resume "
              f"{getattr(exc, 'path', 'RUN_DIR')}`", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get("GPUATLAS_DEBUG"):
            raise
        print(f"gpuatlas: internal error: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''} "
              "(set GPUATLAS_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
