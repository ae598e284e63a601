"""run.json's software record: the CUDA runtime, driver and NVRTC that CuPy loaded (NVRTC compiles every kernel,
so two runs whose NVRTCs differ can differ in what the compiler decides), read through CuPy (faked here)."""
import sys
import types

from gpuatlas.machinery.device import software_versions


def test_the_record_names_cupys_runtime_driver_and_nvrtc(monkeypatch):
    runtime = types.SimpleNamespace(runtimeGetVersion=lambda: 12090, driverGetVersion=lambda: 13000)
    cuda = types.SimpleNamespace(runtime=runtime, nvrtc=types.SimpleNamespace(getVersion=lambda: (12, 6)))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    found = software_versions()
    assert (found["cuda_runtime"], found["cuda_driver"], found["nvrtc"]) == (12090, 13000, "12.6")


def test_without_cupy_the_record_holds_no_cuda_versions(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    found = software_versions()
    assert "python" in found and not {"cuda_runtime", "cuda_driver", "nvrtc"} & set(found)
