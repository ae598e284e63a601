"""The GPU side of gpuatlas: kernels, the harness that times them, and the probe registry.

Importing this package (and any probe module) needs no GPU and no CuPy: kernels are compiled and launched
only inside a probe's function, at run time.
"""
