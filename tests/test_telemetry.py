"""NVML telemetry: the reader against a scripted fake pynvml, the window join, the reason flags, and schema-1
runs still loading."""
import math
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpuatlas.analysis.results import TELEMETRY_COLUMNS, load_run
from gpuatlas.machinery import runner
from gpuatlas.machinery import workers
from gpuatlas.probes.kit import telemetry
from gpuatlas.probes.kit.harness import Sample

REPO = Path(__file__).resolve().parents[1]
META = {"run_id": "r", "gpu": "g"}


def fake_pynvml(readings, instant=True, event_reasons=True):
    """A pynvml whose successive reads return ``readings`` = [(power mW, SM MHz, reasons, temp C), ...]."""
    state = {"i": -1}
    module = types.ModuleType("pynvml")
    module.NVML_SUCCESS, module.NVML_CLOCK_SM, module.NVML_TEMPERATURE_GPU = 0, 1, 0
    module.NVML_FI_DEV_POWER_INSTANT = 186
    module.nvmlInit = lambda: None
    module.nvmlDeviceGetHandleByIndex = lambda index: "handle"

    def by_uuid(uuid):
        if not uuid:
            raise ValueError("NVML_ERROR_INVALID_ARGUMENT")
        return "handle"

    module.nvmlDeviceGetHandleByUUID = by_uuid
    module.nvmlDeviceGetCount = lambda: 1

    def current():
        return readings[min(max(state["i"], 0), len(readings) - 1)]

    def power_usage(handle):
        state["i"] += 1
        return current()[0]

    def field_values(handle, fields):
        assert fields == [186]
        if not instant:
            return [types.SimpleNamespace(nvmlReturn=3, value=types.SimpleNamespace(uiVal=0))]
        state["i"] += 1
        return [types.SimpleNamespace(nvmlReturn=0, value=types.SimpleNamespace(uiVal=current()[0]))]

    module.nvmlDeviceGetPowerUsage = power_usage
    module.nvmlDeviceGetFieldValues = field_values
    module.nvmlDeviceGetClockInfo = lambda handle, clock: current()[1]
    module.nvmlDeviceGetTemperature = lambda handle, sensor: current()[3]
    reasons = lambda handle: current()[2]  # noqa: E731
    if event_reasons:
        module.nvmlDeviceGetCurrentClocksEventReasons = reasons
    else:
        module.nvmlDeviceGetCurrentClocksThrottleReasons = reasons
    return module


@pytest.mark.parametrize("instant", [True, False])
@pytest.mark.parametrize("event_reasons", [True, False])
def test_the_reader_decodes_nvml_units(monkeypatch, instant, event_reasons):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([(650_000, 1755, 0x4, 61)] * 3, instant, event_reasons))
    read = telemetry._nvml_reader(None)
    assert read() == (650.0, 1755e6, 0x4, 61.0)


def test_without_a_known_uuid_only_a_lone_gpu_is_read(monkeypatch):
    module = fake_pynvml([(650_000, 1755, 0x4, 61)])
    monkeypatch.setitem(sys.modules, "pynvml", module)
    assert telemetry._nvml_reader("GPU-a") is not None and telemetry._nvml_reader(None) is not None
    module.nvmlDeviceGetCount = lambda: 2
    assert telemetry._nvml_reader(None) is None and telemetry._nvml_reader("GPU-a") is not None


def test_no_nvml_records_nothing(monkeypatch):
    module = types.ModuleType("pynvml")

    def init():
        raise RuntimeError("NVML Shared Library Not Found")

    module.nvmlInit = init
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(telemetry, "_RECORDER", None)
    rec = telemetry.recorder()
    assert not rec.active and rec.thread is None
    samples = [Sample("x", 1.0, "s", 0, None, "t", created=1.0)]
    rows = workers.samples_frame(META, "p", {}, samples, rec, 0.0)
    assert math.isnan(rows["power_w"].iat[0]) and rows["clock_event_reasons"].iat[0] == 0
    assert rows["telemetry"].iat[0] == ""


@pytest.mark.parametrize("mask, flags", [(0x0, ""), (0x1, ""), (0x4, "power_capped"), (0x80, "power_capped"),
                                         (0x20, "thermal"), (0x40, "thermal"), (0x24, "power_capped+thermal"),
                                         (0x8 | 0x100, "")])
def test_reason_flags(mask, flags):
    assert telemetry.reason_flags(mask) == flags


