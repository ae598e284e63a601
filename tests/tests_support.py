import hashlib
from pathlib import Path


def tree_digest(folder: Path) -> dict:
    """Path -> sha256 of every file under ``folder``: equal digests mean byte-for-byte unchanged."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}
