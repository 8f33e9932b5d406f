"""``conveyor serve``: the HTTP service on one deployment, with the coordinator and (optionally) a
worker for the registered push consumers, run by uvicorn (uvloop + httptools where available)."""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from conveyor.broker.coordinator import Coordinator
from conveyor.client.backpressure import QueueLimits
from conveyor.client.connect import DEFAULT_URL, open_engine, sqlite_directory
from conveyor.client.sync import Conveyor
from conveyor.engine.history import HistorySettings
from conveyor.server.app import build_app
from conveyor.server.auth import Authenticator
from conveyor.server.dev_token import dev_token
from conveyor.server.http_protocol import ConnectionLimits, bounded_protocol, fit_open_files
from conveyor.server.push_workers import HandlerSources, Workers
from conveyor.server.service import Service
from conveyor.server.token_tables import open_token_store
from conveyor.storage.kv import open_kv_store
from conveyor.storage.maintenance import add_storage_services
from conveyor.workflows.retention import add_workflow_services

log = logging.getLogger("conveyor.server")

DEFAULT_PORT = 8787
NO_AUTH_WARNING = (
    "AUTHENTICATION IS OFF (--no-auth): anyone who can reach {where} can read, send to, purge and delete "
    "every queue of every account. Use it for local development only."
)


def data_directory(url: str | None) -> Path:
    """Where the deployment keeps local files (the dev token): the SQLite directory, else ``./.conveyor``."""
    directory = sqlite_directory(url)
    return directory if directory is not None else Path(DEFAULT_URL[len("sqlite://") :])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# Idle keep-alive connections are closed after this long (held long-polls are requests, not idle).
KEEP_ALIVE_SECONDS = 30
# How often the coordinator deletes the rows of expired KV keys (they are invisible at once).
KV_PURGE_SECONDS = 60.0


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
    worker_apps: Sequence[str] = (),
    handler_modules: Sequence[str] = (),
    dev_token_account: str | None = None,
    on_ready: Callable[[str | None], None] | None = None,
    limits: ConnectionLimits | None = None,
    keep_alive_seconds: int = KEEP_ALIVE_SECONDS,
    queue_limits: QueueLimits | None = None,
    history: HistorySettings | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM. ``no_auth`` is refused on anything but a loopback address.

    ``worker_apps`` (``module:attribute`` of a ``conveyor.App``) and ``handler_modules`` are the
    only code this server runs: push consumers registered through the API run here when their
    script name is one of those handlers (see ``push_workers``). ``tokens``: an older Conveyor's
    tokens file to import into the deployment. ``dev_token_account``: keep the directory's dev token
    of that account (``dev_token.py``) and pass its secret to ``on_ready``, called once the server
    listens. ``queue_limits``: refuse sends past a queue's rate (10250), backlog or size (10251).
    ``history``: how often the coordinator records the queue history, and for how long.
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
    if url:
        # App() with no URL connects to $CONVEYOR_URL: the operator's apps run on this deployment.
        os.environ["CONVEYOR_URL"] = url
    sources = HandlerSources(tuple(dict.fromkeys(worker_apps)), tuple(dict.fromkeys(handler_modules)))
    workers = Workers(engine, sources)
    auth = Authenticator(store, no_auth=no_auth)
    service = Service(engine, auth, concurrency=workers.concurrency, queue_limits=queue_limits)
    coordinator = Coordinator(engine, history=history)
    storage_maintenance = add_storage_services(coordinator, engine)
    platform = Conveyor(engine, url or "")  # deployment-wide, for the workflows' maintenance
    add_workflow_services(coordinator, platform)
    coordinator.add_service("kv-expiry", KV_PURGE_SECONDS, lambda: service.store("kv", open_kv_store).purge_expired())
    coordinator.start()
    if sources.empty:
        log.info(
            "no handlers loaded: push consumers registered through the API show as 'no worker for this "
            "script'; run them here with --worker module:app or --handlers module"
        )
    else:
        workers.start()
    limits = fit_open_files(limits or ConnectionLimits())
    server = uvicorn.Server(uvicorn_config(build_app(service), host, port, limits, keep_alive_seconds))
    _release_holds_on_exit(server, service)
    if on_ready is not None:
        threading.Thread(target=_announce, args=(server, lambda: on_ready(secret)), daemon=True).start()
    try:
        server.run()
    finally:
        workers.stop()
        coordinator.stop()
        storage_maintenance.close()
        service.close_stores()
        platform.close()  # its workflow store, then the engine
        if store is not None:
            store.close()


def _release_holds_on_exit(server: uvicorn.Server, service: Service) -> None:
    """On SIGINT/SIGTERM, answer held long-poll leases at once: uvicorn waits for running requests."""
    stop_serving = server.handle_exit

    def handle_exit(sig: int, frame: FrameType | None) -> None:
        service.holds.release_all()
        stop_serving(sig, frame)

    server.handle_exit = handle_exit  # type: ignore[method-assign]


def _announce(server: uvicorn.Server, on_ready: Callable[[], None]) -> None:
    import time

    while not server.started and not server.should_exit:
        time.sleep(0.02)
    if server.started:
        on_ready()
