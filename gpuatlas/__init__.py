"""gpuatlas: reconstruct a GPU's hardware from measurements (the command line lives in gpuatlas.cli)."""

__version__ = "0.1.0"
