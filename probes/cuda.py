"""CUDA C++ kernels: load a ``.cu`` file beside the probes as a CuPy RawModule, or compile it without a GPU.

``compile_cubin`` drives NVRTC directly (no device needed) with the options CuPy uses, so the register and
shared-memory counts CPU tests assert are the ones the GPU runs.  ``sass`` disassembles with cuobjdump.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

KERNEL_DIR = Path(__file__).parent
#: Options shared by the GPU path (RawModule) and the compile-only path, so both build the same code.
NVRTC_OPTIONS = ("-std=c++17",)
#: What CuPy adds to every RawModule compile; the compile-only path adds them to match its resource use.
CUPY_IMPLICIT_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")


_INCLUDE = re.compile(r'^[ \t]*#include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)


def source(filename: str) -> str:
    """The text of a kernel file with its local ``#include "..."`` headers inlined (each once), so NVRTC needs
    no include path and CuPy's compile cache keys on everything the kernels are built from."""
    return _inline(filename, set())


def _inline(filename: str, seen: set) -> str:
    seen.add(filename)
    text = (KERNEL_DIR / filename).read_text()
    return _INCLUDE.sub(lambda m: "" if m.group(1) in seen else _inline(m.group(1), seen), text)


@functools.lru_cache(maxsize=None)
def module(filename: str, arch: str | None = None):
    """The compiled RawModule for ``filename`` (cached per process).

    Without ``arch`` CuPy compiles for the device's own compute capability.  With one (``sm_90a``: the
    architecture-specific target wgmma and setmaxnreg need, which CuPy's RawModule cannot request) the
    cubin is built by ``compile_cubin`` -- the same NVRTC options -- and loaded as is."""
    import cupy

    if arch is None:
        return cupy.RawModule(code=source(filename), options=NVRTC_OPTIONS)
    return cupy.RawModule(path=str(cached_cubin(filename, arch, compile_cubin(filename, arch)[0])))


#: Where architecture-specific cubins are kept for RawModule to load: one file per content, so every probe
#: process of every run reuses it and nothing accumulates.
CUBIN_CACHE = Path(tempfile.gettempdir()) / "gpuatlas-cubins"


def cached_cubin(filename: str, arch: str, cubin: bytes) -> Path:
    """The cache file holding ``cubin`` (named by its content's hash), written atomically if missing."""
    from analysis.results import atomic_write_bytes

    path = CUBIN_CACHE / f"{Path(filename).stem}.{arch}.{hashlib.sha256(cubin).hexdigest()[:16]}.cubin"
    if not path.exists():
        atomic_write_bytes(path, cubin)
    return path


def kernel(filename: str, name: str, arch: str | None = None):
    return module(filename, arch).get_function(name)


def blocks_per_sm(func, threads: int, dynamic_smem: int = 0) -> int:
    """Resident blocks of ``threads`` per SM that the driver grants ``func`` (registers, shared memory)."""
    import cupy

    handle = getattr(func, "kernel", func).ptr  # a RawKernel's CUfunction (or a wrapper's / Function's own)
    blocks = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(handle, threads, dynamic_smem)
    if blocks < 1:
        raise RuntimeError("the driver grants this kernel no resident block per SM")
    return int(blocks)


def compile_cubin(filename: str, arch: str = "sm_90") -> tuple[bytes, str]:
    """Compile ``filename`` for ``arch`` with NVRTC and return ``(cubin, ptxas log)``; needs no GPU."""
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(source(filename), filename, [], [])
    options = [*NVRTC_OPTIONS, *CUPY_IMPLICIT_OPTIONS, f"-arch={arch}", "--ptxas-options=-v"]
    try:
        nvrtc.compileProgram(prog, options)
    except nvrtc.NVRTCError:
        raise RuntimeError(f"NVRTC failed on {filename}:\n{nvrtc.getProgramLog(prog)}") from None
    # CuPy's getCUBIN drops the cubin's last byte (a NUL); put it back so the ELF is whole.
    return nvrtc.getCUBIN(prog) + b"\0", nvrtc.getProgramLog(prog)


def resource_usage(log: str) -> dict[str, dict]:
    """Per-kernel registers, stack, spills and shared memory from a ptxas ``-v`` log."""
    usage: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = re.search(r"(?:Compiling entry function|Function properties for) '?(\w+)'?", line)
        if m:
            current = usage.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        for key, pattern in (("registers", r"Used (\d+) registers"), ("stack_bytes", r"(\d+) bytes stack"),
                             ("spill_stores", r"(\d+) bytes spill stores"),
                             ("spill_loads", r"(\d+) bytes spill loads"), ("smem_bytes", r"(\d+) bytes smem")):
            m = re.search(pattern, line)
            if m:
                current[key] = int(m.group(1))
    return usage


def tool_path(name: str) -> str | None:
    """A CUDA tool (cuobjdump, nvdisasm, ptxas) from the NVIDIA wheels of the test extra, else from PATH."""
    try:
        import nvidia.cu13

        candidate = Path(nvidia.cu13.__path__[0]) / "bin" / name
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    return shutil.which(name)


def _run_tool(name: str, *args: str) -> str:
    tool = tool_path(name)
    if tool is None:
        raise RuntimeError(f"{name} not found: install the test extra (pip install -e '.[test]')")
    env = dict(os.environ, PATH=f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([tool, *args], capture_output=True, text=True, check=True, env=env).stdout


def ptx_to_cubin(ptx: str, arch: str = "sm_90") -> tuple[bytes, str]:
    """Assemble PTX (e.g. Numba's) with ptxas; returns ``(cubin, ptxas -v log)``."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        tool = tool_path("ptxas")
        if tool is None:
            raise RuntimeError("ptxas not found: install the test extra (pip install -e '.[test]')")
        done = subprocess.run([tool, f"-arch={arch}", "-v", str(src), "-o", str(dst)], capture_output=True,
                              text=True, check=True)
        return dst.read_bytes(), done.stdout + done.stderr


def sass(cubin: bytes) -> dict[str, str]:
    """SASS per kernel (mangled names as the ELF has them) of a cubin."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = _run_tool("cuobjdump", "--dump-sass", f.name)
    lines: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            current = lines[m.group(1)] = []
        elif current is not None:
            current.append(line + "\n")
    return {name: "".join(body) for name, body in lines.items()}
