"""NVRTC of any CUDA version, loaded from its own library file through ctypes.

Run as ``python tests/nvrtc_lib.py LIBNVRTC KERNEL_FILE ARCH OUT_DIR``, it builds one kernel file with the
options of every build and writes ``OUT_DIR/{cubin,log,version}``.  A process of its own, because once a
``libnvrtc.so.12`` is loaded, CuPy (through cuda-pathfinder) takes it for its own NVRTC if it has not loaded
one yet, and because NVRTC 12.4 leaves its thread in the C locale.
"""
from __future__ import annotations

import ctypes
import functools
import sys
from pathlib import Path


class NVRTC:
    """One NVRTC library: its version and a compile of CUDA source to a cubin and ptxas log."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.lib = ctypes.CDLL(str(self.path))

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
            raise RuntimeError(f"{what}: {self.lib.nvrtcGetErrorString(status).decode()}")

    @functools.cached_property
    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return major.value, minor.value

    def compile(self, code: str, name: str, options: list[str]) -> tuple[bytes, str]:
        """``(cubin, log)`` of ``code`` compiled with ``options`` (which must name a real ``-arch=sm_XY``)."""
        prog = ctypes.c_void_p()
        self._check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), name.encode(), 0, None, None),
                    "nvrtcCreateProgram")
        try:
            argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            status = self.lib.nvrtcCompileProgram(prog, len(options), argv)
            size = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
            log = ctypes.create_string_buffer(size.value)
            self._check(self.lib.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
            text = log.value.decode(errors="replace")  # the log quotes the source, which may be UTF-8
            if status != 0:
                raise RuntimeError(f"NVRTC {self.version} failed on {name}:\n{text}")
            self._check(self.lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
            cubin = ctypes.create_string_buffer(size.value)
            self._check(self.lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
            return cubin.raw, text
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


def main(library: str, filename: str, arch: str, out: str) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from gpuatlas.probes.kit.cuda import compile_options, source

    nvrtc, out = NVRTC(Path(library)), Path(out)
    code = source(filename)  # read before NVRTC runs (see the module's docstring)
    cubin, log = nvrtc.compile(code, filename, compile_options(arch))
    (out / "cubin").write_bytes(cubin)
    (out / "log").write_text(log, encoding="utf-8")
    (out / "version").write_text("%d.%d" % nvrtc.version)


if __name__ == "__main__":
    main(*sys.argv[1:])
