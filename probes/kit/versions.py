"""A probe's version: a hash of the code its samples depend on, found by following its names.

Results of different versions never mix.  The hash covers the probe's function, the functions, classes and plain
constants of this project it reaches, and the kernel files it names, with their includes; each under its name
without its module, so a move between modules leaves every version as it was and an edit to reached code moves
the versions of exactly the probes that reach it.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import io
import re
import sys
import tokenize
import types
from pathlib import Path
from typing import Callable

from gpuatlas.probes.kit import parsed
from gpuatlas.probes.kit.cuda import KERNEL_DIR


def version(func: Callable, kernels=()) -> str:
    """The version of a probe whose function is ``func`` and whose declared kernel files are ``kernels`` (names,
    found as the kit finds them at run time)."""
    h = hashlib.sha256()
    for label, text in sorted(_version_items(func, [KERNEL_DIR / k for k in kernels])):
        h.update(f"{label}\0{text}\0".encode())
    return h.hexdigest()[:12]


def _kernel_file(folder: Path, name: str) -> Path:
    """A kernel file named in code or included: beside the file that names it, else where the kit finds it."""
    return folder / name if (folder / name).is_file() else KERNEL_DIR / name


#: File names in a probe's code that name its kernels (found beside the module that names them, or by the kit).
_KERNEL_FILE = re.compile(r"^[\w.-]+\.(cu|cuh|h)$")
_INCLUDE = re.compile(r'#include\s+"([^"]+)"')


def version_sources(func: Callable, kernels=()) -> dict[str, str]:
    """Everything the samples of ``func`` depend on, as name -> text: its own source; the functions,
    classes and plain constants of this project it names (by global name, module attribute or type
    annotation), followed transitively; and the kernel files those name or ``kernels`` lists, with their
    includes.  Sources are compared as syntax trees without docstrings, so comments and docstrings do not
    count, and nothing else in a module does either."""
    return {key: text for key, _, text in _sources(func, kernels)}


def _version_items(func: Callable, kernels=()) -> list[tuple[str, str]]:
    """What the version hashes: each source under its name without its module (a function's qualified name,
    a constant's name, a kernel file's name), so moving code between modules leaves the version alone while
    an edit to it moves the version."""
    return [(label, text) for _, label, text in _sources(func, kernels)]


def _sources(func: Callable, kernels=()) -> list[tuple[str, str, str]]:
    """(module-qualified name, name without the module, text) of every source ``func``'s samples depend on."""
    root = _project_root(func)
    out: dict[str, tuple[str, str]] = {}
    files = [Path(k) for k in kernels]
    todo: list = [func]
    while todo:
        obj = _unwrap(todo.pop())
        key = f"{obj.__module__}.{obj.__qualname__}"
        if key in out:
            continue
        out[key] = (obj.__qualname__, _syntax(obj))
        module = sys.modules.get(obj.__module__)
        scope = getattr(obj, "__globals__", None) or vars(module)
        names: set[str] = set()
        for code in _code_objects(obj):
            names |= set(code.co_names)
            for const in code.co_consts:
                if isinstance(const, str) and _KERNEL_FILE.match(const) and module and module.__file__:
                    files.append(_kernel_file(Path(module.__file__).parent, const))
        names |= _annotation_names(obj)
        for base in getattr(obj, "__bases__", ()):
            names.add(base.__name__)
        scope = {**scope, **_local_imports(obj, root)}
        for name in sorted(names):
            if name not in scope:
                continue
            value = scope[name]
            if isinstance(value, types.ModuleType):
                if _is_own_file(getattr(value, "__file__", None), root):
                    todo += [getattr(value, n) for n in sorted(names) if _is_own(getattr(value, n, None), root)]
            elif _is_own(value, root):
                todo.append(value)
            elif (not name.startswith("_") and name not in _rebound(obj.__module__)  # both: module state
                  and (plain := _plain(value)) is not None):
                out[f"{obj.__module__}.{name}"] = (name, plain)
                if isinstance(value, str) and _KERNEL_FILE.match(value) and module and module.__file__:
                    files.append(_kernel_file(Path(module.__file__).parent, value))
    while files:
        path = files.pop()
        if path.name in out or not path.is_file():
            continue
        text = path.read_text()
        out[path.name] = (path.name, text)
        files += [_kernel_file(path.parent, name) for name in _INCLUDE.findall(text)]
    return [(key, label, text) for key, (label, text) in out.items()]


