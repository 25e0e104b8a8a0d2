"""Options of the ``ordered-agg`` source, parsed once into a frozen, typed :class:`SourceConfig`.

Spark lower-cases option keys, so keys are matched case-insensitively; unknown keys are refused
with a did-you-mean suggestion. Every check here runs on the driver (from
``DataSource.schema()`` / ``streamReader()``), so a bad option fails at ``load()``/``start()``,
never in an executor later. Errors are :class:`~spark_stream_sched.errors.ConfigError` naming
the option and the value.

=====================  ========  =================================================================
option                 default   meaning
=====================  ========  =================================================================
inputs                 required  comma-separated, one per input stream: a directory (its files in
                                 name order hold the stream; hidden ``.``/``_`` files skipped) or a
                                 glob (matches sorted by path). Files that appear later must sort
                                 after the last file the source admitted from that input
                                 (see ``lateFiles``).
format                 parquet   ``parquet``, ``csv`` (header row) or ``json`` (one object a line)
timestampColumn        ts        event time: int64 milliseconds or a timestamp column; values
                                 must lie in years 0001..9999 (Spark's timestamp range), else
                                 the query fails naming input, file and row
keyColumns             (none)    comma-separated key columns (empty: one global key)
window                 required  window size, e.g. ``30 seconds``, ``30s``, ``1 minute``, ``500ms``;
                                 at most the supported event-time span (years 0001..9999)
slide                  = window  slide (tumbling windows when equal to window)
aggregates             required  e.g. ``count(*) as n, avg(value) as mean, first(value) as f``;
                                 split at top-level commas only (``first_where(v, a > 1)`` is one)
stateLocation          required  directory for the runtime state (one per query, like a checkpoint)
partitionGroups        16        number of partition groups (units of state); fixed at first start;
                                 at most 4096 (each group is one state file per version)
numPartitions          2         Spark tasks per micro-batch; each owns a range of partition
                                 groups and reads the batch's rows of every input
maxRecordsPerTrigger   500000    input rows admitted per micro-batch: the earliest rows over all
                                 inputs (by event time); ``0`` = no limit. A micro-batch costs
                                 ~0.2-0.35 s of fixed overhead in local[2]; 500k rows take
                                 ~1.5-2 s to process
outOfOrder             fail      ``fail`` or ``drop`` a row whose ts is below an earlier one
endOfInput             never     when an input counts as finished, so that the last windows are
                                 flushed once all inputs have: ``never`` (a directory that keeps
                                 receiving files; open windows wait, as in Spark);
                                 ``availableNow`` (all files present when a
                                 ``Trigger.AvailableNow`` query starts are consumed: bounded
                                 runs); ``exhausted`` (all files listed so far are consumed).
                                 A finished input stays finished; later files are ignored with
                                 a warning.
lateFiles              fail      a file that appears after the source admitted a file that
                                 sorts after it (it belongs to the past of the stream):
                                 ``fail`` stops the query with an error naming the input and
                                 the file; ``skip`` logs it, records it as skipped in the
                                 input's manifest under ``stateLocation`` and counts it
                                 (``late_files_skipped`` in the batch metrics); never read
schema                 inferred  DDL of the input rows, e.g. ``ts bigint, meter string, v double``;
                                 inferred from the first file of the first input when omitted
scheduler              (direct)  run each batch's partition groups as a plan of window operators
                                 (one path per group) on the threaded executor under this
                                 scheduling strategy: ``fifo``, ``round_robin``, ``chain``,
                                 ``path_capacity``, ``segment``, ``simplified_segment``,
                                 ``threshold``, ``qst``, ``lp``, ``et``, ``ct``; results are
                                 identical for every strategy. Unset: groups run one after another
workers                1         executor worker threads per Spark task (with ``scheduler``)
idleTimeout            (off)     e.g. ``30 seconds``: an unfinished input that has had no new
                                 row for this long (wall clock, measured on the driver) is marked
                                 *idle* in the batch's end offset and stops holding back the
                                 ready bound; its next row makes it active again. Rows it then
                                 sends below the bound already released are *late*: an error, or
                                 dropped with ``outOfOrder=drop``
=====================  ========  =================================================================

``idleTimeout`` keeps determinism (DESIGN.md §2) because the decision is *recorded*: it is part
of the offset that Spark writes to its offset log before the batch runs, so a replay or a
restart reproduces exactly the same ready bounds and results.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from spark_stream_sched.errors import ConfigError

#: Canonical option names (documented spelling); matching is case-insensitive.
OPTION_NAMES: tuple[str, ...] = (
    "inputs", "format", "timestampColumn", "keyColumns", "window", "slide", "aggregates",
    "stateLocation", "partitionGroups", "numPartitions", "maxRecordsPerTrigger", "outOfOrder",
    "endOfInput", "schema", "scheduler", "workers", "idleTimeout", "lateFiles",
)
REQUIRED = ("inputs", "window", "aggregates", "stateLocation")
FORMATS = ("parquet", "csv", "json")
OUT_OF_ORDER = ("fail", "drop")
END_OF_INPUT = ("never", "availableNow", "exhausted")
LATE_FILES = ("fail", "skip")
DEFAULT_MAX_RECORDS_PER_TRIGGER = 500_000
DEFAULT_PARTITION_GROUPS = 16
#: Upper bound of option ``partitionGroups``. Each group is one state file per committed version
#: (and the last few versions are kept), so the count multiplies the files written and fsynced
#: per micro-batch; 100,000 groups wrote 166,702 files (658 MB) without finishing a 2,000-row
#: batch. 4096 keeps a batch's state writes bounded while leaving far more groups than tasks.
MAX_PARTITION_GROUPS = 4096
_PARTITION_GROUPS_WHY = (
    ": each partition group is one state file per committed version, so this many groups "
    "would write that many files every micro-batch; use a small multiple of numPartitions "
    f"(default {DEFAULT_PARTITION_GROUPS})")
DEFAULT_NUM_PARTITIONS = 2

_DDL_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(), "varchar": pa.string(), "bigint": pa.int64(), "long": pa.int64(),
    "int": pa.int32(), "integer": pa.int32(), "smallint": pa.int16(), "short": pa.int16(),
    "tinyint": pa.int8(), "byte": pa.int8(), "double": pa.float64(), "float": pa.float32(),
    "real": pa.float32(), "boolean": pa.bool_(), "bool": pa.bool_(), "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    "binary": pa.binary(),
}
_IDENT = re.compile(r"^`?([A-Za-z_][A-Za-z_0-9]*)`?$")


@dataclass(frozen=True)
class SourceConfig:
    """The validated options of one ``ordered-agg`` query (picklable, immutable)."""

    inputs: tuple[str, ...]
    format: str
    timestamp_column: str
    key_columns: tuple[str, ...]
    window_ms: int
    slide_ms: int
    aggregates: tuple[str, ...]
    state_location: str
    partition_groups: int
    num_partitions: int
    max_records_per_trigger: int | None
    out_of_order: str
    end_of_input: str
    schema: pa.Schema | None
    scheduler: str | None
    idle_timeout_ms: int | None = None
    workers: int = 1
    late_files: str = "fail"

    @property
    def n_inputs(self) -> int:
        """Number of input streams."""
        return len(self.inputs)


def parse_duration(option: str, text: str) -> int:
    """Parse ``"30 seconds"``/``"30s"``/``"500ms"``/``"1 minute"`` into positive milliseconds.

    Uses the runtime's parser (one grammar for CLI, configs and Spark options), which also
    refuses durations longer than the supported event-time span (years 0001..9999), so an
    overflowing ``window`` fails here, on the driver, and not in an executor.
    """
    from spark_stream_sched.runtime.windows import parse_duration as runtime_parse

    try:
        return runtime_parse(text, "value")
    except ConfigError as exc:
        raise ConfigError(f"option {option}={text!r}: {exc}") from exc


def parse_ddl(text: str) -> pa.Schema:
    """Parse a simple Spark DDL string (``"ts bigint, meter string, v double"``) to Arrow.

    Supports the flat primitive types of :data:`_DDL_TYPES` (no structs, arrays or decimals).
    """
    fields = []
    for part in (p.strip() for p in text.split(",")):
        words = part.split()
        ident = _IDENT.match(words[0]) if words else None
        kind = words[1].lower() if len(words) >= 2 else ""
        extra = [w.lower() for w in words[2:]]
        if not ident or kind not in _DDL_TYPES or extra not in ([], ["not", "null"]):
            raise ConfigError(
                f"option schema={text!r}: cannot parse {part!r}; write 'name type, ...' with "
                f"types {', '.join(sorted(_DDL_TYPES))}")
        fields.append(pa.field(ident.group(1), _DDL_TYPES[kind], nullable=not extra))
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise ConfigError(f"option schema={text!r}: a column name is used twice")
    return pa.schema(fields)


def split_names(option: str, text: str) -> tuple[str, ...]:
    """Split a comma-separated list of column names (ConfigError naming ``option``)."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        if not _IDENT.match(name):
            raise ConfigError(f"option {option}={text!r}: {name!r} is not a column name")
    return tuple(_IDENT.match(n).group(1) for n in names)  # type: ignore[union-attr]


