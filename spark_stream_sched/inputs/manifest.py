"""Durable per-input file manifests: the files an input's cursors refer to, in admission order.

A directory listing changes under a running query; an offset that Spark has logged must not.
So the driver records every file it admits into an input in an append-only log, the way Spark's
own ``FileStreamSource`` keeps a metadata log, and plans batches from that log only::

    <stateLocation>/inputs/input-0000.log     one JSON object a line, appended and fsync'ed

    {"index": 0, "file": "/data/in0/part-0000.parquet", "size": 5120,
     "mtime_ns": 1700000000123456789, "skipped": false}          (one line in the file)

Contract (called on the driver, by the one process that holds the state location's lock):

* files are appended in name order *before* ``latestOffset`` returns an offset that refers to
  them, so a replayed batch (same offsets) reads exactly the files and rows it planned, whatever
  was added to the directory since;
* a listed file that is not in the manifest and sorts *after* its last file is new and is
  appended; one that sorts *before* it is **late** (it would belong to the past of the stream):
  with ``lateFiles=fail`` an :class:`~spark_stream_sched.errors.InputError` names it, with
  ``lateFiles=skip`` it is logged, recorded with ``"skipped": true`` (so it is reported once and
  never read) and counted;
* a listed file of zero bytes is not recorded until it has bytes (a writer that opens its final
  path leaves one), so no cursor steps over a file still to be written;
* the size and modification time recorded for a file a cursor has entered must not change (a
  batch Spark logged reads it): a change is an :class:`~spark_stream_sched.errors.InputError`
  naming the file; a file after every cursor is in no logged offset, so one that changed or
  vanished since it was recorded is recorded again as it is (:meth:`FileManifest.refresh`);
* a torn last line (the driver died while appending, before the offset that needed it was
  returned) is dropped and cut off; any other unreadable line is a
  :class:`~spark_stream_sched.errors.StateError` naming the file and the line number.

**Compaction.** Appending alone would grow the log by one line per file for the life of the
query. Once Spark has committed an offset, no batch can start before the files its cursors are
in, so the entries ahead of a cursor's file are the *consumed prefix*: their sizes are never
checked again, only their names still matter (a listed file that is neither known nor newer
than the last admitted one is late). :meth:`FileManifest.compact` folds that prefix into the
log's first line, once it holds at least :data:`COMPACT_AT` entries::

    {"compacted": 1200, "skipped": 3, "listed": ["/data/in0/part-1187.parquet", ...]}

``compacted`` entries were folded (the next entry's index), ``skipped`` of them were late files
(still counted in the metrics), and ``listed`` names the folded files that the input directory
still held at the last listing: they stay known, so they are never taken for new or late files.
A folded file that has left the directory is forgotten; if a file of that name appears again,
it is a late file (it sorts before the last admitted one), as any other file in the stream's
past. The log therefore holds the unconsumed files plus the consumed ones still in the
directory: it is bounded when the input directory is (files deleted once consumed), whatever
the age of the query. The rewrite is atomic (:func:`~spark_stream_sched.runtime.state.atomic.\
atomic_write`), so a crash leaves the old log or the new one.

Appends go through :func:`~spark_stream_sched.runtime.state.atomic.append_durably`. Pure
Python: no pyspark.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spark_stream_sched.errors import InputError, StateError
from spark_stream_sched.inputs.listing import file_identity
from spark_stream_sched.runtime.state.atomic import append_durably, atomic_write
from spark_stream_sched.runtime.state.records import seal, unseal

log = logging.getLogger(__name__)

MANIFEST_DIR = "inputs"
LATE_FILE_POLICIES = ("fail", "skip")
#: Consumed entries that make a compaction worth its rewrite (see the module docstring).
COMPACT_AT = 64
_KEYS = ("index", "file", "size", "mtime_ns", "skipped")
_FOLDED_KEYS = ("compacted", "skipped", "listed")


@dataclass(frozen=True)
class ManifestEntry:
    """One admitted (or skipped) file of an input."""

    index: int
    file: str
    size: int
    mtime_ns: int
    skipped: bool = False

    def to_line(self) -> bytes:
        """The entry as one JSON line with the fixed key order."""
        record = {"index": self.index, "file": self.file, "size": self.size,
                  "mtime_ns": self.mtime_ns, "skipped": self.skipped}
        return seal(record) + b"\n"


@dataclass(frozen=True)
class Folded:
    """The consumed prefix of a manifest, folded into its first line (module docstring)."""

    count: int = 0
    skipped: int = 0
    listed: tuple[str, ...] = ()

    def to_line(self) -> bytes:
        """The summary as the log's first line."""
        record = {"compacted": self.count, "skipped": self.skipped, "listed": list(self.listed)}
        return seal(record) + b"\n"

    @classmethod
    def parse(cls, raw: Any) -> Folded | None:
        """The summary of a first line, or None when the line is not one."""
        if not (isinstance(raw, dict) and set(raw) == set(_FOLDED_KEYS)):
            return None
        count, skipped, listed = raw["compacted"], raw["skipped"], raw["listed"]
        ok = (isinstance(count, int) and isinstance(skipped, int) and 0 <= skipped <= count
              and isinstance(listed, list) and all(isinstance(n, str) for n in listed))
        return cls(count, skipped, tuple(listed)) if ok else None


