"""``conveyor.connect(url)``: pick the engine a URL names, and view it as one account."""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.client.backpressure import QueueLimits
from conveyor.client.limited_engine import LimitedEngine
from conveyor.client.sync import Conveyor
from conveyor.engine.accounts import LOCAL_ACCOUNT, AccountEngine, check_account_id
from conveyor.engine.base import Engine
from conveyor.errors import InvalidRequest

DEFAULT_URL = "sqlite://.conveyor"


def connect(
    url: str | None = None,
    *,
    token: str | None = None,
    account_id: str | None = None,
    queue_limits: QueueLimits | None = None,
) -> Conveyor:
    """Open a deployment (``$CONVEYOR_URL``, else SQLite in ``./.conveyor/``) as one account's: the
    one ``account_id`` (else ``$CONVEYOR_ACCOUNT_ID``) names; SQLite and PostgreSQL default to
    ``local``, a server needs it said (or its token's).
    ``queue_limits``: refuse sends past a queue's rate, backlog or size (this process's sends; a
    server has its own, ``conveyor serve --max-send-rate ...``); none by default.

    >>> cv = conveyor.connect("sqlite:///var/lib/conveyor")   # a directory: catalog + shard files
    >>> cv = conveyor.connect("postgresql://host/db", account_id="acc1")
    >>> cv = conveyor.connect("http://127.0.0.1:8787", token="cvt_...", account_id="acc1")  # a server
    >>> cv = conveyor.connect(queue_limits=conveyor.QueueLimits(max_send_rate=5000, max_backlog=10**6))
    """
    url = url or os.environ.get("CONVEYOR_URL") or DEFAULT_URL
    # The environment names the account on every kind of URL, as the command line's --account does
    # (`conveyor --account acme worker app:app` reaches the App through it).
    account_id = account_id or os.environ.get("CONVEYOR_ACCOUNT_ID") or None
    if url.startswith(("http://", "https://")):
        from conveyor.client.http import RemoteEngine

        if queue_limits is not None:
            raise InvalidRequest(
                "queue_limits apply where the queues are stored: give them to the server "
                "(conveyor serve --max-send-rate, --max-backlog, --max-queue-bytes), not to a client of it"
            )

        # The server keeps accounts apart: the remote engine is already one account's, and which
        # one is the caller's to say (a token names it; the server does not guess).
        token = token or os.environ.get("CONVEYOR_TOKEN")
        return Conveyor(RemoteEngine(url, token=token, account_id=account_id or ""), url)
    account = check_account_id(account_id or LOCAL_ACCOUNT)
    engine = open_engine(url)
    if queue_limits is not None and queue_limits.active:
        engine = LimitedEngine(engine, queue_limits)
    return Conveyor(AccountEngine(engine, account, owns_engine=True), _canonical(url))


def open_engine(url: str | None = None) -> Engine:
    """The raw engine of a SQLite or PostgreSQL deployment, which sees every account's queues under
    their qualified names (``acc1/emails``): for deployment-wide duties, as ``conveyor serve`` and
    the coordinator do. Applications use :func:`connect`.

    >>> engine = open_engine("sqlite:///var/lib/conveyor")
    """
    url = url or os.environ.get("CONVEYOR_URL") or DEFAULT_URL
    directory = sqlite_directory(url)
    if directory is not None:
        from conveyor.engine.sqlite import SQLiteEngine

        return SQLiteEngine(directory)
    if url.startswith(("postgresql://", "postgres://")):
        from conveyor.engine.postgres import PostgresEngine

        return PostgresEngine(url)
    raise InvalidRequest(f"unsupported URL {url!r}: use sqlite:///path/to/directory or postgresql://host/db")


def sqlite_directory(url: str | None) -> Path | None:
    """The directory of an embedded deployment's URL (``$CONVEYOR_URL``, else ``./.conveyor``):
    ``sqlite:///path`` or a bare path; ``None`` for any other kind of URL.

    >>> sqlite_directory("sqlite:///var/lib/conveyor")
    PosixPath('/var/lib/conveyor')
    """
    url = url or os.environ.get("CONVEYOR_URL") or DEFAULT_URL
    if url.startswith("sqlite://"):
        return Path(url[len("sqlite://") :] or ".")
    return Path(url) if "://" not in url else None


def _canonical(url: str) -> str:
    return url if "://" in url else f"sqlite://{url}"
