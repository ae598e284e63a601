"""What an install names: the folders probes/ and analysis/ become gpuatlas.probes and gpuatlas.analysis (setup.py),
so that no top-level package of those common names lands in site-packages."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_module_names():
    spec = importlib.util.spec_from_file_location("gpuatlas_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not as __main__: nothing is built
    return module


def package_folders(folder: Path, name: str) -> set[str]:
    """Every package (a folder with __init__.py) at and under ``folder``, named from ``name``."""
    return {".".join([name, *d.relative_to(folder).parts]) for d in [folder, *folder.rglob("*")]
            if (d / "__init__.py").is_file() and "__pycache__" not in d.parts}


def test_every_package_installs_under_gpuatlas_and_none_at_the_top_level():
    setup = setup_module_names()
    names = set(setup.packages())
    expected = (package_folders(ROOT / "gpuatlas", "gpuatlas") | package_folders(ROOT / "probes", "gpuatlas.probes")
                | package_folders(ROOT / "analysis", "gpuatlas.analysis"))
    assert names == expected, names ^ expected
    assert {"gpuatlas.probes.families", "gpuatlas.probes.kit", "gpuatlas.analysis"} <= names
    assert all(n == "gpuatlas" or n.startswith("gpuatlas.") for n in names)
    assert setup.FOLDERS == {"gpuatlas.probes": "probes", "gpuatlas.analysis": "analysis"}


def test_the_folder_mapping_is_what_names_them():
    """Negative control: the same folders without the mapping would install as top-level probes and analysis."""
    plain = package_folders(ROOT / "probes", "probes") | package_folders(ROOT / "analysis", "analysis")
    assert {"probes", "analysis"} <= plain and not plain & set(setup_module_names().packages())


def test_a_source_checkout_serves_the_folders_as_the_installed_names():
    import gpuatlas
    import gpuatlas.analysis
    import gpuatlas.probes

    assert Path(gpuatlas.probes.__file__).parent == ROOT / "probes"
    assert Path(gpuatlas.analysis.__file__).parent == ROOT / "analysis"
    assert str(ROOT) in gpuatlas.__path__
