"""analysis/ imports in one direction: no module reaches itself through its imports, counting those made
inside functions (an import moved into a function to dodge a circle is still a circle)."""
from __future__ import annotations

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[1] / "analysis"


def module_files(root: Path = ANALYSIS) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a subpackage under its own name)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(("gpuatlas", *(parts[:-1] if parts[-1] == "__init__" else parts)))] = path  # as imported
    return found


def _targets(node, here: str, modules: dict[str, Path]) -> set[str]:
    """The package's modules an import statement in module ``here`` loads (a name imported from a package
    counts as its submodule where there is one)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # ``from . import x``, ``from ..y import z``: from the package holding ``here``
            package = here.split(".") if modules[here].name == "__init__.py" else here.split(".")[:-1]
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
    else:
        return set()
    out = set()
    for name in names:
        while name and name not in modules:  # ``import analysis.x.y`` loads what of it exists
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its source (module level or in a function)."""
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        graph[name] = {t for node in ast.walk(tree) for t in _targets(node, name, modules)} - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None: depth first, a node met again while still on the
    path closes a cycle."""
    state: dict[str, str] = {}  # "open" while on the path, "done" after

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt, path)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [])):
            return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle_and_no_other():
    """Negative control: a synthetic circle is found whole, with a tail into it and a diamond beside it that
    are no circle."""
    diamond = {"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}
    assert find_cycle(diamond) is None
    planted = {**diamond, "d": {"e"}, "e": {"f"}, "f": {"d"}, "tail": {"e"}}
    assert find_cycle(planted) == ["d", "e", "f", "d"]
    assert find_cycle({"x": {"x"}}) == ["x", "x"]


def test_the_graph_holds_the_imports_at_module_level_and_in_functions():
    """The graph is read, not empty: known edges of both kinds are in it (a parser that saw nothing would pass
    the no-cycle test)."""
    graph = import_graph(module_files())
    assert "gpuatlas.analysis.quantities" in graph["gpuatlas.analysis.latency"]  # at module level
    # in a function (matplotlib kept lazy)
    assert "gpuatlas.analysis.figures" in graph["gpuatlas.analysis.compare_figure"]
    # a subpackage's relative or absolute import
    assert "gpuatlas.analysis.claims.model" in graph["gpuatlas.analysis.claims"]
    assert sum(map(len, graph.values())) > 100


def test_analysis_has_no_import_cycle():
    graph = import_graph(module_files())
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"
    # negative control: one import back down (units importing the vocabulary, which formats with units) is found
    planted = {**graph, "gpuatlas.analysis.units": graph["gpuatlas.analysis.units"] | {"gpuatlas.analysis.quantities"}}
    cycle = find_cycle(planted)
    assert cycle and cycle[0] == cycle[-1] and set(cycle) == {"gpuatlas.analysis.quantities", "gpuatlas.analysis.units"}
