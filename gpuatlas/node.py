"""``gpuatlas run --gpus``: every GPU of a node at once, one ``gpuatlas run`` worker per device.

Each worker is the plain single-GPU command with CUDA_VISIBLE_DEVICES naming its one device, writing its own
run directory (the same contract) under ``<node>/gpu<N>/``.  The link and collective probes need every GPU
in one process, so they run after the boards, alone, in one more worker that sees all the devices
(``<node>/links/``); on one GPU they record why they were skipped.  Then the node summary
(``node.csv``, ``node.json``: gpuatlas.analysis.boards) and the node page (``<node>/report/``).
"""
from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

from gpuatlas.analysis.errors import UsageError

#: Environment of every worker: NVLink multicast (NVLS) off, as the collectives probe sets it too.
WORKER_ENV = {"NCCL_NVLS_ENABLE": "0"}


def parse_gpus(spec: str, visible: list[str]) -> list[str]:
    """The devices ``--gpus`` names, as CUDA_VISIBLE_DEVICES entries: ``all`` or indices into ``visible``."""
    if spec.strip() == "all":
        return list(visible)
    chosen = []
    for raw in spec.split(","):
        raw = raw.strip()
        if not raw.isdigit() or int(raw) >= len(visible):
            raise UsageError(f"--gpus {spec!r}: {raw!r} is not one of the {len(visible)} visible GPUs' indices "
                             f"(0..{len(visible) - 1}) nor 'all'")
        if visible[int(raw)] in chosen:
            raise UsageError(f"--gpus {spec!r} names GPU {raw} twice")
        chosen.append(visible[int(raw)])
    return chosen


def visible_devices() -> list[str]:
    """CUDA_VISIBLE_DEVICES entries of this process's GPUs (their ordinals when it is unset)."""
    from gpuatlas.machinery.device import require_gpu

    count = require_gpu().cuda.runtime.getDeviceCount()
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def worker_args(args, probe_ids: list[str], out: Path) -> list[str]:
    """``gpuatlas run`` arguments of one worker: the request's own, its probes named one by one."""
    argv = ["run", "--profile", args.profile, "--out", str(out), "--seed", str(args.seed),
            "--probe-timeout", str(args.probe_timeout)]
    for pid in probe_ids:
        argv += ["-p", pid]
    for axis in args.axis or ():
        argv += ["-a", axis]
    return argv


def launch(argv: list[str], device: str, log: Path) -> subprocess.Popen:
    """Start ``gpuatlas <argv>`` on ``device`` (CUDA_VISIBLE_DEVICES) with its output in ``log``."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=device, **WORKER_ENV)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as f:
        return subprocess.Popen([sys.executable, "-m", "gpuatlas.cli", *argv], env=env, stdout=f,
                                stderr=subprocess.STDOUT)


def run_node(args, devices: list[str], out_root: Path, start=launch, say=print) -> tuple[Path, int]:
    """Measure every device in parallel, then the links, then summarize; returns (node folder, exit code)."""
    from gpuatlas.analysis.board_pages import render_boards
    from gpuatlas.analysis.boards import run_dirs, write_summary
    from gpuatlas.probes.registry import select

    probes = select(args.probe)
    board_probes = [p.id for p in probes if p.min_gpus <= 1]
    node_probes = [p.id for p in probes if p.min_gpus > 1]
    node = out_root / f"node-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}"
    node.mkdir(parents=True, exist_ok=False)
    say(f"measuring {len(devices)} GPUs ({', '.join(devices)}) into {node}, one worker each")
    codes = {}
    if board_probes:
        workers = {d: start(worker_args(args, board_probes, node / f"gpu{d}"), d, node / "logs" / f"gpu{d}.log")
                   for d in devices}
        for d, worker in workers.items():
            codes[f"gpu{d}"] = worker.wait()
            say(f"GPU {d}: worker exited {codes[f'gpu{d}']} (log: {node / 'logs' / f'gpu{d}.log'})")
    if node_probes:
        say(f"links and collectives over every GPU at once: {', '.join(node_probes)}")
        codes["links"] = start(worker_args(args, node_probes, node / "links"), ",".join(devices),
                               node / "logs" / "links.log").wait()
    boards = [p for d in devices for p in run_dirs(node / f"gpu{d}")]
    links = run_dirs(node / "links")
    write_summary(node, boards, "node", extra={"devices": devices, "worker_exit_codes": codes,
                                               "links_run": links[0].name if links else None})
    page = render_boards(node, "node", node / "report")
    say(f"node summary: {node / 'node.csv'}; node page: {page}")
    return node, 0 if all(c == 0 for c in codes.values()) else 1
