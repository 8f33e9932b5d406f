"""A real server on 127.0.0.1 in a background thread, for tests (yours and Conveyor's).

>>> with running_server("sqlite:///tmp/data") as server:
...     secret = server.tokens.create("acc1")[0]
...     cv = conveyor.connect(server.url, token=secret, account_id="acc1")
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from conveyor.client.backpressure import QueueLimits
from conveyor.client.connect import connect, open_engine
from conveyor.client.http import RemoteEngine
from conveyor.client.sync import Conveyor
from conveyor.engine.base import Clock, Engine
from conveyor.server.app import build_app
from conveyor.server.auth import Authenticator
from conveyor.server.serve import uvicorn_config
from conveyor.server.service import Service
from conveyor.server.token_tables import open_token_store
from conveyor.server.tokens import TokenStore


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 where nothing answers, for as long as the block runs: it is bound and not
    listening, so a connection is refused and no other process (a parallel test's server) can take
    it meanwhile, as it could a :func:`free_port` released at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@dataclass
class RunningServer:
    url: str
    engine: Engine  # the raw engine, every account's queues (as conveyor serve has it)
    service: Service
    tokens: TokenStore

    def connect(self, account_id: str, **scope: object) -> Conveyor:
        """A remote client of ``account_id`` with a fresh token (``read_only=``, ``queues=``)."""
        secret, _ = self.tokens.create(account_id, **scope)  # type: ignore[arg-type]
        return connect(self.url, token=secret, account_id=account_id)


class InProcessRemoteEngine(RemoteEngine):
    """A remote engine whose server runs in this process: setting its ``clock`` sets the server
    engine's too, so tests that drive time by hand work over HTTP as they do embedded."""

    def __init__(self, url: str, *, token: str, account_id: str, server_engine: Engine, stop: ExitStack) -> None:
        self._server_engine = server_engine
        self._stop = stop
        super().__init__(url, token=token, account_id=account_id)

    @property
    def server_engine(self) -> Engine:
        """The server's own (deployment-wide) engine."""
        return self._server_engine

    @property
    def clock(self) -> Clock:
        return self._server_engine.clock

    @clock.setter
    def clock(self, value: Clock) -> None:
        self._server_engine.clock = value

    def expire(self) -> dict[str, int]:
        """Run the server's retention service now, as tests that drive time by hand need (a
        deployed server runs it on the coordinator's schedule)."""
        return self._server_engine.expire()

    def close(self) -> None:
        super().close()
        self._stop.close()


def http_client(data: Path, account_id: str = "conformance", *, queue_limits: QueueLimits | None = None) -> Conveyor:
    """A fresh deployment in ``data`` served over HTTP by a real server on 127.0.0.1 (in a thread),
    and a remote client of one account; closing the client stops the server."""
    stack = ExitStack()
    server = stack.enter_context(running_server(f"sqlite://{data}", queue_limits=queue_limits))
    secret, _ = server.tokens.create(account_id)
    engine = InProcessRemoteEngine(
        server.url, token=secret, account_id=account_id, server_engine=server.engine, stop=stack
    )
    return Conveyor(engine, server.url)


@contextmanager
def running_server(
    url: str, *, no_auth: bool = False, queue_limits: QueueLimits | None = None
) -> Iterator[RunningServer]:
    engine = open_engine(url)
    tokens = open_token_store(engine)
    service = Service(engine, Authenticator(tokens, no_auth=no_auth), queue_limits=queue_limits)
    port = free_port()
    server = uvicorn.Server(uvicorn_config(build_app(service), "127.0.0.1", port))
    thread = threading.Thread(target=server.run, name="conveyor-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield RunningServer(f"http://127.0.0.1:{port}", engine, service, tokens)
    finally:
        service.holds.release_all()
        server.should_exit = True
        thread.join(10)
        service.close_stores()
        tokens.close()
        engine.close()
