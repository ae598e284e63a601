"""A probe body for tests/test_quiet_run.py, imported by the probe's child process."""
import warnings

import fakes


def one_block_launch(ctx, **params):
    """Configure the one-block launch a latency probe makes (Numba warns when a launch is configured, so no
    GPU is needed), fail if Numba warned, then measure as the simulated clock.sm does."""
    from numba import cuda

    @cuda.jit
    def kernel(a):
        a[0] = 1

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel[1, 1]
    if caught:
        raise RuntimeError(f"Numba warned: {caught[0].message}")
    return fakes.FAKES["clock.sm"](ctx, **params)
