"""Every layout production writes behind one small interface, for the contract suite.

A user writes "version ``n``" of its state under a root directory and reads back which version
it finds; ``files`` lists the files its latest version consists of (the ones a test damages).
Runnable as a script (``python -m tests.runtime.state.users NAME ROOT START``): writes versions
START+1, START+2, ... forever and prints each number once it is durable, for the crash (SIGKILL)
test.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from spark_stream_sched.inputs.manifest import FileManifest, manifest_path
from spark_stream_sched.runtime.state import commit_log, snapshot
from spark_stream_sched.runtime.state.files import FileStateStore, manifest_names, version_dir
from spark_stream_sched.runtime.state.store import BatchStore, GroupState

#: a file whose size never changes, admitted into the manifest once per version
DATA_FILE = str(Path(__file__).resolve())


def payload(n: int, rows: int) -> pa.Table:
    return pa.table({"n": pa.array([n] * rows, pa.int64())})


class StateUser(Protocol):
    name: str

    def write(self, root: Path, n: int, rows: int = 8) -> None: ...

    def read(self, root: Path) -> int: ...

    def files(self, root: Path) -> list[Path]: ...

    def commit_points(self, root: Path) -> list[Path]: ...


def _latest(root: Path) -> str:
    """The newest version a writer committed (a manifest is its commit point)."""
    committed = [v for v in FileStateStore(str(root)).versions()
                 if manifest_names(version_dir(str(root), v))]
    if not committed:
        raise FileNotFoundError(f"no committed state version in {root}")
    return committed[-1]


def _group_state(n: int, rows: int) -> GroupState:
    return GroupState(payload(n, rows), f"window {n}".encode())


@dataclass(frozen=True)
class SourceGroupState:
    """The source's layout: a task's group files of version n, then its manifest.

    Every batch writes a new version from the previous one (incremental: group 1 never
    changes, so its file stays in version 1 and every later manifest points back to it).
    """

    name: str = "source-group-state"

    def write(self, root: Path, n: int, rows: int = 8) -> None:
        files = FileStateStore(str(root), cache=None)
        previous = [v for v in files.versions() if v < f"v{n:06d}"]
        start = files.entries(previous[-1]) if n > 1 and previous else None
        store = BatchStore(files, start, f"v{n:06d}", "t0000")
        store.save({0: _group_state(n, rows), 1: _group_state(1, 1)})

    def read(self, root: Path) -> int:
        files = FileStateStore(str(root), cache=None)
        entries = files.entries(_latest(root))
        assert files.get(1, entries[1]).window == b"window 1"
        return int(files.get(0, entries[0]).pending["n"][0].as_py())

    def files(self, root: Path) -> list[Path]:
        directory = Path(version_dir(str(root), _latest(root)))
        return sorted(directory.iterdir())

    def commit_points(self, root: Path) -> list[Path]:
        """The manifest: without it the version was never committed."""
        return [p for p in self.files(root) if p.name.startswith("_manifest-")]


@dataclass(frozen=True)
class SinkState:
    """The sink's layout: group files of batch n, the driver's manifest, then the marker."""

    name: str = "sink-state"

    def write(self, root: Path, n: int, rows: int = 8) -> None:
        files = FileStateStore(str(root), cache=None)
        name = commit_log.batch_name(n)
        markers = commit_log.read_markers(str(root))
        start = files.entries(str(markers[-1]["version"]), ("driver",)) if markers else None
        store = BatchStore(files, start, name, "t00000a0", commit=False)
        store.save({0: _group_state(n, rows)})
        files.commit(name, "driver", store.written)
        commit_log.write_marker(str(root), name, {"batch_id": n, "order": n, "version": name})

    def _last(self, root: Path) -> dict[str, object]:
        markers = commit_log.read_markers(str(root))
        if not markers:
            raise FileNotFoundError(f"no commit marker in {root}")
        return markers[-1]

    def read(self, root: Path) -> int:
        files = FileStateStore(str(root), cache=None)
        entries = files.entries(str(self._last(root)["version"]), ("driver",))
        return int(files.get(0, entries[0]).pending["n"][0].as_py())

    def files(self, root: Path) -> list[Path]:
        last = self._last(root)
        name = commit_log.batch_name(int(str(last["batch_id"])))
        directory = Path(version_dir(str(root), str(last["version"])))
        return [commit_log.commit_path(str(root), name), *sorted(directory.iterdir())]

    def commit_points(self, root: Path) -> list[Path]:
        """The marker: without it the batch was never committed (the previous one is current)."""
        return self.files(root)[:1]


@dataclass(frozen=True)
class InputManifest:
    """An input's manifest: version n is n admitted entries (append-only)."""

    name: str = "input-manifest"

    def write(self, root: Path, n: int, rows: int = 8) -> None:
        manifest = FileManifest(str(root), 0, "contract-input")
        manifest.append([DATA_FILE] * (n - len(manifest.entries)))

    def read(self, root: Path) -> int:
        return len(FileManifest(str(root), 0, "contract-input").entries)

    def files(self, root: Path) -> list[Path]:
        return [Path(manifest_path(str(root), 0))]

    def commit_points(self, root: Path) -> list[Path]:
        return []


@dataclass(frozen=True)
class SnapshotFile:
    """A runtime snapshot written to and read from one file."""

    name: str = "snapshot"

    def write(self, root: Path, n: int, rows: int = 8) -> None:
        snapshot.write_snapshot(str(root / "query.snapshot"), "contract", {"n": n},
                                {"t": payload(n, rows)})

    def read(self, root: Path) -> int:
        meta, _ = snapshot.read_snapshot(str(root / "query.snapshot"), "contract")
        return int(meta["n"])

    def files(self, root: Path) -> list[Path]:
        return [root / "query.snapshot"]

    def commit_points(self, root: Path) -> list[Path]:
        return []


USERS: dict[str, StateUser] = {u.name: u for u in (SourceGroupState(), SinkState(),
                                                   InputManifest(), SnapshotFile())}


def main() -> None:
    user, root, n = USERS[sys.argv[1]], Path(sys.argv[2]), int(sys.argv[3])
    while True:
        n += 1
        user.write(root, n, rows=20_000)
        print(n, flush=True)


if __name__ == "__main__":
    main()
