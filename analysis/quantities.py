"""The vocabulary of derived quantities: stable dotted ids, their units and what they mean.

derived.csv rows use these ids and nothing else; a probe issue that adds a quantity adds it here first.
"""
from __future__ import annotations

QUANTITIES: dict[str, tuple[str, str]] = {
    "clock.sm_hz": ("Hz", "effective SM clock with every SM busy (clock64 cycles per globaltimer second)"),
    "launch.overhead_s": ("s", "GPU time per launch of an empty kernel, back-to-back plain launches"),
    "launch.graph_overhead_s": ("s", "GPU time per empty kernel replayed from a CUDA graph"),
    "smem.latency_cycles": ("cycles", "shared-memory load-to-use latency"),
    "smem.index_latency_cycles": ("cycles", "one step of a shared-memory chase that computes each address from the "
                                            "loaded index (IMAD, LEA, LDS), as published chases do"),
    "l1.latency_cycles": ("cycles", "L1 hit load-to-use latency (dependent 64-bit loads)"),
    "l1.capacity_bytes": ("B", "L1 capacity seen by global loads"),
    "l1.line_bytes": ("B", "L1 line size: the tag's span, from the L1 capacity counted in distinct lines (the "
                           "capacity knee stays put for chase strides up to the line and moves with the stride "
                           "beyond it)"),
    "l1.line_lower_bound_bytes": ("B", "largest chase stride whose L1 capacity knee still equals the small-stride "
                                       "knee, when no measured stride moved it: the L1 line is at least this"),
    "l1.sector_bytes": ("B", "L1 sector: the smallest block the L1 fills per miss"),
    "l1.fill_bytes": ("B", "block the L1 fills per miss: address-order chase through L1, chain beyond L1 inside L2"),
    "l2.latency_cycles": ("cycles", "L2 hit latency, near partition"),
    "l2.far_latency_cycles": ("cycles", "L2 hit latency, far partition (accesses timed one by one and clustered)"),
    "l2.far_plateau_cycles": ("cycles", "one SM's chase past one L2 partition, where the published staircases show a "
                                        "plateau: far-partition hits mixed with misses, an average of both"),
    "l2.capacity_bytes": ("B", "L2 capacity C of a miss model fitted to every SM's read bandwidth (a footprint F "
                               "keeps min(1, C/F) of itself resident)"),
    "l2.capacity_chase_bytes": ("B", "L2 capacity as the knee of an L2-only pointer chase run from every SM at once "
                                     "(both partitions): the capacity a chase over the whole GPU can use"),
    "l2.capacity_chase_all_readers_bytes": ("B", "L2 capacity as the knee of the every-SM L2-only chase after every SM "
                                                 "walked the whole chain (every line read from both partitions)"),
    "l2.line_bytes": ("B", "L2 line size: the tag's span, from the L2-only chase's capacity counted in distinct "
                           "lines"),
    "l2.line_lower_bound_bytes": ("B", "largest L2-only chase stride whose capacity knee still equals the "
                                       "small-stride knee, when no measured stride moved it"),
    "l2.sector_bytes": ("B", "L2 sector: the smallest block the L2 moves per access, the best-fitting block of "
                             "the L2-level stride bandwidth sweep's useful/moved ratio"),
    "l2.dram_fetch_bytes": ("B", "block the L2 fetches from HBM per miss: address-order L2-only chase, chain "
                                 "beyond the L2"),
    "l2.partition_bytes": ("B", "capacity of one L2 partition as seen from one SM"),
    "l2.far_reach_bytes": ("B", "footprint where one SM's dependent chase turns from far-partition L2 hits to HBM "
                                "misses: the L2 as one SM sees it"),
    "dram.near_latency_cycles": ("cycles", "HBM miss latency of an address the SM's near L2 partition homes "
                                           "(the faster of one SM's two miss clusters)"),
    "dram.far_latency_cycles": ("cycles", "HBM miss latency of an address the far L2 partition homes (the "
                                          "slower miss cluster: the crossing to the far partition and back added)"),
    "dram.latency_cycles": ("cycles", "device-memory (HBM) load-to-use latency of a plain dependent load that misses "
                                      "the L2, inside the TLBs' reach"),
    "dram.latency_ns": ("s", "the same HBM latency in seconds (globaltimer)"),
    "dram.latency_tlb_miss_cycles": ("cycles", "HBM latency of a dependent load whose page translation misses the "
                                               "TLBs too (footprints past their reach)"),
    "dram.latency_tlb_miss_ns": ("s", "the same TLB-missing HBM latency in seconds (globaltimer)"),
    "dram.latency_cg_cycles": ("cycles", "HBM latency of a dependent L2-only load (ld.global.cg) that misses the L2, "
                                         "inside the TLBs' reach"),
    "tlb.l1.reach_bytes": ("B", "footprint up to which the first TLB level holds every page's translation"),
    "tlb.l1.miss_cycles": ("cycles", "latency added when the first TLB level misses"),
    "tlb.l2.reach_bytes": ("B", "footprint up to which the second TLB level holds every translation"),
    "tlb.l2.miss_cycles": ("cycles", "latency added when the second TLB level misses too"),
    "tlb.reach_lower_bound_bytes": ("B", "largest page-stride footprint measured when no TLB step was seen"),
    "tlb.page_bytes": ("B", "page (translation granule) size: the largest block whose TLB knee does not move"),
    "coalescing.efficiency_stride32_fp32": ("1", "useful/moved bytes for fp32 at element stride 32"),
    "coalescing.efficiency_stride2_fp32": ("1", "useful/moved bytes for fp32 at element stride 2"),
    "coalescing.efficiency_misaligned_fp32": ("1", "useful/moved bytes for consecutive fp32 one element off a "
                                                   "128-byte boundary"),
    "coalescing.efficiency_stride64_fp16": ("1", "useful/moved bytes for fp16 at element stride 64"),
    "smem.banks": ("1", "number of shared-memory banks"),
    "smem.bank_width_bytes": ("B", "width of one shared-memory bank"),
    "smem.conflict_cycles_per_way": ("cycles", "extra cycles per extra way of bank conflict"),
    "smem.conflict_cycles_per_way_throughput": ("cycles", "extra cycles of the SM's shared-memory pipeline per "
                                                "extra way (independent loads from several warps)"),
    "smem.column_read_recovery": ("1", "useful bandwidth of a fp16 column read staged through a shared tile "
                                       "over the direct read (lecture exercise 3)"),
    "smem.bandwidth_bytes_per_clk_sm": ("B/cycle", "shared-memory bandwidth per SM"),
    "l1.bandwidth_bytes_per_clk_sm": ("B/cycle", "L1 bandwidth per SM"),
    "l2.bandwidth_bytes_per_s": ("B/s", "L2 bandwidth"),
    "dram.read_bandwidth_bytes_per_s": ("B/s", "device-memory read bandwidth"),
    "dram.write_bandwidth_bytes_per_s": ("B/s", "device-memory write bandwidth"),
    "dram.read_bandwidth_large_footprint_bytes_per_s": ("B/s", "device-memory read bandwidth re-reading the largest "
                                                               "footprint of the footprint sweep (several GiB)"),
    "dram.copy_bandwidth_bytes_per_s": ("B/s", "device-memory copy bandwidth, bytes read plus written"),
    "coalescing.block_bytes": ("B", "bytes moved per block touched, the block size whose byte accounting best "
                                    "predicts the HBM stride sweep"),
    "dram.read_bytes_per_clk_sm": ("B/cycle", "one SM's fair share of HBM read bandwidth: bandwidth / (SMs x "
                                              "measured SM clock)"),
    "littles.bytes_in_flight": ("B", "bytes in flight needed to saturate device memory"),
    "occupancy.warps_to_saturate_dram_ilp1": ("1", "resident warps per SM to saturate HBM, one load each"),
    "littles.loaded_latency_s": ("s", "HBM latency under load: the Little's-law fit of bandwidth against loads "
                                      "in flight"),
    "littles.loaded_latency_cycles": ("cycles", "HBM latency under load in SM cycles (fit x measured clock)"),
    "littles.peak_bandwidth_bytes_per_s": ("B/s", "HBM read plateau of the Little's-law fit"),
    "occupancy.warps_to_saturate_dram_ilp1_16b": ("1", "resident warps per SM to saturate HBM, one 16-byte-per-"
                                                       "lane load each"),
    "littles.l2_bytes_in_flight": ("B", "bytes in flight needed to saturate L2 reads"),
    "littles.l2_loaded_latency_s": ("s", "L2 latency under load: the Little's-law fit of L2 bandwidth"),
    "occupancy.full_occupancy_dram_bandwidth_bytes_per_s": ("B/s", "HBM read bandwidth at the largest residency "
                                                                   "with ILP >= 4"),
    "occupancy.full_occupancy_fraction_of_dram_read": ("1", "that bandwidth over the bandwidth probe's HBM read "
                                                            "bandwidth"),
    "fp32.peak_flops": ("FLOP/s", "FP32 FMA peak"),
    "fp64.peak_flops": ("FLOP/s", "FP64 FMA peak"),
    "fp16.peak_flops": ("FLOP/s", "FP16x2 (HFMA2) peak"),
    "fp32.latency_cycles": ("cycles", "dependent FP32 FMA latency"),
    "tc.bf16.peak_flops": ("FLOP/s", "dense BF16 tensor-core peak (wgmma): the burst rate, a short launch from "
                                     "a rested GPU"),
    "tc.fp16.peak_flops": ("FLOP/s", "dense FP16 tensor-core peak (wgmma): the burst rate, a short launch from "
                                     "a rested GPU"),
    "tc.tf32.peak_flops": ("FLOP/s", "dense TF32 tensor-core peak (wgmma): the burst rate, a short launch from "
                                     "a rested GPU"),
    "tc.fp8.peak_flops": ("FLOP/s", "dense FP8 E4M3 tensor-core peak (wgmma): the burst rate, a short launch "
                                    "from a rested GPU"),
    "tc.bf16.sustained_flops": ("FLOP/s", "dense BF16 wgmma rate held over a second of back-to-back launches "
                                          "(the clock the power limit allows)"),
    "tc.fp16.sustained_flops": ("FLOP/s", "dense FP16 wgmma rate held over a second of back-to-back launches "
                                          "(the clock the power limit allows)"),
    "tc.tf32.sustained_flops": ("FLOP/s", "dense TF32 wgmma rate held over a second of back-to-back launches "
                                          "(the clock the power limit allows)"),
    "tc.fp8.sustained_flops": ("FLOP/s", "dense FP8 E4M3 wgmma rate held over a second of back-to-back "
                                         "launches (the clock the power limit allows)"),
    "tc.bf16.mma_sync_peak_flops": ("FLOP/s", "dense BF16 tensor-core peak through mma.sync"),
    "tc.fp16.mma_sync_peak_flops": ("FLOP/s", "dense FP16 tensor-core peak through mma.sync"),
    "tc.tf32.mma_sync_peak_flops": ("FLOP/s", "dense TF32 tensor-core peak through mma.sync"),
    "tc.fp8.mma_sync_peak_flops": ("FLOP/s", "dense FP8 E4M3 peak through mma.sync (m16n8k32; SASS shows how the "
                                             "GPU runs it)"),
    "int32.peak_ops": ("op/s", "INT32 multiply-add (IMAD) peak, an IMAD counted as 2 integer ops"),
    "fp32.flop_per_clk_sm": ("FLOP/cycle", "FP32 FMA FLOP per clock per SM (2 x the FMA lanes)"),
    "tc.bf16.flop_per_clk_sm": ("FLOP/cycle", "dense BF16 wgmma FLOP per clock per SM"),
    "tc.fp16.flop_per_clk_sm": ("FLOP/cycle", "dense FP16 wgmma FLOP per clock per SM"),
    "tc.tf32.flop_per_clk_sm": ("FLOP/cycle", "dense TF32 wgmma FLOP per clock per SM"),
    "tc.fp8.flop_per_clk_sm": ("FLOP/cycle", "dense FP8 E4M3 wgmma FLOP per clock per SM"),
    "tc.bf16_over_fp32": ("1", "dense BF16 tensor-core peak (wgmma) over the FP32 FMA peak"),
    "tc.bf16.ss_flop_per_clk_sm": ("FLOP/cycle", "dense BF16 wgmma m64n256k16 FLOP per clock per SM, A and B "
                                                 "from shared memory (SS)"),
    "tc.bf16.rs_flop_per_clk_sm": ("FLOP/cycle", "dense BF16 wgmma m64n256k16 FLOP per clock per SM, A from "
                                                 "registers (RS)"),
    "tc.bf16.rs_over_ss": ("1", "BF16 wgmma width with A from registers over A from shared memory (m64n256k16)"),
    "tc.bf16.sparse_flop_per_clk_sm": ("FLOP/cycle", "2:4 sparse BF16 wgmma (m64n256k32) FLOP per clock per SM, "
                                                     "counted dense-equivalent (2 x 64 x 256 x 32 a wgmma)"),
    "tc.int8.ops_per_clk_sm": ("op/cycle", "dense INT8 wgmma (s8 x s8 -> s32) integer ops per clock per SM, a "
                                           "multiply-add counted as 2"),
    "tc.fp64.flop_per_clk_sm": ("FLOP/cycle", "FP64 tensor (DMMA) FLOP per clock per SM: the faster mma.sync f64 "
                                              "shape"),
    "tc.fp64.m8n8k4_flop_per_clk_sm": ("FLOP/cycle", "FP64 mma.sync m8n8k4 (DMMA) FLOP per clock per SM"),
    "tc.fp64.m16n8k16_flop_per_clk_sm": ("FLOP/cycle", "FP64 mma.sync m16n8k16 (DMMA) FLOP per clock per SM"),
    "matmul.cublas_bf16_flops": ("FLOP/s", "cuBLAS (torch.matmul) BF16 matmul throughput, 8192^3"),
    "matmul.triton_bf16_flops": ("FLOP/s", "Triton tl.dot BF16 matmul throughput, 8192^3, best of a few configs"),
    "roofline.tiled_fraction_of_peak": ("1", "best square-tile Triton matmul (BLOCK 128-256) over the BF16 peak"),
    "matmul.lecture_tile_bf16_flops": ("FLOP/s", "Triton BF16 matmul in the lecture's BLOCK 256 x 256 tiles with "
                                                 "BLOCK_K 64, 4096^3"),
    "roofline.lecture_tile_fraction_of_peak": ("1", "the lecture-tile matmul over the BF16 burst peak"),
    "decode.m1_bandwidth_bytes_per_s": ("B/s", "bytes a batch-1 decode GEMM (1 x 4096 by 4096 x N bf16, weights "
                                               "past the L2) moves per second"),
    "decode.m16_flop_per_hbm_byte": ("1", "FLOP/s of the batch-16 decode GEMM over the HBM read bandwidth: the "
                                          "intensity it attains against HBM"),
    "launch.chain_490_s": ("s", "GPU time of 490 small kernels launched back to back (a decode step's dispatch)"),
    "launch.chain_490_graph_s": ("s", "GPU time of the same 490 kernels replayed as one CUDA graph"),
    "waves.programs_per_wave": ("1", "programs of a BLOCK 128 matmul that run at once (a wave): the step size of "
                                     "its time against the program count"),
    "matmul.naive_seconds": ("s", "time of the lecture's naive matmul (one thread per output, no tiling), 4096^3 "
                                  "bf16"),
    "fusion.softmax_speedup": ("1", "three unfused softmax kernels' time over one fused kernel's time, 4096 x 4096 bf16"),
    "dsmem.latency_cycles": ("cycles", "load-to-use latency of another cluster block's shared memory (distributed "
                                       "shared memory, mapa + generic load over the SM-to-SM network), pooled over "
                                       "cluster sizes"),
    "dsmem.self_latency_cycles": ("cycles", "the same generic-address chase through the block's own shared memory"),
    "dsmem.bandwidth_bytes_per_s": ("B/s", "distributed shared-memory read bandwidth, every block of a full grid "
                                           "reading another cluster block's shared memory"),
    "dsmem.bandwidth_bytes_per_clk_sm": ("B/cycle", "distributed shared-memory read bandwidth per SM per clock"),
    "tma.latency_cycles": ("cycles", "one TMA bulk copy (cp.async.bulk, smallest size) from L2, issue to mbarrier "
                                     "completion"),
    "tma.tensor_latency_cycles": ("cycles", "one TMA 2-D box copy (cp.async.bulk.tensor, smallest box) from L2, "
                                            "issue to mbarrier completion"),
    "tma.dram_latency_cycles": ("cycles", "one TMA bulk copy (smallest size) from HBM, issue to mbarrier completion"),
    "tma.bandwidth_bytes_per_s": ("B/s", "HBM -> shared memory by TMA bulk copies (best chunk size)"),
    "tma.l2_bandwidth_bytes_per_s": ("B/s", "L2 -> shared memory by TMA bulk copies (best chunk size)"),
    "cp_async.bandwidth_bytes_per_s": ("B/s", "HBM -> shared memory by Ampere cp.async (16 B per thread)"),
    "cp_async.l2_bandwidth_bytes_per_s": ("B/s", "L2 -> shared memory by Ampere cp.async (16 B per thread)"),
    "ldg_smem.bandwidth_bytes_per_s": ("B/s", "HBM -> shared memory by plain 16-byte loads through registers"),
    "ldg_smem.l2_bandwidth_bytes_per_s": ("B/s", "L2 -> shared memory by plain 16-byte loads through registers"),
    "dpx.viaddmax_latency_cycles": ("cycles", "dependent __viaddmax_s32 (VIADDMNMX) latency"),
    "dpx.viaddmax_emulated_latency_cycles": ("cycles", "dependent max(a + b, c) latency without DPX (IMAD + VIMNMX)"),
    "dpx.vimax3_latency_cycles": ("cycles", "dependent __vimax3_s32 (VIMNMX3) latency"),
    "dpx.viaddmax_ops_per_clk_sm": ("1/cycle", "__viaddmax_s32 operations per clock per SM"),
    "dpx.viaddmax_emulated_ops_per_clk_sm": ("1/cycle", "max(a + b, c) without DPX, operations per clock per SM"),
    "dpx.vimax3_ops_per_clk_sm": ("1/cycle", "__vimax3_s32 operations per clock per SM"),
    "dpx.viaddmax_speedup": ("1", "throughput of DPX max(a + b, c) over its two-instruction emulation"),
    "dpx.viaddmax_latency_speedup": ("1", "latency of the two-instruction emulation over DPX's"),
    "nvlink.links": ("1", "active NVLinks of a GPU (NVML), median over the GPUs of the run"),
    "nvlink.version": ("1", "NVLink generation the links run (NVML)"),
    "nvlink.link_bandwidth_bytes_per_s": ("B/s", "speed of one NVLink as NVML reports it (its common link speed)"),
    "nvlink.pair_bandwidth_bytes_per_s": ("B/s", "NVLink rate between two GPUs one way as NVML rates it: the "
                                                 "links their traffic can use x the per-link speed, median over "
                                                 "pairs"),
    "p2p.read_fraction_of_nvlink": ("1", "peer-read bandwidth of a kernel over the pair's NVML link rate, median "
                                         "over GPU pairs"),
    "p2p.memcpy_bandwidth_bytes_per_s": ("B/s", "cudaMemcpyPeerAsync bandwidth one way, largest message, median "
                                                "over GPU pairs"),
    "p2p.memcpy_bidirectional_bandwidth_bytes_per_s": ("B/s", "cudaMemcpyPeerAsync both ways at once (bytes of "
                                                              "both directions), median over GPU pairs"),
    "p2p.read_bandwidth_bytes_per_s": ("B/s", "a kernel's 16-byte loads from a peer GPU's memory through a peer "
                                              "pointer, median over GPU pairs"),
    "p2p.write_bandwidth_bytes_per_s": ("B/s", "a kernel's 16-byte stores into a peer GPU's memory, median over "
                                               "GPU pairs"),
    "p2p.latency_cycles": ("cycles", "dependent load from a peer GPU's HBM (chain of 4x L2), link both ways "
                                     "included, in the issuing GPU's cycles"),
    "p2p.latency_ns": ("s", "the same remote latency in seconds (globaltimer)"),
    "p2p.l2_latency_cycles": ("cycles", "dependent load that hits the peer GPU's L2 (a chain of L2/4, walked "
                                        "once before timing)"),
    "nccl.all_reduce_busbw_bytes_per_s": ("B/s", "NCCL all-reduce bus bandwidth (nccl-tests busbw: algbw x "
                                                 "2(n-1)/n), largest message, NVLS off"),
    "nccl.all_gather_busbw_bytes_per_s": ("B/s", "NCCL all-gather bus bandwidth (algbw x (n-1)/n), largest "
                                                 "message, NVLS off"),
    "nccl.reduce_scatter_busbw_bytes_per_s": ("B/s", "NCCL reduce-scatter bus bandwidth (algbw x (n-1)/n), "
                                                     "largest message, NVLS off"),
    "nccl.broadcast_busbw_bytes_per_s": ("B/s", "NCCL broadcast bus bandwidth (algbw x 1), largest message, "
                                                "NVLS off"),
    "sm.schedulers": ("1", "warp schedulers per SM: FFMA issue's plateau over one warp's rate, with enough ILP "
                           "that a warp issues whenever its scheduler can"),
    "sm.issue_per_clk_per_scheduler": ("1/cycle", "warp instructions each scheduler issues per clock (the plateau over "
                                                  "the schedulers)"),
    "divergence.throughput_fraction_32way": ("1", "useful FFMA throughput of warps split 32 ways over branches over "
                                                  "unsplit warps'"),
    "l1.ways": ("1", "L1 associativity: lines a chain confined to one set (a power-of-two stride of the set span or "
                     "more) holds before its first miss"),
    "l1.sets": ("1", "L1 sets: the capacity in lines over the ways (the stride where the lines held stop falling, "
                     "over the line)"),
    "l1.set_pattern_departures": ("1", "strides whose lines held before the first L1 miss depart from max(ways, "
                                       "capacity/stride): nonzero where the set index is hashed"),
    "l1.replacement_miss_fraction": ("1", "miss fraction of a cyclic walk of ways+1 lines in one L1 set (1 under "
                                          "LRU or FIFO, far below under random replacement); the verdict in the note"),
    "l1.capacity_bytes_at_carveout": ("B", "L1 capacity beside the most dynamic shared memory measured; the note "
                                           "lists the capacity at each shared allocation (the carve-out table)"),
    "l2.partition_interleave_bytes": ("B", "granularity of the L2 partitions' address interleave: the largest "
                                           "aligned power-of-two block whose lines one partition homes, from one "
                                           "SM's near- and far-homed miss latencies in address order"),
    "l2.far_home_fraction": ("1", "share of lines in an address-order walk that the SM's far L2 partition homes"),
    "l2.ways": ("1", "L2 ways per partition (hashed index): associativity fitted to the hit fraction of chains at "
                     "random places under a balls-into-bins LRU model"),
    "l2.sets": ("1", "L2 sets per partition (hashed index): sets fitted to the hit fraction of chains at random places "
                     "under a balls-into-bins LRU model"),
    "l2.capacity_every_sm_bytes": ("B", "lines the L2 keeps when every SM walks its own stretch of one chain: the "
                                        "half-hit footprint of a steady-state chase, contiguous lines"),
    "l2.sm_sides": ("1", "groups of SMs that see the same lines as near-homed in their cold L2-only misses (each "
                         "group is a side of the GPU, nearest one L2 partition)"),
    "l2.sm_side_fraction": ("1", "share of SMs on the side of the lowest-numbered SM"),
    "l2.sm_map_consistency": ("1", "median over SMs of the share of lines on which an SM's near/far map agrees with "
                                   "its side's (1: every SM sees exactly its side's map)"),
    "const.l1.latency_cycles": ("cycles", "constant-cache (first level) hit latency: dependent LDC loads"),
    "const.l1.capacity_bytes": ("B", "capacity of the first constant-cache level (the staircase's first knee)"),
    "const.l15.latency_cycles": ("cycles", "latency of the level behind the constant L1 (the L1.5 constant cache when "
                                           "the 64 KiB constant space fits it)"),
    "const.l15.capacity_bytes": ("B", "capacity of the level behind the constant L1 (the staircase's second knee)"),
    "l2.persisting_speedup": ("1", "time of a launch re-reading a hot set between L2-sized streams, normal over "
                                   "persisting (evict_last) L2 priority for the hot set"),
    "l1.shared_trade_ratio": ("1", "L1 capacity lost per byte of shared memory allocated (1 when the two are one "
                                   "array carved up by configuration)"),
    "l1.unified_bytes": ("B", "L1 capacity plus the shared memory allocated beside it, the largest over the "
                              "allocations: a lower bound on the unified L1/shared array"),
    "readonly.latency_cycles": ("cycles", "load-to-use latency of a dependent ld.global.nc (the read-only path "
                                          "__ldg takes) over a chain the first-level cache holds"),
    "readonly.l2_latency_cycles": ("cycles", "the same ld.global.nc chase at a footprint of L2/8: an L2 hit"),
    "readonly.dram_latency_cycles": ("cycles", "the same ld.global.nc chase at 4x the L2: an HBM miss"),
    "readonly.capacity_bytes": ("B", "footprint where the ld.global.nc chase leaves its first-level cache (the "
                                     "staircase's first knee)"),
    "readonly.capacity_ratio": ("1", "the ld.global.nc chase's first knee over the plain ld.global chase's"),
    "readonly.shared_capacity_ratio": ("1", "first knee of a chase alternating plain and nc loads over the plain "
                                            "chase's: 1 when one array sits behind both paths, 2 for two separate "
                                            "arrays of the plain path's size"),
    "readonly.l1_shared": ("1", "1 when the read-only path shares the L1's capacity (shared_capacity_ratio nearer "
                                "1 than 2, geometrically), else 0"),
    "readonly.l1_bandwidth_bytes_per_clk_sm": ("B/cycle", "bytes per clock per SM of every SM re-reading an "
                                                          "L1-resident region with ld.global.nc.v4"),
    "readonly.l1_bandwidth_ratio": ("1", "ld.global.nc.v4 over ld.global.v4 read bandwidth, L1-resident regions"),
    "readonly.l2_bandwidth_ratio": ("1", "ld.global.nc.v4 over ld.global.v4 read bandwidth, an L2-resident region "
                                         "read by every SM"),
    "readonly.tex_latency_cycles": ("cycles", "load-to-use latency of a dependent tex1Dfetch (TLD through a texture "
                                              "object) over a chain of texel indices the first-level cache holds"),
    "readonly.tex_capacity_bytes": ("B", "footprint where the texture chase leaves its first-level cache (the "
                                         "staircase's first knee)"),
    "readonly.tex_l2_latency_cycles": ("cycles", "the texture chase at a footprint of L2/8: an L2 hit"),
    "l1.store_reload_cycles": ("cycles", "cycles per step of an L1-resident chase that stores each loaded word back "
                                         "into its line: the cost of loading a line the thread last wrote"),
    "l1.keeps_stored_lines": ("1", "1 when a line the thread stored into still hits the L1 (store_reload_cycles "
                                   "nearer the L1 hit than the L2 hit, geometrically), 0 when the store left the "
                                   "L1 without it (write-through, evicting or not updating)"),
    "l2.written_hit_fraction": ("1", "how far the first L2-only read of lines just written goes from HBM-miss cost "
                                     "(0) to L2-hit cost (1): (cold - first) / (cold - second read) cycles"),
    "l2.write_allocates": ("1", "1 when the L2 keeps the lines a kernel writes (written_hit_fraction above 1/2)"),
    "dram.partial_write_sector_bytes_per_s": ("B/s", "32-byte sectors per second (times 32 B) that 4-byte stores "
                                                     "of one word per sector write to HBM"),
    "dram.partial_write_useful_bytes_per_s": ("B/s", "useful bytes per second of 4-byte stores, one word per "
                                                     "32-byte sector, over HBM"),
    "dram.partial_write_sector_ratio": ("1", "sectors per second of one-word-per-sector stores over those of "
                                             "stores that fill whole sectors: 1 for byte-masked writes, about 1/2 "
                                             "when each sector is read and written back"),
    "dram.partial_write_rmw": ("1", "1 when a partial-sector write costs a read-modify-write at the HBM "
                                    "(partial_write_sector_ratio below 1/sqrt(2)), else 0"),
    "icache.l0.cycles_per_instruction": ("cycles", "cycles per instruction of one warp looping over independent FFMAs "
                                                   "that fit the first instruction-cache level (its issue rate)"),
    "icache.l0.capacity_bytes": ("B", "loop size where one warp's cycles per instruction first step up: the first "
                                      "instruction-cache level's capacity"),
    "icache.l0.miss_cycles_per_instruction": ("cycles", "cycles per instruction added once the loop outgrows the "
                                                        "first instruction-cache level (fetched from the next)"),
    "icache.l1.capacity_bytes": ("B", "loop size of the second step: the second instruction-cache level's capacity"),
    "icache.l1.miss_cycles_per_instruction": ("cycles", "cycles per instruction added once the loop outgrows the "
                                                        "second level too (fetched from beyond it)"),
}
#: The instruction table (probes.execution, analysis.execution.OPS): each op's dependent-chain latency and its
#: full-SM throughput in thread instructions per clock per SM.
_INST_OPS = ("fadd", "fmul", "ffma", "hadd2", "hmul2", "hfma2", "hfma2_bf16", "dadd", "dmul", "dfma", "iadd3", "imad",
             "imad_wide", "lop3", "shf", "imnmx", "popc", "flo", "brev", "add64", "mul64", "mufu_ex2", "mufu_lg2",
             "mufu_rcp", "mufu_rsq", "mufu_sin", "mufu_cos", "mufu_sqrt", "f2f_f32_f16", "f2f_f32_bf16",
             "f2f_f16_f32", "f2i", "i2f", "shfl_idx", "shfl_up", "shfl_down", "shfl_bfly", "vote", "redux", "match",
             "lds", "ldg", "sts")
