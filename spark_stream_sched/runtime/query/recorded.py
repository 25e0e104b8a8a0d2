"""The query definition recorded in a state location: written once, checked at every start.

At first start the spec (:meth:`~.spec.QuerySpec.to_json`), its fingerprint and any adapter
wiring that must not change either (the sink's input-id column, ...) are written to
``<location>/_query.json`` by the state layer
(:func:`~spark_stream_sched.runtime.state.definition.record_query`). A later start with a
different definition is refused before anything runs, with a message whose first line names
the option as the user writes it, the recorded and the new value, and what to do::

    window is '1 minute' but the query in stateLocation '/data/state' was started with
    window '10 seconds': set window back to '10 seconds', or start the changed query with a new
    stateLocation and a new checkpointLocation

(one line in the real message). Records written before specs existed (format version 1, with
``window_ms`` etc.) are compared field by field as far as they go.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.query.spec import FORMAT, VERSION, QuerySpec
from spark_stream_sched.runtime.state.definition import QUERY_FILE, read_query, record_query


def record_spec(location: str, spec: QuerySpec, wiring: Mapping[str, Any] | None = None,
                where: str = "stateLocation") -> None:
    """Record ``spec`` under ``location`` at first start; refuse a changed one later.

    ``wiring`` maps option names to adapter settings that are fixed too; ``where`` names the
    option that chose ``location`` (for messages).

    Raises
    ------
    ConfigError
        The definition differs from the recorded one (see the module docstring).
    StateError
        The record exists but cannot be read (naming the file).

    Notes
    -----
    Called on the driver when a query is defined and when it starts, never on executors.
    """
    wiring = dict(wiring or {})
    check_recorded(location, spec, wiring, where)
    record_query(location, {"format": FORMAT, "version": VERSION,
                            "fingerprint": spec.fingerprint(), **spec.to_json(),
                            "wiring": wiring})


def check_recorded(location: str, spec: QuerySpec, wiring: Mapping[str, Any] | None = None,
                   where: str = "stateLocation") -> None:
    """Refuse ``spec`` if ``location`` records another definition (nothing is written).

    Does nothing when nothing is recorded yet.
    """
    recorded = recorded_query(location)
    if recorded is None:
        return
    if recorded.get("fingerprint") == spec.fingerprint() and recorded.get("wiring", {}) == dict(
            wiring or {}):
        return
    changes = spec.changes_from(recorded)
    old_wiring = recorded.get("wiring", {})
    changes += [(name, repr(old_wiring[name]), repr(value))
                for name, value in (wiring or {}).items()
                if name in old_wiring and old_wiring[name] != value]
    if not changes:
        return
    option, old, new = changes[0]
    lines = [f"{option} is {new} but the query in {where} {location!r} was started with "
             f"{option} {old}: set {option} back to {old}, or start the changed query with a "
             f"new {where} and a new checkpointLocation"]
    lines += [f"also changed: {o} is {n}, was {w}" for o, w, n in changes[1:]]
    raise ConfigError("\n".join(lines))


def recorded_query(location: str) -> dict[str, Any] | None:
    """The query record of ``location`` (None: none recorded there yet); StateError if unusable."""
    if not os.path.exists(os.path.join(location, QUERY_FILE)):
        return None
    return read_query(location)
