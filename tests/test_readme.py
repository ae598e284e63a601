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