def scripted_recorder(rows):
    rec = telemetry.Recorder(read=lambda: None, poll=False)
    rec.rows = list(rows)
    return rec


def test_each_sample_gets_the_readings_since_the_previous_one():
    # Readings every 10 ms: 100 W idle until t=1.00, then 600-700 W capped, then one thermal reading.
    readings = [(1.00, 100.0, 1.98e9, 0x1, 40.0), (1.01, 600.0, 1.80e9, 0x4, 50.0), (1.02, 700.0, 1.70e9, 0x4, 55.0),
                (1.03, 650.0, 1.75e9, 0x0, 56.0), (1.04, 500.0, 1.50e9, 0x20, 80.0)]
    rec = scripted_recorder(readings)
    # Two samples made together at 1.025 (a rate and its per-clock form), one at 1.045; config started at 1.005.
    samples = [Sample("rate", 1.0, "1/s", 0, None, "t", created=1.025),
               Sample("per_clk", 1.0, "1", 0, None, "t", created=1.025 + 1e-6),
               Sample("rate", 1.0, "1/s", 1, None, "t", created=1.045)]
    rows = workers.samples_frame(META, "p", {"n": 1}, samples, rec, 1.005)
    first, second = rows.iloc[0], rows.iloc[2]
    assert first["power_w"] == pytest.approx(650.0) and first["power_max_w"] == 700.0
    assert first["nvml_sm_clock_hz"] == pytest.approx(1.75e9) and first["clock_event_reasons"] == 0x4
    assert first["temperature_c"] == 55.0 and first["telemetry"] == "power_capped"
    shared = [c for c in TELEMETRY_COLUMNS if c != "elapsed_s"]
    assert rows.iloc[1][shared].tolist() == first[shared].tolist()
    assert rows["elapsed_s"].tolist() == pytest.approx([0.02, 0.02, 0.04], abs=1e-5)
    # The second window (1.025, 1.045] holds the last two readings only: the idle one is not in it.
    assert second["power_w"] == pytest.approx(575.0) and second["clock_event_reasons"] == 0x20
    assert second["telemetry"] == "thermal" and second["temperature_c"] == 80.0
    assert rows["clock_event_reasons"].dtype == np.int64
    assert "flag" in rows and set(rows["flag"]) == {""}, "telemetry never goes into the fit's flag column"


def test_a_window_without_a_reading_takes_the_last_recent_one():
    rec = scripted_recorder([(1.00, 300.0, 1.9e9, 0x4, 50.0)])
    near, far = rec.windows([(1.001, 1.002), (1.5, 1.6)])
    assert near["power_w"] == 300.0 and near["telemetry"] == "power_capped"
    assert math.isnan(far["power_w"]) and far["telemetry"] == ""


def test_the_polling_recorder_records_the_scripted_device(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([(90_000, 1980, 0x1, 35)] * 4 + [(700_000, 1740, 0x4, 70)]))
    rec = telemetry.Recorder(telemetry._nvml_reader("GPU-x"), poll_s=0.001)
    try:
        deadline = __import__("time").monotonic() + 5
        while len(rec.readings()) < 4 and __import__("time").monotonic() < deadline:
            rec.stopped.wait(0.01)
    finally:
        rec.stopped.set()
    data = rec.readings()
    assert len(data) >= 3 and data[-1, 1] == 700.0 and rec.idle_power_w() == 90.0


def test_a_schema_1_run_still_loads_with_empty_telemetry():
    meta, measurements = load_run(REPO / "tests" / "fixtures" / "schema1-run")
    assert meta["schema_version"] == 1
    assert set(TELEMETRY_COLUMNS) <= set(measurements.columns)
    assert measurements["power_w"].isna().all() and (measurements["clock_event_reasons"] == 0).all()
    assert (measurements["telemetry"] == "").all()
    from gpuatlas.analysis.report_figures import figure_specs
    from gpuatlas.analysis.telemetry import FIGURES, has_telemetry

    assert not has_telemetry(measurements)
    assert not set(FIGURES) & set(figure_specs(measurements))


def test_a_run_records_telemetry_columns(tmp_path):
    from fakes import DEVICE, simulated_probes

    probes = [p for p in simulated_probes() if p.id == "launch.overhead"]
    run, meta = runner.new_run(tmp_path, DEVICE, {"python": "3"}, probes, "quick", {}, 0, ["gpuatlas", "run"])
    runner.execute(run, meta, probes, isolate=False)
    _, measurements = load_run(run.path)
    assert set(TELEMETRY_COLUMNS) <= set(measurements.columns)
    assert pd.api.types.is_integer_dtype(measurements["clock_event_reasons"])


