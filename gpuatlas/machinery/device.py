"""Device properties and software versions, as recorded in run.json.

Everything here is read from the driver (CUDA runtime through CuPy, and NVML where it answers); nothing is
looked up by GPU name.  Keys are SI: bytes, Hz, bits.
"""
from __future__ import annotations

import importlib.metadata
import platform

from gpuatlas.analysis.errors import UsageError


def require_gpu():
    """Import CuPy and check that a CUDA device answers; raise a one-line ``UsageError`` otherwise."""
    try:
        import cupy
    except ImportError:
        raise UsageError("CuPy is not installed, so no probe can run: install the GPU extra with "
                         "`pip install -e '.[gpu]'` (then `gpuatlas doctor`)") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError without a driver, or with one older than the runtime
        if not _driver_version(cupy):
            raise UsageError("no NVIDIA driver on this machine, so no probe can run: run on a machine with an "
                             "NVIDIA GPU and its driver (`gpuatlas doctor` checks one)") from None
        raise UsageError(f"no CUDA GPU is reachable ({_first_line(exc)}): run `gpuatlas doctor` on a "
                         "machine with an NVIDIA GPU and driver") from None
    if count == 0:
        raise UsageError("no CUDA GPU is reachable (0 devices): run `gpuatlas doctor` for details")
    return cupy


def _driver_version(cupy) -> int:
    """The CUDA version the installed driver supports (e.g. 13000), 0 where no driver is installed."""
    try:
        return int(cupy.cuda.runtime.driverGetVersion())
    except Exception:
        return 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__


def device_properties(index: int = 0) -> dict:
    cupy = require_gpu()
    rt = cupy.cuda.runtime
    props = rt.getDeviceProperties(index)

    def attr(name: str):
        try:
            return int(rt.deviceGetAttribute(getattr(rt, name), index))
        except Exception:
            return None

    def text(value) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    def prop(key: str, attribute: str | None = None) -> int | None:
        """A property from cudaDeviceProp, else from cudaDeviceGetAttribute (CUDA 13 dropped some)."""
        if key in props:
            return int(props[key])
        return attr(attribute) if attribute else None

    clock_khz = attr("cudaDevAttrClockRate")
    mem_clock_khz = attr("cudaDevAttrMemoryClockRate")
    device = {
        "index": index,
        "name": text(props["name"]),
        "uuid": _uuid(props.get("uuid")),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sm_count": prop("multiProcessorCount", "cudaDevAttrMultiProcessorCount"),
        "l2_bytes": prop("l2CacheSize", "cudaDevAttrL2CacheSize"),
        "persisting_l2_max_bytes": prop("persistingL2CacheMaxSize", "cudaDevAttrMaxPersistingL2CacheSize"),
        "smem_per_sm_bytes": prop("sharedMemPerMultiprocessor", "cudaDevAttrMaxSharedMemoryPerMultiprocessor"),
        "smem_per_block_bytes": prop("sharedMemPerBlock", "cudaDevAttrMaxSharedMemoryPerBlock"),
        "smem_per_block_optin_bytes": prop("sharedMemPerBlockOptin", "cudaDevAttrMaxSharedMemoryPerBlockOptin"),
        "regs_per_sm": prop("regsPerMultiprocessor", "cudaDevAttrMaxRegistersPerMultiprocessor"),
        "regs_per_block": prop("regsPerBlock", "cudaDevAttrMaxRegistersPerBlock"),
        "max_threads_per_sm": prop("maxThreadsPerMultiProcessor", "cudaDevAttrMaxThreadsPerMultiProcessor"),
        "max_threads_per_block": prop("maxThreadsPerBlock", "cudaDevAttrMaxThreadsPerBlock"),
        "max_blocks_per_sm": prop("maxBlocksPerMultiProcessor", "cudaDevAttrMaxBlocksPerMultiprocessor"),
        "warp_size": prop("warpSize", "cudaDevAttrWarpSize"),
        "total_memory_bytes": prop("totalGlobalMem"),
        "memory_bus_bits": prop("memoryBusWidth", "cudaDevAttrGlobalMemoryBusWidth"),
        "sm_clock_max_hz": clock_khz * 1000 if clock_khz else None,
        "memory_clock_hz": mem_clock_khz * 1000 if mem_clock_khz else None,
        "ecc": bool(props.get("ECCEnabled", 0)),
        "pci_bus_id": f"{props.get('pciDomainID', 0):04x}:{props.get('pciBusID', 0):02x}:"
                      f"{props.get('pciDeviceID', 0):02x}",
    }
    device["gpu_count"] = int(rt.getDeviceCount())  # GPUs this run sees (CUDA_VISIBLE_DEVICES applied)
    if not _whole(device["uuid"]):
        device["uuid"] = _nvml_uuid(device["pci_bus_id"]) or device["uuid"]
    device.update(_nvml_facts(device["uuid"]))
    return device


def _uuid(raw) -> str | None:
    """The UUID as nvidia-smi prints it, from cudaDeviceProp's 16 bytes.  CuPy hands them over as a C string,
    cut at the first zero byte: such a UUID comes out short (``_whole`` says so) and NVML completes it."""
    if raw is None:
        return None
    data = bytes(raw) if not isinstance(raw, (bytes, str)) else raw
    if isinstance(data, str):
        return data
    h = data.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _whole(uuid: str | None) -> bool:
    return bool(uuid) and len(uuid) == len("GPU-") + 36


def _nvml_uuid(pci_bus_id: str) -> str | None:
    """The board's UUID from NVML, found by its PCI bus id (domain:bus:device, as cudaDeviceProp gives it)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return _decode(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByPciBusId(f"{pci_bus_id}.0")))
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def _nvml_facts(uuid: str | None) -> dict:
    """Clocks and power limits from NVML, found by UUID (NVML ignores CUDA_VISIBLE_DEVICES, so an index
    could name another board); empty where NVML does not answer (not an error)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return {}
    facts = {}
    try:
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:
            return {}
        reads = {
            "sm_clock_max_hz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM) * 1e6,
            "memory_clock_hz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM) * 1e6,
            "sm_clock_at_start_hz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM) * 1e6,
            "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000,
            "driver": lambda: _decode(pynvml.nvmlSystemGetDriverVersion()),
        }
        for key, read in reads.items():
            try:
                facts[key] = read()
            except Exception:
                pass
    finally:
        pynvml.nvmlShutdown()
    return facts


def _decode(value):
    return value.decode() if isinstance(value, bytes) else value


def software_versions() -> dict:
    versions = {"python": platform.python_version()}
    for dist in ("numpy", "pandas", "cupy-cuda13x", "cupy-cuda12x", "numba", "numba-cuda", "triton",
                 "nvidia-ml-py", "torch"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        import cupy

        versions["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        versions["cuda_driver"] = cupy.cuda.runtime.driverGetVersion()
        versions["nvrtc"] = "%d.%d" % cupy.cuda.nvrtc.getVersion()  # the compiler of every CuPy kernel
    except Exception:
        pass
    return versions
