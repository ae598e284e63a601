"""The probe registry: each probe declares its parameter sweeps as data, so ``gpuatlas list`` needs no GPU.

A sweep is a function of the device's own properties (the ``device`` block of run.json) that returns the
axes of one profile, ``{"footprint_bytes": [...], "flavour": [...]}``; configs are their cartesian product.
No GPU model's numbers appear in a sweep: sizes come from ``l2_bytes``, ``smem_per_sm_bytes``, ``sm_count``.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import io
import itertools
import linecache
import math
import pkgutil
import re
import sys
import textwrap
import tokenize
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from analysis.errors import UsageError
from analysis.results import MEASUREMENT_COLUMNS

PROFILES = ("quick", "full")
KERNEL_DIR = Path(__file__).parent


@dataclass(frozen=True)
class Probe:
    id: str
    func: Callable
    sweeps: dict  # profile -> (device dict -> {axis: values})
    axes: dict  # axis -> plain-language description of its values
    quantities: tuple = ()
    backend: str = "cupy"
    kernels: tuple = ()  # .cu files beside the module, hashed into the probe version
    min_cc: tuple = (7, 0)
    min_gpus: int = 1  # GPUs the run must see (link and collective probes need a peer)
    #: The newest compute capability the probe runs on: an architecture-specific target (sm_90a's wgmma) runs
    #: on its own architecture only.
    max_cc: tuple | None = None

    @property
    def summary(self) -> str:
        return (inspect.getdoc(self.func) or "").split("\n\n")[0].replace("\n", " ")

    @property
    def version(self) -> str:
        """Hash of what the probe's samples depend on: results of different versions never mix."""
        h = hashlib.sha256()
        for label, text in sorted(_version_items(self.func, [KERNEL_DIR / k for k in self.kernels])):
            h.update(f"{label}\0{text}\0".encode())
        return h.hexdigest()[:12]

    def configs(self, device: dict, profile: str, overrides: dict | None = None) -> list[dict]:
        """A sweep returns axes (a cartesian product) or an explicit list of configs (zipped axes).

        An override replaces an axis of a product; on an explicit list it keeps the configs it names."""
        if profile not in self.sweeps:
            raise UsageError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)}")
        sweep = self.sweeps[profile](device)
        overrides = {k: v for k, v in (overrides or {}).items() if k in self.axes}
        if isinstance(sweep, list):
            return [c for c in sweep if all(c[k] in v for k, v in overrides.items())]
        axes = {**sweep, **overrides}
        names = list(axes)
        return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


# -- the version: the code a probe runs, found by following its names --------------------------------

#: File names in a probe's code that name its kernels (loaded from beside the module that names them).
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
                    files.append(Path(module.__file__).parent / const)
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
                    files.append(Path(module.__file__).parent / value)
    while files:
        path = files.pop()
        if path.name in out or not path.is_file():
            continue
        text = path.read_text()
        out[path.name] = (path.name, text)
        files += [path.parent / name for name in _INCLUDE.findall(text)]
    return [(key, label, text) for key, (label, text) in out.items()]


@functools.lru_cache(maxsize=None)
def _rebound(module_name: str) -> frozenset:
    """Names the module's own functions rebind (``global cuda``): state set while it runs, not code."""
    found = _parsed_file(getattr(sys.modules.get(module_name), "__file__", None))
    return found[1].rebound if found else frozenset()


