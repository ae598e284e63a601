"""The simulated backend is honest: its truth is first-principles arithmetic, never the analysis's models."""
import ast
from pathlib import Path

import pytest

import fakes

HERE = Path(__file__).parent


def test_the_fakes_import_nothing_from_the_analysis():
    files = sorted((HERE / "fakes").glob("*.py"))
    assert len(files) > 10
    for path in files:
        tree = ast.parse(path.read_text())
        modules = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        modules += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert modules and not [m for m in modules if m.split(".")[0] == "analysis"], (path.name, modules)


def test_every_probe_has_one_fake_and_the_fakes_are_every_familys():
    """FAKES is gathered from the family modules of tests/fakes/: each probe faked once, none left out."""
    from gpuatlas.probes.registry import all_probes

    assert set(fakes.FAKES) == set(all_probes())
    owners = [module.__name__ for module in fakes._family_modules() for _ in module.FAKES]
    assert len(owners) == len(fakes.FAKES) and len(set(owners)) > 10
    assert fakes.bank_ways is fakes.smem_banks.bank_ways, "a family's names are the package's"
    with pytest.raises(AttributeError, match="no attribute"):  # negative control
        fakes.no_such_physics


def test_bank_ways_worked_by_hand():
    assert fakes.bank_ways(1, 4) == 1 and fakes.bank_ways(0, 4) == 1, "consecutive words; one broadcast word"
    assert fakes.bank_ways(2, 4) == 2 and fakes.bank_ways(32, 4) == 32 and fakes.bank_ways(33, 4) == 1
    assert fakes.bank_ways(1, 8) == 1 and fakes.bank_ways(2, 8) == 2, "half-warp phases of 16 x 8 bytes"
    assert fakes.bank_ways(1, 16) == 1 and fakes.bank_ways(8, 16) == 8, "quarter-warp phases of 8 x 16 bytes"


def test_sector_efficiency_worked_by_hand():
    assert fakes.sector_efficiency(1, 4) == 1.0, "128 contiguous bytes fill four sectors"
    assert fakes.sector_efficiency(32, 4) == 4 / 32, "a sector per lane for its 4 bytes"
    assert fakes.sector_efficiency(2, 4) == 0.5 and fakes.sector_efficiency(0, 4) == 4 / 32
    assert fakes.sector_efficiency(3, 16) == 0.5, "16 bytes at 48-byte steps: each lane half of its own sector"
    assert fakes.sector_efficiency(1, 3 * 4) == 1.0 and fakes.sector_efficiency(5, 12) < 12 / 32