@functools.lru_cache(maxsize=None)
def _rebound(module_name: str) -> frozenset:
    """Names the module's own functions rebind (``global cuda``): state set while it runs, not code."""
    found = parsed.parsed_file(getattr(sys.modules.get(module_name), "__file__", None))
    return found[1].rebound if found else frozenset()


def _local_imports(obj, root: Path) -> dict:
    """Names that ``obj`` imports inside its body from this project's modules (``from gpuatlas.probes.kit.cuda import
    kernel``), as name -> value: followed like its global names."""
    found = {}
    for module_name, names in _body_imports(obj):
        if not _is_own_module(module_name, root):
            continue
        module = importlib.import_module(module_name)
        if isinstance(names, str):  # ``import a.b [as c]`` binds ``c``, or ``a``
            found[names] = module
        else:
            found.update({bound: getattr(module, name) for name, bound in names if hasattr(module, name)})
    return found


def _body_imports(obj) -> tuple:
    """The absolute imports in ``obj``'s source, in walk order: ``(module, ((name, bound name), ...))`` for a
    ``from`` import, ``(module, bound name)`` for a plain one."""
    found = parsed.source_of(obj)
    return found[2] if found else ()


def _is_own_module(name: str, root: Path) -> bool:
    """Whether module ``name`` is this project's (found without importing it; a missing package is not).  A
    submodule of another package's is not, and is not looked for: finding it would import its package."""
    top = name.partition(".")[0]
    try:
        if top != name and (spec := importlib.util.find_spec(top)) is not None and spec.origin \
                and not _is_own_file(spec.origin, root):
            return False
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    return spec is not None and _is_own_file(spec.origin, root)


def _project_root(func: Callable) -> Path:
    """The folder holding the top-level package (or module) of ``func``: code under it is this project's."""
    top = sys.modules[func.__module__.split(".")[0]]
    return Path(top.__path__[0]).parent if hasattr(top, "__path__") else Path(top.__file__).parent


def _unwrap(obj):
    """The Python function behind a kernel decorator (Numba's ``py_func``, Triton's ``fn``) or a cache."""
    for attr in ("py_func", "fn"):
        inner = getattr(obj, attr, None)
        if inspect.isfunction(inner):
            obj = inner
    return inspect.unwrap(obj) if hasattr(obj, "__wrapped__") else obj


def _is_own(obj, root: Path) -> bool:
    obj = _unwrap(obj)
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        return False
    return _is_own_file(getattr(sys.modules.get(obj.__module__), "__file__", None), root)


@functools.lru_cache(maxsize=None)
def _is_own_file(file: str | None, root: Path) -> bool:
    if not file:
        return False
    path = Path(file).resolve()
    return path.is_relative_to(root.resolve()) and "site-packages" not in path.parts


def _code_objects(obj) -> list:
    """The code of a function (nested functions, lambdas and comprehensions too) or of a class's methods."""
    if inspect.isclass(obj):
        members = [m.__func__ if isinstance(m, (staticmethod, classmethod)) else m for m in vars(obj).values()]
        members += [f for m in vars(obj).values() if isinstance(m, property) for f in (m.fget, m.fset)]
        roots = [m.__code__ for m in members if inspect.isfunction(m)]
    else:
        roots = [obj.__code__] if hasattr(obj, "__code__") else []
    codes = []
    while roots:
        code = roots.pop()
        codes.append(code)
        roots += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return codes


def _annotation_names(obj) -> set[str]:
    """Names in type annotations (``ctx: Context``), so the kit a probe reaches through its arguments counts."""
    annotations = dict(getattr(obj, "__annotations__", {}))
    if inspect.isclass(obj):
        for member in vars(obj).values():
            annotations.update(getattr(member, "__annotations__", {}))
    names = set()
    for value in annotations.values():
        names |= set(re.findall(r"[A-Za-z_]\w*", value if isinstance(value, str) else getattr(value, "__name__", "")))
    return names


