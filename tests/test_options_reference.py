"""docs/options.md is generated from the one declaration of the settings, and that declaration
matches what every front door accepts (names, TOML keys and defaults, flags and defaults)."""

from __future__ import annotations

import argparse
import inspect
from dataclasses import fields
from pathlib import Path

import pytest

from spark_stream_sched.commands import aggregate, demo, run
from spark_stream_sched.jobs.config import DataConfig, JobConfig, QueryConfig
from spark_stream_sched.options.reference import COMMAND, render
from spark_stream_sched.options.sink import SINK_OPTION_NAMES, parse_sink_options
from spark_stream_sched.options.source import OPTION_NAMES, parse_options
from spark_stream_sched.options.table import option_names, settings
from spark_stream_sched.runtime.distribution.manager import ADAPTATION_OPTIONS
from spark_stream_sched.spark.transform import ordered

REPO = Path(__file__).resolve().parents[1]
SOURCE = {"inputs": "in-0,in-1", "window": "10 seconds", "aggregates": "count(*) as n",
          "stateLocation": "/nonexistent/state"}
SINK = {"path": "/nonexistent/out", "inputs": "2", "window": "10 seconds",
        "aggregates": "count(*) as n", "checkpointLocation": "/nonexistent/checkpoint"}


def test_docs_options_md_is_generated_from_the_table() -> None:
    written = (REPO / "docs" / "options.md").read_text(encoding="utf-8")
    assert written == render(), f"docs/options.md is stale: run `{COMMAND}`"


def test_the_parsers_take_their_names_from_the_table() -> None:
    assert option_names("source") == OPTION_NAMES
    assert option_names("sink") == SINK_OPTION_NAMES
    assert set(ADAPTATION_OPTIONS) <= set(OPTION_NAMES)
    assert {"inputs", "window", "aggregates", "stateLocation", "adaptation"} <= set(OPTION_NAMES)


@pytest.mark.parametrize(("door", "parse", "base"), [
    ("source", parse_options, SOURCE), ("sink", parse_sink_options, SINK)])
def test_every_documented_default_is_what_the_parser_does_without_it(door, parse, base) -> None:
    checked = 0
    for s in settings():
        name = getattr(s, door)
        if name and s.value is not None and name not in base:
            assert parse({**base, name: s.value}) == parse(base), (door, name, s.value)
            checked += 1
    assert checked >= 6


def test_ordered_arguments_are_in_the_table() -> None:
    documented = {s.ordered.rstrip("=") for s in settings() if s.ordered.endswith("=")}
    keyword = {p for p in inspect.signature(ordered).parameters if p != "inputs"}
    assert documented == keyword
    assert "inputs" in {s.ordered for s in settings()}


def _toml_default(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@pytest.mark.parametrize(("section", "cls"), [
    ("job", JobConfig), ("data", DataConfig), ("query", QueryConfig)])
def test_toml_keys_and_defaults_match_the_job_config(section: str, cls: type) -> None:
    table = {s.toml.split("] ")[1]: s for s in settings() if s.toml.startswith(f"[{section}]")}
    keys = {f.name for f in fields(cls) if f.name not in ("data", "query", "spark")}
    assert set(table) == keys
    defaults = cls()
    for key, s in table.items():
        value = getattr(defaults, key)
        if section != "query" and not isinstance(value, tuple):
            # the first word: "500000 (TOML: 100000)" documents both doors' defaults
            shown = s.default.split(" (TOML: ")[-1].rstrip(")")
            assert shown == _toml_default(value), (section, key)


def _flags(register: object) -> dict[str, argparse.Action]:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())  # type: ignore[operator]
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    (command,) = sub.choices.values()
    return {flag: action for action in command._actions for flag in action.option_strings}


def test_command_line_flags_are_in_the_table() -> None:
    flags = _flags(aggregate.register)
    documented = {s.cli.split(" ")[0] for s in settings() if s.cli.startswith("--")}
    assert documented <= set(flags)
    assert set(flags) - documented == {"-h", "--help"}
    for s in settings():
        if s.cli in ("--workers", "--format", "--out-of-order", "--queue", "--timestamp"):
            assert str(flags[s.cli].default) == s.default, s.cli
    for command, register in (("run", run.register), ("demo", demo.register)):
        flags = _flags(register)
        named = {s.cli.split(" ")[1] for s in settings() if s.cli.startswith(f"{command} --")}
        assert named == set(flags) - {"-h", "--help"}, command
        for s in settings():
            # a flag that overrides a TOML key has no default of its own
            if (s.cli.startswith(f"{command} --") and not s.toml
                    and s.default not in ("off", "required")):
                assert str(flags[s.cli.split(" ")[1]].default) == s.default, s.cli
