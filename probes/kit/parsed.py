"""Source text as the version reads it: each Python file parsed once, whole, for every object in it (its
functions, classes, imports, docstrings and ``global`` statements, by line), and an object's source cut from it."""
from __future__ import annotations

import ast
import functools
import inspect
import linecache
import sys
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Parsed:
    """What the version reads from a parsed source, by line (1-based; ranges inclusive)."""
    functions: dict  # (first line, decorators included; name) -> def statement
    classes: dict  # qualified name -> the first class statement of that name in source order, as inspect finds
    dropped: tuple  # (first, last) of every import statement and every def's or class's docstring
    imports: tuple  # (line, ((module, names or bound name), ...)) of each absolute import, in ast.walk order
    rebound: frozenset  # names a ``global`` statement rebinds

    @classmethod
    def of(cls, source: str) -> Parsed:
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
                    functions.setdefault((first_line(node), node.name), node)
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


def first_line(node) -> int:
    """The line a def or class statement starts on: its first decorator's (a function's ``co_firstlineno``)."""
    return node.decorator_list[0].lineno if node.decorator_list else node.lineno


#: File name -> (the lines linecache held when it was parsed, their parse or None): parsed anew when linecache
#: reads the file anew (it checks size and modification time), as ``inspect.getsource`` reads it anew.
PARSED: dict[str, tuple[list, Parsed | None]] = {}


def parsed_file(file: str | None) -> tuple[list, Parsed] | None:
    """A Python source file's lines and parse, parsed once for all the objects in it rather than once for each
    (None for no file, or one that does not parse)."""
    if not file or not file.endswith(".py"):
        return None
    linecache.checkcache(file)
    lines = linecache.getlines(file)
    if not lines:
        return None
    if file not in PARSED or PARSED[file][0] is not lines:
        try:
            parsed = Parsed.of("".join(lines))
        except (SyntaxError, ValueError):
            parsed = None
        PARSED[file] = (lines, parsed)
    return (lines, PARSED[file][1]) if PARSED[file][1] else None


def statement_span(obj) -> tuple[list, Parsed, int, int] | None:
    """The def or class statement of ``obj`` in its file: (the file's lines, its parse, the first line,
    decorators included, and the last); None where there is none (a lambda, code made at run time).  A wrapper
    stands for what it wraps, as in ``inspect.getsource``."""
    obj = inspect.unwrap(obj)
    if inspect.isclass(obj):
        found = parsed_file(getattr(sys.modules.get(obj.__module__), "__file__", None))
        node = found and found[1].classes.get(obj.__qualname__)
    elif inspect.isfunction(obj):
        found = parsed_file(obj.__code__.co_filename)
        node = found and found[1].functions.get((obj.__code__.co_firstlineno, obj.__code__.co_name))
    else:
        return None
    return (*found, first_line(node), node.end_lineno) if node else None


@functools.lru_cache(maxsize=None)
def source_of(obj) -> tuple[str, set[int], tuple] | None:
    """The source of ``obj``, dedented; its lines (from 0) that hold import statements or docstrings; and its
    absolute imports (as ``_body_imports``).  Cut from its file's parse; where that has no such statement
    (a lambda), or the statement's text would not parse alone (a line indented less than its def), read by
    ``inspect.getsource`` and parsed on its own.  None where there is no source that parses."""
    if (span := statement_span(obj)) is not None:
        lines, parsed, first, last = span
        source = textwrap.dedent("".join(lines[first - 1:last]))
        if not source[:1].isspace():
            return source, parsed.dropped_in(first, last), parsed.imports_in(first, last)
    try:
        source = textwrap.dedent(inspect.getsource(obj))
        parsed = Parsed.of(source)
    except (OSError, TypeError, SyntaxError):
        return None
    return source, parsed.dropped_in(1, sys.maxsize), parsed.imports_in(1, sys.maxsize)
