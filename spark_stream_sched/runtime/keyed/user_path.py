"""Finding the function of ``udf(package.module:function)`` without running code it does not need.

Importing a module runs its top-level code, so a stage that names the wrong module (or a module
that happens to exist, such as ``this``) would run that code before being refused. The import
path is therefore checked in two steps before anything is imported:

1. **shape** (:func:`parse_import_path`): dotted Python names, a colon, one function name --
   no slashes, no ``..``, no file paths, nothing relative;
2. **source** (:func:`check_defined`): the module is located on the import path without
   importing it or its packages (:class:`importlib.machinery.PathFinder`), each name of the
   dotted chain inside the package the one before it resolved to (a plain module anywhere but
   at the end of the chain is refused: ``this.tests.x`` is not searched for on all of
   ``sys.path``), and its source must
   define the function at top level with ``@keyed_function`` (or assign it from a
   ``keyed_function(...)`` call). Only then is the module imported (:func:`load_function`).

A module already imported in this process runs no code when imported again, so it skips step 2.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import re
import sys
from typing import Any

from spark_stream_sched.errors import ConfigError

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_IMPORT_PATH = re.compile(rf"({_NAME}(?:\.{_NAME})*):({_NAME})")
SHAPE = "package.module:function (Python names separated by dots, a colon, a function name)"


def parse_import_path(path: str) -> tuple[str, str]:
    """``(module, function)`` of ``path`` (ConfigError naming the expected shape otherwise)."""
    match = _IMPORT_PATH.fullmatch(path.strip())
    if match is None:
        raise ConfigError(f"{path!r} is not an import path of the form {SHAPE}; slashes, "
                          f"'..' and file paths are refused")
    return match.group(1), match.group(2)


def module_source(module: str) -> str | None:
    """Source text of ``module`` found on ``sys.path``, importing nothing (None: not found).

    Each name of the dotted chain is looked up inside the package the one before it resolved
    to; a name before the last that is not a package is a ConfigError (its own code would run
    on import, and the rest of the chain cannot be inside it).
    """
    locations: Any = None
    spec = None
    parts = module.split(".")
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        loaded = sys.modules.get(name)
        if loaded is not None and i < len(parts) - 1:
            locations = getattr(loaded, "__path__", None)  # imported: search where it searches
        else:
            spec = importlib.machinery.PathFinder.find_spec(name, locations)
            if spec is None:
                return None
            locations = spec.submodule_search_locations
        if locations is None and i < len(parts) - 1:
            raise ConfigError(f"module {name!r} is not a package, so it holds no module "
                              f"{module!r} (checked before importing it, so none of its code "
                              f"ran); name the module by its own import path")
    get_source = getattr(spec.loader, "get_source", None) if spec is not None else None
    return get_source(module) if get_source is not None else None


def _mentions_keyed_function(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Name) and n.id == "keyed_function")
               or (isinstance(n, ast.Attribute) and n.attr == "keyed_function")
               for n in ast.walk(node))


def defines_keyed_function(source: str, name: str) -> bool:
    """True if the last top-level binding of ``name`` in ``source`` is a keyed function."""
    found = False
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = any(_mentions_keyed_function(d) for d in node.decorator_list)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found = _mentions_keyed_function(node.value)
    return found


def check_defined(path: str) -> None:
    """ConfigError unless ``path``'s module source defines its function (nothing is imported)."""
    module, name = parse_import_path(path)
    if module in sys.modules:
        return
    try:
        source = module_source(module)
    except ConfigError as exc:
        raise ConfigError(f"cannot import {path!r}: {exc}") from None
    if source is None:
        raise ConfigError(f"cannot import {path!r}: no Python source of module {module!r} was "
                          f"found on the import path; ship the module as source (a .py file, "
                          f"or a zip on the path, e.g. with --py-files)")
    try:
        defined = defines_keyed_function(source, name)
    except SyntaxError as exc:
        raise ConfigError(f"cannot import {path!r}: module {module!r} does not parse "
                          f"({exc})") from exc
    if not defined:
        raise ConfigError(f"{path!r} is not decorated with @keyed_function: module {module!r} "
                          f"defines no top-level function {name!r} with @keyed_function "
                          f"(checked in its source before importing it, so none of its code "
                          f"ran)")


def load_function(path: str) -> Any:
    """Import ``path``'s function after :func:`check_defined` (ConfigError if it cannot)."""
    check_defined(path)
    module, name = parse_import_path(path)
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {path!r}: {exc}") from exc
