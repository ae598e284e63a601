"""The README's Python example runs as written, from the repository root."""
import re

from conftest import REPO


def test_readme_pandas_example_runs(monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert blocks, "the README shows a pandas example"
    monkeypatch.chdir(REPO)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "dram.latency_cycles" in out and "NVIDIA H100" in out
    medians = out[out.index("footprint_bytes"):out.index("Name: value")].splitlines()[1:]
    footprints = [line.split()[-2] for line in medians if len(line.split()) >= 2]
    assert footprints and all(f.isdigit() for f in footprints), medians  # 4096, not 4096.0
