"""The standalone ``aggregate`` command: results equal the oracle; errors are one line, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_stream_sched.cli import main
from spark_stream_sched.inputs import list_files, write_input
from spark_stream_sched.runtime.window.spec import WindowSpec
from spark_stream_sched.testing.reference import reference_aggregate

from .runtime.test_properties import assert_rows_equal

A = pa.table({"ts": [0, 1000, 2000, 5000, 5000], "meter": [1, 2, 1, 1, 2],
              "value": [1.0, None, 3.0, 4.0, 2.5]})
B = pa.table({"ts": [500, 1000, 7000], "meter": [2, 1, 1], "value": [2.0, 5.0, None]})
AGGS = ["count(*) as n", "avg(value) as mean", "first(value) as first_v",
        "last_where(value, value > 2) as lw"]


def write_dir(table: pa.Table, directory: Path, parts: int = 2) -> str:
    directory.mkdir(parents=True)
    step = max(1, -(-table.num_rows // parts))
    for n, start in enumerate(range(0, table.num_rows, step)):
        pq.write_table(table.slice(start, step), directory / f"part-{n:05d}.parquet")
    return str(directory)


def cli(*args: str) -> int:
    return main(list(args))


def test_aggregate_writes_the_oracle_result(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out.parquet"
    a, b = write_dir(A, tmp_path / "a"), write_dir(B, tmp_path / "b")
    code = cli("aggregate", "--input", a, "--input", b, "--timestamp", "ts", "--key", "meter",
               "--window", "4s", "--slide", "2s", *[x for g in AGGS for x in ("--agg", g)],
               "--out", str(out))
    assert code == 0
    assert "8 input rows from 2 inputs" in capsys.readouterr().out
    expected = reference_aggregate([A, B], WindowSpec(4000, 2000), ["meter"], AGGS)
    assert pq.read_table(out).to_pylist() == expected


def test_signed_zeros_and_nan_payloads_are_one_key_each(tmp_path: Path) -> None:
    """Keys 0.0, -0.0, NaN and a NaN with the sign bit: 2 window keys, as Spark groups them."""
    signed_nan = np.array([0xFFF8000000000001], np.uint64).view(np.float64)[0]
    table = pa.table({"ts": pa.array(range(8), pa.int64()),
                      "k": pa.array([0.0, -0.0, np.nan, signed_nan] * 2, pa.float64())})
    out = tmp_path / "out.parquet"
    code = cli("aggregate", "--input", write_dir(table, tmp_path / "a", parts=1), "--key", "k",
               "--window", "1 minute", "--agg", "count(*) as n", "--out", str(out))
    assert code == 0
    result = pq.read_table(out)
    assert result.column("n").to_pylist() == [4, 4]
    keys = result.column("k").to_numpy().view(np.uint64).tolist()
    assert keys == [0x7FF8000000000000, 0]  # Spark's normalised values: the quiet NaN, 0.0


@pytest.mark.parametrize(("argv", "message"), [
    (["--key", "nope"], "column 'nope' not found"),
    (["--agg", "median(value)"], "unknown function 'median'"),
    (["--agg", "count_where(value rlike 'x')"], "rlike needs a string column"),
    (["--slide", "1 fortnight"], "not a duration"),
])
def test_bad_flags_are_one_clear_line(tmp_path: Path, capsys, argv, message) -> None:
    a = write_dir(A, tmp_path / "a")
    base = {"--key": "meter", "--agg": "count(*) as n", "--slide": "1s"}
    base.update(dict(zip(argv[::2], argv[1::2], strict=True)))
    flat = [x for k, v in base.items() for x in (k, v)]
    code = cli("aggregate", "--input", a, "--window", "4s", *flat,
               "--out", str(tmp_path / "o.parquet"))
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def unsorted_dir(tmp_path: Path) -> tuple[str, Path]:
    """An input whose second file goes back in time at its row 1 (position 3 of the input)."""
    directory = tmp_path / "unsorted"
    directory.mkdir()
    pq.write_table(pa.table({"ts": [100, 500], "meter": [1, 2], "value": [1.0, 2.0]}),
                   directory / "part-00000.parquet")
    pq.write_table(pa.table({"ts": [600, 200], "meter": [2, 1], "value": [4.0, 5.0]}),
                   directory / "part-00001.parquet")
    return str(directory), directory / "part-00001.parquet"


def unsorted_message(directory: str, late: Path) -> str:
    return (f"spark-stream-sched aggregate: error: input 1 ({directory}) is out of order in "
            f"file {str(late)!r} at row 1 (0-based; position 3 of the input): ts 200 is lower "
            f"than the previous ts 600 of the same input; sort the input by event time, or pass "
            f"--out-of-order drop to drop such rows")


def test_unsorted_input_names_the_file_and_exits_2_without_traceback(tmp_path: Path) -> None:
    directory, late = unsorted_dir(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "spark_stream_sched.cli", "aggregate", "--input",
         write_dir(B, tmp_path / "b"), "--input", directory, "--window", "4s", "--agg",
         "count(*) as n", "--out", str(tmp_path / "o.parquet")],
        capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [unsorted_message(directory, late)]


@pytest.mark.parametrize("path_flags", [
    [], ["--workers", "2"], ["--op", "delta(value)", "--key", "meter", "--workers", "2"]])
def test_unsorted_input_reads_the_same_on_every_path_of_the_command(
        tmp_path: Path, capsys, path_flags: list[str]) -> None:
    """Direct, on the executor, through keyed operators: one message, naming the flag."""
    directory, late = unsorted_dir(tmp_path)
    assert cli("aggregate", "--input", write_dir(B, tmp_path / "b"), "--input", directory,
               "--window", "4s", "--agg", "count(*) as n", *path_flags,
               "--out", str(tmp_path / "o.parquet")) == 2
    assert capsys.readouterr().err.splitlines()[0] == unsorted_message(directory, late)


@pytest.mark.parametrize(("declared", "written", "message"), [
    ("csv", "parquet", "is not CSV (it looks like Parquet); pass --format parquet"),
    ("jsonl", "parquet", "is not JSON lines (it looks like Parquet); pass --format parquet"),
    ("parquet", "csv", "is not Parquet (it looks like CSV); pass --format csv"),
    ("csv", "jsonl", "is not CSV (it looks like JSON lines); pass --format jsonl"),
    ("jsonl", "csv", "is not JSON lines (it looks like CSV); pass --format csv"),
])
def test_a_file_of_another_format_names_the_format_to_pass(
        tmp_path: Path, capsys, declared: str, written: str, message: str) -> None:
    write_input(A, tmp_path / "in", written)
    (first,) = list_files(str(tmp_path / "in"))[:1]
    assert cli("aggregate", "--input", str(tmp_path / "in"), "--format", declared,
               "--window", "4s", "--agg", "count(*) as n",
               "--out", str(tmp_path / "o.parquet")) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"spark-stream-sched aggregate: error: file {first!r} "
                                f"{message}, or move the file out of the input"]


def test_a_format_the_inputs_cannot_hold_says_to_convert(tmp_path: Path, capsys) -> None:
    """An Arrow IPC file among CSV inputs: no binary bytes, no format to pass."""
    (tmp_path / "in").mkdir()
    arrow = tmp_path / "in" / "part-00000.arrow"
    with pa.ipc.new_file(arrow, A.schema) as writer:
        writer.write_table(A)
    assert cli("aggregate", "--input", str(tmp_path / "in"), "--format", "csv", "--window",
               "4s", "--agg", "count(*) as n", "--out", str(tmp_path / "o.parquet")) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"spark-stream-sched aggregate: error: file {str(arrow)!r} is not CSV (it looks like an "
        f"Arrow IPC file); convert the input to Parquet, CSV or JSON lines, or move the file "
        f"out of the input"]


def test_drop_policy_counts_dropped_rows(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"ts": [500, 200, 900], "meter": [2, 1, 1], "value": [4.0, 5.0, 1.0]}),
                   bad)
    out = tmp_path / "o.parquet"
    assert cli("aggregate", "--input", str(bad), "--window", "1s", "--agg", "count(*) as n",
               "--out-of-order", "drop", "--out", str(out)) == 0
    assert "1 out-of-order rows dropped" in capsys.readouterr().out
    assert pq.read_table(out).to_pylist() == [{"window_start": 0, "window_end": 1000, "n": 2}]


@pytest.mark.parametrize("strategy", ["fifo", "round_robin", "chain", "path_capacity",
                                      "segment", "simplified_segment", "threshold", "qst",
                                      "lp", "et", "ct"])
def test_every_scheduler_gives_the_oracle_result(tmp_path: Path, strategy: str) -> None:
    """``--where``/``--scheduler``/``--workers`` run on the threaded executor; same result."""
    from spark_stream_sched.data.smart_grid import smart_grid_streams
    from spark_stream_sched.runtime.predicate import Predicate

    streams = smart_grid_streams(3, 40, rows=1500, seed=3, null_rate=0.1)
    dirs = [write_dir(t, tmp_path / f"in{i}", parts=3) for i, t in enumerate(streams)]
    where = "kind = 'reading' and value > 0.2"
    aggs = ["count(*) as n", "avg(value) as mean", "first(value) as first_v",
            "last_where(value, value < 0.5) as lw"]
    out = tmp_path / "out.parquet"
    code = cli("aggregate", *[x for d in dirs for x in ("--input", d)], "--key", "meter",
               "--window", "10s", "--slide", "2s", *[x for a in aggs for x in ("--agg", a)],
               "--where", where, "--scheduler", strategy, "--workers", "2", "--out", str(out))
    assert code == 0
    predicate = Predicate.compile(where, streams[0].schema)
    kept = [t.filter(pa.array([predicate.evaluate_row(r) for r in t.to_pylist()]))
            for t in streams]
    expected = reference_aggregate(kept, WindowSpec(10_000, 2_000), ["meter"], aggs)
    assert expected
    assert_rows_equal(pq.read_table(out).to_pylist(), expected)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_out_suffix_picks_the_format(tmp_path: Path, suffix: str) -> None:
    from spark_stream_sched.inputs import get_format, read_input

    out = tmp_path / f"windows{suffix}"
    a, b = write_dir(A, tmp_path / "a"), write_dir(B, tmp_path / "b")
    assert cli("aggregate", "--input", a, "--input", b, "--key", "meter", "--window", "4s",
               "--slide", "2s", "--agg", "count(*) as n", "--out", str(out)) == 0
    expected = reference_aggregate([A, B], WindowSpec(4000, 2000), ["meter"], ["count(*) as n"])
    fmt = get_format(suffix.lstrip("."))
    assert read_input(out, fmt.name).to_pylist() == expected


def test_out_dash_writes_csv_to_stdout_and_the_summary_to_stderr(tmp_path: Path,
                                                                  capsys) -> None:
    a = write_dir(A, tmp_path / "a")
    assert cli("aggregate", "--input", a, "--key", "meter", "--window", "4s",
               "--agg", "count(*) as n", "--out", "-") == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[0] == '"window_start","window_end","meter","n"'
    expected = reference_aggregate([A], WindowSpec(4000, 4000), ["meter"], ["count(*) as n"])
    assert len(lines) == 1 + len(expected)
    assert "result rows in standard output" in captured.err
    assert not (Path.cwd() / "-").exists()


def test_out_dash_writes_the_bytes_of_a_csv_file(tmp_path: Path, capsys) -> None:
    """Standard output and a ``.csv`` file get one writer: floats quoted with a decimal point."""
    a = write_dir(A, tmp_path / "a")
    query = ["aggregate", "--input", a, "--key", "meter", "--window", "4s",
             "--agg", "count(*) as n", "--agg", "avg(value) as mean", "--agg", "sum(value) as s"]
    assert cli(*query, "--out", "-") == 0
    printed = capsys.readouterr().out
    assert cli(*query, "--out", str(tmp_path / "w.csv")) == 0
    assert printed == (tmp_path / "w.csv").read_text(encoding="utf-8")
    header, first = printed.splitlines()[:2]
    assert header == '"window_start","window_end","meter","n","mean","s"'
    mean = first.split(",")[4]
    assert mean.startswith('"'), first  # a float's text, quoted as in the file
    assert "." in mean, first


def test_unknown_out_suffix_fails_before_any_work(tmp_path: Path, capsys) -> None:
    a = write_dir(A, tmp_path / "a")
    code = cli("aggregate", "--input", a, "--window", "4s", "--agg", "count(*) as n",
               "--out", str(tmp_path / "o.txt"))
    err = capsys.readouterr().err
    assert code == 2
    assert "'.txt' names no output format" in err
    assert not (tmp_path / "o.txt").exists()


def test_help_shows_no_rest_markup(capsys) -> None:
    for argv in ([], ["aggregate"], ["bench"]):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        assert "``" not in capsys.readouterr().out


def _generated_inputs(tmp_path: Path, n_inputs: int = 3, rows: int = 3_000) -> list[str]:
    """Sorted inputs with many meters, ties across inputs and nulls (several files each)."""
    import numpy as np

    rng = np.random.default_rng(7)
    dirs = []
    for i in range(n_inputs):
        ts = np.sort(rng.integers(0, rows * 400, rows))
        value = rng.normal(10, 3, rows).round(1)
        table = pa.table({"ts": ts.astype(np.int64), "meter": rng.integers(0, 40, rows),
                          "value": pa.array(value, mask=rng.random(rows) < 0.05)})
        dirs.append(write_dir(table, tmp_path / f"in{i}", parts=3))
    return dirs


@pytest.mark.parametrize("ops", [
    ["delta(value) as d", "sessionize(2 seconds)"],
    ["delta(value) as d"],
    ["lag(value) as prev", "where(value > 9)"],
])
@pytest.mark.parametrize(("extra", "label"), [
    (["--workers", "2"], "w2"),
    (["--workers", "3", "--scheduler", "qst", "--queue", "partitioned"], "w3-qst-part"),
    (["--scheduler", "ct"], "w1-ct"),
])
def test_keyed_ops_on_worker_threads_equal_the_single_threaded_path(
        tmp_path: Path, ops: list[str], extra: list[str], label: str) -> None:
    """--op with --workers N / a multicore --scheduler runs on KeyedPipeline: same output."""
    inputs = [x for d in _generated_inputs(tmp_path) for x in ("--input", d)]
    flags = [x for op in ops for x in ("--op", op)] + ["--key", "meter"]
    if ops[-1].startswith("sessionize"):
        flags += ["--agg", "count(*) as n", "--agg", "sum(d) as total"]
    one, many = tmp_path / "one.parquet", tmp_path / f"{label}.parquet"
    assert cli("aggregate", *inputs, *flags, "--out", str(one)) == 0
    assert cli("aggregate", *inputs, *flags, *extra, "--out", str(many)) == 0
    expected, got = pq.read_table(one), pq.read_table(many)
    assert expected.num_rows > 10
    assert got.schema.equals(expected.schema)
    assert got.equals(expected)


def test_keyed_ops_then_windows_and_where_on_worker_threads(tmp_path: Path) -> None:
    inputs = [x for d in _generated_inputs(tmp_path, 2) for x in ("--input", d)]
    flags = ["--op", "delta(value) as d", "--key", "meter", "--window", "20s", "--slide",
             "10s", "--agg", "count(*) as n", "--agg", "sum(d) as total",
             "--where", "value > 8"]
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    assert cli("aggregate", *inputs, *flags, "--out", str(one)) == 0
    assert cli("aggregate", *inputs, *flags, "--workers", "2", "--out", str(two)) == 0
    expected = pq.read_table(one)
    assert expected.num_rows > 10
    assert pq.read_table(two).equals(expected)


def test_keyed_ops_refuse_a_scheduler_that_is_not_multicore(tmp_path: Path, capsys) -> None:
    a = write_dir(A, tmp_path / "a")
    code = cli("aggregate", "--input", a, "--op", "delta(value)", "--key", "meter",
               "--scheduler", "fifo", "--out", str(tmp_path / "o.parquet"))
    assert code == 2
    assert "use one of qst, lp, et, ct" in capsys.readouterr().err


@pytest.mark.parametrize(("n_inputs", "op", "fix"), [
    (2, "join(3)", "write join(2, ...)"),
    (2, "join(4, within=5 seconds)", "write join(2, ...)"),
    (1, "join(2)", "a join needs at least 2 inputs"),
])
def test_a_join_of_more_inputs_than_the_query_has_is_refused(tmp_path: Path, capsys,
                                                             n_inputs: int, op: str,
                                                             fix: str) -> None:
    """Without the check a join(3) over 2 inputs wrote 0 rows and exited 0."""
    dirs = [write_dir(t, tmp_path / f"in{j}") for j, t in enumerate([A, B][:n_inputs])]
    out = tmp_path / "o.parquet"
    code = cli("aggregate", *[x for d in dirs for x in ("--input", d)], "--key", "meter",
               "--op", op, "--out", str(out))
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    n = op[5]
    assert f"operator 'join({n}" in err
    assert f"joins {n} inputs" in err
    assert f"the query has {n_inputs} input" in err
    assert fix in err
    assert not out.exists()


def test_a_udf_path_of_another_shape_is_one_line_naming_the_shape(tmp_path: Path,
                                                                   capsys) -> None:
    """A relative file path used to escape as a TypeError traceback from importlib."""
    a = write_dir(A, tmp_path / "a")
    code = cli("aggregate", "--input", a, "--key", "meter", "--op",
               f"udf(../..{tmp_path}/evil:f)", "--out", str(tmp_path / "o.parquet"))
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert f"operator 'udf(../..{tmp_path}/evil:f)'" in err
    assert "is not an import path of the form package.module:function" in err


def test_a_udf_module_without_the_function_is_refused_before_its_code_runs(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """udf(this:x) used to print the Zen of Python, then refuse 'x'."""
    (tmp_path / "chatty_udf_module.py").write_text("print('IMPORT-TIME CODE RAN')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    a = write_dir(A, tmp_path / "a")
    code = cli("aggregate", "--input", a, "--key", "meter", "--op",
               "udf(chatty_udf_module:x)", "--out", str(tmp_path / "o.parquet"))
    captured = capsys.readouterr()
    assert code == 2
    assert "IMPORT-TIME CODE RAN" not in captured.out + captured.err
    assert "defines no top-level function 'x' with @keyed_function" in captured.err


#: Hostile option strings: each is one line naming what is wrong and the fix, at definition.
HOSTILE = {
    "nested parentheses": (["--where", "(" * 250 + "value > 1" + ")" * 250],
                           "nests parentheses and 'not' more than 100 levels deep"),
    "nested in an aggregate": (["--agg", "count_where(" + "(" * 250 + "value > 1" + ")" * 250
                                + ") as c"], "more than 100 levels deep"),
    # 1,001 flags, not 60,000: argparse takes quadratic time in the number of flags (the 1 MB
    # option of 60,000 is tested on the spec, tests/runtime/query/test_spec.py)
    "1,001 aggregates": ([x for i in range(1001) for x in ("--agg", f"count(*) as n{i}")],
                         "1,001 aggregates given; at most 1,000 are supported per query"),
    "reserved alias": (["--agg", "count(*) as __input"],
                       "alias '__input' starts with '__', which is reserved"),
    "reserved operator alias": (["--op", "delta(value) as __d"],
                                "alias '__d' starts with '__', which is reserved"),
    "aliases equal up to case": (["--agg", "count(*) as N", "--agg", "count(value) as n"],
                                 "aggregate aliases 'N' and 'n' are equal up to case"),
    "alias equal to the key up to case": (["--agg", "count(*) as Meter"],
                                          "result columns 'meter' and 'Meter' are equal up to "
                                          "case; Spark resolves column names without case"),
    "alias equal to a window bound up to case": (["--agg", "count(*) as Window_End"],
                                                 "'window_end' and 'Window_End' are equal"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_option_strings_are_one_line_at_definition(tmp_path: Path, capsys,
                                                           case: str) -> None:
    """They used to raise RecursionError, kill the driver's heap, or be written and then fail
    in every task (``__input``) or in Spark's reader (COLUMN_ALREADY_EXISTS)."""
    flags, message = HOSTILE[case]
    if "--agg" not in flags:
        flags = [*flags, "--agg", "count(*) as n"]
    out = tmp_path / "o.parquet"
    code = cli("aggregate", "--input", write_dir(A, tmp_path / "a"), "--key", "meter",
               "--window", "4s", *flags, "--out", str(out))
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err[:2000]
    assert message in err
    assert len(err) < 2000  # a 1 MB option is not repeated in the message
    assert not out.exists()


def test_a_long_and_chain_and_100_levels_of_nesting_run(tmp_path: Path) -> None:
    """8,000 terms joined by 'and' used to raise RecursionError; they are one level deep."""
    chain = " and ".join(f"value > {-i}" for i in range(8000))  # value > 0 and value > -1 ...
    nested = "(" * 100 + "value > 2" + ")" * 100
    a = write_dir(A, tmp_path / "a")
    for i, where in enumerate((chain, f"{nested} or {chain}")):
        out = tmp_path / f"o{i}.parquet"
        assert cli("aggregate", "--input", a, "--key", "meter", "--window", "4s", "--where",
                   where, "--agg", "count(*) as n", "--out", str(out)) == 0
        kept = A.filter(pa.compute.greater(A.column("value"), 0))  # nulls drop out
        expected = reference_aggregate([kept], WindowSpec(4000, 4000), ["meter"],
                                       ["count(*) as n"])
        assert pq.read_table(out).to_pylist() == expected
