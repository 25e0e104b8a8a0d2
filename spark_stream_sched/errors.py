"""Exceptions raised by spark_stream_sched.

Every error the project raises on purpose derives from :class:`SparkStreamSchedError`, and each
leaf also subclasses the builtin it resembles, so ``except ValueError`` keeps working for callers
that do not know this package::

    SparkStreamSchedError (Exception)
    ├── ConfigError (ValueError)          bad option, flag, window spec or aggregate list
    │   └── ExpressionError (ValueError)  a predicate or aggregate expression does not parse
    ├── InputError (ValueError)           malformed input rows, unknown columns, bad files
    │   ├── OutOfOrderError (ValueError)  ts decreased within one input (policy ``fail``)
    │   └── FormatMismatchError (ValueError)  a file is not in the input's declared format
    └── StateError (RuntimeError)         missing, corrupt or incompatible state / snapshots
        └── SpillError (OSError)          state could not be written to disk (e.g. disk full)

Messages say what was wrong, where, and what to do about it, on one line; :func:`abbreviated`
quotes what the user wrote so that a huge option does not make a huge message, and
:func:`schema_line` shows a schema on one line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class SparkStreamSchedError(Exception):
    """Root of every error raised on purpose by spark_stream_sched."""


class ConfigError(SparkStreamSchedError, ValueError):
    """An option, flag or specification is unknown or malformed."""


class ExpressionError(ConfigError):
    """An aggregate or predicate expression cannot be parsed or does not fit the schema."""


class InputError(SparkStreamSchedError, ValueError):
    """Input data violates the contract (malformed rows, missing columns, unreadable files)."""


class OutOfOrderError(InputError):
    """A tuple's event time is lower than the previous tuple's of the same input.

    ``position`` is the tuple's 0-based position in its input. Where the input is a directory
    of files, :meth:`located` adds the input's path, the file and the row's 0-based index in
    that file. ``option`` is how the user turns the policy to ``drop``: the source option
    ``outOfOrder`` by default, a command-line flag (``--out-of-order``) where the command line
    reports the error (:meth:`for_flag`).
    """

    def __init__(self, input_id: int, position: int, ts: int, previous_ts: int, *,
                 path: str | None = None, file: str | None = None, row: int | None = None,
                 option: str = "outOfOrder") -> None:
        self.input_id, self.position, self.ts, self.previous_ts = (input_id, position, ts,
                                                                   previous_ts)
        self.path, self.file, self.row, self.option = path, file, row, option
        super().__init__(self._message())

    def _message(self) -> str:
        name = f"input {self.input_id}" + (f" ({self.path})" if self.path else "")
        where = (f"in file {self.file!r} at row {self.row} (0-based; position {self.position} "
                 f"of the input)" if self.file is not None else f"at position {self.position}")
        drop = (f"pass {self.option} drop" if self.option.startswith("-")
                else f"set {self.option}=drop")
        return (f"{name} is out of order {where}: ts {self.ts} is lower than the previous ts "
                f"{self.previous_ts} of the same input; sort the input by event time, or "
                f"{drop} to drop such rows")

    def located(self, path: str, file: str, row: int) -> OutOfOrderError:
        """The same error naming the input's path, the file and the row within the file."""
        return OutOfOrderError(self.input_id, self.position, self.ts, self.previous_ts,
                               path=path, file=file, row=row, option=self.option)

    def for_flag(self, flag: str = "--out-of-order") -> OutOfOrderError:
        """The same error telling how to drop such rows with command-line ``flag``."""
        return OutOfOrderError(self.input_id, self.position, self.ts, self.previous_ts,
                               path=self.path, file=self.file, row=self.row, option=flag)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (OutOfOrderError, (self.input_id, self.position, self.ts,
                                             self.previous_ts),
                           {"path": self.path, "file": self.file, "row": self.row,
                            "option": self.option}))


class FormatMismatchError(InputError):
    """An input file is not in the format the input declares (e.g. Parquet read as CSV).

    ``looks_like`` describes what the file's first bytes say it is (``"Parquet"``,
    ``"an Arrow IPC file"``); ``fix`` says what to do, phrased for the option ``format`` or,
    after :meth:`for_flag`, the command line's ``--format``.
    """

    def __init__(self, path: str, declared: str, looks_like: str, detected: str | None, *,
                 option: str = "format") -> None:
        self.path, self.declared, self.looks_like, self.detected = (path, declared, looks_like,
                                                                    detected)
        self.option = option
        super().__init__(f"file {path!r} is not {_FORMAT_TITLES.get(declared, declared)} (it "
                         f"looks like {looks_like}); {self._fix()}")

    def _fix(self) -> str:
        if self.detected is None:
            return ("convert the input to Parquet, CSV or JSON lines, or move the file out of "
                    "the input")
        if self.option.startswith("-"):
            return f"pass {self.option} {self.detected}, or move the file out of the input"
        return f"set option {self.option}={self.detected}, or move the file out of the input"

    def for_flag(self, flag: str = "--format") -> FormatMismatchError:
        """The same error telling how to fix it with command-line ``flag``."""
        return FormatMismatchError(self.path, self.declared, self.looks_like, self.detected,
                                   option=flag)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (FormatMismatchError, (self.path, self.declared, self.looks_like,
                                                 self.detected), {"option": self.option}))


def _rebuild(cls: type[Exception], args: tuple[object, ...],
             kwargs: dict[str, object]) -> Exception:
    """Unpickle an error whose constructor takes more than its message."""
    return cls(*args, **kwargs)


#: How messages name the input formats.
_FORMAT_TITLES = {"parquet": "Parquet", "csv": "CSV", "jsonl": "JSON lines"}


class StateError(SparkStreamSchedError, RuntimeError):
    """State or a snapshot is missing, corrupt or does not match the query."""


class SpillError(StateError, OSError):
    """State could not be written to disk (for example because the disk is full)."""


def abbreviated(text: str, limit: int = 200) -> str:
    """``repr(text)`` for a message: cut to its first characters and its length past ``limit``.

    A message that quotes what the user wrote stays one short line however long the option
    (a 1 MB aggregate list is shown as its first 180 characters and ``(1,048,576 characters)``).
    """
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit - 20]!r}... ({len(text):,} characters)"


def schema_line(schema: Iterable[Any]) -> str:
    """A pyarrow schema on one line, ``(ts int64, v double)``, for a message.

    ``str(schema)`` puts each field (and the metadata) on a line of its own, which would push the
    reason and the fix of a message off its first line.
    """
    return "(" + ", ".join(f"{field.name} {field.type}" for field in schema) + ")"


def one_line(exc: BaseException) -> str:
    """``str(exc)`` with its line breaks (and runs of blanks) as single spaces."""
    return " ".join(str(exc).split())

