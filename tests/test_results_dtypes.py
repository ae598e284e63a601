"""Probe parameters read back as what they are: a byte count is an integer, even where the merged file
stores it as float because other probes' rows leave it empty."""
import numpy as np
import pandas as pd

from gpuatlas.analysis.results import MEASUREMENT_COLUMNS, RunDir


def rows(probe: str, **params) -> pd.DataFrame:
    base = {c: "" for c in MEASUREMENT_COLUMNS} | {"probe": probe, "value": 1.0, "repeat": 0, "sm_clock_hz": 1e9}
    return pd.DataFrame([{**base, **params}])


def test_integer_parameters_stay_integers_and_fractional_ones_stay_float(tmp_path):
    merged = pd.concat([rows("chase.latency", footprint_bytes=4096, stride_bytes=128),
                        rows("other", footprint_bytes=3 * 2**30, load_fraction=0.5),
                        rows("third", mode="x")], ignore_index=True)
    assert merged["footprint_bytes"].dtype == np.float64, "the merge itself turns a partial column to float"
    run = RunDir(tmp_path)
    merged.to_parquet(run.measurements_path, index=False)
    read = run.read_measurements()
    assert str(read["footprint_bytes"].dtype) == "Int64" and str(read["stride_bytes"].dtype) == "Int64"
    assert read["footprint_bytes"].tolist()[:2] == [4096, 3 * 2**30] and pd.isna(read["footprint_bytes"][2])
    assert read["load_fraction"].dtype == np.float64, "a parameter with a fraction is not rounded"
    assert read["value"].dtype == np.float64 and read["sm_clock_hz"].dtype == np.float64
    table = read.groupby(["probe", "footprint_bytes"])["value"].median().to_string()
    assert "4096" in table and "4096.0" not in table
