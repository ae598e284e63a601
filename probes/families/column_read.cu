// The lecture's exercise 3: read a row-major n x n fp16 matrix column by column -- here, sum every column.
// A block of 32 x 8 threads owns 32 adjacent columns and one split of the rows (rows_per_split, a multiple
// of 32); each warp owns 4 of the block's columns (y, y + 8, y + 16, y + 24) and writes their sums over the
// split to partial[split * n + column], which the host adds up and checks.
//
//   column_direct: lane x reads row r + x of its column straight from global memory, so one warp-wide load
//                  spans 32 rows, 2n bytes apart: 32 different lines for 64 useful bytes.
//   column_staged: the block first loads a 32 x 32 tile row by row (a warp reads one row's 32 halves, 64
//                  contiguous bytes), stores it in shared memory, and then each warp reads its columns out
//                  of the tile.  The tile's rows are padded to 34 halves (17 words), so the 32 lanes of a
//                  column read fall in 32 different banks.
// fp16 elements travel as their 16-bit patterns (no cuda_fp16.h: the compile-only path has no CUDA headers).
constexpr int TILE = 32, ROWS = 8, PER_THREAD = TILE / ROWS;

__device__ __forceinline__ float half_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ void write_sums(const float* acc, int n, float* partial) {
#pragma unroll
    for (int j = 0; j < PER_THREAD; ++j) {
        const float sum = warp_sum(acc[j]);
        if (threadIdx.x == 0) partial[(size_t)blockIdx.y * n + blockIdx.x * TILE + threadIdx.y + ROWS * j] = sum;
    }
}

extern "C" __global__ void column_direct(const unsigned short* a, int n, int rows_per_split, float* partial) {
    const int row0 = blockIdx.y * rows_per_split;
    float acc[PER_THREAD] = {};
    for (int r = row0; r < row0 + rows_per_split; r += TILE) {
        const unsigned short* row = a + (size_t)(r + threadIdx.x) * n + blockIdx.x * TILE + threadIdx.y;
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j) acc[j] += half_to_float(row[ROWS * j]);
    }
    write_sums(acc, n, partial);
}

extern "C" __global__ void column_staged(const unsigned short* a, int n, int rows_per_split, float* partial) {
    __shared__ unsigned short tile[TILE][TILE + 2];
    const int row0 = blockIdx.y * rows_per_split;
    float acc[PER_THREAD] = {};
    for (int r = row0; r < row0 + rows_per_split; r += TILE) {
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j) {
            const int y = threadIdx.y + ROWS * j;
            tile[y][threadIdx.x] = a[(size_t)(r + y) * n + blockIdx.x * TILE + threadIdx.x];
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < PER_THREAD; ++j) acc[j] += half_to_float(tile[threadIdx.x][threadIdx.y + ROWS * j]);
        __syncthreads();
    }
    write_sums(acc, n, partial);
}
