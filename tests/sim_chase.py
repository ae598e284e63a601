"""Run by test_numba_sim.py in a fresh process with NUMBA_ENABLE_CUDASIM=1 (read at import time)."""
import itertools
import json
import sys

import numpy as np
from numba import config, cuda

from gpuatlas.probes.families.chase_numba import make_chase_kernel
from gpuatlas.probes.kit.chain import UNROLL, chain_order, expected_address, fill_chain

assert config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
ticks = itertools.count(0, 7)
visited = []


def load(chain, p):  # the simulator's stand-in for ld.global: chain addresses are byte offsets (base 0)
    visited.append(int(p))
    return chain[p // 8]


def tick():
    return next(ticks)


elements, stride_bytes, warm, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
order = chain_order(np.random.default_rng(1), elements)
words = np.zeros(elements * stride_bytes // 8, dtype=np.uint64)
fill_chain(words, order, stride_bytes, base=0)
out = np.zeros(3, dtype=np.uint64)
start = int(order[0]) * stride_bytes
make_chase_kernel(cuda, load, tick, tick)[1, 1](words, np.uint64(start), warm, steps, out)
print(json.dumps({"sink": int(out[2]), "expected": expected_address(order, warm + steps, stride_bytes, 0),
                  "visited": visited, "order": [int(o) * stride_bytes for o in order], "unroll": UNROLL}))
