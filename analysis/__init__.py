"""The analysis side of gpuatlas: results contract, fits, derived quantities, comparison and reports.

Nothing here imports CuPy or needs a GPU.
"""
