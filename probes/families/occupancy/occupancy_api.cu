// A register-hungry kernel: compiled under several --maxrregcount caps it uses that many registers, so
// CUDA's occupancy API can be asked about a spread of register counts.  Never launched for its result.
extern "C" __global__ void hungry(float* data, int rounds) {
    float acc[160];
#pragma unroll
    for (int i = 0; i < 160; ++i) acc[i] = data[threadIdx.x + i];
    for (int r = 0; r < rounds; ++r) {
#pragma unroll
        for (int i = 0; i < 160; ++i) acc[i] = acc[i] * acc[(i + 7) % 160] + 1.0f;
    }
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 160; ++i) sum += acc[i];
    data[threadIdx.x] = sum;
}