for _dtype, _shape in (("bf16", "m16n8k16"), ("fp16", "m16n8k16"), ("tf32", "m16n8k8"), ("int8", "m16n8k32"),
                       ("fp64", "m8n8k4")):
    QUANTITIES[f"tc.{_dtype}.mma_sync_latency_cycles"] = ("cycles", f"mma.sync {_shape} {_dtype} latency: one "
                                                                    "warp's dependent accumulator chain")
for _type in ("i32", "f32", "f64"):
    QUANTITIES[f"atomic.global.add_{_type}_latency_cycles"] = ("cycles", f"global atom.add.{_type} latency: one "
                                                                         "thread's chain, each add's operand the "
                                                                         "previous one's return, one address")
    for _mode, _what in (("same", "every thread of a full grid on one address"),
                         ("warp", "one address per warp (32 threads adding to it)"),
                         ("distinct", "every thread on its own address")):
        QUANTITIES[f"atomic.global.add_{_type}_ops_per_s_{_mode}"] = ("1/s", f"global red.add.{_type} per second, "
                                                                             f"{_what}")
for _type, _how in (("i32", "ATOMS.ADD"), ("f32", "a compare-and-swap loop on sm_90: LDS, FADD, ATOMS.CAST.SPIN")):
    QUANTITIES[f"atomic.shared.add_{_type}_latency_cycles"] = ("cycles", f"shared atom.add.{_type} ({_how}) latency: "
                                                                         "one thread's chain, each add's operand "
                                                                         "the previous one's return, one word")
    for _mode, _what in (("same", "every thread of one full block on one word"),
                         ("warp", "one word per warp (32 threads adding to it)"),
                         ("distinct", "every thread on its own word, no bank conflict")):
        QUANTITIES[f"atomic.shared.add_{_type}_ops_per_clk_sm_{_mode}"] = (
            "1/cycle", f"shared red.add.{_type} ({_how}) per clock of one SM, {_what}")
