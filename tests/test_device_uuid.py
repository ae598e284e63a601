"""The board's UUID in run.json: whole even where CuPy cut cudaDeviceProp's 16 bytes at a zero byte."""
import sys
import types

import pytest

from gpuatlas.machinery import device

#: A UUID with a zero byte in its ninth place, as a board of the panel has: CuPy hands over the bytes before it.
WHOLE = "GPU-2cf37f14-4405-ac65-4900-fe34c2ec0462"
RAW = bytes.fromhex(WHOLE[4:].replace("-", ""))


def fake_cupy(uuid_bytes):
    props = {"name": b"Fake GPU", "uuid": uuid_bytes, "major": 9, "minor": 0, "pciDomainID": 0, "pciBusID": 0,
             "pciDeviceID": 6, "totalGlobalMem": 1 << 30}
    runtime = types.SimpleNamespace(getDeviceProperties=lambda i: props, getDeviceCount=lambda: 1,
                                    deviceGetAttribute=lambda a, i: 1)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


def fake_nvml(boards):
    """NVML that knows ``boards`` (PCI bus id -> UUID) and answers nothing else."""
    def by_bus(bus_id):
        if bus_id not in boards:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return bus_id

    def by_uuid(uuid):
        if uuid not in boards.values():
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        raise RuntimeError("no facts in this fake")

    return types.SimpleNamespace(nvmlInit=lambda: None, nvmlShutdown=lambda: None,
                                 nvmlDeviceGetHandleByPciBusId=by_bus, nvmlDeviceGetUUID=lambda h: boards[h].encode(),
                                 nvmlDeviceGetHandleByUUID=by_uuid)


@pytest.mark.parametrize("raw", [RAW, RAW[:RAW.index(0)]], ids=["whole bytes", "cut at the zero byte"])
def test_the_uuid_is_whole_whether_or_not_cupy_cut_it(monkeypatch, raw):
    monkeypatch.setattr(device, "require_gpu", lambda: fake_cupy(raw))
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml({"0000:00:06.0": WHOLE}))
    assert device.device_properties()["uuid"] == WHOLE


def test_a_cut_uuid_that_nvml_cannot_complete_stays_as_read(monkeypatch):
    """Negative control: without NVML's answer the short form is kept (and visibly short), never invented."""
    cut = RAW[:RAW.index(0)]
    monkeypatch.setattr(device, "require_gpu", lambda: fake_cupy(cut))
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml({}))
    uuid = device.device_properties()["uuid"]
    assert uuid.startswith(WHOLE[:25]) and len(uuid) < len(WHOLE)
