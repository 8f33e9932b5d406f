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
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from conveyor.client.connect import connect
from conveyor.client.sync import Conveyor
from conveyor.server.app import build_app
from conveyor.server.auth import Authenticator
from conveyor.server.serve import token_store
from conveyor.server.service import Service
from conveyor.server.tokens import TokenStore


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningServer:
    url: str
    client: Conveyor
    service: Service
    tokens: TokenStore

    def connect(self, account_id: str, **scope: object) -> Conveyor:
        """A remote client of ``account_id`` with a fresh token (``read_only=``, ``queues=``)."""
        secret, _ = self.tokens.create(account_id, **scope)  # type: ignore[arg-type]
        return connect(self.url, token=secret, account_id=account_id)


@contextmanager
def running_server(url: str, *, no_auth: bool = False) -> Iterator[RunningServer]:
    client = connect(url)
    tokens = token_store(url)
    service = Service(client.engine, Authenticator(tokens, no_auth=no_auth))
    port = free_port()
    config = uvicorn.Config(build_app(service), host="127.0.0.1", port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="conveyor-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield RunningServer(f"http://127.0.0.1:{port}", client, service, tokens)
    finally:
        server.should_exit = True
        thread.join(10)
        tokens.close()
        client.close()
