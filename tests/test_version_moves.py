"""A refactor that moves a kit helper leaves every probe's version as it was, so the committed runs stay valid;
an edit to the helper's body moves the versions of exactly the probes that reach it.  Both on a copy of the
packages in a temporary folder, each version computed in a fresh interpreter."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

#: Every probe's version, and the probes whose sources include ``blocks_per_sm``.
VERSIONS = '''
import json
from gpuatlas.probes.kit.versions import version_sources
from gpuatlas.probes.registry import all_probes

probes = all_probes()
print(json.dumps({"versions": {pid: p.version for pid, p in probes.items()},
                  "reach": sorted(pid for pid, p in probes.items()
                                  if any(k.endswith(".blocks_per_sm") for k in version_sources(p.func)))}))
'''
#: The helper moved: from the CUDA adapter into a kit module of its own, re-exported where it was.
HELPER = '''def blocks_per_sm(func, threads: int, dynamic_smem: int = 0) -> int:
    """Resident blocks of ``threads`` per SM that the driver grants ``func`` (registers, shared memory)."""
    import cupy

    handle = getattr(func, "kernel", func).ptr  # a RawKernel's CUfunction (or a wrapper's / Function's own)
    blocks = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(handle, threads, dynamic_smem)
    if blocks < 1:
        raise RuntimeError("the driver grants this kernel no resident block per SM")
    return int(blocks)
'''


def _versions(root) -> dict:
    out = subprocess.run([sys.executable, "-c", VERSIONS], cwd=root, capture_output=True, text=True, timeout=100,
                         env={**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    for package in ("gpuatlas", "probes", "analysis"):  # gpuatlas serves the folders as gpuatlas.probes, ...
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _move_helper(root):
    cuda = root / "probes" / "kit" / "cuda.py"
    text = cuda.read_text()
    assert HELPER in text, "the helper as it stands in probes/kit/cuda.py"
    text = text.replace(HELPER, "").replace("KERNEL_DIR = KernelFiles(",
                                            "from gpuatlas.probes.kit.residency import blocks_per_sm  # noqa: E402\n\n"
                                            "KERNEL_DIR = KernelFiles(", 1)
    cuda.write_text(text)
    (root / "probes" / "kit" / "residency.py").write_text('"""Resident blocks."""\n\n\n' + HELPER)


@pytest.mark.xdist_group("version_moves")
def test_moving_a_kit_helper_leaves_every_version_and_editing_it_moves_exactly_its_probes(copy):
    before = _versions(copy)
    reach = set(before["reach"])
    assert 3 < len(reach) < len(before["versions"]), "a helper some probes reach and others do not"
    _move_helper(copy)
    moved = _versions(copy)
    assert moved["versions"] == before["versions"], "a move changes no version"
    assert set(moved["reach"]) == reach
    # negative control: the same move with the helper's body edited
    (copy / "probes" / "kit" / "residency.py").write_text(
        '"""Resident blocks."""\n\n\n' + HELPER.replace("if blocks < 1:", "if blocks < 2:"))
    edited = _versions(copy)["versions"]
    assert {pid for pid in edited if edited[pid] != before["versions"][pid]} == reach
