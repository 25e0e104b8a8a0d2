"""Load query plans from JSON or TOML files (or already parsed dictionaries).

File layout (JSON shown; TOML uses ``[[operators]]`` tables with the same keys)::

    {"name": "example",
     "operators": [
        {"id": "1", "kind": "select", "inputs": ["s1"], "selectivity": 0.2, "capacity": 1},
        {"id": "3", "kind": "join", "inputs": ["1", "2"], "selectivity": 0.8, "capacity": 0.2}
     ]}

``kind`` defaults to ``select`` for one input and ``join`` for several. ``inputs`` name input
streams or other operator ids. Optional numbers: ``selectivity``, ``capacity`` *or* ``cost``,
``input_tuple_size``, ``output_tuple_size``, ``partitions``; ``params`` is a free table.
Unknown keys are rejected with a suggestion.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.names import did_you_mean
from spark_stream_sched.runtime.plan.dag import QueryPlan
from spark_stream_sched.runtime.plan.operators import OperatorDef, OperatorKind

_TOP_KEYS = ("name", "description", "operators")
_OP_KEYS = (
    "id", "kind", "inputs", "params", "selectivity", "capacity", "cost",
    "input_tuple_size", "output_tuple_size", "partitions",
)
_NUMBERS = ("selectivity", "capacity", "cost", "input_tuple_size", "output_tuple_size")


def read_document(path: str | Path) -> dict[str, Any]:
    """Parse a ``.json`` or ``.toml`` file into a dictionary; :class:`ConfigError` on failure."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {p}: {exc.strerror or exc}") from exc
    try:
        if p.suffix.lower() == ".toml":
            doc: Any = tomllib.loads(raw.decode("utf-8"))
        else:
            doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p} is not valid {p.suffix.lstrip('.') or 'JSON'}: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"{p} must hold an object/table at the top level")
    return doc


def load_plan(path: str | Path) -> QueryPlan:
    """Load a :class:`QueryPlan` from a JSON or TOML file."""
    doc = read_document(path)
    try:
        return plan_from_dict(doc)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def plan_from_dict(doc: Mapping[str, Any]) -> QueryPlan:
    """Build a :class:`QueryPlan` from a parsed document (see the module docstring)."""
    check_keys(doc, _TOP_KEYS, "plan")
    ops = doc.get("operators")
    if not isinstance(ops, list) or not ops:
        raise ConfigError("a plan needs a non-empty 'operators' list")
    return QueryPlan(operator_from_dict(entry, i) for i, entry in enumerate(ops))


def operator_from_dict(entry: Any, index: int) -> OperatorDef:
    """Build one :class:`OperatorDef` from its table; ``index`` is used in messages."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"operator #{index} must be an object/table")
    check_keys(entry, _OP_KEYS, f"operator #{index}")
    if "id" not in entry or "inputs" not in entry:
        raise ConfigError(f"operator #{index} needs 'id' and 'inputs'")
    inputs = entry["inputs"]
    if isinstance(inputs, str | int):
        inputs = [inputs]
    if not isinstance(inputs, list):
        raise ConfigError(f"operator #{index}: 'inputs' must be a list of names")
    kind_text = entry.get("kind", "join" if len(inputs) > 1 else "select")
    params = entry.get("params", {})
    if not isinstance(params, Mapping):
        raise ConfigError(f"operator #{index}: 'params' must be an object/table")
    numbers = {k: _number(entry[k], k, index) for k in _NUMBERS if k in entry}
    partitions = entry.get("partitions")
    if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, int)):
        raise ConfigError(f"operator #{index}: 'partitions' must be an integer")
    return OperatorDef(
        op_id=str(entry["id"]),
        kind=OperatorKind.parse(str(kind_text)),
        inputs=tuple(str(s) for s in inputs),
        params=dict(params),
        partitions=partitions,
        **numbers,
    )


def _number(value: Any, key: str, index: int) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"operator #{index}: {key!r} must be a number, got {value!r}")
    return float(value)


def check_keys(doc: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """Raise :class:`ConfigError` naming the first unknown key, with a suggestion."""
    for key in doc:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r}{suggest(str(key), allowed)}")


def suggest(word: str, choices: tuple[str, ...] | list[str]) -> str:
    """Return ``"; did you mean 'x'?"`` for the closest choice, or a list of valid choices."""
    return did_you_mean(word, choices) or "; valid: " + ", ".join(choices)
