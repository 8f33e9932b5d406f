"""``conveyor serve``: the HTTP service on one deployment, with the coordinator and (optionally) a
worker for the registered push consumers, run by uvicorn (uvloop + httptools where available)."""

from __future__ import annotations

import importlib
import ipaddress
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from conveyor.broker.coordinator import Coordinator
from conveyor.client.connect import DEFAULT_URL, open_engine
from conveyor.client.sync import Conveyor
from conveyor.consumer.app import App
from conveyor.engine.base import Engine
from conveyor.errors import ConveyorError
from conveyor.model import ConsumerInfo
from conveyor.server.accounts import AccountEngine, split
from conveyor.server.app import build_app
from conveyor.server.auth import Authenticator
from conveyor.server.dev_token import dev_token
from conveyor.server.http_protocol import ConnectionLimits, bounded_protocol, fit_open_files
from conveyor.server.service import Service
from conveyor.server.token_tables import open_token_store

log = logging.getLogger("conveyor.server")

DEFAULT_PORT = 8787
NO_AUTH_WARNING = (
    "AUTHENTICATION IS OFF (--no-auth): anyone who can reach {where} can read, send to, purge and delete "
    "every queue of every account. Use it for local development only."
)


def data_directory(url: str | None) -> Path:
    """Where the deployment keeps local files (the dev token): the SQLite directory, else ``./.conveyor``."""
    url = url or os.environ.get("CONVEYOR_URL") or DEFAULT_URL
    if url.startswith("sqlite://"):
        return Path(url[len("sqlite://") :] or ".")
    if "://" not in url:
        return Path(url)
    return Path(DEFAULT_URL[len("sqlite://") :])


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


# How often the worker looks for push consumers registered (or removed) through the API.
WORKER_REFRESH_SECONDS = 5.0


@dataclass
class Workers:
    """Runs the push consumers registered through the API whose handler (``script_name``,
    ``module:function``) imports here: one :class:`App` per queue, started when the consumer appears
    and stopped when it goes. Queues of embedded users (no account) are left to their own workers."""

    engine: Engine
    apps: dict[tuple[str, str], tuple[str, App]] = field(default_factory=dict)
    _failed: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.refresh()
        self._thread = threading.Thread(target=self._loop, name="conveyor-serve-workers", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(WORKER_REFRESH_SECONDS):
            try:
                self.refresh()
            except Exception:
                log.exception("could not refresh the push consumers")

    def refresh(self) -> None:
        wanted: dict[tuple[str, str], ConsumerInfo] = {}
        for queue in self.engine.list_queues():
            account, name = split(queue.queue_name)
            for consumer in queue.consumers:
                if account and consumer.type == "worker":
                    wanted[(account, name)] = consumer
        gone = [key for key, (cid, _) in self.apps.items() if key not in wanted or wanted[key].consumer_id != cid]
        for key in gone:
            log.info("queue %s/%s: its push consumer is gone; stopping it", *key)
            self.apps.pop(key)[1].stop()
        for key, consumer in wanted.items():
            if key in self.apps or consumer.consumer_id in self._failed:
                continue
            app = self._app(key[0], key[1], consumer)
            try:
                if app is None:
                    raise ImportError(consumer.script_name)
                app.start()
            except (ImportError, ConveyorError) as exc:
                # Said once per consumer: a handler that does not import now will not import later.
                log.warning("queue %s/%s: not running push consumer %r: %s", *key, consumer.script_name, exc)
                self._failed.add(consumer.consumer_id)
                continue
            self.apps[key] = (consumer.consumer_id, app)

    def _app(self, account: str, queue: str, consumer: ConsumerInfo) -> App | None:
        try:
            handler = _import_handler(consumer.script_name)
        except (ImportError, AttributeError, ValueError):
            return None
        s = consumer.settings
        app = App(Conveyor(AccountEngine(self.engine, account)))
        app.consumer(
            queue,
            max_batch_size=s.batch_size,
            max_batch_timeout=s.max_wait_time_ms / 1000,
            max_retries=s.max_retries,
            retry_delay=s.retry_delay,
            dead_letter_queue=consumer.dead_letter_queue or None,
            max_concurrency=s.max_concurrency,
            visibility_timeout_ms=s.visibility_timeout_ms,
        )(handler)
        return app

    def concurrency(self, account: str, queue: str) -> int | None:
        entry = self.apps.get((account, queue))
        return entry[1].concurrency(queue) if entry is not None else None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for _, app in self.apps.values():
            app.stop()


# Idle keep-alive connections are closed after this long (held long-polls are requests, not idle).
KEEP_ALIVE_SECONDS = 30


def uvicorn_config(
    app: Any,
    host: str,
    port: int,
    limits: ConnectionLimits | None = None,
    keep_alive_seconds: int = KEEP_ALIVE_SECONDS,
) -> uvicorn.Config:
    """How Conveyor runs uvicorn: uvloop where available, httptools under :class:`ConnectionLimits`."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="auto",
        http=bounded_protocol(limits or ConnectionLimits()),
        ws="none",  # no route speaks WebSocket, and an upgraded connection would escape the limits
        access_log=False,
        log_config=None,
        timeout_keep_alive=keep_alive_seconds,
        backlog=4096,
    )


def serve(
    url: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    no_auth: bool = False,
    tokens: str | Path | None = None,
    json_logs: bool = False,
    log_level: int = logging.INFO,
    worker: bool = False,
    dev_token_account: str | None = None,
    on_ready: Callable[[str | None], None] | None = None,
    limits: ConnectionLimits | None = None,
    keep_alive_seconds: int = KEEP_ALIVE_SECONDS,
) -> None:
    """Serve until SIGINT/SIGTERM. ``no_auth`` is refused on anything but a loopback address.

    ``tokens``: an older Conveyor's tokens file to import into the deployment. ``dev_token_account``:
    keep the directory's dev token of that account (``dev_token.py``) and pass its secret to
    ``on_ready``, called once the server listens.
    """
    from conveyor.server import logs

    logs.configure(json_lines=json_logs, level=log_level)
    if no_auth and not is_loopback(host):
        raise SystemExit(f"--no-auth is only allowed on a loopback address, not {host!r}")
    engine = open_engine(url)  # every account's queues: the server views it per request's account
    store = None if no_auth else open_token_store(engine, Path(tokens) if tokens else None)
    secret = None
    if store is not None and dev_token_account is not None:
        secret = dev_token(store, data_directory(url), dev_token_account)
    if no_auth:
        log.warning(NO_AUTH_WARNING.format(where=f"{host}:{port}"))
    workers = Workers(engine)
    service = Service(engine, Authenticator(store, no_auth=no_auth), concurrency=workers.concurrency)
    coordinator = Coordinator(engine)
    coordinator.start()
    if worker:
        workers.start()
    limits = fit_open_files(limits or ConnectionLimits())
    server = uvicorn.Server(uvicorn_config(build_app(service), host, port, limits, keep_alive_seconds))
    if on_ready is not None:
        threading.Thread(target=_announce, args=(server, lambda: on_ready(secret)), daemon=True).start()
    try:
        server.run()
    finally:
        workers.stop()
        coordinator.stop()
        engine.close()
        if store is not None:
            store.close()


def _announce(server: uvicorn.Server, on_ready: Callable[[], None]) -> None:
    import time

    while not server.started and not server.should_exit:
        time.sleep(0.02)
    if server.started:
        on_ready()
