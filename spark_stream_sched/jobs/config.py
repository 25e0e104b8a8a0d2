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

import difflib
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from spark_stream_sched.errors import ConfigError

ENGINES = ("source", "sink", "runtime")
FORMATS = ("parquet", "csv", "jsonl")


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
    """The ordered window aggregation."""

    timestamp_column: str = "ts"
    key_columns: tuple[str, ...] = ("meter",)
    window: str = "30s"
    slide: str = "3s"
    aggregates: tuple[str, ...] = (
        "count(*) as readings", "avg(value) as avg_kwh", "first(value) as first_kwh",
        "count_where(kind = 'alarm') as alarms",
    )
    out_of_order: str = "fail"


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
            guess = difflib.get_close_matches(key, list(known), n=1)
            hint = f"; did you mean {guess[0]!r}?" if guess else ""
            raise ConfigError(f"[{section}] has an unknown key {key!r}{hint}")
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
    _choice("[data] format", data.format, FORMATS)
    _choice("[query] out_of_order", query.out_of_order, ("fail", "drop"))
    if data.generate and data.generator != "smart_grid":
        raise ConfigError(f"[data] generator = {data.generator!r}: only 'smart_grid' is known")
    if not data.generate and not data.paths:
        raise ConfigError("[data] needs generate = true or paths = [<one directory per input>]")
    if data.inputs < 1 or data.rows < 0 or data.files_per_input < 1:
        raise ConfigError("[data] inputs and files_per_input must be >= 1 and rows >= 0")
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
