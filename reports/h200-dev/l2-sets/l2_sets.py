"""Development experiment: how many lines can the L2 hold, seen access by access, with the chain's lines at
random places (a hashed set index then overfills some sets early) and at contiguous places.

One thread per walking SM follows a cyclic chain of 64-bit absolute addresses with L2-only loads
(ld.global.cg).  After each load it stores the value to shared memory and reads %clock, so consecutive clock
reads bracket one access; accesses slower than THRESH cycles (not L2 hits through the near partition) are counted and the first
SCAP recorded (chain position, interval) in shared memory, copied out after the walk.
Two recorded passes follow two warm passes.  Per chain length N: accesses, slow ones by cluster, the distinct
positions slow in both passes (under an LRU-like policy a set holding W+1 of the chain's lines misses those
W+1 lines on every pass), and the walk's mean cycles per access.

Usage (H200, repo root): python3 reports/h200-dev/l2-sets/l2_sets.py $OUT
"""
import json
import sys
import time

import cupy
import numpy as np

SRC = r"""
__device__ __forceinline__ unsigned long long ld_cg(unsigned long long p) {
    unsigned long long next;
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(next) : "l"(p) : "memory");
    return next;
}
__device__ __forceinline__ unsigned int clock_after(unsigned long long p, unsigned int slot) {
    unsigned int t;
    asm volatile("st.shared.u32 [%1], %2;\n\tmov.u32 %0, %%clock;" : "=r"(t) : "r"(slot), "r"((unsigned int)p) : "memory");
    return t;
}
#define SCAP 8000
// Slow accesses are kept in shared memory during the walk (no global store disturbs the L2) and copied out
// after it; `count` is every slow access, the record holds the first SCAP of them.
extern "C" __global__ void slow_record(const unsigned long long* starts, long long warm, long long steps,
                                       unsigned int thresh, int cap, unsigned int* idx, unsigned short* dt,
                                       unsigned long long* out) {
    __shared__ unsigned int s_idx[SCAP];
    __shared__ unsigned short s_dt[SCAP];
    __shared__ unsigned int slot_s[2];
    if (threadIdx.x != 0) return;
    const int b = blockIdx.x;
    unsigned long long p = starts[b];
    for (long long i = 0; i < warm; ++i) p = ld_cg(p);
    const unsigned int slot = (unsigned int)__cvta_generic_to_shared(slot_s);
    long long c0;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c0) :: "memory");
    unsigned int before = clock_after(p, slot);
    int count = 0;
#pragma unroll 1
    for (long long i = 0; i < steps; ++i) {
        p = ld_cg(p);
        const unsigned int after = clock_after(p, slot);
        const unsigned int d = after - before;
        before = after;
        if (d > thresh) {
            if (count < SCAP) { s_idx[count] = (unsigned int)i; s_dt[count] = (unsigned short)min(d, 65535u); }
            ++count;
        }
    }
    long long c1;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c1) :: "memory");
    const int kept = min(count, min(SCAP, cap));
    for (int k = 0; k < kept; ++k) { idx[(long long)b * cap + k] = s_idx[k]; dt[(long long)b * cap + k] = s_dt[k]; }
    out[3 * b] = (unsigned long long)(c1 - c0);
    out[3 * b + 1] = (unsigned long long)count;
    out[3 * b + 2] = p;
}
"""

LINE = 128
THRESH = 480  # cycles: above every L2 hit interval through the near partition (<= 450 here: the interval holds
# the STS, the clock read and the loop), below far-partition hits and misses (>= 500)
REGION = 256 << 20  # random lines are drawn from this many bytes (inside the TLB's measured reach)
CAP = 8000  # slow accesses kept per walker (SCAP in the kernel)
BINS = [480, 500, 530, 560, 600, 650, 700, 800, 1000, 65536]


