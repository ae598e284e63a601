"""The installed names: the folders probes/ and analysis/ install as gpuatlas.probes and gpuatlas.analysis
(package_dir), so that an install adds no top-level package of those common names.  Everything else is in
pyproject.toml."""
from setuptools import find_packages, setup

FOLDERS = {"gpuatlas.probes": "probes", "gpuatlas.analysis": "analysis"}


def packages() -> list[str]:
    """gpuatlas and its subpackages, and each mapped folder's packages under its installed name."""
    found = find_packages(include=["gpuatlas", "gpuatlas.*"])
    for name, folder in FOLDERS.items():
        found += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]
    return found


if __name__ == "__main__":  # as setuptools runs it; a test imports the names without building
    setup(packages=packages(), package_dir=FOLDERS)
