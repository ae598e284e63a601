"""CUDA C++ kernels: load a ``.cu`` file beside the probes as a CuPy RawModule, or compile it without a GPU.

``compile_cubin`` drives NVRTC directly (no device needed) with the options CuPy's RawModule uses, and every
module a probe loads is built by it into a cubin cache on disk (``cubin_file``), so the register and
shared-memory counts CPU tests assert are the ones the GPU runs, and a run's compile workers can build a
probe's kernels on the CPU before the probe needs them.  ``sass`` disassembles with cuobjdump.
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


class KernelFiles:
    """Where a kernel file is found by its name: the family folders under probes/families, then the kit's own
    folder (names are unique across them, so a name finds one file wherever its family keeps it).
    ``KERNEL_DIR / name`` is that file; a name found nowhere is the kit's path of it, which reads as missing."""

    def __init__(self, kit: Path, families: Path):
        self.kit, self.families = kit, families

    @functools.cached_property
    def folders(self) -> list[Path]:
        """The family folders, then the kit's: walked once (the tree does not change while a process runs)."""
        found = [self.families, *(d for d in sorted(self.families.rglob("*"))
                                  if d.is_dir() and d.name != "__pycache__")]
        return [*found, self.kit]

    def files(self, *suffixes: str) -> list[Path]:
        """Every kernel file (by default every ``.cu`` file), by name."""
        return sorted((p for d in self.folders for p in d.iterdir() if p.suffix in (suffixes or (".cu",))),
                      key=lambda p: p.name)

    def __truediv__(self, name: str) -> Path:
        return next((d / name for d in self.folders if (d / name).is_file()), self.kit / name)


KERNEL_DIR = KernelFiles(Path(__file__).parent, Path(__file__).parent.parent / "families")

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
    """The compiled RawModule for ``filename`` (cached per process), built for ``arch`` (default: the device's
    own ``sm_XY``; ``sm_90a``: the architecture-specific target wgmma and setmaxnreg need) by ``compiled``."""
    return compiled(source(filename), filename, arch)


def compiled(code: str, name: str, arch: str | None = None):
    """A RawModule of ``code`` built by ``compile_source`` (the options CuPy's RawModule uses) for ``arch``, or
    the device's own ``sm_XY``; loaded from the cubin cache, compiled into it on a miss."""
    import cupy

    return cupy.RawModule(path=str(cubin_file(code, name, arch or device_arch())))


def device_arch() -> str:
    """``sm_XY`` of the current device: the target CuPy's RawModule builds for."""
    import cupy

    return f"sm_{cupy.cuda.Device().compute_capability}"


def arch_of(compute_capability: str, specific: bool = False) -> str:
    """``sm_XY`` of a compute capability written ``X.Y`` (run.json's form); ``specific``: its ``sm_XYa``."""
    return f"sm_{compute_capability.replace('.', '')}{'a' if specific else ''}"


#: Where compiled cubins are kept for RawModule to load, each named by a hash of everything it is built from
#: (source, options, target, NVRTC's version): every probe process of every run and a run's compile workers
#: (``gpuatlas.machinery.workers.start_compiles``) share it, and an edit to a kernel makes a new file, never a stale read.
CUBIN_CACHE = Path(tempfile.gettempdir()) / "gpuatlas-cubins"


def cubin_file(code: str, name: str, arch: str) -> Path:
    """The cache file of ``code`` built for ``arch``: compiled and written atomically if missing."""
    from cupy.cuda import nvrtc

    from gpuatlas.analysis.results import atomic_write_bytes

    key = "\0".join([code, name, *compile_options(arch), repr(nvrtc.getVersion())])
    path = CUBIN_CACHE / f"{Path(name).stem}.{arch}.{hashlib.sha256(key.encode()).hexdigest()[:24]}.cubin"
    if not path.exists():
        atomic_write_bytes(path, compile_source(code, name, arch)[0])
    return path


def kernel(filename: str, name: str, arch: str | None = None):
    return module(filename, arch).get_function(name)


def replayed(launches, stream, mode: str):
    """``launches`` itself (``mode`` plain), or (``graph``) a call that replays one CUDA graph captured from a
    call of it on ``stream``: the same kernels, launched by the driver as one submission."""
    if mode == "plain":
        return launches
    if mode != "graph":
        raise ValueError(f"unknown launch mode {mode!r}: plain or graph")
    stream.begin_capture()
    launches()
    graph = stream.end_capture()
    graph.upload(stream)
    return lambda: graph.launch(stream)


def blocks_per_sm(func, threads: int, dynamic_smem: int = 0) -> int:
    """Resident blocks of ``threads`` per SM that the driver grants ``func`` (registers, shared memory)."""
    import cupy

    handle = getattr(func, "kernel", func).ptr  # a RawKernel's CUfunction (or a wrapper's / Function's own)
    blocks = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(handle, threads, dynamic_smem)
    if blocks < 1:
        raise RuntimeError("the driver grants this kernel no resident block per SM")
    return int(blocks)


def compile_options(arch: str) -> list[str]:
    """NVRTC options of every build: the probes' own, CuPy's implicit ones, the target, ptxas's counts."""
    return [*NVRTC_OPTIONS, *CUPY_IMPLICIT_OPTIONS, f"-arch={arch}", "--ptxas-options=-v"]


def compile_cubin(filename: str, arch: str = "sm_90") -> tuple[bytes, str]:
    """Compile ``filename`` for ``arch`` with NVRTC and return ``(cubin, ptxas log)``; needs no GPU."""
    return compile_source(source(filename), filename, arch)


def compile_source(code: str, name: str, arch: str) -> tuple[bytes, str]:
    """Compile CUDA source ``code`` (named ``name`` in messages) for ``arch``: ``(cubin, ptxas log)``."""
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(code, name, [], [])
    try:
        nvrtc.compileProgram(prog, compile_options(arch))
    except nvrtc.NVRTCError:
        raise RuntimeError(f"NVRTC failed on {name}:\n{nvrtc.getProgramLog(prog)}") from None
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