def main(out_dir):
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    sms, l2 = props["multiProcessorCount"], props["l2CacheSize"]
    mod = cupy.RawModule(code=SRC, options=("-arch=sm_90",))
    k = mod.get_function("slow_record")
    words = cupy.zeros(REGION // 8, dtype=cupy.uint64)
    base = int(words.data.ptr)
    blocks_in_region = REGION // LINE
    rng = np.random.default_rng(7)
    idx = cupy.zeros(sms * CAP, dtype=cupy.uint32)
    dt = cupy.zeros(sms * CAP, dtype=cupy.uint16)
    out = cupy.zeros(3 * sms, dtype=cupy.uint64)
    rows = []
    raw = {}

    def walk(blocks, walkers, whole=False):
        n = len(blocks)
        at = blocks.astype(np.uint64) * np.uint64(LINE)
        words[cupy.asarray((at // 8).astype(np.int64))] = cupy.asarray(np.uint64(base) + np.roll(at, -1))
        seg = n // walkers
        cap = CAP
        starts = np.uint64(base) + at[np.arange(walkers) * seg]
        steps = n if whole else seg  # whole: every walker walks the whole cycle each pass
        # two warm passes of each walker's own stretch: walker w walks positions w*seg .. w*seg+seg-1, then
        # the next stretch; to re-walk its own stretch each pass it restarts from its start (one launch per pass)
        res = []
        for rep in range(4):
            out.fill(0)
            k((walkers,), (32,), (cupy.asarray(starts), np.int64(0), np.int64(steps), np.uint32(THRESH),
                                   np.int32(cap), idx, dt, out))
            o = out.get().reshape(-1, 3)[:walkers]
            want = np.uint64(base) + at[(np.arange(walkers) * seg + steps) % n]
            assert np.array_equal(o[:, 2], want), "sink mismatch"
            if rep >= 2:
                counts = o[:, 1].astype(np.int64)
                ii = idx.get()[:walkers * cap].reshape(walkers, cap)
                dd = dt.get()[:walkers * cap].reshape(walkers, cap)
                pos, dts = [], []
                for w in range(walkers):
                    c = min(int(counts[w]), cap)
                    pos.append(w * seg + ii[w, :c].astype(np.int64))
                    dts.append(dd[w, :c].astype(np.int64))
                res.append((o[:, 0].astype(float) / steps, counts, np.concatenate(pos), np.concatenate(dts)))
        return res, seg * walkers

    sizes = np.unique(np.geomspace(l2 / 64, 1.6 * l2, 30).astype(np.int64) // LINE)
    modes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["one_sm_random", "one_sm_contiguous",
                                                               "every_sm_random", "every_sm_contiguous"]
    for mode in modes:
        walkers = 1 if mode.startswith("one") else sms
        t0 = time.time()
        for n in sizes:
            if mode.startswith("one") and n * 4 * 700 / 1.9e9 > 1.5:
                continue
            if mode.endswith("random"):
                blocks = rng.choice(blocks_in_region, int(n), replace=False).astype(np.int64)
            else:
                blocks = rng.permutation(int(n)).astype(np.int64)
            if mode.startswith("every_sm_all") and n * LINE < l2 / 4:
                continue
            res, walked = walk(blocks, walkers, whole=mode.startswith("every_sm_all"))
            (cyc1, cnt1, pos1, dt1), (cyc2, cnt2, pos2, dt2) = res
            hist = np.histogram(dt1, bins=BINS)[0]
            both = np.intersect1d(pos1, pos2)
            if mode.startswith("every_sm_all"):
                walked = int(n) * walkers
            rows.append(dict(mode=mode, lines=int(n), bytes=int(n) * LINE, walked=int(walked),
                             cycles_per_access=float(np.median(cyc1)), mean_cycles_per_access=float(np.mean(cyc1)),
                             slow1=int(cnt1.sum()), slow2=int(cnt2.sum()), capped=bool((cnt1 > CAP).any()),
                             hist_bins=BINS, hist=hist.tolist(), slow_both_distinct=int(len(both)),
                             slow1_distinct=int(len(np.unique(pos1)))))
            if len(pos1) <= 100000:
                raw[f"{mode}_{n}_pos1"] = pos1.astype(np.int32); raw[f"{mode}_{n}_dt1"] = dt1.astype(np.uint16)
                raw[f"{mode}_{n}_pos2"] = pos2.astype(np.int32); raw[f"{mode}_{n}_dt2"] = dt2.astype(np.uint16)
            print(json.dumps(rows[-1]), flush=True)
        print(mode, "took", round(time.time() - t0, 1), "s", flush=True)
    json.dump(dict(l2_bytes=l2, sms=sms, thresh=THRESH, region=REGION, rows=rows), open(f"{out_dir}/l2_sets.json", "w"),
              indent=1)
    np.savez_compressed(f"{out_dir}/l2_sets_raw.npz", **raw)


if __name__ == "__main__":
    main(sys.argv[1])