QUANTITIES.update({
    "sync.named_barrier_cycles_one_warp": ("cycles", "one bar.sync 1, 32 (a named barrier of one warp) in a loop"),
    "sync.named_barrier_cycles_all_warps": ("cycles", "one bar.sync 1, count of every warp of the largest block"),
    "sync.named_barrier_cycles_16_ids": ("cycles", "one bar.sync id, blockDim / 16 with the largest block's warps "
                                                   "split over 16 barrier ids at once"),
    "sync.fence_none_cycles": ("cycles", "one volatile global store of one thread's loop, no fence (the fences' "
                                         "baseline)"),
    "sync.fence_cta_cycles": ("cycles", "one volatile global store + __threadfence_block (MEMBAR.SC.CTA)"),
    "sync.fence_gpu_cycles": ("cycles", "one volatile global store + __threadfence (MEMBAR.SC.GPU)"),
    "sync.fence_sys_cycles": ("cycles", "one volatile global store + __threadfence_system (MEMBAR.SC.SYS)"),
    "sync.grid_sync_cycles_one_block_per_sm": ("cycles", "one grid-wide barrier of a cooperative launch, one block "
                                                         "per SM"),
    "sync.grid_sync_cycles_full": ("cycles", "one grid-wide barrier of a cooperative launch, as many blocks per SM "
                                             "as the SM holds"),
    "sync.mbarrier_cycles_one_warp": ("cycles", "one mbarrier phase (arrive + try_wait.parity) of a one-warp block"),
    "sync.mbarrier_cycles_all_warps": ("cycles", "one mbarrier phase (arrive + try_wait.parity) of the largest "
                                                 "block"),
})
for _dtype, _k in (("bf16", 16), ("fp16", 16), ("tf32", 8), ("fp8", 32)):
    for _n in (64, 256):
        QUANTITIES[f"tc.{_dtype}.wgmma_latency_cycles_n{_n}"] = ("cycles", f"wgmma m64n{_n}k{_k} {_dtype} latency: "
                                                                           "one warpgroup's dependent accumulator "
                                                                           "chain, each step waited for")
