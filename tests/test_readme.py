"""The README's Python example runs as written, from a directory other than the repository's."""
import re

from conftest import REPO


def test_readme_pandas_example_runs_from_any_directory(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert blocks, "the README shows a pandas example"
    monkeypatch.chdir(tmp_path)  # no reports/ here: the example finds the committed run from the package
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "dram.latency_cycles" in out and "NVIDIA H100" in out and "ref:a100-sxm4-80gb" in out
    medians = out[out.index("footprint_bytes"):out.index("Name: value")].splitlines()[1:]
    footprints = [line.split()[-2] for line in medians if len(line.split()) >= 2]
    assert footprints and all(f.isdigit() for f in footprints), medians  # 4096, not 4096.0
    assert not any(tmp_path.iterdir()), "the example writes nothing"


def test_committed_run_is_found_from_any_directory_or_named_as_missing(tmp_path, monkeypatch):
    import pytest

    import gpuatlas

    monkeypatch.chdir(tmp_path)
    assert (gpuatlas.committed_run() / "run.json").is_file()
    monkeypatch.setattr(gpuatlas, "COMMITTED_RUN", tmp_path / "site-packages" / "reports" / "h200")
    with pytest.raises(FileNotFoundError, match="not with an installed wheel"):
        gpuatlas.committed_run()
