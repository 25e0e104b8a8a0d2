"""The cluster tests' polling of a Spark master's web UI, against a real HTTP server on loopback.

A master still starting may answer ``/json/`` with something that is not its status (CI once
saw the standalone fixture fail on an answer that was not JSON); the poll must retry it, and a
UI that never gives the status must end in a ``TimeoutError`` that says what it answered.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from integration.cluster import MasterNotReady, free_port, master_status, wait_for_workers


def serve(answers: list[bytes]) -> Iterator[int]:
    """A loopback HTTP server answering 200 with ``answers`` in turn (the last one repeats)."""
    served = iter(answers)
    last = [answers[-1]]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = next(served, last[0])
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


STATUS = json.dumps({"url": "spark://127.0.0.1:7077", "aliveworkers": 2}).encode()


@pytest.fixture
def starting_master() -> Iterator[int]:
    yield from serve([b"", b"<html>starting</html>", STATUS])


@pytest.fixture
def worker_ui() -> Iterator[int]:
    yield from serve([json.dumps({"id": "worker-1", "masterurl": "spark://x"}).encode()])


def test_a_master_answering_non_json_while_starting_is_polled_again(starting_master: int) -> None:
    with pytest.raises(MasterNotReady, match="answered /json/ with b''"):
        master_status(starting_master)
    wait_for_workers(starting_master, 2, timeout=30)
    assert master_status(starting_master)["aliveworkers"] == 2


def test_a_ui_that_is_not_the_masters_ends_in_a_timeout_naming_its_answer(worker_ui: int) -> None:
    with pytest.raises(TimeoutError, match=r"2 workers not alive after 2 s .*worker-1"):
        wait_for_workers(worker_ui, 2, timeout=2)


def test_free_ports_are_not_handed_out_twice() -> None:
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
