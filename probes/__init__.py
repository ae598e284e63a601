"""The GPU side of gpuatlas: the probe families (probes/families), the measuring kit they share (probes/kit)
and the probe registry.

Importing this package (and any probe module) needs no GPU and no CuPy: kernels are compiled and launched
only inside a probe's function, at run time.
"""