def manifest_path(location: str, input_id: int) -> str:
    """Path of input ``input_id``'s manifest under a state location."""
    return os.path.join(location, MANIFEST_DIR, f"input-{input_id:04d}.log")


def _entry(raw: Any, index: int) -> ManifestEntry | None:
    ok = (isinstance(raw, dict) and set(raw) == set(_KEYS) and raw["index"] == index
          and isinstance(raw["file"], str) and isinstance(raw["size"], int)
          and isinstance(raw["mtime_ns"], int) and isinstance(raw["skipped"], bool))
    return ManifestEntry(**raw) if ok else None


def read_manifest(path: str) -> tuple[list[ManifestEntry], int]:
    """Entries of a manifest file (after its folded prefix) and the length of its complete lines.

    See :func:`read_log`, which also returns the folded prefix.
    """
    _, entries, good = read_log(path)
    return entries, good


def read_log(path: str) -> tuple[Folded, list[ManifestEntry], int]:
    """A manifest's folded prefix, its entries and the byte length of its complete lines.

    A missing file is an empty manifest. The last line is *torn* when it lacks its newline (a
    crash mid-append); it is not returned, and the length tells the caller where to cut.

    Raises
    ------
    StateError
        A complete line that is not a manifest entry (naming the file and the line number).
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return Folded(), [], 0
    complete = data[: data.rfind(b"\n") + 1]
    lines = complete.splitlines()
    folded = Folded.parse(_unsealed(lines[0])) if lines else None
    start = 0 if folded is None else 1
    folded = folded or Folded()
    entries: list[ManifestEntry] = []
    for number, line in enumerate(lines[start:], start=start + 1):
        entry = _entry(_unsealed(line), folded.count + len(entries))
        if entry is None:
            raise StateError(
                f"input manifest {path} line {number} is corrupt: {line[:200]!r}; the manifest "
                f"records which files each batch reads — restore it from a backup, or start the "
                f"query with a new checkpointLocation and stateLocation")
        entries.append(entry)
    return folded, entries, len(complete)


def _unsealed(line: bytes) -> Any:
    try:
        return unseal(line)
    except ValueError:
        return None


def late_file_error(input_id: int, input_path: str, files: Sequence[str],
                    last: str) -> InputError:
    """The error for files that sort before the last file already admitted into an input."""
    return InputError(
        f"input {input_id} ({input_path!r}): file {files[0]!r} appeared after the source had "
        f"already admitted {last!r}, which sorts after it ({len(files)} such file(s)); it would "
        f"belong to the past of the stream, so it is neither read nor ignored in silence — "
        f"give it a name that sorts after {os.path.basename(last)!r}, remove it, or set option "
        f"lateFiles=skip to log and count such files without reading them")


class FileManifest:
    """The manifest of one input: load, append new files, record late ones (driver only)."""

    def __init__(self, location: str, input_id: int, input_path: str) -> None:
        self.path = manifest_path(location, input_id)
        self.input_id = input_id
        self.input_path = input_path
        self.folded, self.entries, good = read_log(self.path)
        self._cut_torn_tail(good)
        self._known = {e.file: e for e in self.entries}
        self._listed: frozenset[str] | None = None  # the last listing :meth:`sync` saw

    def _cut_torn_tail(self, good: int) -> None:
        if os.path.exists(self.path) and os.path.getsize(self.path) > good:
            log.warning("input manifest %s: dropping a torn last line (crash while appending)",
                        self.path)
            os.truncate(self.path, good)

    @property
    def admitted(self) -> list[str]:
        """Files to read, in stream order (skipped files excluded)."""
        return [e.file for e in self.entries if not e.skipped]

    def holds(self, path: str) -> bool:
        """Whether ``path`` has an entry (admitted or skipped) after the folded prefix."""
        return path in self._known

    @property
    def is_new(self) -> bool:
        """Whether nothing was ever recorded (a new location, or one from before manifests)."""
        return not self.entries and self.folded.count == 0

    @property
    def skipped_count(self) -> int:
        """Late files recorded as skipped (``lateFiles=skip``)."""
        return self.folded.skipped + sum(e.skipped for e in self.entries)

    @property
    def last_file(self) -> str | None:
        """The last admitted file (every later file must sort after it)."""
        admitted = self.admitted
        return admitted[-1] if admitted else None

    def classify(self, listed: Sequence[str]) -> tuple[list[str], list[str]]:
        """Split listed files unknown to the manifest into (new, late), each in name order.

        A file of zero bytes is neither yet: it holds no row in any format, and a writer that
        opens its final path leaves one before it writes. It is classified once it has bytes,
        so a cursor never steps over a file that is still to be written.
        """
        last = self.last_file
        folded = set(self.folded.listed)
        unknown = sorted(f for f in listed
                         if f not in self._known and f not in folded and _has_bytes(f))
        if last is None:
            return unknown, []
        return [f for f in unknown if f > last], [f for f in unknown if f < last]

    def sync(self, listed: Sequence[str], late_files: str, admit_new: bool = True,
             warn: Callable[..., None] = log.warning) -> list[str]:
        """Record what a fresh listing shows; return the late files found.

        New files are appended when ``admit_new`` (False while ``Trigger.AvailableNow`` holds
        the manifest frozen). Late files raise with ``late_files="fail"``, are appended as
        skipped with ``"skip"``, and are only returned with ``"defer"`` (the caller reports
        them at its next planning step).
        """
        self._listed = frozenset(listed)
        new, late = self.classify(listed)
        if late and late_files == "fail":
            raise late_file_error(self.input_id, self.input_path, late, str(self.last_file))
        if late and late_files == "skip":
            warn("input %d (%r): skipping %d late file(s) that sort before %r, e.g. %r "
                 "(lateFiles=skip); they are recorded in %s and never read", self.input_id,
                 self.input_path, len(late), self.last_file, late[0], self.path)
            self.append(late, skipped=True)
        if admit_new and new:
            self.append(new)
        return late

    def append(self, files: Sequence[str], skipped: bool = False) -> None:
        """Append ``files`` (stat'ed now) and make them durable before returning."""
        if not files:
            return
        start = self.folded.count + len(self.entries)
        added = [ManifestEntry(start + i, f, *_stat(f), skipped=skipped)
                 for i, f in enumerate(files)]
        append_durably(self.path, b"".join(e.to_line() for e in added))
        self.entries.extend(added)
        self._known.update((e.file, e) for e in added)

    def compact(self, cursor_file: str, at_least: int | None = None) -> int:
        """Fold the entries ahead of ``cursor_file`` into the log's first line (module doc).

        ``cursor_file`` is the file an offset Spark committed is in: no batch starts before it.
        Nothing happens unless at least ``at_least`` (default :data:`COMPACT_AT`) entries lie
        ahead of it. Of the folded
        files, those the last :meth:`sync` listed stay known (all of them when this process
        has not listed the input yet). Returns the number of entries folded. Called on the
        driver from ``commit()``.
        """
        position = next((i for i, e in enumerate(self.entries)
                         if e.file == cursor_file and not e.skipped), None)
        if position is None or position < (COMPACT_AT if at_least is None else at_least):
            return 0
        ahead, kept = self.entries[:position], self.entries[position:]
        names = {*self.folded.listed, *(e.file for e in ahead)}
        if self._listed is not None:
            names &= self._listed
        folded = Folded(self.folded.count + position,
                        self.folded.skipped + sum(e.skipped for e in ahead), tuple(sorted(names)))
        atomic_write(self.path, folded.to_line() + b"".join(e.to_line() for e in kept))
        self.folded, self.entries = folded, kept
        self._known = {e.file: e for e in kept}
        return position

    def check_unchanged(self, files: Sequence[str]) -> None:
        """Fail when an admitted file's size or modification time differs from the recorded one.

        For the files a cursor has entered: a batch Spark logged reads them, so they must be
        what it planned.

        Raises
        ------
        InputError
            Naming the file, what changed and what to do; a vanished file is also an error.
        """
        for path in files:
            size, mtime_ns = _stat(path)
            entry = self._known[path]
            if (size, mtime_ns) == (entry.size, entry.mtime_ns):
                continue
            change = (f"was {entry.size} bytes when the source admitted it and is {size} bytes "
                      f"now" if size != entry.size else
                      f"was modified after the source admitted it (mtime {entry.mtime_ns} ns, "
                      f"now {mtime_ns} ns)")
            raise InputError(
                f"input {self.input_id} file {path!r} {change}; a batch has read from it, and "
                f"files of an input must not change once read (write them elsewhere and "
                f"rename them into place) — restore the file and put new rows in a new file "
                f"that sorts after {os.path.basename(str(self.last_file))!r}, or start a new "
                f"query with a fresh checkpointLocation and stateLocation")

    def refresh(self, files: Sequence[str], warn: Callable[..., None] = log.warning) -> int:
        """Record again admitted ``files`` that no cursor has entered yet and that changed.

        No offset Spark logged reaches into such a file, so no batch reads it as it was: a
        file completed, replaced or removed after the query stopped on it (a half-written
        Parquet file) is taken as it is now -- its entry gets the new size and modification
        time, or is dropped when the file is gone or empty (:meth:`classify` takes it up again
        once it has bytes). The log is rewritten atomically. Returns the entries dropped.
        """
        now = {path: _stat_or_none(path) for path in files}
        changed = {path: stat for path, stat in now.items()
                   if stat != (self._known[path].size, self._known[path].mtime_ns)}
        if not changed:
            return 0
        kept: list[ManifestEntry] = []
        for entry in self.entries:
            stat = changed.get(entry.file, (entry.size, entry.mtime_ns))
            if stat is not None and stat[0] > 0:
                kept.append(ManifestEntry(self.folded.count + len(kept), entry.file, *stat,
                                          skipped=entry.skipped))
        for path, stat in changed.items():
            warn("input %d file %r %s before any batch read from it: %s", self.input_id, path,
                 "changed" if stat else "disappeared",
                 "recorded again as it is now" if stat and stat[0] else "dropped from the "
                 "manifest (taken up again if it reappears with bytes)")
        head = self.folded.to_line() if self.folded != Folded() else b""
        atomic_write(self.path, head + b"".join(e.to_line() for e in kept))
        dropped = len(self.entries) - len(kept)
        self.entries, self._known = kept, {e.file: e for e in kept}
        return dropped


def _stat(path: str) -> tuple[int, int]:
    _, size, mtime_ns = file_identity(path)
    return size, mtime_ns


def _stat_or_none(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _has_bytes(path: str) -> bool:
    stat = _stat_or_none(path)
    return stat is not None and stat[0] > 0
