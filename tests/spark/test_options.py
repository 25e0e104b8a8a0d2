"""Option parsing of the ordered-agg source (pure: no JVM)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.options.source import parse_ddl, parse_options

BASE = {"inputs": "/data/a, /data/b", "window": "30 seconds", "slide": "3s",
        "aggregates": "count(*) as n, avg(value) as mean, first_where(value, a > 1 and b < 2) as f",
        "stateLocation": "/tmp/state"}


def test_keys_are_case_insensitive_and_values_typed() -> None:
    opts = {k.lower(): v for k, v in BASE.items()} | {"MAXRECORDSPERTRIGGER": "500",
                                                       "keycolumns": "meter, site"}
    config = parse_options(opts)
    assert config.inputs == ("/data/a", "/data/b")
    assert (config.window_ms, config.slide_ms) == (30_000, 3_000)
    assert config.max_records_per_trigger == 500
    assert config.key_columns == ("meter", "site")
    assert config.partition_groups == 16
    assert config.end_of_input == "never"


def test_aggregates_split_at_top_level_commas_only() -> None:
    config = parse_options(BASE)
    assert config.aggregates == ("count(*) as n", "avg(value) as mean",
                                 "first_where(value, a > 1 and b < 2) as f")


def test_unknown_option_suggests_the_closest_name() -> None:
    with pytest.raises(ConfigError, match=r"unknown option 'maxrecordspertriger'.*"
                                          r"did you mean 'maxRecordsPerTrigger'"):
        parse_options(BASE | {"maxrecordspertriger": "5"})


@pytest.mark.parametrize("missing", ["inputs", "window", "aggregates", "stateLocation"])
def test_required_options(missing: str) -> None:
    opts = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ConfigError, match=f"option {missing} is required"):
        parse_options(opts)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("window", "thirty seconds", r"option window='thirty seconds'"),
    ("slide", "1 minute", r"option slide='1 minute' is longer than window"),
    ("format", "avro", r"option format='avro' is not an input format"),
    ("outOfOrder", "reorder", r"option outOfOrder='reorder' is not one of fail, drop"),
    ("partitionGroups", "0", r"option partitionGroups='0' must be at least 1"),
    ("maxRecordsPerTrigger", "lots", r"option maxRecordsPerTrigger='lots' is not an integer"),
    ("aggregates", "median(value) as m", r"option aggregates=.*unknown function 'median'"),
    ("keyColumns", "a, b c", r"option keyColumns='a, b c': 'b c' is not a column name"),
    ("scheduler", "chian", r"option scheduler='chian' is not a scheduling strategy; did you "
                           r"mean 'chain'\?"),
    ("workers", "0", r"option workers='0' must be at least 1"),
    ("endOfInput", "sometimes", r"option endOfInput='sometimes'"),
])
def test_bad_values_name_option_and_value(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options(BASE | {key: value})


def test_zero_limit_means_unlimited() -> None:
    assert parse_options(BASE | {"maxRecordsPerTrigger": "0"}).max_records_per_trigger is None


def test_ddl_schema() -> None:
    schema = parse_ddl("ts bigint, `meter` string, value double not null, at timestamp")
    assert schema == pa.schema([
        pa.field("ts", pa.int64()), pa.field("meter", pa.string()),
        pa.field("value", pa.float64(), nullable=False),
        pa.field("at", pa.timestamp("us", tz="UTC"))])
    with pytest.raises(ConfigError, match="cannot parse 'v decimal'"):
        parse_ddl("ts bigint, v decimal")


@pytest.mark.parametrize(("key", "value", "message"), [
    ("window", "9223372036854775807 days",
     r"option window='9223372036854775807 days': value .* is 796899343984252629724800000 ms, "
     r"longer than the supported event-time span of 315537897600000 ms"),
    ("window", "3652500 days", r"option window='3652500 days': .*longer than the supported"),
    ("slide", "106751991167301 days", r"option slide='106751991167301 days': .*longer than"),
    ("aggregates", r"count_where(name rlike '(a)\\1') as n",
     r"option aggregates=.*bad regular expression '\(a\)\\\\1': RE2, the engine rlike runs "
     r"on, refuses it \(Invalid regular expression: invalid escape sequence"),
    ("partitionGroups", "100000",
     r"option partitionGroups='100000' must be at most 4096: each partition group is one "
     r"state file per committed version"),
])
def test_values_that_would_fail_at_run_time_fail_at_load(key: str, value: str,
                                                         message: str) -> None:
    """Reported defect: an overflowing window, an rlike RE2 cannot run and an unbounded
    partitionGroups are refused on the driver, at load(), naming option and value."""
    with pytest.raises(ConfigError, match=message):
        parse_options(BASE | {key: value})


def test_partition_groups_are_bounded_at_4096() -> None:
    assert parse_options(BASE | {"partitionGroups": "4096"}).partition_groups == 4096
    with pytest.raises(ConfigError, match="option partitionGroups='4097' must be at most 4096"):
        parse_options(BASE | {"partitionGroups": "4097"})


@pytest.mark.parametrize(("key", "value", "first_line"), [
    ("maxRecordsPerTrigger", "100000000000000000000",
     "option maxRecordsPerTrigger='100000000000000000000' must be at most 9223372036854775807 "
     "(Spark's row limit is a Java long); 0 admits every row"),
    ("maxRecordsPerTrigger", "1e20",
     "option maxRecordsPerTrigger='1e20' is not an integer; write it in digits, from 0 to "
     "9223372036854775807"),
    ("numPartitions", "5000",
     "option numPartitions='5000' must be at most 4096 (a task runs at least one partition "
     "group)"),
    ("workers", "100000", "option workers='100000' must be at most 256 executor threads per "
                          "Spark task"),
    ("keepMetrics", "0", "option keepMetrics='0' must be at least 1"),
    ("keepMetrics", "10000000", "option keepMetrics='10000000' must be at most 1000000"),
])
def test_every_integer_option_is_bounded(key: str, value: str, first_line: str) -> None:
    """An integer past a Java long (``1e20`` written out) was accepted and overflowed later."""
    with pytest.raises(ConfigError) as info:
        parse_options(BASE | {key: value})
    assert str(info.value).splitlines()[0] == first_line


@pytest.mark.parametrize(("key", "value", "first_line"), [
    ("inputs", "100000", "option inputs='100000' must be at most 10000"),
    ("keepVersions", "99999999999999999999", "option keepVersions='99999999999999999999' must "
                                             "be at most 1000000"),
    ("keepMetrics", "-1", "option keepMetrics='-1' must be at least 1"),
])
def test_every_integer_sink_option_is_bounded(key: str, value: str, first_line: str) -> None:
    from spark_stream_sched.options.sink import parse_sink_options

    opts = {"path": "/o", "inputs": "2", "window": "1 minute", "aggregates": "count(*) as n",
            "stateLocation": "/s"}
    with pytest.raises(ConfigError) as info:
        parse_sink_options(opts | {key: value})
    assert str(info.value).splitlines()[0] == first_line


def test_keep_metrics_defaults_to_a_thousand_batches() -> None:
    assert parse_options(BASE).keep_metrics == 1000
    assert parse_options(BASE | {"keepMetrics": "20"}).keep_metrics == 20


@pytest.mark.parametrize(("extra", "chosen"), [
    ({}, "tasks"),  # auto, Parquet (the default format): the driver reads only footers
    ({"format": "csv"}, "driver"),  # auto, no statistics: the driver reads timestamps anyway
    ({"format": "json"}, "driver"),
    ({"splitRows": "AUTO", "format": "Parquet"}, "tasks"),
    ({"splitRows": "driver"}, "driver"),  # an explicit choice is kept, whatever the format
    ({"splitRows": "tasks", "format": "csv"}, "tasks"),
])
def test_split_rows_auto_reads_in_the_tasks_for_parquet_only(extra: dict[str, str],
                                                             chosen: str) -> None:
    assert parse_options(BASE | extra).split_rows == chosen


def test_an_unknown_split_rows_names_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        parse_options(BASE | {"splitRows": "executors"})
    assert "splitRows='executors'" in str(info.value)
    assert all(choice in str(info.value) for choice in ("auto", "driver", "tasks"))
