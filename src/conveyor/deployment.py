"""Where a deployment keeps its state, for the parts that live beside the queues.

Workflows, buckets, KV and the tools keep state of their own (instances, object metadata, jobs)
next to the queues' engine: in files of the same SQLite directory, in tables of the same PostgreSQL
database, or behind the same ``conveyor serve``. Each asks the queues' engine where that is,
:meth:`conveyor.engine.base.Engine.deployment`, and opens its own store there; the engine interface
itself stays about queues and messages.

>>> conveyor.connect("sqlite:///var/lib/conveyor").engine.deployment()
Deployment(kind='sqlite', location='/var/lib/conveyor', account='local')
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Kind = Literal["sqlite", "postgresql", "http"]


@dataclasses.dataclass(frozen=True)
class Deployment:
    """``kind`` and ``location``: a SQLite deployment's directory, a PostgreSQL conninfo, or a
    server's base URL. ``account``: the account a view works in; ``""`` for the deployment-wide
    (raw) engine, whose stores take the account per call. ``token``: a server's bearer token,
    never shown."""

    kind: Kind
    location: str
    account: str = ""
    token: str | None = dataclasses.field(default=None, repr=False)

    def for_account(self, account: str) -> Deployment:
        return dataclasses.replace(self, account=account)
