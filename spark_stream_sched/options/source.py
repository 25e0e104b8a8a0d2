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

=====================  ========  =================================================================
option                 default   meaning
=====================  ========  =================================================================
inputs                 required  comma-separated, one per input stream: a directory (its files in
                                 name order hold the stream; hidden ``.``/``_`` files skipped) or a
                                 glob (matches sorted by path). Files that appear later must sort
                                 after the last file the source admitted from that input
                                 (see ``lateFiles``).
format                 parquet   ``parquet``, ``csv`` (header row) or ``jsonl`` (one object a
                                 line; ``json`` is an alias); see ``inputs/formats.py``
timestampColumn        ts        event time: int64 milliseconds or a timestamp column; values
                                 must lie in years 0001..9999 (Spark's timestamp range), else
                                 the query fails naming input, file and row
keyColumns             (none)    comma-separated key columns (empty: one global key)
window                 required  window size as a Spark interval: ``30 seconds``, ``30s``,
                                 ``interval 1 minute``, ``1 minute 30 seconds``, ``1 week``,
                                 ``500 milliseconds``; a bare number is refused; at most the
                                 supported event-time span (years 0001..9999). Fixed at first
                                 start
slide                  = window  slide (tumbling windows when equal to window)
aggregates             required  e.g. ``count(*) as n, avg(value) as mean, first(value) as f``;
                                 split at top-level commas only (``first_where(v, a > 1)`` is one)
stateLocation          required  directory for the runtime state (one per query, like a checkpoint);
                                 streams only: a batch read (``spark.read``) keeps its state
                                 in memory and ignores it (``spark/batch.py``)
partitionGroups        16        number of partition groups (units of state); fixed at first start;
                                 at most 4096 (each group is one state file per version)
numPartitions          2         Spark tasks per micro-batch; each owns a range of partition
                                 groups and reads the batch's rows of every input
maxRecordsPerTrigger   500000    input rows admitted per micro-batch: the earliest rows over all
                                 inputs (by event time); ``0`` = no limit. A micro-batch costs
                                 ~0.2-0.35 s of fixed overhead in local[2]; 500k rows take
                                 ~1.5-2 s to process
outOfOrder             fail      ``fail`` or ``drop`` a row whose ts is below an earlier one
where                  (none)    keep only merged rows matching this predicate before the windows,
                                 e.g. ``kind = 'reading'`` (the safe predicate language)
operators              (none)    keyed operators per key, in order, separated by ``;``:
                                 ``delta(value) as used; dedup(kind, within=10 seconds)``;
                                 without ``window`` the last one gives the result: rows
                                 (``delta``, ``lag``, ``running``, ``dedup``, ``where``, ``udf``)
                                 or sessions (``sessionize(5 minutes)`` with ``aggregates``).
                                 See docs/keyed.md
endOfInput             never     when an input counts as finished, so that the last windows are
                                 flushed once all inputs have: ``never`` (a directory that keeps
                                 receiving files; open windows wait, as in Spark);
                                 ``availableNow`` (all files present when a
                                 ``Trigger.AvailableNow`` query starts are consumed: bounded
                                 runs); ``exhausted`` (all files listed so far are consumed).
                                 A finished input stays finished; later files are ignored with
                                 a warning. ``Trigger.AvailableNow`` with ``never`` logs a
                                 warning naming ``availableNow`` (the last windows stay open);
                                 an input without files at start is reported with a warning.
                                 Batch reads: every input finishes at the end (option ignored)
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
workers                1         executor worker threads per Spark task. Above 1 without
                                 ``scheduler`` the groups run on the executor under ``fifo``
                                 (as the CLI's ``--workers`` does)
idleTimeout            (off)     e.g. ``30 seconds``: an unfinished input that has had no new
                                 row for this long (wall clock, measured on the driver) is marked
                                 *idle* in the batch's end offset and stops holding back the
                                 ready bound; its next row makes it active again. Rows it then
                                 sends below the bound already released are *late*: an error, or
                                 dropped with ``outOfOrder=drop``
adaptation             none      distributed adaptation of partition groups across the Spark
                                 tasks at micro-batch boundaries (seed 003 §5-§6): ``none``
                                 (each task owns a fixed range of groups), ``lazy-disk`` (move
                                 the most productive groups from the fullest task to the
                                 emptiest when ``M_l/M_m < thetaD``; push to disk only what
                                 rebalancing cannot hold) or ``active-disk`` (also push the
                                 low-output task's least productive groups when memory is
                                 balanced but ``MaxRate/MinRate > thetaF``). Decisions come from
                                 the previous batch's recorded metrics and are recorded with the
                                 batch (``<stateLocation>/assignments``), so replays repeat them;
                                 pushes apply only when the last operator is a ``join`` and
                                 there is no window. See docs/state_store.md
thetaD                 0.8       move groups when ``M_l / M_m < thetaD``, in (0, 1]
thetaF                 2.0       active-disk pushes when ``MaxRate / MinRate > thetaF`` (>= 1)
pushFraction           0.3       least share of an over-budget task's state pushed to disk at
                                 once (seed 003 §4.4; Fig. 9), in (0, 1]
stateMemoryBudget      (none)    bytes of partition-group state in memory per task, e.g.
                                 ``512m``: a task above it pushes its least productive groups
                                 (with adaptation); also the size of the committed-state cache
                                 of each Python worker (default 256m)
keepMetrics            1000      micro-batches whose metrics files (``metrics/batch-*.json``,
                                 about 1-2 KB each) and assignment records are kept under
                                 ``stateLocation``; older ones are deleted at each commit
                                 (docs/state_store.md, "Retention")
spillLocation          (temp)    absolute directory under which the ``join`` stages write the
                                 state they push to disk (one ``join-spill-*`` directory per
                                 join stage and partition group, created when the first push
                                 happens, deleted when the group's batch ends); default: the
                                 system temp directory of each Python worker (Python's
                                 ``tempfile.gettempdir()``: ``$TMPDIR``, else ``/tmp``)
(path)                 refused   ``load(path)`` / option ``path`` is refused with a pointer to
                                 ``inputs`` (a query merges several streams; ``path`` names one)
=====================  ========  =================================================================

The options that define the query are recorded under ``stateLocation`` at first start; a
restart with a changed one fails at ``load()``, naming the option, the recorded and the new
value (``runtime/query/recorded.py``).

``idleTimeout`` keeps determinism (DESIGN.md §2) because the decision is *recorded*: it is part
of the offset that Spark writes to its offset log before the batch runs, so a replay or a
restart reproduces exactly the same ready bounds and results.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.inputs.formats import canonical_format
from spark_stream_sched.runtime.distribution.manager import (
    ADAPTATION_OPTIONS,
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

#: Canonical option names (documented spelling); matching is case-insensitive.
OPTION_NAMES: tuple[str, ...] = (
    "inputs", "format", "timestampColumn", "keyColumns", "window", "slide", "aggregates",
    "stateLocation", "partitionGroups", "numPartitions", "maxRecordsPerTrigger", "outOfOrder",
    "endOfInput", "schema", "scheduler", "workers", "idleTimeout", "lateFiles", "where",
    "operators", "keepMetrics", "spillLocation", *ADAPTATION_OPTIONS,
)
REQUIRED = ("inputs", "window", "aggregates", "stateLocation")
#: Required by a batch read (``spark.read``), which keeps its state in memory.
BATCH_REQUIRED = ("inputs", "window", "aggregates")
END_OF_INPUT = ("never", "availableNow", "exhausted")
LATE_FILES = ("fail", "skip")
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
    return SourceConfig(
        spec=spec_from_options(opts, len(inputs)),
        inputs=inputs,
        format=canonical_format(opts.get("format", "parquet"), "option format"),
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
    )


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