def _local_imports(obj, root: Path) -> dict:
    """Names that ``obj`` imports inside its body from this project's modules (``from probes.cuda import
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
    found = _source(obj)
    return found[2] if found else ()


@dataclass(frozen=True)
class _Parsed:
    """What the version reads from a parsed source, by line (1-based; ranges inclusive)."""
    functions: dict  # (first line, decorators included; name) -> def statement
    classes: dict  # qualified name -> the first class statement of that name in source order, as inspect finds
    dropped: tuple  # (first, last) of every import statement and every def's or class's docstring
    imports: tuple  # (line, ((module, names or bound name), ...)) of each absolute import, in ast.walk order
    rebound: frozenset  # names a ``global`` statement rebinds

    @classmethod
    def of(cls, source: str) -> _Parsed:
        functions, classes, dropped, imports, rebound = {}, {}, [], [], set()
        statements = [(ast.parse(source), ())]  # with the qualified name of the scope holding each
        for node, scope in statements:  # breadth first, as ast.walk meets them (the imports' order)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                dropped.append((node.lineno, node.end_lineno))
                if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = tuple((alias.name, alias.asname or alias.name) for alias in node.names)
                    imports.append((node.lineno, ((node.module, names),)))
                elif isinstance(node, ast.Import):
                    imports.append((node.lineno, tuple((alias.name, (alias.asname or alias.name).split(".")[0])
                                                       for alias in node.names)))
            elif isinstance(node, ast.Global):
                rebound.update(node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                body = node.body
                if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                        and isinstance(body[0].value.value, str)):
                    dropped.append((body[0].lineno, body[0].end_lineno))
                if isinstance(node, ast.ClassDef):
                    scope += (node.name,)
                    if classes.setdefault(".".join(scope), node).lineno > node.lineno:  # the first in the file
                        classes[".".join(scope)] = node
                else:
                    functions.setdefault((_first_line(node), node.name), node)
                    scope += (node.name, "<locals>")
            # only statement lists hold statements (none is inside an expression)
            statements += [(child, scope) for field in node._fields if isinstance(value := getattr(node, field), list)
                           for child in value if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))]
        return cls(functions, classes, tuple(dropped), tuple(imports), frozenset(rebound))

    def dropped_in(self, first: int, last: int) -> set[int]:
        """The dropped lines of a statement on lines ``first``-``last``, counted from 0 at ``first``."""
        return {line - first for a, b in self.dropped if first <= a and b <= last for line in range(a, b + 1)}

    def imports_in(self, first: int, last: int) -> tuple:
        return tuple(item for line, items in self.imports if first <= line <= last for item in items)


def _first_line(node) -> int:
    """The line a def or class statement starts on: its first decorator's (a function's ``co_firstlineno``)."""
    return node.decorator_list[0].lineno if node.decorator_list else node.lineno


#: File name -> (the lines linecache held when it was parsed, their parse or None): parsed anew when linecache
#: reads the file anew (it checks size and modification time), as ``inspect.getsource`` reads it anew.
_PARSED: dict[str, tuple[list, _Parsed | None]] = {}


def _parsed_file(file: str | None) -> tuple[list, _Parsed] | None:
    """A Python source file's lines and parse, parsed once for all the objects in it rather than once for each
    (None for no file, or one that does not parse)."""
    if not file or not file.endswith(".py"):
        return None
    linecache.checkcache(file)
    lines = linecache.getlines(file)
    if not lines:
        return None
    if file not in _PARSED or _PARSED[file][0] is not lines:
        try:
            parsed = _Parsed.of("".join(lines))
        except (SyntaxError, ValueError):
            parsed = None
        _PARSED[file] = (lines, parsed)
    return (lines, _PARSED[file][1]) if _PARSED[file][1] else None


def _span(obj) -> tuple[list, _Parsed, int, int] | None:
    """The def or class statement of ``obj`` in its file: (the file's lines, its parse, the first line,
    decorators included, and the last); None where there is none (a lambda, code made at run time).  A wrapper
    stands for what it wraps, as in ``inspect.getsource``."""
    obj = inspect.unwrap(obj)
    if inspect.isclass(obj):
        found = _parsed_file(getattr(sys.modules.get(obj.__module__), "__file__", None))
        node = found and found[1].classes.get(obj.__qualname__)
    elif inspect.isfunction(obj):
        found = _parsed_file(obj.__code__.co_filename)
        node = found and found[1].functions.get((obj.__code__.co_firstlineno, obj.__code__.co_name))
    else:
        return None
    return (*found, _first_line(node), node.end_lineno) if node else None


@functools.lru_cache(maxsize=None)
def _source(obj) -> tuple[str, set[int], tuple] | None:
    """The source of ``obj``, dedented; its lines (from 0) that hold import statements or docstrings; and its
    absolute imports (as ``_body_imports``).  Cut from its file's parse; where that has no such statement
    (a lambda), or the statement's text would not parse alone (a line indented less than its def), read by
    ``inspect.getsource`` and parsed on its own.  None where there is no source that parses."""
    if (span := _span(obj)) is not None:
        lines, parsed, first, last = span
        source = textwrap.dedent("".join(lines[first - 1:last]))
        if not source[:1].isspace():
            return source, parsed.dropped_in(first, last), parsed.imports_in(first, last)
    try:
        source = textwrap.dedent(inspect.getsource(obj))
        parsed = _Parsed.of(source)
    except (OSError, TypeError, SyntaxError):
        return None
    return source, parsed.dropped_in(1, sys.maxsize), parsed.imports_in(1, sys.maxsize)


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
    found = _source(obj)
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
    span = _span(obj)
    if span is None or not inspect.isfunction(inspect.unwrap(obj)):
        return {}
    file_lines, parsed, first, _ = span
    code = inspect.unwrap(obj).__code__
    node = parsed.functions.get((code.co_firstlineno, code.co_name))
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


_REGISTRY: dict[str, Probe] = {}


def probe(probe_id: str, *, sweeps: dict, axes: dict, **kw) -> Callable:
    """Register ``func(ctx, **params) -> list[Sample]`` as a probe with declared sweeps."""
    missing = set(PROFILES) - set(sweeps)
    if missing:
        raise ValueError(f"probe {probe_id} lacks profiles {sorted(missing)}")
    clash = set(axes) & set(MEASUREMENT_COLUMNS)
    if clash:
        raise ValueError(f"probe {probe_id}: axis names {sorted(clash)} collide with result columns")

    def register(func: Callable) -> Callable:
        _REGISTRY[probe_id] = Probe(probe_id, func, sweeps, axes, **kw)
        return func

    return register


def all_probes() -> dict[str, Probe]:
    modules = probe_modules()
    for module in modules:
        importlib.import_module(module)
    return {pid: _REGISTRY[pid] for pid in sorted(_REGISTRY, key=lambda pid: _order(pid, modules))}


_DECLARES = re.compile(r"^@probe\(", re.MULTILINE)
_RUN_ORDER = re.compile(r"^RUN_ORDER = (\d+)$", re.MULTILINE)


@functools.lru_cache(maxsize=None)
def probe_modules() -> tuple[str, ...]:
    """Every module under probes/ that declares a probe (an ``@probe(`` line), in the order a run measures
    them: by the ``RUN_ORDER = <int>`` each declares, read from its source, so no list names them."""
    import probes

    found = {}
    for info in pkgutil.iter_modules(probes.__path__):
        path = Path(info.module_finder.path) / f"{info.name}.py"
        if info.ispkg or not path.is_file():
            continue
        text = path.read_text()
        if not _DECLARES.search(text):
            continue
        orders = _RUN_ORDER.findall(text)
        if len(orders) != 1:
            raise ValueError(f"{path} declares probes but {len(orders)} RUN_ORDER lines: write one, "
                             "RUN_ORDER = <int>, where in a run its probes are measured")
        found[f"probes.{info.name}"] = int(orders[0])
    clash = sorted(name for name, order in found.items() if list(found.values()).count(order) > 1)
    if clash:
        raise ValueError(f"probe modules {clash} declare the same RUN_ORDER: give each its own")
    return tuple(sorted(found, key=found.get))


def _order(probe_id: str, modules: tuple[str, ...]) -> tuple:
    module = _REGISTRY[probe_id].func.__module__
    return (modules.index(module) if module in modules else len(modules), probe_id)


def select(names: list[str] | None) -> list[Probe]:
    """Probes named exactly or by prefix (``chase`` selects ``chase.latency`` and ``chase.latency_numba``)."""
    probes = all_probes()
    if not names:
        return list(probes.values())
    chosen = []
    for name in names:
        hits = [p for pid, p in probes.items() if pid == name or pid.startswith(name + ".")
                or pid.startswith(name + "_")]
        if not hits:
            raise UsageError(f"unknown probe {name!r}: `gpuatlas list` shows the probes "
                             f"({', '.join(probes)})")
        chosen += [p for p in hits if p not in chosen]
    return chosen


def parse_override(text: str, probes: list[Probe]) -> tuple[str, list]:
    """Parse ``-a axis=v1,v2,...`` against the selected probes' axes."""
    name, sep, values = text.partition("=")
    name = name.strip()
    known = sorted({a for p in probes for a in p.axes})
    if not sep or not name or not values.strip():
        raise UsageError(f"malformed sweep override {text!r}: write AXIS=V1,V2,... (axes: {', '.join(known)})")
    if name not in known:
        raise UsageError(f"unknown axis {name!r} in {text!r}: the selected probes sweep {', '.join(known)}")
    parsed = []
    for raw in values.split(","):
        raw = raw.strip()
        if not raw:
            raise UsageError(f"malformed sweep override {text!r}: empty value")
        parsed.append(_parse_value(raw, text))
    return name, parsed


_SUFFIX = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "K": 2**10, "M": 2**20, "G": 2**30}


