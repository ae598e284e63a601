"""The measuring kit every family shares: the harness (samples, budgets, timers), the samplers, the chain kit,
the CuPy, Numba, torch and Triton adapters, thread-block clusters, the kit's kernel files (common.cuh with the
timer reads, and the clock, chase and bandwidth kernels the kit itself launches) and the version hasher.

No module of the kit declares a probe or imports a family."""
