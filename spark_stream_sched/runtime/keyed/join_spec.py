"""The ``join`` stage's arguments, output schema, input check and routing (:class:`~.join.Join`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_stream_sched.errors import ConfigError
from spark_stream_sched.runtime.durations import parse_bytes, parse_duration
from spark_stream_sched.runtime.keyed.stage import StageSpec
from spark_stream_sched.runtime.keys import assign_to_partition_group, key_hash
from spark_stream_sched.runtime.packets import INPUT_COL, SEQ_COL

MAX_INPUTS = 8
_USAGE = "e.g. join(3, within=10 seconds) or join(2) for finite inputs"


def parse_join(stage: StageSpec) -> tuple[int, int | None, int | None]:
    """``(N, within ms or None, budget bytes or None)`` from the stage's arguments.

    Raises
    ------
    ConfigError
        Naming the stage: ``N`` not an integer 2..8, a malformed ``within`` or ``budget``,
        another keyword or an alias.
    """
    unknown = sorted(k for k, _ in stage.kwargs if k not in ("within", "budget"))
    if unknown or stage.alias or len(stage.args) > 1:
        raise stage.fail(f"expected at most the number of inputs and the keywords 'within' "
                         f"and 'budget', no alias; {_USAGE}")
    text = stage.args[0].strip() if stage.args else "2"
    if not text.isdigit() or not 2 <= int(text) <= MAX_INPUTS:
        raise stage.fail(f"the number of inputs must be an integer 2..{MAX_INPUTS}, "
                         f"got {text!r}; {_USAGE}")
    try:
        within, budget = stage.keyword("within"), stage.keyword("budget")
        return (int(text), None if within is None else parse_duration(within, "within"),
                None if budget is None else parse_bytes(budget))
    except ConfigError as exc:
        raise stage.fail(str(exc)) from exc


def check_query_inputs(stage: StageSpec, n_inputs: int) -> None:
    """ConfigError naming the stage if it joins more inputs than the query has.

    Such a join could never produce a result (a result needs a tuple of every joined input).
    """
    n = parse_join(stage)[0]
    if n <= n_inputs:
        return
    fix = (f"write join({n_inputs}, ...)" if n_inputs >= 2
           else "a join needs at least 2 inputs")
    raise stage.fail(f"joins {n} inputs (0..{n - 1}), but the query has {n_inputs} "
                     f"input{'s' if n_inputs != 1 else ''}, so it could never produce a result; "
                     f"give the query {n} inputs or {fix}")


def join_output_schema(input_schema: pa.Schema, ts_column: str, key_columns: list[str],
                       payload: list[str], n_inputs: int, stage: StageSpec) -> pa.Schema:
    """Completing tuple's ts/__input/__seq and keys, then each input's payload and ts.

    ConfigError naming the stage if two output columns would have the same name.
    """
    field = input_schema.field
    fields = [field(n) for n in (ts_column, INPUT_COL, SEQ_COL, *key_columns)]
    for j in range(n_inputs):
        fields += [field(n).with_name(f"{n}_{j}") for n in (*payload, ts_column)]
    names = [f.name for f in fields]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise stage.fail(f"output columns {clash} would appear twice; rename the input columns")
    return pa.schema(fields)


def check_inputs(rows: pa.Table, n_inputs: int, stage: StageSpec) -> None:
    """ConfigError naming the stage if a row's ``__input`` is not one of the join's N inputs."""
    inputs = np.asarray(rows.column(INPUT_COL).to_numpy(), np.int64)
    bad = np.flatnonzero((inputs < 0) | (inputs >= n_inputs))
    if len(bad):
        raise stage.fail(f"a tuple of input {inputs[bad[0]]} arrived, but this join has "
                         f"{n_inputs} inputs (0..{n_inputs - 1}); write "
                         f"join({max(int(inputs.max()) + 1, 2)}, ...) to join every input")


def route(rows: pa.Table, key_columns: list[str], n_groups: int
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Key hashes, non-null-key mask and partition group of every row.

    A key's group is :func:`~..keys.assign_to_partition_group` of the high 32 bits of its hash
    (the task split upstream already used the low bits).
    """
    hashes = key_hash(rows, key_columns)
    valid = np.ones(rows.num_rows, bool)
    for name in key_columns:
        valid &= np.asarray(rows.column(name).is_valid().to_numpy(zero_copy_only=False))
    return hashes, valid, assign_to_partition_group(hashes >> np.uint64(32), n_groups)
