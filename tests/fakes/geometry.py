"""Cache geometry (probes/families/geometry/): the L1's sets, ways and carve-out access by access, the L2's
partition map from one SM and from every SM, the constant caches and L2 persistence."""
from __future__ import annotations

import numpy as np

from fakes import (CLOCK_HZ, DEVICE, FAR_MISS, HBM_READ, L2_READ, LEVELS, LINE_BYTES, NEAR_MISS, PARTITION_INTERLEAVE,
                   RECORD_COST, _samples, far_homed)
from gpuatlas.probes.kit.harness import Sample

#: The simulated L1: a unified array of UNIFIED_BYTES holds the shared carve (the allocation plus a reserved
#: KiB per block, in CARVE_STEP steps) and the L1 the rest, in sets of L1_WAYS 128-byte lines whose index is
#: hashed (set_index), replaced LRU.
UNIFIED_BYTES, CARVE_STEP, L1_WAYS = 256 << 10, 8 << 10, 4


def l1_bytes_beside(smem_bytes: int) -> int:
    carve = -(-(smem_bytes + 1024) // CARVE_STEP) * CARVE_STEP
    return UNIFIED_BYTES - carve


def set_index(blocks: np.ndarray, sets: int, hashed: bool = False) -> np.ndarray:
    """The set of each line number: its lowest base-``sets`` digit, or with ``hashed`` that digit combined with
    every upper one (XOR where ``sets`` is a power of two, else their sum mod ``sets``).  Either way an aligned
    run of ``sets`` lines puts one line in each set; hashed, no power-of-two stride falls into one set."""
    blocks = np.asarray(blocks, dtype=np.int64)
    index = blocks % sets
    if not hashed or sets == 1:
        return index
    upper = blocks // sets
    while upper.any():
        index = index ^ (upper % sets) if sets & (sets - 1) == 0 else (index + upper) % sets
        upper //= sets
    return index


class SetCache:
    """A set-associative cache of known geometry, access by access: ``sets`` sets of ``ways`` lines of
    ``line`` bytes, replaced ``lru``, ``fifo``, ``plru`` (a binary tree, ways a power of two) or ``random``;
    with ``hashed`` the set index is XORed with the next bits up of the address (a hashed index)."""

    def __init__(self, sets: int, ways: int, line: int = LINE_BYTES, policy: str = "lru", hashed: bool = False,
                 seed: int = 0):
        self.sets_n, self.ways, self.line, self.policy, self.hashed = sets, ways, line, policy, hashed
        self.tags = [dict() for _ in range(sets)]  # tag -> way
        self.order = [[] for _ in range(sets)]  # ways by age (lru, fifo)
        self.tree = [[0] * max(ways - 1, 1) for _ in range(sets)]
        self.rng = np.random.default_rng(seed)

    def set_of(self, address: int) -> int:
        return int(set_index(np.array([address // self.line]), self.sets_n, self.hashed)[0])

    def _touch(self, s: int, way: int) -> None:
        if self.policy == "plru":
            node, span = 0, self.ways
            while span > 1:
                span //= 2
                right = (way // span) % 2
                self.tree[s][node] = 1 - right  # point away from the way just used
                node = 2 * node + 1 + right
        elif self.policy == "lru":
            self.order[s].remove(way)
            self.order[s].append(way)

    def _victim(self, s: int) -> int:
        if self.policy == "plru":
            node, way, span = 0, 0, self.ways
            while span > 1:
                span //= 2
                right = self.tree[s][node]
                way += right * span
                node = 2 * node + 1 + right
            return way
        if self.policy == "random":
            return int(self.rng.integers(self.ways))
        return self.order[s][0]

    def access(self, address: int) -> bool:
        """True on a hit; a miss fills the line, evicting the policy's victim."""
        s, tag = self.set_of(address), address // self.line
        table = self.tags[s]
        if tag in table:
            self._touch(s, table[tag])
            return True
        if len(table) < self.ways:
            way = len(table)
            self.order[s].append(way)
        else:
            way = self._victim(s)
            del table[next(t for t, w in table.items() if w == way)]
            if self.policy in ("lru", "fifo"):
                self.order[s].remove(way)
                self.order[s].append(way)
        table[tag] = way
        if self.policy == "plru":
            self._touch(s, way)
        return False


def cache_walk(make_cache, stride_bytes: int, recorded: int, blocks=None, hit: float = LEVELS["l1"],
               miss: float = LEVELS["l2"]):
    """``walk(lines) -> intervals``: a fresh cache, a cyclic walk of that many lines (``blocks[:lines]`` x the
    stride; no ``blocks``: 0, 1, 2, ...), two passes warm, then ``recorded`` accesses timed: ``hit`` or
    ``miss`` cycles plus the recording's cost."""
    def walk(lines: int) -> np.ndarray:
        at = (np.arange(lines) if blocks is None else blocks[:lines]) * stride_bytes
        cache = make_cache()
        for i in range(2 * lines):
            cache.access(int(at[i % lines]))
        start = 2 * lines
        return np.array([(hit if cache.access(int(at[(start + k) % lines])) else miss) + RECORD_COST
                         for k in range(recorded)])

    return walk


def lru_cyclic_walk(sets: int, ways: int, stride_bytes: int, recorded: int, blocks: np.ndarray,
                    hashed: bool = False):
    """The same walk on an LRU cache (set index by set_index), in closed form: a cyclic walk keeps every line
    of a set holding at most ``ways`` of them and misses every access to a set holding more."""
    def walk(lines: int) -> np.ndarray:
        index = set_index(blocks[:lines] * stride_bytes // LINE_BYTES, sets, hashed)
        overfull = np.bincount(index, minlength=sets)[index] > ways
        visits = (2 * lines + np.arange(recorded)) % lines
        return np.where(overfull[visits], LEVELS["l2"], LEVELS["l1"]) + RECORD_COST

    return walk


def _geometry_l1(ctx, stride_bytes, smem_bytes, placement):
    from gpuatlas.probes.families.geometry import RECORDED, chain_blocks, max_lines, sweep_lines

    sets = l1_bytes_beside(smem_bytes) // LINE_BYTES // L1_WAYS
    n_max = max_lines(ctx.device, stride_bytes)
    blocks = chain_blocks(placement, n_max, np.random.default_rng([stride_bytes, smem_bytes]))
    return sweep_lines(lru_cyclic_walk(sets, L1_WAYS, stride_bytes, RECORDED, blocks, hashed=True), n_max,
                       CLOCK_HZ)


def partition_walks(stride_bytes, lines, walks, interleave=PARTITION_INTERLEAVE, seed=0):
    """Cold misses in address order, ``walks`` times: near- or far-homed miss latency, noise, the record's
    cost; ``interleave`` None: every line homed by the near partition."""
    rng = np.random.default_rng(seed)
    far = np.zeros(lines, dtype=bool) if interleave is None else far_homed(np.arange(lines) * stride_bytes,
                                                                           interleave)
    cycles = np.where(far, FAR_MISS, NEAR_MISS)
    return np.concatenate([np.round(cycles + rng.normal(0, 6, lines) + RECORD_COST) for _ in range(walks)])


def _l2_partition(ctx, stride_bytes):
    from gpuatlas.probes.families.geometry.l2_partition import PARTITION_LINES, PARTITION_WALKS

    values = partition_walks(stride_bytes, PARTITION_LINES, PARTITION_WALKS, seed=stride_bytes)
    return ([Sample("access", float(v), "cycles", i, CLOCK_HZ, "clock") for i, v in enumerate(values)]
            + [Sample("walk_lines", float(PARTITION_LINES), "1", 0, CLOCK_HZ, "config")])


#: The simulated GPU's SM ids are not dense (as %smid need not be): every SM_ID_GAP-th id is missing.  SMs
#: alternate between the two sides by id; an SM on side 1 sees every line's home the other way round.
SM_ID_GAP = 7


def sm_map_walks(lines, sm_ids, sides, seed=0):
    """Each SM's cold misses over the same lines in address order: near-homed for its side or far."""
    rng = np.random.default_rng(seed)
    far = far_homed(np.arange(lines) * 128, PARTITION_INTERLEAVE)
    rows = [np.where(far ^ bool(side), FAR_MISS, NEAR_MISS) + rng.normal(0, 6, lines) + RECORD_COST
            for side in sides]
    return np.round(np.concatenate(rows))


def _l2_sm_map(ctx, sm_stride):
    from gpuatlas.probes.families.geometry.l2_partition import SM_MAP_LINES

    ids = [i for i in range(2 * DEVICE["sm_count"]) if i % SM_ID_GAP != 3][:DEVICE["sm_count"]:int(sm_stride)]
    values = sm_map_walks(SM_MAP_LINES, ids, [i % 2 for i in ids], seed=sm_stride)
    return ([Sample("access", float(v), "cycles", i, CLOCK_HZ, "clock") for i, v in enumerate(values)]
            + [Sample("smid", float(sm), "1", rank, CLOCK_HZ, "config") for rank, sm in enumerate(ids)]
            + [Sample("walk_lines", float(SM_MAP_LINES), "1", 0, CLOCK_HZ, "config")])


#: The simulated constant caches: (capacity bytes, hit cycles) of each level, LRU, and the cycles beyond them.
CONST_LEVELS, CONST_BEYOND = ((2 << 10, 24.0), (32 << 10, 80.0)), 240.0


def _const(ctx, footprint_bytes):
    """A random cycle through more lines than an LRU level holds misses it at every step; the first level
    that holds the footprint serves it."""
    cycles = next((hit for capacity, hit in CONST_LEVELS if footprint_bytes <= capacity), CONST_BEYOND)
    return _samples(cycles, footprint_bytes)


def _l2_persist(ctx, hint):
    """Each round re-reads the hot set after an L2-sized stream: under LRU the stream evicts it (read from HBM)
    unless its lines persist (evict_last: read from the L2); the stream always comes from HBM."""
    from gpuatlas.probes.families.geometry import PERSIST_ROUNDS, persist_hot_bytes

    hot, stream = persist_hot_bytes(DEVICE), DEVICE["l2_bytes"]
    seconds = PERSIST_ROUNDS * (hot / (L2_READ if hint == "evict_last" else HBM_READ) + stream / HBM_READ)
    return ([Sample("seconds", seconds * (1 + 0.001 * r), "s", r, None, "cuda_event") for r in range(5)]
            + [Sample("hot_bytes", float(hot), "B", 0, None, "config"),
               Sample("stream_bytes_per_round", float(stream), "B", 0, None, "config")])


#: probe id -> its fake.
FAKES = {"geometry.l1": _geometry_l1, "geometry.l2_partition": _l2_partition, "geometry.l2_sm_map": _l2_sm_map,
         "geometry.const": _const, "geometry.l2_persist": _l2_persist}