for _size in (2, 4, 8, 16):
    QUANTITIES[f"sync.cluster_barrier_cycles_c{_size}"] = ("cycles", "one barrier.cluster.arrive + wait of a "
                                                                     f"cluster of {_size} blocks")
    QUANTITIES[f"sync.cluster_barrier_relaxed_cycles_c{_size}"] = ("cycles", "one barrier.cluster.arrive.relaxed + "
                                                                             f"wait of a cluster of {_size} blocks "
                                                                             "(no release fence)")
QUANTITIES["sync.syncthreads_cycles_one_warp"] = ("cycles", "one __syncthreads (BAR.SYNC) of a one-warp block")
QUANTITIES["sync.syncthreads_cycles"] = ("cycles", "one __syncthreads (BAR.SYNC) of the largest block")
for _op in _INST_OPS:
    if _op != "sts":
        QUANTITIES[f"inst.{_op}.latency_cycles"] = ("cycles", f"dependent-chain latency of {_op} (one thread's "
                                                              "chain, per instruction)")
    QUANTITIES[f"inst.{_op}.ops_per_clk_sm"] = ("1/cycle", f"{_op} thread instructions per clock per SM, every SM "
                                                           "full of independent chains")


def derived_row(quantity: str, value, low, high, method: str, probe: str, note: str = "") -> dict:
    """One derived.csv row; the unit comes from the vocabulary, so a quantity outside it is an error."""
    return {"quantity": quantity, "value": float(value), "unit": QUANTITIES[quantity][0], "ci_low": float(low),
            "ci_high": float(high), "method": method, "probe": probe, "note": note}