def test_the_report_draws_the_strip_and_the_trace_with_the_flags_marked():
    from gpuatlas.analysis.figure_job import draw_figures
    from gpuatlas.analysis.telemetry import FIGURES as TELEMETRY_FIGURES
    from gpuatlas.analysis.telemetry import SLOT_FILL, clock_power_strip, power_trace, traces

    rows = []
    for probe in ("bw.dram", "compute.wgmma"):
        for i in range(6):
            capped = probe == "compute.wgmma" and i >= 3
            rows.append({"probe": probe, "config": "dtype=e4m3,n=256", "metric": "throughput", "value": 1.0,
                         "repeat": i, "power_w": 690.0 if capped else 300.0, "power_max_w": 700.0,
                         "nvml_sm_clock_hz": 1.7e9 if capped else 1.98e9, "clock_event_reasons": 4 if capped else 0,
                         "temperature_c": 60.0, "telemetry": "power_capped" if capped else "", "elapsed_s": 0.1 * i})
    for i in range(5):
        for metric, value in (("trace_t_s", 0.01 * i), ("trace_power_w", 600.0 + 20 * i),
                              ("trace_sm_clock_hz", 1.9e9 - 3e7 * i), ("trace_clock_event_reasons", 4 * (i > 1))):
            rows.append({"probe": "compute.wgmma", "config": "dtype=e4m3,n=256", "metric": metric, "value": value,
                         "repeat": i, "power_w": np.nan, "elapsed_s": np.nan, "telemetry": ""})
    frame = pd.DataFrame(rows)
    ax = clock_power_strip(frame)
    labels = [label.get_text() for label in ax.figure.axes[1].get_xticklabels()]
    assert labels == ["bw.dram (0.5 s)", "compute.wgmma (0.5 s)"], "one slot per probe, its time under its name"

    def capped_at(ax):
        (marked,) = [line for line in ax.get_lines() if line.get_label().startswith("power capped")]
        return list(marked.get_xdata())

    def slot(i, t):  # sample time t of the probe in slot i, whose last sample is at 0.5 s
        return i + (1 - SLOT_FILL) / 2 + SLOT_FILL * t / 0.5

    assert capped_at(ax) == pytest.approx([slot(1, t) for t in (0.3, 0.4, 0.5)]), "only wgmma's capped samples"
    in_run_order = clock_power_strip(frame, ["compute.wgmma", "clock.sm", "bw.dram"])
    assert capped_at(in_run_order) == pytest.approx([slot(0, t) for t in (0.3, 0.4, 0.5)])
    points = [line for line in ax.get_lines() if line.get_marker() == "." and len(line.get_xdata())]
    assert sorted(points[0].get_ydata()) == [300.0] * 9 + [690.0] * 3
    [trace] = traces(frame).values()
    assert trace["power_w"].tolist() == [600.0, 620.0, 640.0, 660.0, 680.0]
    assert power_trace(frame) is not None
    drawn = [spec.stem for spec, _ in draw_figures({"device": {}}, frame, pd.DataFrame(), TELEMETRY_FIGURES)]
    assert drawn == ["clock-power", "power-trace"]
    assert not list(draw_figures({"device": {}}, frame[~frame["metric"].str.startswith("trace_")], pd.DataFrame(),
                                 TELEMETRY_FIGURES[1:])), "no trace, no trace figure"


def test_the_strip_bins_a_long_probe_and_keeps_each_bins_extremes():
    """600 samples in one probe become at most STRIP_BINS points; a lone clock dip survives as its bin's min
    (a median alone would hide it)."""
    from gpuatlas.analysis.telemetry import STRIP_BINS, _binned, _samples

    n = 600
    clock = np.full(n, 1.98e9)
    clock[301] = 0.5e9
    frame = pd.DataFrame({"probe": "p", "metric": "m", "power_w": 300.0, "power_max_w": 310.0,
                          "nvml_sm_clock_hz": clock, "telemetry": "", "elapsed_s": np.arange(1, n + 1) / n})
    binned = _binned(_samples(frame), ["p"])
    assert len(binned) == STRIP_BINS and binned["clock_ghz"].min() == pytest.approx(1.98)
    assert binned["clock_ghz_min"].min() == pytest.approx(0.5) and (binned["clock_ghz_max"] == 1.98).all()
