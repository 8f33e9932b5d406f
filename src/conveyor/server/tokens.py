"""API tokens: random secrets stored as SHA-256 hashes in the deployment's catalog.

A token is ``cvt_`` + 43 URL-safe characters (256 random bits). A random secret of that size needs no
slow password hash: SHA-256 of it cannot be reversed or guessed, so the catalog holds only hashes
and a stolen copy grants nothing. A token answers for one account, and may be limited further to
some queues (by name) and to reading (GET requests and peek). An operator token answers for no
account: it reads ``/metrics`` across all of them.

Tokens belong to the deployment, not to a server: every ``conveyor serve`` on one SQLite directory
or one PostgreSQL database accepts the same tokens (``token_tables.open_token_store``).

>>> store = open_token_store(engine)
>>> secret, token = store.create("acc1", read_only=True)
>>> store.verify(secret).account_id
'acc1'
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from conveyor.errors import StorageError
from conveyor.ids import iso_now
from conveyor.server.accounts import check_account_id

PREFIX = "cvt_"


@dataclass(frozen=True, slots=True)
class Token:
    """What a token may do (never the secret itself)."""

    token_id: str
    account_id: str
    read_only: bool = False
    queues: tuple[str, ...] = ()
    created_on: str = ""
    operator: bool = False

    def allows_queue(self, name: str) -> bool:
        return not self.queues or name in self.queues


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenTable(Protocol):
    """Where a deployment keeps its tokens; rows are ``token_row`` dictionaries."""

    def insert(self, row: Mapping[str, Any]) -> None: ...
    def find(self, hash: str) -> Token | None: ...
    def all(self) -> list[Token]: ...
    def delete(self, token_id: str) -> bool: ...
    def close(self) -> None: ...


def token_row(token: Token, hash: str) -> dict[str, Any]:
    return {
        "token_id": token.token_id,
        "hash": hash,
        "account_id": token.account_id,
        "read_only": token.read_only,
        "queues": json.dumps(list(token.queues)),
        "operator": token.operator,
        "created_on": token.created_on,
    }


def token_from_row(row: tuple[Any, ...]) -> Token:
    """A token from ``(token_id, account_id, read_only, queues, operator, created_on)``."""
    return Token(row[0], row[1], bool(row[2]), tuple(json.loads(row[3])), row[5], bool(row[4]))


class TokenStore:
    """Creates, verifies, lists and revokes the tokens of one deployment; safe across threads."""

    def __init__(self, table: TokenTable) -> None:
        self.table = table

    def close(self) -> None:
        self.table.close()

    def create(self, account_id: str, *, read_only: bool = False, queues: tuple[str, ...] = ()) -> tuple[str, Token]:
        """A new token of ``account_id``: ``(secret, token)``. The secret is shown once and never stored."""
        from conveyor.client.validation import check_queue_name

        check_account_id(account_id)
        for name in queues:
            check_queue_name(name)
        return self._store(Token(secrets.token_hex(8), account_id, read_only, tuple(queues), iso_now()))

    def create_operator(self) -> tuple[str, Token]:
        """A new operator token (``/metrics`` of every account): ``(secret, token)``."""
        return self._store(Token(secrets.token_hex(8), "", True, (), iso_now(), operator=True))

    def _store(self, token: Token) -> tuple[str, Token]:
        secret = PREFIX + secrets.token_urlsafe(32)
        self.table.insert(token_row(token, hash_secret(secret)))
        return secret, token

    def verify(self, secret: str) -> Token | None:
        """The token whose secret this is, or ``None``."""
        return self.table.find(hash_secret(secret))

    def list(self) -> list[Token]:
        return self.table.all()

    def revoke(self, token_id: str) -> bool:
        """Delete a token by id; False if there was none."""
        return self.table.delete(token_id)

    def import_file(self, path: Path) -> int:
        """Bring in the tokens of a ``tokens.db`` of an older Conveyor (one per server), then keep
        the file aside as ``tokens.db.imported``; returns how many tokens it held. A token already
        here is left as it is, so importing twice changes nothing."""
        try:
            old = sqlite3.connect(path, timeout=60.0)
            try:
                rows = old.execute(
                    "SELECT token_id, hash, account_id, read_only, queues, created_on FROM tokens"
                ).fetchall()
            finally:
                old.close()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot import the tokens of {path}: {exc}") from None
        for token_id, hash, account_id, read_only, queues, created_on in rows:
            token = Token(token_id, account_id, bool(read_only), tuple(json.loads(queues)), created_on)
            self.table.insert(token_row(token, hash))
        _keep_aside(path)
        return len(rows)


def _keep_aside(path: Path) -> None:
    """Rename ``path`` (and any log beside it) to ``NAME.imported`` (``.imported.2``, ... if taken)."""
    target = path.with_name(path.name + ".imported")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.imported.{n}")
    try:
        path.rename(target)
    except FileNotFoundError:
        return  # another process imported it at the same moment
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.exists():
            side.rename(Path(f"{target}{suffix}"))
