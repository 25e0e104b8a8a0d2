"""A file that is not in the input's declared format: recognised by its first bytes, named, no
binary bytes in any message (``inputs/sniff.py``, ``inputs/files.py``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from spark_stream_sched.errors import FormatMismatchError, InputError
from spark_stream_sched.inputs import FORMATS, list_files, read_input, write_input
from spark_stream_sched.inputs.sniff import HEAD_BYTES, sniff

TABLE = pa.table({"ts": pa.array([0, 1000], pa.int64()), "name": ["é", "b"], "v": [1.0, 2.5]})


@pytest.mark.parametrize(("head", "found"), [
    (b"PAR1\x15\x04", ("Parquet", "parquet")),
    (b"ARROW1\x00\x00", ("an Arrow IPC file", None)),
    (b"\xff\xff\xff\xff\x10\x00", ("an Arrow IPC stream", None)),
    (b"ORC\x0a", ("an ORC file", None)),
    (b"\x1f\x8b\x08\x00", ("gzip-compressed data", None)),
    (b"\xef\xbb\xbf  \n{\"ts\": 1}", ("JSON lines", "jsonl")),
    (b"ts,name\n1,\xc3\xa9\n", ("CSV", "csv")),
    (b"ts,name\n1,\xc3", ("CSV", "csv")),  # a character cut off at the end of the head
    (b"[{\"ts\": 1}]", ("a JSON array (JSON-lines inputs hold one object a line)", None)),
    (b"\x00\x01\x02\x03", None),
    (b"\xc3\x28 not utf-8 at all, and long enough", None),
    (b"   \n", None),
])
def test_first_bytes_say_what_a_file_is(head: bytes, found: tuple[str, str | None] | None
                                        ) -> None:
    assert sniff(head[:HEAD_BYTES]) == found


@pytest.mark.parametrize("declared", sorted(FORMATS))
@pytest.mark.parametrize("written", sorted(FORMATS))
def test_reading_a_file_as_another_format_names_the_format_to_set(
        tmp_path: Path, declared: str, written: str) -> None:
    write_input(TABLE, tmp_path, written)
    if declared == written:
        assert read_input(tmp_path, declared).num_rows == 2
        return
    (file,) = list_files(str(tmp_path))
    titles = {"parquet": "Parquet", "csv": "CSV", "jsonl": "JSON lines"}
    with pytest.raises(FormatMismatchError) as info:
        read_input(tmp_path, declared)
    assert str(info.value) == (f"file {file!r} is not {titles[declared]} (it looks like "
                               f"{titles[written]}); set option format={written}, or move the "
                               f"file out of the input")


def test_an_unparsable_file_is_quoted_without_raw_control_bytes(tmp_path: Path) -> None:
    bad = tmp_path / "part-00000.csv"
    bad.write_bytes(b"ts,v\n1,2.0\n\x00\x07,3,4\n")
    with pytest.raises(InputError) as info:
        read_input(tmp_path, "csv")
    message = str(info.value)
    assert message.startswith(f"cannot read csv file {str(bad)!r}: ")
    assert "\\x00\\x07" in message
    assert message.isprintable()
