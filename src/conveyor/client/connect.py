"""``conveyor.connect(url)``: pick the engine a URL names."""

from __future__ import annotations

import os

from conveyor.allocator import keep_freed_memory
from conveyor.client.sync import Conveyor
from conveyor.errors import InvalidRequest

DEFAULT_URL = "sqlite://.conveyor"


def connect(url: str | None = None, *, token: str | None = None, account_id: str | None = None) -> Conveyor:
    """Open a deployment: ``$CONVEYOR_URL``, else SQLite in ``./.conveyor/``.

    >>> cv = conveyor.connect("sqlite:///var/lib/conveyor")   # a directory: catalog + shard files
    >>> cv = conveyor.connect("http://127.0.0.1:8787", token="cvt_...", account_id="acc1")  # a server
    """
    url = url or os.environ.get("CONVEYOR_URL") or DEFAULT_URL
    keep_freed_memory()  # batches allocate and free ~100 KB each: see conveyor.allocator
    if url.startswith(("http://", "https://")):
        from conveyor.client.http import RemoteEngine

        token = token or os.environ.get("CONVEYOR_TOKEN")
        account_id = account_id or os.environ.get("CONVEYOR_ACCOUNT_ID") or ""
        return Conveyor(RemoteEngine(url, token=token, account_id=account_id), url)
    if url.startswith("sqlite://"):
        from conveyor.engine.sqlite import SQLiteEngine

        return Conveyor(SQLiteEngine(url[len("sqlite://") :] or "."), url)
    if url.startswith(("postgresql://", "postgres://")):
        from conveyor.engine.postgres import PostgresEngine

        return Conveyor(PostgresEngine(url), url)
    if "://" not in url:
        from conveyor.engine.sqlite import SQLiteEngine

        return Conveyor(SQLiteEngine(url), f"sqlite://{url}")
    raise InvalidRequest(f"unsupported URL {url!r}: use sqlite:///path/to/directory or postgresql://host/db")
