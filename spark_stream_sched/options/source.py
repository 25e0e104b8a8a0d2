"""Options of the ``ordered-agg`` source, parsed once into a frozen, typed :class:`SourceConfig`.

The options that define the query (window, slide, aggregates, keys, timestamp column,
outOfOrder, where, partitionGroups and the number of inputs) become a
:class:`~spark_stream_sched.runtime.query.QuerySpec` through the runtime's
:func:`~spark_stream_sched.runtime.query.spec_from_options` (the sink, TOML job configs and CLI
flags build the same spec); the rest say how the query runs.

Spark lower-cases option keys, so keys are matched case-insensitively; unknown keys are refused
with a did-you-mean suggestion. Every check here runs on the driver (from
``DataSource.schema()`` / ``streamReader()``), so a bad option fails at ``load()``/``start()``,
never in an executor later. Errors are :class:`~spark_stream_sched.errors.ConfigError` naming
the option and the value.

The options, their types, defaults and meanings are declared once, in :mod:`.table`, and
listed in docs/options.md (generated from it); docs/source.md explains end of input, idle
inputs, late files, admission control, metrics and errors. ``load(path)`` / option ``path`` is
refused with a pointer to ``inputs`` (a query merges several streams; ``path`` names one).

The options that define the query are recorded under ``stateLocation`` at first start; a
restart with a changed one fails at ``load()``, naming the option, the recorded and the new
value (``runtime/query/recorded.py``).

``idleTimeout`` keeps results deterministic (README, "Semantics") because the decision is
*recorded*: it is part of the offset that Spark writes to its offset log before the batch runs, so a
replay or a restart reproduces exactly the same ready bounds and results.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.inputs.formats import canonical_format
from spark_stream_sched.options.table import option_names
from spark_stream_sched.runtime.distribution.manager import (
    AdaptationConfig,
    adaptation_from_options,
)
from spark_stream_sched.runtime.durations import parse_duration as runtime_duration
from spark_stream_sched.runtime.names import (
    did_you_mean,
    normalise_options,
    query_required,
)
from spark_stream_sched.runtime.query.spec import (
    MAX_PARTITION_GROUPS,
    QuerySpec,
    SpecView,
    spec_from_options,
)
from spark_stream_sched.runtime.state.batch_metrics import KEEP_BATCHES

#: Canonical option names (documented spelling, declared in :mod:`.table`); matching is
#: case-insensitive.
OPTION_NAMES: tuple[str, ...] = option_names("source")
REQUIRED = ("inputs", "window", "aggregates", "stateLocation")
#: Required by a batch read (``spark.read``), which keeps its state in memory.
BATCH_REQUIRED = ("inputs", "window", "aggregates")
END_OF_INPUT = ("never", "availableNow", "exhausted")
LATE_FILES = ("fail", "skip")
#: Where a micro-batch's rows are read and split by partition group (option ``splitRows``);
#: ``auto`` is ``tasks`` for Parquet inputs, whose admission needs only footers on the driver,
#: and ``driver`` for the others, whose timestamps the driver reads anyway (:func:`split_rows`).
SPLIT_ROWS = ("auto", "driver", "tasks")
DEFAULT_MAX_RECORDS_PER_TRIGGER = 500_000
DEFAULT_NUM_PARTITIONS = 2
#: Spark passes a row limit to the source as a Java ``long``.
MAX_ROWS = 2**63 - 1
#: Executor threads per Spark task (a task runs at most ``MAX_PARTITION_GROUPS`` groups).
MAX_WORKERS = 256
#: Batches of history a state location may be asked to keep (option ``keepMetrics``).
MAX_KEEP = 1_000_000

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
class SourceConfig(SpecView):
    """The validated options of one ``ordered-agg`` query (picklable, immutable).

    ``spec`` is *what* the query computes (fixed for a state location); the other fields say
    how and where it runs.
    """

    spec: QuerySpec
    inputs: tuple[str, ...]
    format: str
    state_location: str
    num_partitions: int
    max_records_per_trigger: int | None
    end_of_input: str
    schema: pa.Schema | None
    scheduler: str | None
    idle_timeout_ms: int | None = None
    workers: int = 1
    late_files: str = "fail"
    adaptation: AdaptationConfig = AdaptationConfig()
    keep_metrics: int = KEEP_BATCHES
    spill_location: str | None = None
    split_rows: str = "driver"


def parse_duration(option: str, text: str) -> int:
    """Parse a Spark interval string (``"30 seconds"``, ``"30s"``, ...) into milliseconds.

    The runtime's one grammar (:mod:`spark_stream_sched.runtime.durations`): a bare number is
    refused, and so is a duration longer than the supported event-time span, here on the
    driver and not in an executor.
    """
    try:
        return runtime_duration(text, "value")
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


def choice_option(option: str, text: str, choices: tuple[str, ...]) -> str:
    """Match ``text`` case-insensitively against ``choices`` (ConfigError listing them)."""
    for choice in choices:
        if text.strip().lower() == choice.lower():
            return choice
    raise ConfigError(f"option {option}={text!r} is not one of {', '.join(choices)}")


def int_option(option: str, text: str, minimum: int, maximum: int, why: str = "") -> int:
    """Parse an integer option in ``minimum .. maximum`` (ConfigError naming ``option``).

    Every integer option has both bounds, so a value no one meant (``1e20``, a number past a
    Java ``long``) fails here on the driver, naming the option and the bound, instead of
    overflowing in Spark or an executor later. ``why`` explains the maximum in the message.
    """
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"option {option}={text!r} is not an integer; write it in digits, "
                          f"from {minimum} to {maximum}") from None
    if value < minimum:
        raise ConfigError(f"option {option}={text!r} must be at least {minimum}")
    if value > maximum:
        raise ConfigError(f"option {option}={text!r} must be at most {maximum}{why}")
    return value


def _strategy(text: str) -> str | None:
    """Validate option ``scheduler`` against the strategy registry (None when unset)."""
    name = text.strip().lower()
    if not name:
        return None
    from spark_stream_sched.runtime.scheduler.strategies import strategy_names

    if name not in strategy_names():
        hint = did_you_mean(name, strategy_names())
        raise ConfigError(f"option scheduler={text!r} is not a scheduling strategy{hint} "
                          f"Known: {', '.join(strategy_names())}")
    return name


def reject_path(options: Mapping[str, str]) -> None:
    """Refuse ``load(path)`` / option ``path``, pointing at option ``inputs``.

    An ``ordered-agg`` query merges several streams, one per entry of ``inputs``; Spark's
    ``path`` names one dataset, so it is not taken as a silent alias.
    """
    for key, value in options.items():
        if key.lower() in ("path", "paths"):
            raise ConfigError(
                f"the ordered-agg source takes its input directories from option inputs, not "
                f"from load(path) or option {key}={value!r}: write .option('inputs', "
                f"'/data/in0,/data/in1').load() (one directory or glob per input stream, "
                f"comma-separated)")


def parse_options(options: Mapping[str, str], streaming: bool = True) -> SourceConfig:
    """Parse and validate the source options (keys in any case).

    With ``streaming`` False (a batch read, ``spark.read``) option ``stateLocation`` is not
    required: a batch read keeps its state in memory.

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
    reject_path(options)
    required = REQUIRED if streaming else BATCH_REQUIRED
    opts = normalise_options(options, OPTION_NAMES, query_required(required, options),
                             "ordered-agg source")
    inputs = tuple(p.strip() for p in opts["inputs"].split(",") if p.strip())
    if not inputs:
        raise ConfigError(f"option inputs={opts['inputs']!r} names no input path")
    schema_text = opts.get("schema", "").strip()
    fmt = canonical_format(opts.get("format", "parquet"), "option format")
    return SourceConfig(
        spec=spec_from_options(opts, len(inputs)),
        inputs=inputs,
        format=fmt,
        state_location=opts.get("stateLocation", "").strip(),
        num_partitions=int_option("numPartitions",
                                  opts.get("numPartitions", str(DEFAULT_NUM_PARTITIONS)), 1,
                                  MAX_PARTITION_GROUPS, " (a task runs at least one partition "
                                  "group)"),
        max_records_per_trigger=int_option(
            "maxRecordsPerTrigger",
            opts.get("maxRecordsPerTrigger", str(DEFAULT_MAX_RECORDS_PER_TRIGGER)), 0, MAX_ROWS,
            " (Spark's row limit is a Java long); 0 admits every row") or None,
        end_of_input=choice_option("endOfInput", opts.get("endOfInput", "never"), END_OF_INPUT),
        schema=parse_ddl(schema_text) if schema_text else None,
        scheduler=_strategy(opts.get("scheduler", "")),
        workers=int_option("workers", opts.get("workers", "1"), 1, MAX_WORKERS,
                           " executor threads per Spark task"),
        late_files=choice_option("lateFiles", opts.get("lateFiles", "fail"), LATE_FILES),
        idle_timeout_ms=(parse_duration("idleTimeout", opts["idleTimeout"])
                         if opts.get("idleTimeout", "").strip() else None),
        adaptation=adaptation_from_options(opts),
        keep_metrics=keep_option(opts),
        spill_location=spill_option(opts),
        split_rows=split_rows(opts.get("splitRows", "auto"), fmt),
    )


