"""API tokens: random secrets stored as SHA-256 hashes, each scoped to one account.

A token is ``cvt_`` + 43 URL-safe characters (256 random bits). A random secret of that size needs no
slow password hash: SHA-256 of it cannot be reversed or guessed, so the store holds only hashes and a
stolen ``tokens.db`` grants nothing. A token may be limited further to some queues (by name) and to
reading (GET requests and peek).

>>> store = TokenStore(Path("data/tokens.db"))
>>> secret, token = store.create("acc1", read_only=True)
>>> store.verify(secret).account_id
'acc1'
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from conveyor.ids import iso_now
from conveyor.server.accounts import check_account_id

PREFIX = "cvt_"

SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    token_id   TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    account_id TEXT NOT NULL,
    read_only  INTEGER NOT NULL,
    queues     TEXT NOT NULL,      -- JSON list of queue names; [] means every queue of the account
    created_on TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Token:
    """What a token may do (never the secret itself)."""

    token_id: str
    account_id: str
    read_only: bool = False
    queues: tuple[str, ...] = ()
    created_on: str = ""

    def allows_queue(self, name: str) -> bool:
        return not self.queues or name in self.queues


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenStore:
    """Tokens in one SQLite file; safe to share between threads and processes."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=5000")
        self._conn.executescript(SCHEMA)
        # Hashes cannot be reversed, but which accounts and queues exist is nobody else's business.
        path.chmod(0o600)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def create(self, account_id: str, *, read_only: bool = False, queues: tuple[str, ...] = ()) -> tuple[str, Token]:
        """A new token: ``(secret, token)``. The secret is shown once and never stored."""
        from conveyor.client.validation import check_queue_name

        check_account_id(account_id)
        for name in queues:
            check_queue_name(name)
        secret = PREFIX + secrets.token_urlsafe(32)
        token = Token(secrets.token_hex(8), account_id, read_only, tuple(queues), iso_now())
        with self._lock:
            self._conn.execute(
                "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, ?)",
                (
                    token.token_id,
                    hash_secret(secret),
                    account_id,
                    int(read_only),
                    json.dumps(list(queues)),
                    token.created_on,
                ),
            )
        return secret, token

    def verify(self, secret: str) -> Token | None:
        """The token whose secret this is, or ``None``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT token_id, account_id, read_only, queues, created_on FROM tokens WHERE hash = ?",
                (hash_secret(secret),),
            ).fetchone()
        return None if row is None else _token(row)

    def list(self) -> list[Token]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT token_id, account_id, read_only, queues, created_on FROM tokens ORDER BY created_on"
            ).fetchall()
        return [_token(r) for r in rows]

    def revoke(self, token_id: str) -> bool:
        """Delete a token by id; False if there was none."""
        with self._lock:
            return self._conn.execute("DELETE FROM tokens WHERE token_id = ?", (token_id,)).rowcount > 0


def _token(row: tuple[str, str, int, str, str]) -> Token:
    return Token(row[0], row[1], bool(row[2]), tuple(json.loads(row[3])), row[4])
