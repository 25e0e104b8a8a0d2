"""What a file's first bytes say it is: the check behind "file X is not CSV (it looks like ...)".

An input declares one format (``format=csv``); a file of another format in its directory makes
the declared reader fail with a message about bytes it could not parse (or, CSV being lenient,
read garbage). :func:`format_mismatch` recognises the common cases from the first bytes alone:

===============================  ==================================  ===========================
first bytes                      looks like                          fix
===============================  ==================================  ===========================
``PAR1``                         Parquet                             ``format=parquet``
``{`` (after blanks, a BOM)      JSON lines                          ``format=jsonl``
other UTF-8 text                 CSV                                 ``format=csv``
``ARROW1``, ``FF FF FF FF``      an Arrow IPC file / stream          convert the input
``FEA1``, ``ORC``                Feather v1 / ORC                    convert the input
``1F 8B``, ``PK 03 04``          gzip / zip compressed data          decompress / convert it
===============================  ==================================  ===========================

A JSON array (``[``) is reported as such: JSON-lines inputs hold one object a line. Anything
else binary is left to the reader's own error. Pure Python (no pyspark).
"""

from __future__ import annotations

from spark_stream_sched.errors import FormatMismatchError

#: Bytes read from the start of a file; enough for every signature and a first character.
HEAD_BYTES = 64

#: Binary signatures: (prefix, what the file looks like, the input format to set or None).
_SIGNATURES: tuple[tuple[bytes, str, str | None], ...] = (
    (b"PAR1", "Parquet", "parquet"),
    (b"ARROW1", "an Arrow IPC file", None),
    (b"\xff\xff\xff\xff", "an Arrow IPC stream", None),
    (b"FEA1", "a Feather (v1) file", None),
    (b"ORC", "an ORC file", None),
    (b"\x1f\x8b", "gzip-compressed data", None),
    (b"PK\x03\x04", "a zip archive", None),
)
_BOM = b"\xef\xbb\xbf"


def sniff(head: bytes) -> tuple[str, str | None] | None:
    """``(looks like, input format or None)`` for a file starting with ``head``; None: unknown.

    Text is JSON lines when its first character is ``{``, a JSON array when it is ``[``, and
    CSV otherwise; bytes that are not UTF-8 text (or hold a NUL) and match no signature give
    None.
    """
    for prefix, looks_like, fmt in _SIGNATURES:
        if head.startswith(prefix):
            return looks_like, fmt
    text = head.removeprefix(_BOM).lstrip()
    if not text:
        return None
    if text.startswith(b"{"):
        return "JSON lines", "jsonl"
    if text.startswith(b"["):
        return "a JSON array (JSON-lines inputs hold one object a line)", None
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(text) - 3:  # not just a character cut off by HEAD_BYTES
            return None
    return (None if b"\0" in text else ("CSV", "csv"))


def format_mismatch(path: str, declared: str) -> FormatMismatchError | None:
    """The error for ``path`` when its first bytes say it is not ``declared`` (canonical name).

    None when the file looks like ``declared``, cannot be recognised, or cannot be opened (the
    reader then reports it).
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return None
    found = sniff(head)
    if found is None or found[1] == declared:
        return None
    return FormatMismatchError(path, declared, *found)
