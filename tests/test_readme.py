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


def test_readme_is_one_page_with_the_ci_test_command():
    """The README is a newcomer's one page (the methods live in docs/methods.md), and it shows, as written, the
    CPU test command that .ci/run runs from a fresh clone."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 150, f"README.md has {len(readme.splitlines())} lines: move detail to docs/"
    ci_command = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    code = re.findall(r"```\n(.*?)```", readme, re.S)
    assert any(ci_command in block.splitlines() for block in code), ci_command


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_readme_and_docs_resolves():
    """Every relative link of README.md and docs/*.md names a file of the repository, and an anchor names one of
    that file's headings."""
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.is_file():
                broken.append(f"{page.name}: {target}")
            elif anchor and anchor not in {_slug(h) for h in re.findall(r"^#+ (.*)$", file.read_text(), re.M)}:
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken
