"""Owner records: a location belongs to one query, for the source and the sink alike.

A state location holds the state of exactly one query, and a sink's output path the results of
exactly one query. A second query pointed at it -- a new
checkpoint with an old ``stateLocation``, two queries sharing one -- must fail, naming both
queries and what to do, before it writes a byte: the sink would otherwise take the old batches
for replays and skip them, the source would recompute from scratch over the old versions (the
same offsets name the same versions). Each door keeps one checksummed record (no pyspark)::

    <stateLocation>/_sink.json      the sink's owner: checkpoint location, the Spark query id of
                                    <checkpoint>/metadata, output path, options' fingerprint
    <stateLocation>/_source.json    the source's owner: its token, and whether a batch was
                                    planned with it
    <path>/_ordered-agg-sink.json   the sink's output path's owner: checkpoint location, Spark
                                    query id, state location (two queries on one path would
                                    write the same ``part-batch-<id>.parquet`` names)

The record is created once, exclusively
(:func:`~spark_stream_sched.runtime.state.atomic.create_exclusively`, so two queries racing for a
fresh location cannot both win), and compared with the running query on every use: the fields
of :attr:`Door.identity` must match.

**How the source knows its query.** Spark's Python source API hands the source no checkpoint
location and no query id on the driver, only offsets -- and offsets are what the checkpoint
logs. So the source's driver draws a random *token* when Spark first asks for the
``initialOffset`` (a query with a fresh checkpoint; a restart is handed its logged offsets
instead) and puts it into every offset: each offset the checkpoint logs carries the token of
the query that wrote it. A location whose record holds token ``T`` accepts only offsets that
carry ``T``; an ``initialOffset`` on a location that has already planned a batch
(``confirmed``) is a second query. Until the first batch is planned the location holds no state,
and a fresh query may take it over (this is also how the first query restarts when it died
before Spark logged its first offset; when it died after that but before the batch was
planned, its restart takes the logged offset's token back: :func:`check_token`).
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_stream_sched.errors import StateError
from spark_stream_sched.runtime.state.atomic import atomic_write, create_exclusively
from spark_stream_sched.runtime.state.records import read_record, seal


def _source_query(record: dict[str, Any]) -> str:
    since = (f", first started {record['created']} by pid {record.get('pid')} on host "
             f"{record.get('host')}" if record.get("created") else "")
    return f"the query whose checkpoint offsets carry owner token {record.get('token')}{since}"


def _sink_query(record: dict[str, Any]) -> str:
    return (f"checkpointLocation={record.get('checkpoint_location')!r}, Spark query id "
            f"{record.get('query_id')!r}, output path {record.get('output_path')!r}")


def _output_query(record: dict[str, Any]) -> str:
    return (f"checkpointLocation={record.get('checkpoint_location')!r}, Spark query id "
            f"{record.get('query_id')!r}, stateLocation {record.get('state_location')!r}")


@dataclass(frozen=True)
class Door:
    """What one door records about the query that owns a location, and how it names one.

    ``place`` names the kind of location in messages (the option that sets it); ``identity``:
    the fields that must be equal on every use; ``describe`` names a query from its record;
    ``fix``: what to do when a second query meets the location.
    """

    what: str
    file: str
    format: str
    identity: tuple[str, ...]
    describe: Callable[[dict[str, Any]], str]
    fix: str
    place: str = "stateLocation"


SINK = Door("ordered-agg sink", "_sink.json", "ordered-agg-sink-owner",
            ("checkpoint_location", "query_id", "output_path"), _sink_query,
            "give this one its own stateLocation (and output path), or restart the original "
            "query from its own checkpoint")
SOURCE = Door("ordered-agg source", "_source.json", "ordered-agg-source-owner", ("token",),
              _source_query,
              "restart the original query from its own checkpointLocation, or give this query "
              "a new stateLocation (a fresh checkpointLocation over an old stateLocation would "
              "recompute every batch over the old query's state)")
OUTPUT = Door("ordered-agg sink", "_ordered-agg-sink.json", "ordered-agg-sink-output-owner",
              ("checkpoint_location", "query_id", "state_location"), _output_query,
              "give this query its own path (with a new checkpointLocation), or stop it and "
              "restart the original query from its own checkpoint", place="output path")


def owner_path(location: str, door: Door) -> Path:
    """``<location>/<door.file>``."""
    return Path(location) / door.file


def read_owner(location: str, door: Door) -> dict[str, Any] | None:
    """The recorded owner (None: the location has none).

    Raises
    ------
    StateError
        The record is damaged, or is not ``door``'s (the location belongs to something else).
    """
    path = owner_path(location, door)
    if not path.exists():
        return None
    owner = read_record(str(path), f"{door.what} owner record",
                        f"restore it or use a new {door.place}")
    if owner.get("format") != door.format:
        raise StateError(f"{path} is not an {door.what} owner record; this {door.place} "
                         f"belongs to something else — use a new {door.place}")
    return owner


def _stamped(door: Door, mine: dict[str, Any]) -> dict[str, Any]:
    """``mine`` with the format and who created it now (fields of ``mine`` win)."""
    return {"format": door.format, "version": 1,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": socket.gethostname(), "pid": os.getpid(), **mine}


def create_owner(location: str, door: Door, mine: dict[str, Any]) -> bool:
    """Record ``mine`` as the owner of a location that has none; True when this call did.

    The location's directory is created when missing; a failure is a
    :class:`~spark_stream_sched.errors.SpillError` naming the record.
    """
    return create_exclusively(str(owner_path(location, door)), seal(_stamped(door, mine),
                                                                     indent=1))


def replace_owner(location: str, door: Door, mine: dict[str, Any]) -> None:
    """Overwrite the record (the source confirms it, or takes over a location with no state)."""
    atomic_write(str(owner_path(location, door)), seal(_stamped(door, mine), indent=1))


def refusal(location: str, door: Door, owner: dict[str, Any], mine: str) -> StateError:
    """The error for a second query on ``location``: both queries and what to do."""
    return StateError(
        f"{door.what} {door.place} {location} belongs to another query "
        f"({door.describe(owner)}); this query has {mine}. Two queries cannot share {door.what} "
        f"{door.place}: {door.fix}")


def check_owner(location: str, door: Door, mine: dict[str, Any]) -> dict[str, Any]:
    """Refuse to use ``location`` unless ``mine`` matches its owner record; return the record.

    A field the record holds as None (not known when it was written) matches anything.
    """
    owner = read_owner(location, door)
    if owner is None:
        raise StateError(f"{door.what} {door.place} {location} has no owner record "
                         f"{door.file}; it was removed or the location is damaged — restore it, "
                         f"or use a new {door.place}")
    for field in door.identity:
        recorded = owner.get(field)
        if recorded is not None and recorded != mine.get(field):
            raise refusal(location, door, owner, door.describe(mine))
    return owner


# -- the source's token ------------------------------------------------------------------------


def claim_fresh(location: str) -> str:
    """The owner token of a query Spark asked for its initial offset (a fresh checkpoint).

    Creates the record, or takes over one under which no batch was planned (the location
    holds no state of that query). Called on the driver, under the location's lock.

    Raises
    ------
    StateError
        The location planned a batch for another query: naming both and what to do.
    """
    owner = read_owner(location, SOURCE)
    if owner is not None and owner.get("confirmed"):
        raise refusal(location, SOURCE, owner,
                      "a fresh checkpointLocation (Spark asked the source for its initial "
                      "offset: the checkpoint holds no offset of it)")
    mine = {"token": uuid.uuid4().hex, "confirmed": False, "adopted": False}
    if owner is None:
        create_owner(location, SOURCE, mine)
    else:
        replace_owner(location, SOURCE, mine)
    return str(mine["token"])


def check_token(location: str, token: str | None, planned: bool,
                claimed: str | None = None) -> str:
    """Check the token of an offset Spark handed back; return the location's token.

    ``token`` None is an offset of an earlier release: a location without a record adopts its
    checkpoint (and accepts such offsets from then on). ``planned``: Spark logged the offset
    for a batch it now runs (``partitions()``), which confirms the record: from then on only
    this token's offsets are accepted and a fresh checkpoint is refused. Called on the driver,
    under the location's lock.

    ``claimed``: the token this driver process drew with :func:`claim_fresh`, if any. A query
    that died after Spark logged its first offset but before that batch was planned restarts
    with that offset *and* an ``initialOffset`` call (batch 0 starts there), which drew a new
    token: the record holds ``claimed``, unconfirmed, and the logged offset carries the
    token of the query's first run. That offset comes from this query's own checkpoint, so
    the record takes its token. Had another query claimed the location since, the record
    would hold that query's token, not ``claimed``, and the offset is refused.

    Raises
    ------
    StateError
        The offsets carry another token (or none, on a location owned by a token).
    """
    owner = read_owner(location, SOURCE)
    if owner is None and token is None:
        mine = {"token": uuid.uuid4().hex, "confirmed": True, "adopted": True}
        create_owner(location, SOURCE, mine)
        return str(mine["token"])
    if owner is None:
        return str(check_owner(location, SOURCE, {"token": token})["token"])  # refuses
    if (token is not None and token != owner["token"] and owner["token"] == claimed
            and not owner.get("confirmed")):
        owner = {**owner, "token": token}  # this query's first run logged it (docstring)
        replace_owner(location, SOURCE, owner)
    if token != owner["token"] and not (token is None and owner.get("adopted")):
        offsets = ("offsets of an earlier release, without an owner token" if token is None
                   else f"checkpoint offsets that carry owner token {token}")
        raise refusal(location, SOURCE, owner, offsets)
    if planned and not owner.get("confirmed"):
        replace_owner(location, SOURCE, {**owner, "confirmed": True})
    return str(owner["token"])


# -- the sink's identity -----------------------------------------------------------------------


def spark_query_id(checkpoint_location: str | None) -> str | None:
    """The query id Spark recorded in ``<checkpoint>/metadata`` (None when not readable).

    Spark writes that file when a query first starts; a checkpoint directory that was deleted
    and recreated gets a new id, which is how a fresh query on an old state location is told
    apart from a restart. Only local paths (or ``file:`` URIs) can be read from here.
    """
    if not checkpoint_location:
        return None
    path = checkpoint_location.removeprefix("file://").removeprefix("file:")
    try:
        with open(os.path.join(path, "metadata"), encoding="utf-8") as fh:
            first = fh.readline()
        value = json.loads(first).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def sink_owner(checkpoint_location: str | None, output_path: str,
               fingerprint: str) -> dict[str, Any]:
    """The sink query now running, as its owner record names it."""
    checkpoint = os.path.abspath(checkpoint_location) if checkpoint_location else None
    return {"checkpoint_location": checkpoint, "query_id": spark_query_id(checkpoint_location),
            "output_path": os.path.abspath(output_path), "fingerprint": fingerprint}



def output_owner(sink: dict[str, Any], state_location: str) -> dict[str, Any]:
    """The sink query ``sink`` (:func:`sink_owner`) as the owner record of its output path."""
    return {"checkpoint_location": sink["checkpoint_location"], "query_id": sink["query_id"],
            "state_location": os.path.abspath(state_location)}
