"""Every user setting of every front door, declared once: the source for docs/options.md.

One :class:`Setting` is one setting, with its spelling at each front door where it exists: the
``ordered-agg`` source (``spark.readStream.format("ordered-agg").option(...)``), the sink
(``df.writeStream.format("ordered-agg").option(...)``), the ``ordered()`` transformation, the
TOML job configs (``spark-stream-sched run``, ``spark-submit``) and the ``aggregate`` command
line. The parsers take their option names from here (:func:`option_names`), and
``tests/test_options_reference.py`` checks the rest against them: the ``ordered()`` signature,
the TOML dataclasses' keys and defaults, the command line's flags and defaults, and that every
documented default of the source and the sink is what the parser does without the option.
:mod:`.reference` renders the tables (``python -m spark_stream_sched.options.reference``).
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_stream_sched.runtime.aggregates import signatures

#: The front doors, in the order of the table's columns.
DOORS = ("source", "sink", "ordered", "toml", "cli")


@dataclass(frozen=True)
class Setting:
    """One setting and its spelling at each front door ("" where it does not exist).

    ``value`` is the default written as an option value: passing it must change nothing (a test
    parses with and without it); None where the default is not a value one can write.
    """

    source: str = ""
    sink: str = ""
    ordered: str = ""
    toml: str = ""
    cli: str = ""
    kind: str = ""
    default: str = ""
    meaning: str = ""
    value: str | None = None


S = Setting
_ADAPT = "source only; see docs/state_store.md"
#: (title, settings) groups, in the order of docs/options.md.
GROUPS: tuple[tuple[str, tuple[Setting, ...]], ...] = (
    ("The query (the same setting at every front door)", (
        S("timestampColumn", "timestampColumn", "timestamp=", "[query] timestamp_column",
          "--timestamp", "column name", "ts",
          "event time: int64 milliseconds since the epoch or a timestamp column", "ts"),
        S("keyColumns", "keyColumns", "keys=", "[query] key_columns", "--key (repeated)",
          "column names (comma-separated)", "none (one global key)",
          "the group-by columns; each key's rows go to one partition group (stable hash)", ""),
        S("window", "window", ".window(size)", "[query] window", "--window",
          "Spark interval (`30 seconds`, `30s`, `1 minute`)", "required",
          "window size; a bare number is refused; optional when operators give the result"),
        S("slide", "slide", ".window(size, slide)", "[query] slide", "--slide",
          "Spark interval, at least window / 10,000,000", "the window (tumbling)",
          "window slide; windows are aligned to the epoch: `[k*slide, k*slide + window)`; a row "
          "is in `window/slide` windows (docs/aggregates.md, \"Many windows per row\")"),
        S("aggregates", "aggregates", ".agg(...)", "[query] aggregates", "--agg (repeated)",
          "`expr as alias`, comma-separated; at most 1,000", "required",
          "e.g. `count(*) as n, avg(value) as mean, first(value) as f`; functions: "
          + ", ".join(f"`{call}`" for call in signatures()) +
          " (docs/aggregates.md: nulls as in Spark SQL; `first`, `last` and ties of "
          "`max_by`/`min_by` follow the total order); aliases may not start with `__` (the "
          "runtime's columns), and no two result columns "
          "(aliases, keys, `window_start`/`window_end`) may be equal up to case, which Spark "
          "could not read back; at most 4,096 result columns"),
        S("outOfOrder", "outOfOrder", "out_of_order=", "[query] out_of_order", "--out-of-order",
          "`fail` or `drop`", "fail",
          "a row whose event time is below an earlier one of its input: stop naming both, or "
          "drop and count it", "fail"),
        S("where", "where", "", "[query] where", "--where",
          "predicate; parentheses and `not` nest at most 100 deep", "none",
          "keep only merged rows matching it before the windows, e.g. `kind = 'reading'`", ""),
        S("operators", "operators", ".operators(...)", "[query] operators", "--op (repeated)",
          "keyed operators, `;`-separated", "none",
          "per-key stages before the window (`delta`, `lag`, `running`, `dedup`, `where`, "
          "`sessionize`, `join`, `udf`; docs/keyed.md); without a window the last gives the "
          "result; an alias may not start with `__`", ""),
        S("partitionGroups", "partitionGroups", "partition_groups=", "[query] partition_groups",
          "", "integer 1..4096", "16",
          "partition groups: the units of state (fixed at first start)", "16"),
    )),
    ("The source: `spark.readStream.format(\"ordered-agg\")` (and the same setting "
     "elsewhere)", (
        S("inputs", cli="--input (repeated)", toml="[data] paths", kind="paths, comma-separated",
          default="required",
          meaning="one directory (its files in name order; hidden `.`/`_` files skipped) or "
                  "glob per input stream; later files must sort after those admitted "
                  "(`lateFiles`); `load(path)` is refused"),
        S("format", cli="--format", toml="[data] format", kind="`parquet`, `csv`, `jsonl`",
          default="parquet", meaning="input file format (`json` is an alias of `jsonl`)",
          value="parquet"),
        S("stateLocation", kind="directory", default="required for streams",
          meaning="the query's state (one per query, on a file system driver and executors "
                  "share); a batch read keeps its state in memory"),
        S("numPartitions", kind="integer >= 1", default="2",
          meaning="Spark tasks per micro-batch; each owns a range of partition groups",
          value="2"),
        S("maxRecordsPerTrigger", toml="[job] max_records_per_trigger",
          kind="integer >= 0 (0: no limit)", default="500000 (TOML: 100000)",
          meaning="input rows admitted per micro-batch, the earliest by event time",
          value="500000"),
        S("endOfInput", kind="`never`, `availableNow`, `exhausted`", default="never",
          meaning="when an input counts as finished, so that the last windows close: `never` "
                  "(open windows wait, as in Spark), `availableNow` (the files present when a "
                  "`Trigger.AvailableNow` query starts), `exhausted` (the files listed so far); "
                  "a finished input stays finished", value="never"),
        S("lateFiles", kind="`fail`, `skip`", default="fail",
          meaning="a file that sorts before one already admitted: stop naming it, or skip "
                  "and count it", value="fail"),
        S("idleTimeout", sink="idleTimeout", kind="Spark interval", default="off",
          meaning="an input with no new row for this long (driver's wall clock) stops holding "
                  "the ready bound back; its later rows below it are late"),
        S("schema", kind="DDL, e.g. `ts bigint, meter string`",
          default="inferred from the first file (a stream: at its first start, then recorded)",
          meaning="the input rows' schema"),
        S("scheduler", cli="--scheduler",
          kind="`fifo`, `round_robin`, `chain`, `path_capacity`, `segment`, "
               "`simplified_segment`, `threshold`, `qst`, `lp`, `et`, `ct`",
          default="none (groups run one after another)",
          meaning="run each batch's groups on the threaded executor under this scheduling "
                  "strategy (docs/references.md); results are identical for every one"),
        S("workers", cli="--workers", kind="integer 1..256", default="1",
          meaning="executor worker threads per Spark task (above 1 without a scheduler: "
                  "`fifo`)", value="1"),
        S("keepMetrics", sink="keepMetrics", kind="integer >= 1", default="1000",
          meaning="micro-batches whose metrics files (source) or commit markers (sink) are "
                  "kept", value="1000"),
        S("spillLocation", sink="spillLocation", kind="absolute directory",
          default="each Python worker's temp directory (`$TMPDIR`, else `/tmp`)",
          meaning="where `join` stages write the state they push to disk: one `join-spill-*` "
                  "directory per join stage and partition group, deleted when the group's "
                  "batch ends"),
        S("splitRows", kind="`auto`, `driver`, `tasks`", default="auto",
          meaning="where a micro-batch's rows are read and split by partition group: in every "
                  "task, each reading the batch's columns it uses and keeping its groups' rows, "
                  "the driver admitting Parquet inputs by whole row groups from their footers' "
                  "statistics (`maxRecordsPerTrigger` counted in whole row groups when one fits) "
                  "and reading only the timestamps of other inputs; or once on the driver, each "
                  "task then reading only its own rows; `auto`: `tasks` for Parquet inputs, "
                  "`driver` for CSV and JSON lines (docs/source.md, \"Where the rows are "
                  "read\"); results are identical", value="auto"),
        S("adaptation", kind="`none`, `lazy-disk`, `active-disk`", default="none",
          meaning="move partition groups between Spark tasks at batch boundaries and push "
                  "join state to disk (Liu & Rundensteiner (2005), §5–§6); " + _ADAPT,
          value="none"),
        S("thetaD", kind="number in (0, 1]", default="0.8",
          meaning="move groups when the least memory a task uses divided by the most is below "
                  "this (the paper's θ_d)"),
        S("thetaF", kind="number >= 1", default="2.0",
          meaning="active-disk also pushes when the highest output rate of a task divided by "
                  "the lowest is above this"),
        S("stateMemoryBudget", kind="bytes, e.g. `512m`", default="none",
          meaning="partition-group state per task held in memory; above it the least "
                  "productive groups go to disk (with adaptation)"),
        S("pushFraction", kind="number in (0, 1]", default="0.3",
          meaning="least share of an over-budget task's state pushed to disk at once "
                  "(Liu & Rundensteiner (2005), §4.4)"),
    )),
    ("Sink only: `df.writeStream.format(\"ordered-agg\")`", (
        S(sink="path", kind="directory", default="required",
          meaning="output directory: one Parquet file per micro-batch that closed windows"),
        S(sink="inputs", kind="integer 1..10000", default="required",
          meaning="number of input streams N; input ids are `0 .. N-1`"),
        S(sink="inputColumn", kind="column name", default="input",
          meaning="integer column holding each row's input id", value="input"),
        S(sink="sequenceColumn", ordered="sequence=", kind="column name",
          default="none (sink); required (ordered())",
          meaning="the order of one input's rows (a Kafka offset, `_metadata.row_index`); "
                  "orders rows with equal event times"),
        S(sink="endOfInputColumn", ordered="end_of_input=", kind="boolean column",
          default="none",
          meaning="a row with `true` declares its input finished (the row is not data); "
                  "without it the last windows stay open"),
        S(sink="stateLocation", kind="directory",
          default="`<checkpointLocation>/ordered-agg-sink`",
          meaning="the sink's state and staged rows"),
        S(sink="checkpointLocation", kind="directory", default="Spark's",
          meaning="Spark's checkpoint (the sink's state goes under it by default)"),
        S(sink="keepVersions", kind="integer >= 1", default="10",
          meaning="state versions kept; older ones are pruned at each commit", value="10"),
        S(sink="queryName", kind="text", default="none",
          meaning="Spark's query name (accepted, as Spark passes it)"),
    )),
    ("`ordered()` only: `spark_stream_sched.spark.transform.ordered(inputs, ...)`", (
        S(ordered="inputs", kind="list of streaming DataFrames", default="required",
          meaning="one DataFrame per input; input `j` is `inputs[j]`, each sorted by event time"),
        S(ordered=".rows()", kind="method", default="",
          meaning="the last operator's rows instead of windows"),
    )),
    ("Job configs (TOML; `spark-stream-sched run`, `spark-submit`)", (
        S(toml="[job] name", kind="text", default="ordered_agg", meaning="the job's name"),
        S(toml="[job] engine", cli="run --engine", kind="`source`, `sink`, `runtime`",
          default="source",
          meaning="the front door the job runs through (`runtime`: no Spark)"),
        S(toml="[job] output", kind="directory", default="demo-output/smart_grid/output",
          meaning="where the result Parquet files go"),
        S(toml="[job] checkpoint", kind="directory",
          default="demo-output/smart_grid/checkpoint",
          meaning="Spark's checkpoint (the source's state goes under it)"),
        S(toml="[job] master", cli="run --master", kind="Spark master URL", default="local[*]",
          meaning="where the job runs"),
        S(toml="[job] max_files_per_trigger", kind="integer", default="8",
          meaning="files per micro-batch of the sink engine's native file streams"),
        S(toml="[job] show", cli="run --show", kind="integer", default="12",
          meaning="result rows printed at the end"),
        S(toml="[data] generate", kind="boolean", default="true",
          meaning="write seeded smart-grid streams to `dir` first"),
        S(toml="[data] generator", kind="`smart_grid`", default="smart_grid",
          meaning="the sample-data generator"),
        S(toml="[data] dir", kind="directory", default="demo-output/smart_grid/input",
          meaning="where generated inputs go (`input-000` ...)"),
        S(toml="[data] inputs", kind="integer >= 1", default="8",
          meaning="generated input streams (data concentrators)"),
        S(toml="[data] meters", kind="integer", default="1000", meaning="generated meters"),
        S(toml="[data] rows", kind="integer >= 0", default="200000",
          meaning="generated rows over all inputs"),
        S(toml="[data] files_per_input", kind="integer >= 1", default="8",
          meaning="files each generated input is cut into"),
        S(toml="[data] seed", kind="integer", default="42", meaning="generator seed"),
        S(toml="[data] tick_ms", kind="integer", default="100",
          meaning="generated time step (ms)"),
        S(toml="[data] reading_interval_ms", kind="integer", default="1000",
          meaning="generated interval between a meter's readings (ms)"),
        S(toml="[spark] <key>", kind="text", default="none",
          meaning="extra Spark settings, e.g. `\"spark.sql.shuffle.partitions\" = \"2\"`"),
    )),
    ("Command line only: `spark-stream-sched aggregate` (no Spark)", (
        S(cli="--out", kind="file", default="required",
          meaning="result file; its suffix picks the format (`.parquet`, `.csv`, `.jsonl`; "
                  "`-`: CSV to standard output)"),
        S(cli="--queue", kind="`hybrid`, `partitioned`", default="hybrid",
          meaning="with `--op` on several workers: the keyed operators' work queue "
                  "(Prasaad et al. (2018), §4.2–§4.3)"),
        S(cli="--read-ahead", kind="integer >= 1", default="4",
          meaning="executor: read an input packet only while fewer than N wait"),
        S(cli="--metrics", kind="file", default="none",
          meaning="executor: write the run's metrics summary as JSON"),
    )),
    ("Command line: `spark-stream-sched run` and `demo`", (
        S(cli="run <config>", kind="TOML file", default="required",
          meaning="the job config, e.g. `conf/smart_grid.toml`"),
        S(cli="run --quiet", kind="flag", default="off", meaning="no line per micro-batch"),
        S(cli="demo --engine", kind="`spark`, `sink`, `runtime`", default="spark",
          meaning="the source, file streams into the sink, or the engine without Spark"),
        S(cli="demo --output", kind="directory", default="demo-output",
          meaning="inputs, checkpoint and results: a new or empty directory, or one an "
                  "earlier demo wrote (marked by its `_demo.json`), whose results and "
                  "checkpoint are replaced"),
        S(cli="demo --tmp", kind="flag", default="off",
          meaning="use a temporary directory, removed afterwards"),
        S(cli="demo --rows", kind="integer", default="100000", meaning="rows to generate"),
        S(cli="demo --show", kind="integer", default="12", meaning="result rows to print"),
        S(cli="demo --quiet", kind="flag", default="off", meaning="no line per micro-batch"),
    )),
)


def settings() -> tuple[Setting, ...]:
    """Every setting, in the order of docs/options.md."""
    return tuple(s for _, group in GROUPS for s in group)


def option_names(door: str) -> tuple[str, ...]:
    """The names of ``door``'s settings (``source`` or ``sink``), in table order."""
    return tuple(getattr(s, door) for s in settings() if getattr(s, door))
