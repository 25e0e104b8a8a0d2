"""Job configs: a TOML file parsed once into a frozen, validated :class:`JobConfig`.

A job reads N input streams (generated sample data or existing directories of files), runs the
ordered window aggregation and writes Parquet. Example (``conf/smart_grid.toml``)::

    [job]
    name = "smart_grid"
    engine = "source"          # source | sink | runtime
    output = "demo-output/smart_grid/output"
    checkpoint = "demo-output/smart_grid/checkpoint"

    [data]
    generate = true            # write seeded smart-grid streams to `dir` first
    dir = "demo-output/smart_grid/input"
    inputs = 8

    [query]
    key_columns = ["meter"]
    window = "30s"
    slide = "3s"
    aggregates = ["count(*) as readings", "first(value) as first_kwh"]

    [spark]                    # extra Spark settings
    "spark.sql.shuffle.partitions" = "2"

Relative paths are resolved against the current directory. Engines: ``source`` runs
``spark.readStream.format("ordered-agg")`` into Spark's Parquet file sink; ``sink`` unions N
native file streams and writes them with ``writeStream.format("ordered-agg")``; ``runtime``
runs the pure runtime without Spark.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.inputs.formats import FORMAT_NAMES
from spark_stream_sched.runtime.durations import parse_duration
from spark_stream_sched.runtime.names import did_you_mean, one_name, split_list, split_names
from spark_stream_sched.runtime.query import QuerySpec
from spark_stream_sched.runtime.query.spec import DEFAULT_PARTITION_GROUPS

T = TypeVar("T")
ENGINES = ("source", "sink", "runtime")


@dataclass(frozen=True)
class DataConfig:
    """Where the inputs are, and how to generate them when ``generate`` is true."""

    generate: bool = True
    generator: str = "smart_grid"
    dir: str = "demo-output/smart_grid/input"
    paths: tuple[str, ...] = ()
    format: str = "parquet"
    inputs: int = 8
    meters: int = 1000
    rows: int = 200_000
    files_per_input: int = 8
    seed: int = 42
    tick_ms: int = 100
    reading_interval_ms: int = 1_000


@dataclass(frozen=True)
class QueryConfig:
    """The ``[query]`` table as written; :meth:`spec` turns it into the runtime's QuerySpec.

    Keys are the spec's field names (``window``/``slide`` are Spark interval strings such as
    ``"30 seconds"``; ``slide = ""`` means tumbling); the Spark options of the same query are
    their camelCase forms (``key_columns`` -> ``keyColumns``).
    """

    timestamp_column: str = "ts"
    key_columns: tuple[str, ...] = ("meter",)
    window: str = "30s"
    slide: str = "3s"
    aggregates: tuple[str, ...] = (
        "count(*) as readings", "avg(value) as avg_kwh", "first(value) as first_kwh",
        "count_where(kind = 'alarm') as alarms",
    )
    out_of_order: str = "fail"
    where: str = ""
    partition_groups: int = DEFAULT_PARTITION_GROUPS
    #: Keyed stages per key before the window, e.g. ``["delta(value) as used"]``; with
    #: ``window = ""`` the last one gives the result (rows, or sessions with aggregates).
    operators: tuple[str, ...] = ()

    def spec(self, n_inputs: int) -> QuerySpec:
        """The query over ``n_inputs`` inputs; ConfigError naming the ``[query]`` key."""
        no_window = not self.window.strip() and bool(self.operators)
        window = 0 if no_window else _query_key(
            "window", lambda: parse_duration(self.window, "value"))
        slide = _query_key("slide", lambda: parse_duration(self.slide, "value")) if (
            self.slide.strip() and not no_window) else window
        return _query_key("", lambda: QuerySpec(
            n_inputs=n_inputs, window_ms=window, slide_ms=slide,
            aggregates=split_list(self.aggregates),
            timestamp_column=one_name("timestamp_column", self.timestamp_column),
            key_columns=split_names("key_columns", self.key_columns),
            out_of_order=self.out_of_order, where=self.where.strip() or None,
            partition_groups=self.partition_groups, operators=self.operators))


def _query_key(key: str, build: Callable[[], T]) -> T:
    """``build()``, with a ConfigError prefixed by ``[query] key:``."""
    try:
        return build()
    except ConfigError as exc:
        raise ConfigError(f"[query] {key}{': ' if key else ''}{exc}") from exc


@dataclass(frozen=True)
class JobConfig:
    """A whole job: ``[job]`` keys plus the data, query and Spark sections."""

    name: str = "ordered_agg"
    engine: str = "source"
    output: str = "demo-output/smart_grid/output"
    checkpoint: str = "demo-output/smart_grid/checkpoint"
    master: str = "local[*]"
    max_records_per_trigger: int = 100_000
    max_files_per_trigger: int = 8
    show: int = 12
    data: DataConfig = field(default_factory=DataConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    spark: tuple[tuple[str, str], ...] = ()

    def input_dirs(self) -> list[Path]:
        """Directories of the input streams, one per input, in input-id order."""
        if self.data.generate or not self.data.paths:
            return [Path(self.data.dir) / f"input-{i:03d}" for i in range(self.data.inputs)]
        return [Path(p) for p in self.data.paths]

    def with_engine(self, engine: str) -> JobConfig:
        """Return a copy that runs on ``engine``."""
        return replace(self, engine=_choice("engine", engine, ENGINES))


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{key} = {value!r} is not one of {', '.join(choices)}")
    return str(value)


def _build(cls: type, section: str, values: dict[str, Any]) -> Any:
    """Instantiate dataclass ``cls`` from a TOML table; unknown keys get a suggestion."""
    known = {f.name: f for f in fields(cls) if f.name not in ("data", "query", "spark")}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"[{section}] has an unknown key {key!r}"
                              f"{did_you_mean(key, known)}")
        default = getattr(cls(), key)
        if isinstance(default, tuple):
            value = (value,) if isinstance(value, str) else tuple(value)
        elif isinstance(default, bool) != isinstance(value, bool) or not isinstance(
                value, type(default)):
            raise ConfigError(f"[{section}] {key} = {value!r} should be a "
                              f"{type(default).__name__}")
        kwargs[key] = value
    return cls(**kwargs)


def parse_job_config(doc: dict[str, Any], where: str = "job config") -> JobConfig:
    """Validate a parsed TOML document; ConfigError naming the section and key."""
    unknown = set(doc) - {"job", "data", "query", "spark"}
    if unknown:
        raise ConfigError(f"{where}: unknown section(s) {sorted(unknown)}; "
                          f"use [job], [data], [query] and [spark]")
    data = _build(DataConfig, "data", doc.get("data", {}))
    query = _build(QueryConfig, "query", doc.get("query", {}))
    spark = tuple((str(k), str(v)) for k, v in doc.get("spark", {}).items())
    job: JobConfig = replace(_build(JobConfig, "job", doc.get("job", {})), data=data,
                             query=query, spark=spark)
    _choice("[job] engine", job.engine, ENGINES)
    _choice("[data] format", data.format, FORMAT_NAMES)
    _choice("[query] out_of_order", query.out_of_order, ("fail", "drop"))
    if data.generate and data.generator != "smart_grid":
        raise ConfigError(f"[data] generator = {data.generator!r}: only 'smart_grid' is known")
    if not data.generate and not data.paths:
        raise ConfigError("[data] needs generate = true or paths = [<one directory per input>]")
    if data.inputs < 1 or data.rows < 0 or data.files_per_input < 1:
        raise ConfigError("[data] inputs and files_per_input must be >= 1 and rows >= 0")
    query.spec(len(job.input_dirs()))  # the whole query is validated here, before any work
    return job


def load_job_config(path: str | Path) -> JobConfig:
    """Read and validate a TOML job config file."""
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"job config {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"job config {path} is not valid TOML: {exc}") from exc
    return parse_job_config(doc, str(path))