def choice_option(option: str, text: str, choices: tuple[str, ...]) -> str:
    """Match ``text`` case-insensitively against ``choices`` (ConfigError listing them)."""
    for choice in choices:
        if text.strip().lower() == choice.lower():
            return choice
    raise ConfigError(f"option {option}={text!r} is not one of {', '.join(choices)}")


def int_option(option: str, text: str, minimum: int, maximum: int | None = None,
               why: str = "") -> int:
    """Parse an integer option in ``minimum .. maximum`` (ConfigError naming ``option``).

    ``why`` explains the maximum in the error message.
    """
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"option {option}={text!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"option {option}={text!r} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"option {option}={text!r} must be at most {maximum}{why}")
    return value


def canonical_options(options: Mapping[str, str], names: tuple[str, ...],
                      required: tuple[str, ...], what: str) -> dict[str, str]:
    """Map case-insensitive keys to the canonical ``names``; check the ``required`` ones.

    ``what`` names the component in messages (``"source"``, ``"sink"``). Unknown keys are refused
    with a did-you-mean suggestion (Spark lower-cases option keys).
    """
    by_lower = {name.lower(): name for name in names}
    out: dict[str, str] = {}
    for key, value in options.items():
        name = by_lower.get(key.lower())
        if name is None:
            guess = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
            hint = f"; did you mean {by_lower[guess[0]]!r}?" if guess else ""
            raise ConfigError(f"unknown option {key!r} for the ordered-agg {what}{hint} "
                              f"Known options: {', '.join(names)}")
        out[name] = str(value)
    for name in required:
        if not out.get(name, "").strip():
            raise ConfigError(f"option {name} is required by the ordered-agg {what}; "
                              f"e.g. .option({name!r}, ...)")
    return out


