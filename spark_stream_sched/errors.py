"""Exceptions raised by spark_stream_sched.

Every error the project raises on purpose derives from :class:`SparkStreamSchedError`, and each
leaf also subclasses the builtin it resembles, so ``except ValueError`` keeps working for callers
that do not know this package::

    SparkStreamSchedError (Exception)
    ├── ConfigError (ValueError)          bad option, flag, window spec or aggregate list
    │   └── ExpressionError (ValueError)  a predicate or aggregate expression does not parse
    ├── InputError (ValueError)           malformed input rows, unknown columns, bad files
    │   └── OutOfOrderError (ValueError)  ts decreased within one input (policy ``fail``)
    └── StateError (RuntimeError)         missing, corrupt or incompatible state / snapshots
        └── SpillError (OSError)          state could not be written to disk (e.g. disk full)

Messages say what was wrong, where, and what to do about it.
"""

from __future__ import annotations


class SparkStreamSchedError(Exception):
    """Root of every error raised on purpose by spark_stream_sched."""


class ConfigError(SparkStreamSchedError, ValueError):
    """An option, flag or specification is unknown or malformed."""


class ExpressionError(ConfigError):
    """An aggregate or predicate expression cannot be parsed or does not fit the schema."""


class InputError(SparkStreamSchedError, ValueError):
    """Input data violates the contract (malformed rows, missing columns, unreadable files)."""


class OutOfOrderError(InputError):
    """A tuple's event time is lower than the previous tuple's of the same input."""

    def __init__(self, input_id: int, position: int, ts: int, previous_ts: int) -> None:
        self.input_id = input_id
        self.position = position
        self.ts = ts
        self.previous_ts = previous_ts
        super().__init__(
            f"input {input_id} is out of order at position {position}: ts {ts} is lower than "
            f"the previous ts {previous_ts} of the same input; sort the input by event time or "
            f"set the out-of-order policy to 'drop'"
        )


class StateError(SparkStreamSchedError, RuntimeError):
    """State or a snapshot is missing, corrupt or does not match the query."""


class SpillError(StateError, OSError):
    """State could not be written to disk (for example because the disk is full)."""
