"""``conveyor serve``: the HTTP service on one deployment, with the coordinator and (optionally) a
worker for the registered push consumers, run by uvicorn (uvloop + httptools where available)."""

from __future__ import annotations

import importlib
import ipaddress
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from conveyor.broker.coordinator import Coordinator
from conveyor.client.connect import DEFAULT_URL, connect
from conveyor.client.sync import Conveyor
from conveyor.consumer.app import App
from conveyor.engine.base import Engine
from conveyor.server.accounts import AccountEngine, split
from conveyor.server.app import build_app
from conveyor.server.auth import Authenticator
from conveyor.server.service import Service
from conveyor.server.tokens import TokenStore

log = logging.getLogger("conveyor.server")

DEFAULT_PORT = 8787
NO_AUTH_WARNING = (
    "AUTHENTICATION IS OFF (--no-auth): anyone who can reach {where} can read, send to, purge and delete "
    "every queue of every account. Use it for local development only."
)


def data_directory(url: str | None) -> Path:
    """Where the deployment keeps local files (``tokens.db``): the SQLite directory, else ``./.conveyor``."""
    url = url or os.environ.get("CONVEYOR_URL") or DEFAULT_URL
    if url.startswith("sqlite://"):
        return Path(url[len("sqlite://") :] or ".")
    if "://" not in url:
        return Path(url)
    return Path(DEFAULT_URL[len("sqlite://") :])


def token_store(url: str | None, path: str | Path | None = None) -> TokenStore:
    return TokenStore(Path(path) if path else data_directory(url) / "tokens.db")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _import_handler(script_name: str) -> Any:
    module, _, qualname = script_name.partition(":")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


@dataclass
class Workers:
    """Push consumers registered in the catalog whose handler this process can import, one App per account."""

    engine: Engine
    apps: dict[str, App] = field(default_factory=dict)

    def start(self) -> None:
        for queue in self.engine.list_queues():
            account, name = split(queue.queue_name)
            for consumer in queue.consumers:
                if consumer.type != "worker":
                    continue
                try:
                    handler = _import_handler(consumer.script_name)
                except (ImportError, AttributeError, ValueError):
                    log.warning("queue %s: cannot import push consumer %r; not running it", name, consumer.script_name)
                    continue
                app = self.apps.get(account)
                if app is None:
                    engine = AccountEngine(self.engine, account) if account else self.engine
                    app = self.apps[account] = App(Conveyor(engine))
                s = consumer.settings
                app.consumer(
                    name,
                    max_batch_size=s.batch_size,
                    max_batch_timeout=s.max_wait_time_ms / 1000,
                    max_retries=s.max_retries,
                    retry_delay=s.retry_delay,
                    dead_letter_queue=consumer.dead_letter_queue or None,
                    max_concurrency=s.max_concurrency,
                    visibility_timeout_ms=s.visibility_timeout_ms,
                )(handler)
        for app in self.apps.values():
            app.start()

    def concurrency(self, account: str, queue: str) -> int | None:
        app = self.apps.get(account)
        return app.concurrency(queue) if app is not None and queue in app.dispatchers else None

    def stop(self) -> None:
        for app in self.apps.values():
            app.stop()


def serve(
    url: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    no_auth: bool = False,
    tokens: str | Path | None = None,
    json_logs: bool = False,
    worker: bool = False,
    on_ready: Any = None,
) -> None:
    """Serve until SIGINT/SIGTERM. ``no_auth`` is refused on anything but a loopback address."""
    from conveyor.server import logs

    logs.configure(json_lines=json_logs)
    if no_auth and not is_loopback(host):
        raise SystemExit(f"--no-auth is only allowed on a loopback address, not {host!r}")
    client = connect(url)
    engine = client.engine
    store = None if no_auth else token_store(url, tokens)
    if no_auth:
        log.warning(NO_AUTH_WARNING.format(where=f"{host}:{port}"))
    workers = Workers(engine)
    service = Service(engine, Authenticator(store, no_auth=no_auth), concurrency=workers.concurrency)
    coordinator = Coordinator(engine)
    coordinator.start()
    if worker:
        workers.start()
    config = uvicorn.Config(
        build_app(service),
        host=host,
        port=port,
        loop="auto",
        http="auto",
        access_log=False,
        log_config=None,
        timeout_keep_alive=30,
        backlog=4096,
        # Idle keep-alive connections cost a few KB each; a slow client's body arrives with flow
        # control, so it holds only its own request, never the event loop.
        h11_max_incomplete_event_size=64 * 1024,
    )
    server = uvicorn.Server(config)
    if on_ready is not None:
        threading.Thread(target=_announce, args=(server, on_ready), daemon=True).start()
    try:
        server.run()
    finally:
        workers.stop()
        coordinator.stop()
        client.close()
        if store is not None:
            store.close()


def _announce(server: uvicorn.Server, on_ready: Any) -> None:
    import time

    while not server.started and not server.should_exit:
        time.sleep(0.02)
    if server.started:
        on_ready()
