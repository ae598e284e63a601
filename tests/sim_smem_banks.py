"""Run by test_smem_banks_sim.py in a fresh process with NUMBA_ENABLE_CUDASIM=1 (read at import time).

Argument: a JSON list of configs ``[access_bytes, stride_words, layout, offset_words, form, trips, warps]``.
Prints one JSON line: per config, every shared byte address each thread loaded, and the kernel's out and sink.
"""
import itertools
import json
import sys
import threading

import numpy as np
from numba import config, cuda

from gpuatlas.probes.families.smem_banks import LANES, lane_elements, layout_params
from gpuatlas.probes.families.smem_banks.smem_banks_numba import make_banks_kernel

assert config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
ticks = itertools.count(0, 7)


def run(access_bytes, stride_words, layout, offset_words, form, trips, warps):
    visits = [[] for _ in range(LANES * warps)]

    def load(words, address):  # the stand-in for ld.shared: the array starts at shared address 0
        visits[threading.current_thread().threadIdx.x].append(int(address))
        return words[int(address) // 4]

    pitch, xor_mask = layout_params(stride_words, layout, offset_words)
    elements = int(lane_elements(pitch, offset_words, xor_mask).max()) + 1
    out = np.zeros(1 + 4 * warps, dtype=np.uint64)
    sink = np.zeros(LANES * warps, dtype=np.uint32)
    kernel = make_banks_kernel(cuda, access_bytes, form, load, lambda words: 0, lambda: next(ticks),
                               lambda: next(ticks))
    args = (np.int32(elements), np.int32(pitch), np.int32(offset_words), np.int32(xor_mask), np.uint32(trips))
    kernel[1, LANES * warps, 0, elements * access_bytes](*args, out, sink)
    return {"visits": visits, "out": [int(v) for v in out], "sink": [int(v) for v in sink]}


print(json.dumps([run(*c) for c in json.loads(sys.argv[1])]))