def _parse_value(raw: str, text: str):
    for suffix, scale in _SUFFIX.items():
        if raw.endswith(suffix) and raw[: -len(suffix)].replace(".", "", 1).isdigit():
            return int(float(raw[: -len(suffix)]) * scale)
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        value = float(raw)
    except ValueError:
        return raw
    if not math.isfinite(value):
        raise UsageError(f"malformed sweep override {text!r}: {raw} is not a finite number")
    return value


# -- axis helpers used by sweeps ------------------------------------------------------------------

def geom(lo: int, hi: int, per_octave: int, jitter_seed: int | None = None, align: int = 1) -> list[int]:
    """Log-spaced integers from ``lo`` to ``hi`` inclusive, ``per_octave`` per doubling, multiples of ``align``.

    With ``jitter_seed`` each interior point moves by up to a third of a step (seeded, so reproducible), so
    that a swept curve does not alias with power-of-two structure in the hardware.
    """
    import numpy as np

    n = max(2, int(round(math.log2(hi / lo) * per_octave)) + 1)
    exps = np.linspace(math.log2(lo), math.log2(hi), n)
    if jitter_seed is not None:
        step = exps[1] - exps[0]
        jitter = np.random.default_rng(jitter_seed).uniform(-step / 3, step / 3, n)
        jitter[[0, -1]] = 0
        exps = exps + jitter
    values = sorted({max(align, int(round(2**e / align)) * align) for e in exps})
    return values