def split_rows(text: str, fmt: str) -> str:
    """Option ``splitRows`` (``text``) resolved to ``driver`` or ``tasks`` for input format ``fmt``.

    ``auto`` is ``tasks`` when the inputs are Parquet: the driver then admits whole row groups
    from the files' footers and reads no row, and each task reads the batch's columns it uses
    (on the benchmark's data the tasks' reads cost less than the driver's read-split-write with
    2 to 8 tasks on 2 cores, and the same with 16: docs/source.md). For CSV and JSON lines
    the driver parses the timestamps to admit rows anyway and every task's parse of the whole
    batch costs more (measured: the tasks were faster with 2 tasks, slower with 4 and 8), so
    ``auto`` is ``driver``, whose cost does not grow with the tasks.
    """
    chosen = choice_option("splitRows", text, SPLIT_ROWS)
    if chosen != "auto":
        return chosen
    return "tasks" if fmt == "parquet" else "driver"


def spill_option(opts: Mapping[str, str]) -> str | None:
    """Option ``spillLocation`` (source and sink): an absolute directory, or None (temp dir).

    Raises
    ------
    ConfigError
        A relative path (the Python workers run in other working directories than the driver)
        or a path that exists and is not a directory.
    """
    text = opts.get("spillLocation", "").strip()
    if not text:
        return None
    if not os.path.isabs(text):
        raise ConfigError(f"option spillLocation={text!r} must be an absolute path: the join's "
                          f"spill files are written by Spark's Python workers, which run in "
                          f"other working directories than the driver")
    if os.path.exists(text) and not os.path.isdir(text):
        raise ConfigError(f"option spillLocation={text!r} exists and is not a directory; give "
                          f"a directory (it is created if missing)")
    return text


def keep_option(opts: Mapping[str, str]) -> int:
    """Option ``keepMetrics``: batches of per-batch records kept (source and sink)."""
    return int_option("keepMetrics", opts.get("keepMetrics", str(KEEP_BATCHES)), 1, MAX_KEEP)
