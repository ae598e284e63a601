import hashlib
from pathlib import Path


def tree_digest(folder: Path) -> dict:
    """Path -> sha256 of every file under ``folder``: equal digests mean byte-for-byte unchanged."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def small_simulated_run(root: Path, probe_ids=("clock.sm", "chase.latency")) -> Path:
    """A quick run of a few simulated probes (tests/fakes.py), measured in this process in about a second: a
    run to read, copy and damage where a command is tested, not the size of the committed run."""
    import fakes
    from probes import runner

    probes = [p for p in fakes.simulated_probes() if p.id in probe_ids]
    run, meta = runner.new_run(root, fakes.DEVICE, {}, probes, "quick", {}, 0, ["test"])
    runner.execute(run, meta, probes, isolate=False)
    return run.path
