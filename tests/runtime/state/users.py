"""Every user of the state layer behind one small interface, for the contract suite.

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
from spark_stream_sched.runtime.state import commit_log, snapshot, versions

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


@dataclass(frozen=True)
class GroupVersions:
    """The source's versioned partition-group state (a replayed batch rewrites its version)."""

    name: str = "source-group-state"

    def write(self, root: Path, n: int, rows: int = 8) -> None:
        state = versions.GroupState(payload(n, rows), f"window {n}".encode())
        versions.save_groups(str(root), "v", {0: state}, {"n": n})

    def read(self, root: Path) -> int:
        return int(versions.load_group(str(root), 0, "v").pending["n"][0].as_py())

    def files(self, root: Path) -> list[Path]:
        return [Path(versions.version_path(str(root), 0, "v"))]

    def commit_points(self, root: Path) -> list[Path]:
        return []


@dataclass(frozen=True)
class SinkCommitLog:
    """The sink's commit log: state file of batch n, then its commit marker."""

    name: str = "sink-commit-log"

    def write(self, root: Path, n: int, rows: int = 8) -> None:
        name = commit_log.batch_name(n)
        data = snapshot.encode("contract", {"n": n}, {"t": payload(n, rows)})
        state, digest = commit_log.write_state(str(root), name, data)
        commit_log.write_marker(str(root), name, {"batch_id": n, "order": n, "state": state,
                                                  "state_sha256": digest})

    def _last(self, root: Path) -> dict[str, object]:
        markers = commit_log.read_markers(str(root))
        if not markers:
            raise FileNotFoundError(f"no commit marker in {root}")
        return markers[-1]

    def read(self, root: Path) -> int:
        meta, _ = snapshot.decode(commit_log.read_state(str(root), self._last(root)), "contract")
        return int(meta["n"])

    def files(self, root: Path) -> list[Path]:
        last = self._last(root)
        name = commit_log.batch_name(int(str(last["batch_id"])))
        return [commit_log.commit_path(str(root), name), commit_log.state_file(str(root), last)]

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


USERS: dict[str, StateUser] = {u.name: u for u in (GroupVersions(), SinkCommitLog(),
                                                   InputManifest(), SnapshotFile())}


def main() -> None:
    user, root, n = USERS[sys.argv[1]], Path(sys.argv[2]), int(sys.argv[3])
    while True:
        n += 1
        user.write(root, n, rows=20_000)
        print(n, flush=True)


if __name__ == "__main__":
    main()