@functools.lru_cache(maxsize=None)
def _syntax(obj) -> str:
    """The source of ``obj`` without docstrings, comments, imports, blank lines or trailing blanks: the code that
    runs (where it imports a name from does not matter; what the name is, is followed and hashed).
    Text, not ``ast.dump``, whose form changes between Python versions (a run measured under one must match
    the registry under another)."""
    found = parsed.source_of(obj)
    comments = _comments(found[0]) if found else None
    if comments is None:
        return obj.__code__.co_code.hex() if hasattr(obj, "__code__") else obj.__qualname__
    source, dropped, _ = found
    lines = [line[:comments[i]] if i in comments else line for i, line in enumerate(source.splitlines())]
    declared = _declarations(obj, lines)
    inside = {i for first, (last, _) in declared.items() for i in range(first, last + 1)}
    kept = []
    for i, line in enumerate(lines):
        if i in declared:
            kept += declared[i][1].splitlines()
        elif i not in dropped and i not in inside:
            kept.append(line)
    return "\n".join(line.rstrip() for line in kept if line.strip())


#: Keywords of a probe's decorator that declare, not measure: the ids its samples are derived into and the
#: plain words for its axes.  The version leaves them out, so that a new derived id or a reworded axis does
#: not make the committed runs stale.
DECLARATIONS = ("quantities", "axes")


def _declarations(obj, lines: list[str]) -> dict[int, tuple[int, str]]:
    """First line (from 0, in ``obj``'s dedented source) of each of its decorators with DECLARATIONS -> (its
    last line, its text without them), cut from ``lines`` (that source without comments).  The decorators
    come from the file's own parse, so no text is parsed twice."""
    span = parsed.statement_span(obj)
    if span is None or not inspect.isfunction(inspect.unwrap(obj)):
        return {}
    file_lines, parse, first, _ = span
    code = inspect.unwrap(obj).__code__
    node = parse.functions.get((code.co_firstlineno, code.co_name))
    if node is None or not lines:
        return {}
    raw = file_lines[first - 1]
    indent = (len(raw) - len(raw.lstrip())) - (len(lines[0]) - len(lines[0].lstrip()))  # what dedent took off

    def text(part) -> str:  # the part's source, its positions made relative to ``lines`` (bytes, as ast's)
        rows = [line.encode() for line in lines[part.lineno - first:part.end_lineno - first + 1]]
        rows[-1] = rows[-1][:part.end_col_offset - indent]
        rows[0] = rows[0][part.col_offset - indent:]
        return b"\n".join(rows).decode()

    out = {}
    for d in node.decorator_list:
        if isinstance(d, ast.Call) and any(k.arg in DECLARATIONS for k in d.keywords):
            parts = [text(a) for a in d.args] + [f"{k.arg}={text(k.value)}" for k in d.keywords
                                                 if k.arg not in DECLARATIONS]
            out[d.lineno - first] = (d.end_lineno - first, f"@{text(d.func)}({', '.join(parts)})")
    return out


def _comments(source: str) -> dict[int, int] | None:
    """Where each comment of ``source`` starts, line (from 0) -> column; None if it does not tokenize."""
    if "#" not in source:
        return {}
    try:
        return {tok.start[0] - 1: tok.start[1] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    except (SyntaxError, tokenize.TokenError):
        return None


def _plain(value) -> str | None:
    """A stable text for plain data (numbers, strings and containers of them), or None for anything else."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        items = [_plain(v) for v in value]
        return None if None in items else f"{type(value).__name__}({', '.join(items)})"
    if isinstance(value, (set, frozenset)):
        items = [_plain(v) for v in value]
        return None if None in items else f"set({', '.join(sorted(items))})"
    if isinstance(value, dict):
        items = [(_plain(k), _plain(v)) for k, v in value.items()]
        return None if any(None in kv for kv in items) else f"dict({', '.join(f'{k}: {v}' for k, v in items)})"
    return None