def _strategy(text: str) -> str | None:
    """Validate option ``scheduler`` against the strategy registry (None when unset)."""
    name = text.strip().lower()
    if not name:
        return None
    from spark_stream_sched.runtime.scheduler.strategies import strategy_names

    if name not in strategy_names():
        guess = difflib.get_close_matches(name, list(strategy_names()), n=1)
        hint = f"; did you mean {guess[0]!r}?" if guess else ""
        raise ConfigError(f"option scheduler={text!r} is not a scheduling strategy{hint} "
                          f"Known: {', '.join(strategy_names())}")
    return name


def _check_aggregates(text: str) -> tuple[str, ...]:
    # Imported lazily: the runtime parser is the one source of truth for aggregate syntax.
    from spark_stream_sched.runtime.aggregates import parse_aggregates, split_top_level

    items = tuple(split_top_level(text))
    try:
        parse_aggregates(list(items))
    except ConfigError as exc:
        raise ConfigError(f"option aggregates={text!r}: {exc}") from exc
    return items


def parse_options(options: Mapping[str, str]) -> SourceConfig:
    """Parse and validate the source options (keys in any case).

    Raises
    ------
    ConfigError
        Unknown option, missing required option or a malformed value; the message names the
        option and the value.

    Notes
    -----
    Called on the driver. Checks that need the input schema (columns of the aggregates, key and
    timestamp columns) happen when the reader builds the window operator.
    """
    opts = canonical_options(options, OPTION_NAMES, REQUIRED, "source")
    inputs = tuple(p.strip() for p in opts["inputs"].split(",") if p.strip())
    if not inputs:
        raise ConfigError(f"option inputs={opts['inputs']!r} names no input path")
    window_ms = parse_duration("window", opts["window"])
    slide_ms = parse_duration("slide", opts.get("slide", opts["window"]))
    if slide_ms > window_ms:
        raise ConfigError(f"option slide={opts['slide']!r} is longer than window="
                          f"{opts['window']!r}; windows would leave gaps")
    limit = int_option("maxRecordsPerTrigger",
                 opts.get("maxRecordsPerTrigger", str(DEFAULT_MAX_RECORDS_PER_TRIGGER)), 0)
    ts_col = split_names("timestampColumn", opts.get("timestampColumn", "ts"))
    if len(ts_col) != 1:
        raise ConfigError(f"option timestampColumn={opts.get('timestampColumn')!r} must name "
                          f"exactly one column")
    schema_text = opts.get("schema", "").strip()
    return SourceConfig(
        inputs=inputs,
        format=choice_option("format", opts.get("format", "parquet"), FORMATS),
        timestamp_column=ts_col[0],
        key_columns=split_names("keyColumns", opts.get("keyColumns", "")),
        window_ms=window_ms,
        slide_ms=slide_ms,
        aggregates=_check_aggregates(opts["aggregates"]),
        state_location=opts["stateLocation"].strip(),
        partition_groups=int_option("partitionGroups",
                                    opts.get("partitionGroups", str(DEFAULT_PARTITION_GROUPS)),
                                    1, MAX_PARTITION_GROUPS, _PARTITION_GROUPS_WHY),
        num_partitions=int_option("numPartitions",
                            opts.get("numPartitions", str(DEFAULT_NUM_PARTITIONS)), 1),
        max_records_per_trigger=limit or None,
        out_of_order=choice_option("outOfOrder", opts.get("outOfOrder", "fail"), OUT_OF_ORDER),
        end_of_input=choice_option("endOfInput", opts.get("endOfInput", "never"), END_OF_INPUT),
        schema=parse_ddl(schema_text) if schema_text else None,
        scheduler=_strategy(opts.get("scheduler", "")),
        workers=int_option("workers", opts.get("workers", "1"), 1),
        late_files=choice_option("lateFiles", opts.get("lateFiles", "fail"), LATE_FILES),
        idle_timeout_ms=(parse_duration("idleTimeout", opts["idleTimeout"])
                         if opts.get("idleTimeout", "").strip() else None),
    )
