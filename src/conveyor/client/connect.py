"""``conveyor.connect(url)``: pick the engine a URL names."""

from __future__ import annotations

import os

from conveyor.client.sync import Conveyor
from conveyor.errors import InvalidRequest

DEFAULT_URL = "sqlite://.conveyor"


def connect(url: str | None = None) -> Conveyor:
    """Open a deployment: ``$CONVEYOR_URL``, else SQLite in ``./.conveyor/``.

    >>> cv = conveyor.connect("sqlite:///var/lib/conveyor")   # a directory: catalog + shard files
    """
    url = url or os.environ.get("CONVEYOR_URL") or DEFAULT_URL
    if url.startswith("sqlite://"):
        from conveyor.engine.sqlite import SQLiteEngine

        return Conveyor(SQLiteEngine(url[len("sqlite://") :] or "."), url)
    if "://" not in url:
        from conveyor.engine.sqlite import SQLiteEngine

        return Conveyor(SQLiteEngine(url), f"sqlite://{url}")
    raise InvalidRequest(f"unsupported URL {url!r}: use sqlite:///path/to/directory")
