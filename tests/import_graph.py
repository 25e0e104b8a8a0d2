"""The package's import graph, read from the code (AST), and its cycles (for test_layering)."""

from __future__ import annotations

import ast
import pathlib
import sys


def modules(package: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every module of ``package`` (a package is its __init__)."""
    found = {}
    for path in package.rglob("*.py"):
        name = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _resolve(module: str | None, level: int, current: str, is_package: bool) -> str:
    if not level:
        return module or ""
    parts = current.split(".") if is_package else current.split(".")[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([module] if module else []))


def import_graph(package: pathlib.Path) -> dict[str, set[str]]:
    """``module -> modules it imports``; importing ``a.b.c`` also runs ``a.b``'s __init__."""
    mods = modules(package)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module, node.level, name, path.name == "__init__.py")
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            for target in targets:
                parts = target.split(".")
                for k in range(2, len(parts) + 1):
                    prefix = ".".join(parts[:k])
                    if prefix in mods and prefix != name and not name.startswith(prefix + "."):
                        graph[name].add(prefix)
    return graph


def import_cycles(package: pathlib.Path) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), sorted."""
    graph = import_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(cycles)
