"""The one table of input file formats: each format's read, row count and write in one place.

=========  ==================================  =================================================
format     file                                notes
=========  ==================================  =================================================
parquet    ``part-00000.parquet``              row counts from the footer; ranges read only the
                                               row groups they overlap
csv        ``part-00000.csv``, header row      values parsed as the input schema's types;
                                               ``NaN`` is not-a-number, as in Spark
jsonl      ``part-00000.jsonl``, one object    alias ``json`` (Spark's name for the same files);
           a line                              values parsed as the input schema's types
=========  ==================================  =================================================

Every format obeys the same two rules, so that what the writer produces is exactly what the
readers accept:

* a file of zero bytes holds zero rows, whatever its format (a text writer given no rows leaves
  one; an empty JSON-lines file has nothing Arrow could call a schema);
* the writer's text keeps each column's type under inference: a floating-point value is
  written with a decimal point or an exponent (``1.0``, not ``1``), so the first file of an
  input infers the same schema as the table that was written.

Pure Python + PyArrow (no pyspark).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from spark_stream_sched.errors import ConfigError, InputError
from spark_stream_sched.runtime.names import did_you_mean

#: ``(path, schema or None) -> table``: one whole file, values parsed as ``schema``'s types.
Reader = Callable[[str, Any], Any]
#: ``(table, path, row_group_size) -> None``: one file holding exactly ``table``'s rows
#: (``row_group_size``: rows per Parquet row group; None for the writer's default).
Writer = Callable[[Any, Path, "int | None"], None]


@dataclass(frozen=True)
class FileFormat:
    """One input file format: its names, file suffixes, reader and writer."""

    name: str
    suffixes: tuple[str, ...]
    spark_name: str
    read: Reader
    write: Writer

    @property
    def suffix(self) -> str:
        """The suffix the writer gives its files."""
        return self.suffixes[0]


# -- readers -----------------------------------------------------------------------------------


def _read_parquet(path: str, schema: Any) -> Any:
    return pq.read_table(path, columns=None if schema is None else schema.names)


#: Texts a CSV reader takes for null: Arrow's defaults less ``NaN``, which Spark's CSV reader
#: reads as not-a-number (its ``nanValue``), so both read the same values from the same file.
CSV_NULL_VALUES = tuple(v for v in pa_csv.ConvertOptions().null_values if v != "NaN")


def _read_csv(path: str, schema: Any) -> Any:
    convert = pa_csv.ConvertOptions(null_values=list(CSV_NULL_VALUES))
    if schema is not None:
        convert.column_types = dict(zip(schema.names, schema.types, strict=True))
        convert.include_columns = schema.names
    return pa_csv.read_csv(path, convert_options=convert)


def _read_jsonl(path: str, schema: Any) -> Any:
    parse = pa_json.ParseOptions(explicit_schema=schema,
                                 unexpected_field_behavior="ignore" if schema else "infer")
    return pa_json.read_json(path, parse_options=parse)


# -- writers -----------------------------------------------------------------------------------


def _write_parquet(table: Any, path: Path, row_group_size: int | None = None) -> None:
    pq.write_table(table, path, row_group_size=row_group_size)


def write_csv(table: Any, sink: Any, row_group_size: int | None = None) -> None:
    """Write ``table`` as CSV to ``sink`` (a path or a binary stream; no row groups).

    A header row, then the rows; every text value is quoted, and so is every float, whose text
    keeps a decimal point (the module notes). A ``.csv`` file and ``--out -`` get the same bytes.
    """
    columns = [_float_text(table.column(n)) if pa.types.is_floating(table.schema.field(n).type)
               else table.column(n) for n in table.column_names]
    pa_csv.write_csv(pa.table(columns, names=table.column_names), sink)


def _write_jsonl(table: Any, path: Path, row_group_size: int | None = None) -> None:
    """Write one JSON object per line; numbers keep their exact (shortest round-trip) text."""
    if table.num_rows == 0:
        path.write_bytes(b"")
        return
    pieces: list[Any] = []
    for i, name in enumerate(table.column_names):
        pieces += [", " if i else "{", _json_field(name, table.column(name))]
    lines = pc.binary_join_element_wise(*pieces, "}", "")
    path.write_text("\n".join(lines.to_pylist()) + "\n", encoding="utf-8")


def _float_text(chunked: Any) -> Any:
    """Shortest round-trip text of floats, with ``.0`` added to whole numbers (``1`` → ``1.0``).

    Not-a-number and the infinities are written as Spark writes them (``NaN``, ``Infinity``,
    ``-Infinity``), which Spark's CSV reader and this one read back as the same values.
    """
    text = pc.cast(chunked.combine_chunks(), pa.string())
    whole = pc.match_substring_regex(text, r"^-?[0-9]+$")
    text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    for arrow, spark in (("nan", "NaN"), ("inf", "Infinity"), ("-inf", "-Infinity")):
        text = pc.if_else(pc.equal(text, arrow), spark, text)
    return text


def _json_field(name: str, chunked: Any) -> Any:
    """Build ``"name": value`` text for every row of a column, with Arrow kernels."""
    column = chunked.combine_chunks()
    kind = column.type
    if pa.types.is_floating(kind):
        if pc.all(pc.is_finite(column)).as_py() is False:
            raise InputError(f"column {name!r} holds NaN or infinity, which JSON cannot "
                             f"represent; write it as parquet instead")
        text = _float_text(chunked)
    elif pa.types.is_integer(kind):
        text = pc.cast(column, pa.string())
    elif pa.types.is_boolean(kind):
        text = pc.if_else(column, "true", "false")
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = _json_strings(column)
    else:
        raise ConfigError(f"the jsonl writer supports integer, floating, boolean and string "
                          f"columns; column {name!r} is {kind}")
    text = pc.fill_null(text, "null")
    return pc.binary_join_element_wise(json.dumps(name) + ": ", text, "")


def _json_strings(column: Any) -> Any:
    """Quote and escape strings as JSON (per value only when one holds a control character)."""
    if pc.any(pc.match_substring_regex(column, "[\\x00-\\x1f]")).as_py():
        return pa.array([None if v is None else json.dumps(v, ensure_ascii=False)
                         for v in column.to_pylist()], pa.string())
    escaped = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), '"', '\\"')
    return pc.binary_join_element_wise('"', escaped, '"', "")


# -- the table ---------------------------------------------------------------------------------

#: Canonical format name -> format. Aliases are in :data:`ALIASES`.
FORMATS: dict[str, FileFormat] = {
    "parquet": FileFormat("parquet", (".parquet",), "parquet", _read_parquet, _write_parquet),
    "csv": FileFormat("csv", (".csv",), "csv", _read_csv, write_csv),
    "jsonl": FileFormat("jsonl", (".jsonl", ".json", ".ndjson"), "json", _read_jsonl,
                        _write_jsonl),
}
#: Other accepted spellings: ``json`` is Spark's name for JSON-lines files.
ALIASES: dict[str, str] = {"json": "jsonl"}
#: Every accepted spelling (for CLI choices and option checks).
FORMAT_NAMES: tuple[str, ...] = (*FORMATS, *ALIASES)


def canonical_format(name: str, where: str = "format") -> str:
    """The canonical name of format ``name`` (case-insensitive; ``json`` → ``jsonl``).

    Raises
    ------
    ConfigError
        Unknown format, naming ``where`` (e.g. ``"option format"``), the accepted names and a
        close match.
    """
    key = name.strip().lower()
    if key in FORMATS:
        return key
    if key in ALIASES:
        return ALIASES[key]
    hint = did_you_mean(key, FORMAT_NAMES)
    raise ConfigError(f"{where}={name!r} is not an input format{hint} Use one of "
                      f"{', '.join(FORMAT_NAMES)} (json is an alias of jsonl)")


def get_format(name: str) -> FileFormat:
    """The :class:`FileFormat` named ``name`` or one of its aliases (ConfigError otherwise)."""
    return FORMATS[canonical_format(name)]
