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
//
//   fill_uniform:     the matrix, element i = k / 1024 with k the top 10 bits of a 32-bit hash of i ^ key
//                     (uniform on [0, 1) and exact in fp16), so no library generator is compiled at run time
//                     and the host recomputes any element it checks.
//   column_reference: one thread per column sums it from the top in fp64 (exact for these values): the
//                     answer the two kernels' partial sums are checked against.
// fp16 elements travel as their 16-bit patterns (no cuda_fp16.h: the compile-only path has no CUDA headers).
constexpr int TILE = 32, ROWS = 8, PER_THREAD = TILE / ROWS;

__device__ __forceinline__ float half_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ unsigned short float_to_half(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// Chris Wellons' lowbias32 integer hash (a bijection of 32-bit words); column_read.py has its twin.
__device__ __forceinline__ unsigned int lowbias32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

extern "C" __global__ void fill_uniform(unsigned short* a, unsigned long long count, unsigned int key) {
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
        a[i] = float_to_half((float)(lowbias32((unsigned int)i ^ key) >> 22) * (1.0f / 1024.0f));
}

extern "C" __global__ void column_reference(const unsigned short* a, int n, double* sums) {
    const int column = blockIdx.x * blockDim.x + threadIdx.x;
    if (column >= n) return;
    double sum = 0.0;
#pragma unroll 8
    for (int r = 0; r < n; ++r) sum += half_to_float(a[(size_t)r * n + column]);
    sums[column] = sum;
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
