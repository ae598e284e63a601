"""NCCL collectives between every GPU the run sees, through torch.distributed: all-reduce, all-gather,
reduce-scatter and broadcast, bus bandwidth against message size (gpuatlas.analysis.collectives: nccl-tests'
algbw and busbw).

Rank 0 is the probe's own process; ranks 1..n-1 are helper processes (``python -m gpuatlas.probes.families.collectives``)
started once and kept for the probe's configs, each on its own GPU, all joined in one NCCL group.  NVLink
SHARP (NVLS, multicast) is switched off (NCCL_NVLS_ENABLE=0) in every rank, so the figures are the plain
NVLink/PCIe paths'.
"""
from __future__ import annotations

import atexit
import json
import math
import os
import sys

from gpuatlas.analysis.collectives import COLLECTIVES, algbw, busbw
from gpuatlas.probes.kit.harness import Sample, repeat_until_stable
from gpuatlas.probes.registry import geom, probe

#: Environment of every rank: NVLink multicast stays off.
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0"}
_GROUP = {}


def collective_sizes(device: dict, per_octave: int) -> list[int]:
    """Message sizes S from 16 KiB per rank to 4x L2, multiples of 4 bytes x ranks (fp32 chunks); none
    without a peer."""
    n = device.get("gpu_count", 1) if device else 1
    if n < 2:
        return []
    return geom(16384 * n, 4 * device["l2_bytes"], per_octave=per_octave, align=4096 * n)


def _sweep(per_octave: int):
    return lambda device: {"collective": list(COLLECTIVES), "message_bytes": collective_sizes(device, per_octave)}


def _run_op(torch, dist, collective: str, nbytes: int, ranks: int, rank: int, iters: int):
    """``iters`` back-to-back collectives of size S = nbytes on this rank; CUDA-event seconds per op."""
    count = nbytes // 4
    chunk = count // ranks
    full = torch.ones(count, dtype=torch.float32, device=f"cuda:{rank}")
    part = torch.ones(chunk, dtype=torch.float32, device=f"cuda:{rank}")
    op = {"all_reduce": lambda: dist.all_reduce(full),
          "all_gather": lambda: dist.all_gather_into_tensor(full[: chunk * ranks], part),
          "reduce_scatter": lambda: dist.reduce_scatter_tensor(part, full[: chunk * ranks]),
          "broadcast": lambda: dist.broadcast(full, src=0)}[collective]
    op()
    torch.cuda.synchronize(rank)
    dist.barrier(device_ids=[rank])
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        op()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1e-3 / iters


def _init(rank: int, ranks: int, address: str):
    import datetime

    os.environ.update(NCCL_ENV)
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=address, rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=120), device_id=torch.device(f"cuda:{rank}"))
    return torch, dist


def _helper(rank: int, ranks: int, address: str) -> None:
    """A rank other than 0: run each command rank 0 writes to stdin (a JSON line) until stdin closes."""
    torch, dist = _init(rank, ranks, address)
    for line in sys.stdin:
        collective, nbytes, iters = json.loads(line)
        _run_op(torch, dist, collective, nbytes, ranks, rank, iters)
    dist.destroy_process_group()


def _group(ranks: int):
    """(torch, dist, helpers): the NCCL group of this process (rank 0) and its helper processes, started once.

    Helpers are plain subprocesses (the probe may itself run in a daemonic child, which multiprocessing
    forbids to have children)."""
    if ranks not in _GROUP:
        import socket
        import subprocess

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        os.environ.update(NCCL_ENV)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, sys.path)))  # they import as this process
        helpers = [subprocess.Popen([sys.executable, "-m", "gpuatlas.probes.collectives", str(r), str(ranks),
                                     address], stdin=subprocess.PIPE, text=True, env=env) for r in range(1, ranks)]
        torch, dist = _init(0, ranks, address)

        def stop():
            for h in helpers:
                h.stdin.close()
            for h in helpers:
                try:
                    h.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    h.kill()

        atexit.register(stop)
        _GROUP[ranks] = (torch, dist, helpers)
    return _GROUP[ranks]


@probe("nccl.collectives", sweeps={"quick": _sweep(1), "full": _sweep(4)},
       axes={"collective": ", ".join(COLLECTIVES),
             "message_bytes": "S as nccl-tests prints it (the whole buffer; all-gather's output, reduce-scatter's "
                              "input): 16 KiB per rank to 4x L2"},
       quantities=("nccl.all_reduce_busbw_bytes_per_s", "nccl.all_gather_busbw_bytes_per_s",
                   "nccl.reduce_scatter_busbw_bytes_per_s", "nccl.broadcast_busbw_bytes_per_s"),
       backend="torch", min_gpus=2)
def nccl_collectives(ctx, collective: str, message_bytes: int) -> list[Sample]:
    """Seconds per NCCL collective over every GPU of the run, as nccl-tests' algbw and busbw."""
    ranks = ctx.device["gpu_count"]
    torch, dist, helpers = _group(ranks)
    iters = max(5, min(200, math.ceil(4 * ctx.device["l2_bytes"] / message_bytes)))

    def sample(repeat: int) -> list[Sample]:
        for h in helpers:
            h.stdin.write(json.dumps([collective, message_bytes, iters]) + "\n")
            h.stdin.flush()
        seconds = _run_op(torch, dist, collective, message_bytes, ranks, 0, iters)
        return [Sample("busbw", busbw(collective, message_bytes, seconds, ranks), "B/s", repeat, None, "cuda_event"),
                Sample("algbw", algbw(message_bytes, seconds), "B/s", repeat, None, "cuda_event"),
                Sample("seconds", seconds, "s", repeat, None, "cuda_event")]

    return repeat_until_stable(sample, "busbw", ctx.budget)


if __name__ == "__main__":
    _helper(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
