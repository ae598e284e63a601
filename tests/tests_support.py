import hashlib
from pathlib import Path


def tree_digest(folder: Path) -> dict:
    """Path -> sha256 of every file under ``folder``: equal digests mean byte-for-byte unchanged."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def small_simulated_run(root: Path, probe_ids=("clock.sm", "chase.latency")) -> Path:
    """A quick run of a few simulated probes (tests/fakes/), measured in this process in about a second: a
    run to read, copy and damage where a command is tested, not the size of the committed run."""
    import fakes
    from gpuatlas.machinery import runner

    probes = [p for p in fakes.simulated_probes() if p.id in probe_ids]
    run, meta = runner.new_run(root, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    runner.execute(run, meta, probes, isolate=False)
    return run.path


def cubin_kernels(cubin: bytes) -> set[str]:
    """The kernels (mangled names) a cubin holds code for: its non-empty ``.text.<name>`` sections, read from
    the ELF64 section headers (what cuobjdump lists, without starting it)."""
    import struct

    assert cubin[:5] == b"\x7fELF\x02" and cubin[5] == 1, "a little-endian ELF64 cubin"
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    strings = headers[shstrndx][4]  # sh_offset of the section-name table

    def name(offset: int) -> str:
        return cubin[strings + offset:cubin.index(b"\0", strings + offset)].decode()

    return {name(h[0])[len(".text."):] for h in headers if name(h[0]).startswith(".text.") and h[5] > 0}
