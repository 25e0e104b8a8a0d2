"""The query definition: one frozen, validated :class:`QuerySpec` for every front door.

A spec says *what* a query computes — N inputs merged in the total order ``(ts, input, seq)``
(S-Merge, Gulisano et al. (2016), §4), an optional filter, epoch-aligned sliding windows with
aggregates per key (the Window Hive of the same paper, §5.6), the out-of-order policy and the number
of partition groups that hold its state (Liu & Rundensteiner 2005) — and nothing about *how* it runs
(paths, formats, scheduler, workers, batch sizes). Building a spec runs nothing (definition is kept
separate from execution);
:meth:`QuerySpec.build` creates the runtime logic, optionally resumed from a snapshot.

Thin parsers build specs from Spark source and sink options (:func:`spec_from_options`), the
``[query]`` table of a TOML job config and CLI flags; all of them share
:func:`~spark_stream_sched.runtime.durations.parse_duration` and the helpers of
:mod:`~spark_stream_sched.runtime.names`, so the same query written on any surface gives
an equal spec with the same :meth:`~QuerySpec.fingerprint`. The fingerprint is recorded in the
state location at first start (:mod:`~spark_stream_sched.runtime.query.recorded`); a restart
with a changed definition is refused by :meth:`~QuerySpec.changes_from`, naming the option as
the user writes it (:data:`OPTION_NAMES`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from spark_stream_sched.errors import ConfigError, abbreviated
from spark_stream_sched.runtime.aggregates import parse_aggregates
from spark_stream_sched.runtime.distribution.groups import check_group_function
from spark_stream_sched.runtime.durations import format_duration, parse_duration
from spark_stream_sched.runtime.expr import parse_predicate
from spark_stream_sched.runtime.keyed.base import operator_class
from spark_stream_sched.runtime.keyed.pipeline import INTERNAL, Pipeline, parse_stages
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.merge import OUT_OF_ORDER_POLICIES, check_policy
from spark_stream_sched.runtime.names import one_name, split_list, split_names
from spark_stream_sched.runtime.output_names import check_output_names
from spark_stream_sched.runtime.query.ordered import GroupOperator, OrderedAggregation
from spark_stream_sched.runtime.window.aggregator import WindowAggregator
from spark_stream_sched.runtime.window.spec import WindowSpec

DEFAULT_PARTITION_GROUPS = 16
#: Upper bound of ``partitionGroups``. Each group is one state file per committed version (and
#: the last few versions are kept), so the count multiplies the files written and fsynced per
#: micro-batch; 100,000 groups wrote 166,702 files (658 MB) without finishing a 2,000-row batch.
MAX_PARTITION_GROUPS = 4096
#: Spark option names of the query fields: how messages name a field (``window``, not
#: ``window_ms``). The TOML ``[query]`` keys are the snake_case field names without ``_ms``.
OPTION_NAMES: dict[str, str] = {
    "n_inputs": "inputs", "window_ms": "window", "slide_ms": "slide", "aggregates": "aggregates",
    "timestamp_column": "timestampColumn", "key_columns": "keyColumns",
    "out_of_order": "outOfOrder", "where": "where", "partition_groups": "partitionGroups",
    "operators": "operators",
}
#: Spark options read by :func:`spec_from_options` (besides the input count).
SPEC_OPTIONS = ("timestampColumn", "keyColumns", "window", "slide", "aggregates", "outOfOrder",
                "where", "partitionGroups", "operators")
FORMAT = "ordered-agg-query"
VERSION = 2


@dataclass(frozen=True)
class QuerySpec:
    """What one ordered query computes (picklable, immutable, validated).

    ``aggregates`` are kept in their canonical text (``AggSpec.text()``), so ``COUNT(*) AS n``
    and ``count(*) as n`` are the same query; so are ``operators``, the keyed stages applied
    per key before the window (:mod:`~spark_stream_sched.runtime.keyed.pipeline`).
    ``window_ms == 0`` means no window: the last operator gives the result (rows, or sessions
    with ``aggregates``). ``group_function`` maps a key to its partition group
    (:data:`~spark_stream_sched.runtime.distribution.groups.GROUP_FUNCTIONS`): it lays out the
    state, never changes a result, and is not part of the definition (:meth:`to_json`); the
    sink records it with its state (``SinkConfig.wiring``).
    """

    n_inputs: int
    window_ms: int
    slide_ms: int
    aggregates: tuple[str, ...]
    timestamp_column: str = "ts"
    key_columns: tuple[str, ...] = ()
    out_of_order: str = "fail"
    where: str | None = None
    partition_groups: int = DEFAULT_PARTITION_GROUPS
    operators: tuple[str, ...] = ()
    group_function: str = "splitmix64"

    def __post_init__(self) -> None:
        if self.n_inputs < 1:
            raise ConfigError(f"a query needs at least one input, got {self.n_inputs}")
        canonical = tuple(a.text() for a in parse_aggregates(list(self.aggregates))) if (
            self.aggregates) else ()
        object.__setattr__(self, "aggregates", canonical)
        stages = parse_stages(self.operators)
        object.__setattr__(self, "operators", tuple(s.text() for s in stages))
        self._check_shape(stages)
        self.window  # noqa: B018 - validates size and slide
        check_policy(self.out_of_order)
        if self.where is not None:
            parse_predicate(self.where)
        check_partition_groups(self.partition_groups)
        check_group_function(self.group_function)
        if len(set(self.key_columns)) != len(self.key_columns):
            raise ConfigError(f"keyColumns {list(self.key_columns)} names a column twice")

    def _check_shape(self, stages: list[StageSpec]) -> None:
        """A window needs aggregates; no window needs operators that give the result.

        Every operator must fit the query's inputs (a join of more inputs than it has).
        """
        for stage in stages:
            operator_class(stage.name).check_query_inputs(stage, self.n_inputs)
        if self.window_ms:
            if not self.aggregates:
                raise ConfigError("a window needs at least one aggregate (option aggregates)")
            return
        if not stages:
            raise ConfigError("option window is required (or operators that give the result, "
                              "e.g. operators='sessionize(5 minutes)')")
        closing = not operator_class(stages[-1].name).emits_rows
        if closing and not self.aggregates:
            raise stages[-1].fail("needs aggregates (option aggregates), e.g. 'count(*) as n'")
        if not closing and self.aggregates:
            raise ConfigError(f"option aggregates is set but nothing aggregates: the last "
                              f"operator {stages[-1].text()!r} returns rows; add a window or "
                              f"remove aggregates")

    @property
    def window(self) -> WindowSpec | None:
        """The sliding window (validates size and slide), or None without one."""
        if self.window_ms == 0 and self.slide_ms == 0 and self.operators:
            return None
        return WindowSpec(self.window_ms, self.slide_ms)

    # -- identity --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Every field as JSON values, in a fixed order (what the state location records).

        ``group_function`` is left out (it is not what the query computes), and
        ``operators`` is left out when empty, so queries defined before operators existed keep
        their fingerprint.
        """
        fields = asdict(self)
        del fields["group_function"]  # how state is laid out, not what is computed
        if not self.operators:
            del fields["operators"]
        return {name: list(v) if isinstance(v, tuple) else v for name, v in fields.items()}

    def fingerprint(self) -> str:
        """Stable hash of the definition: equal specs, equal fingerprints, in any process."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def changes_from(self, recorded: Mapping[str, Any]) -> list[tuple[str, str, str]]:
        """``(option, old, new)`` for each field that differs from a recorded definition.

        ``option`` is the name the user writes (``window``, not ``window_ms``) and the values
        are shown as written (``'10 seconds'``). Fields the record lacks (written by an older
        version) are not compared. Empty: the same query.
        """
        mine = self.to_json()
        return [(option, _shown(name, recorded[name]), _shown(name, mine[name]))
                for name, option in OPTION_NAMES.items()
                if name in recorded and recorded[name] != mine[name]]

    # -- execution -------------------------------------------------------------------------

    def build(self, input_schema: pa.Schema, resume_state: bytes | None = None
              ) -> OrderedAggregation:
        """The merge + filter + pipeline logic for ``input_schema``, resumed from a snapshot."""
        if resume_state is not None:
            return OrderedAggregation.restore(resume_state, parse_stages(self.operators))
        return OrderedAggregation.of(self.n_inputs, self.timestamp_column, self.out_of_order,
                                     self.build_group(input_schema), input_schema, self.where)

    def build_group(self, input_schema: pa.Schema, resume_state: bytes | None = None
                    ) -> GroupOperator:
        """The per-key logic of one partition group (windows or a pipeline), resumed.

        A new one's result columns are checked (:func:`~..output_names.check_output_names`:
        how many, and equal up to case), so every door refuses them when the query is defined.
        """
        if resume_state is not None:
            if not self.operators:
                return WindowAggregator.restore(resume_state)
            return Pipeline.restore(resume_state, parse_stages(self.operators))
        group: GroupOperator
        if not self.operators:
            assert self.window is not None
            group = WindowAggregator(self.window, list(self.key_columns), list(self.aggregates),
                                     self.timestamp_column, input_schema)
        else:
            group = Pipeline(parse_stages(self.operators), self.window, self.key_columns,
                             self.aggregates, self.timestamp_column, input_schema)
        check_output_names([n for n in group.output_schema.names if n not in INTERNAL])
        return group

    def used_columns(self, input_schema: pa.Schema) -> list[str]:
        """The columns of ``input_schema`` the query uses, in the schema's order.

        A window query uses the timestamp, the keys, the aggregated columns and the columns of
        the aggregates' predicates and of ``where``; keyed operators return their input rows,
        so a query with ``operators`` uses every column. A door reads (the source), ships
        (``ordered()``) or shuffles (the sink's ``partition_for_sink``) only these.
        """
        group = self.build_group(input_schema)
        if not isinstance(group, WindowAggregator):
            return list(input_schema.names)
        used = set(group.columns)
        if self.where is not None:
            used |= parse_predicate(self.where).columns()
        return [name for name in input_schema.names if name in used]


def check_partition_groups(n: int) -> int:
    """``n`` if it is in ``1 .. MAX_PARTITION_GROUPS`` (ConfigError explaining the bound)."""
    if n < 1:
        raise ConfigError(f"must be at least 1, got {n}")
    if n > MAX_PARTITION_GROUPS:
        raise ConfigError(
            f"must be at most {MAX_PARTITION_GROUPS}: each partition group is one state file "
            f"per committed version, so this many groups would write that many files every "
            f"micro-batch; use a small multiple of numPartitions "
            f"(default {DEFAULT_PARTITION_GROUPS})")
    return n


def _shown(name: str, value: Any) -> str:
    """A recorded value as the user would write it (durations in words)."""
    if name in ("window_ms", "slide_ms") and isinstance(value, int) and value > 0:
        return repr(format_duration(value))
    if isinstance(value, list):
        return repr(", ".join(str(v) for v in value))
    return repr(value)



class SpecView:
    """Read-only access to the fields of a ``spec`` (for configs that wrap a :class:`QuerySpec`).

    The source's and the sink's configs hold the query as ``spec`` plus their own wiring;
    this mixin lets their callers read ``config.window_ms`` and friends without copies.
    """

    spec: QuerySpec

    @property
    def n_inputs(self) -> int:
        """Number of input streams."""
        return self.spec.n_inputs

    @property
    def timestamp_column(self) -> str:
        """Event-time column."""
        return self.spec.timestamp_column

    @property
    def key_columns(self) -> tuple[str, ...]:
        """Key columns."""
        return self.spec.key_columns

    @property
    def window_ms(self) -> int:
        """Window size in ms."""
        return self.spec.window_ms

    @property
    def slide_ms(self) -> int:
        """Window slide in ms."""
        return self.spec.slide_ms

    @property
    def aggregates(self) -> tuple[str, ...]:
        """Aggregates in canonical text."""
        return self.spec.aggregates

    @property
    def partition_groups(self) -> int:
        """Number of partition groups."""
        return self.spec.partition_groups

    @property
    def out_of_order(self) -> str:
        """Out-of-order policy."""
        return self.spec.out_of_order

def spec_from_options(opts: Mapping[str, str], n_inputs: int) -> QuerySpec:
    """Build a spec from options already mapped to canonical names (Spark source or sink).

    ``opts`` holds any of :data:`SPEC_OPTIONS`; ``window`` and ``aggregates`` are required.
    Errors name the option and its value.
    """
    operators = _option(opts, "operators", _operators, "")
    no_window = bool(operators) and not opts.get("window", "").strip()
    window = 0 if no_window else _option(opts, "window", _duration)
    slide = _option(opts, "slide", _duration) if (
        opts.get("slide", "").strip() and not no_window) else window
    if slide > window:
        raise ConfigError(f"option slide={opts['slide']!r} is longer than window="
                          f"{opts['window']!r}; windows would leave gaps")
    groups = _option(opts, "partitionGroups", lambda t: check_partition_groups(int(t)),
                     str(DEFAULT_PARTITION_GROUPS))
    return QuerySpec(
        n_inputs=n_inputs, window_ms=window, slide_ms=slide,
        aggregates=_option(opts, "aggregates", _aggregates, None if not operators else ""),
        timestamp_column=one_name("timestampColumn", opts.get("timestampColumn", "ts")),
        key_columns=split_names("keyColumns", opts.get("keyColumns", "")),
        out_of_order=_option(opts, "outOfOrder", _policy, "fail"),
        where=_option(opts, "where", _where, ""),
        partition_groups=groups, operators=operators)


def _duration(text: str) -> int:
    return parse_duration(text, "value")


def _aggregates(text: str) -> tuple[str, ...]:
    if not text.strip():  # only reached for operators; a window without aggregates is refused
        return ()
    return tuple(a.text() for a in parse_aggregates(list(split_list(text))))


def _operators(text: str) -> tuple[str, ...]:
    """Stages separated by ``;`` (top level), each checked (ConfigError naming it)."""
    return tuple(s.text() for s in parse_stages(split_list(text, ";")))


def _where(text: str) -> str | None:
    text = text.strip()
    if text:
        parse_predicate(text)
    return text or None


def _policy(text: str) -> str:
    name = text.strip().lower()
    if name not in OUT_OF_ORDER_POLICIES:
        raise ConfigError(f"is not one of {', '.join(OUT_OF_ORDER_POLICIES)}")
    return name


def _option(opts: Mapping[str, str], name: str, parse: Any, default: str | None = None) -> Any:
    """``parse(opts[name])`` with errors prefixed by ``option name='value':``."""
    text = opts.get(name, default)
    if text is None:
        raise ConfigError(f"option {name} is required")
    try:
        return parse(text)
    except ConfigError as exc:
        if str(exc).startswith("option "):
            raise
        sep = " " if str(exc).startswith(("must ", "is ")) else ": "
        raise ConfigError(f"option {name}={abbreviated(text)}{sep}{exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"option {name}={abbreviated(text)} is not an integer") from exc
