"""Who is asking, and what they may touch.

``Authorization: Bearer <token>``: no token or an unknown one is 401 (code 10106). A token answers
for one account: any other account in the path is 403. What a read-only, a queue-scoped or an
operator token may call is declared by each route (:mod:`conveyor.server.access`). A token limited
to some queues sees only those: the others do not exist for it (404, the answer an unknown id gets),
so a token never learns what it may not touch. An operator token reads ``/metrics`` of every account.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from starlette.requests import Request

from conveyor.errors import Forbidden, QueueNotFound, Unauthorized
from conveyor.server.tokens import Token, TokenStore, hash_secret

# How long a verified token is trusted without asking the store again: revocation takes effect
# within this, and a busy server reads the store once a second per token, not once a request.
CACHE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request: an account, and what its token allows (``None``: everything)."""

    account_id: str
    token: Token | None = None

    @property
    def read_only(self) -> bool:
        return self.token is not None and self.token.read_only

    def check_write(self) -> None:
        if self.read_only:
            raise Forbidden("this token is read-only")

    def check_queue(self, name: str) -> None:
        """``QueueNotFound`` for a queue (named by the caller) outside the token's scope."""
        if self.token is not None and not self.token.allows_queue(name):
            raise QueueNotFound(f"queue {name!r} does not exist")

    def check_queue_id(self, queue_id: str, name: str) -> None:
        """``QueueNotFound`` for the queue ``queue_id`` (named ``name``) outside the token's scope:
        the very answer an unknown id gets, so the caller learns neither its name nor that it exists."""
        if self.token is not None and not self.token.allows_queue(name):
            raise QueueNotFound(f"queue {queue_id!r} does not exist")

    def check_create(self, name: str) -> None:
        """``Forbidden`` for a queue-scoped token naming a queue outside its scope (a read-only token
        never gets here: the route's declaration refuses it first, server/access.py)."""
        if self.token is not None and not self.token.allows_queue(name):
            raise Forbidden(f"this token may not create queue {name!r}")

    def sees(self, name: str) -> bool:
        return self.token is None or self.token.allows_queue(name)


class Authenticator:
    """Checks bearer tokens against a :class:`TokenStore` (or lets everyone in with ``no_auth``)."""

    def __init__(self, store: TokenStore | None, *, no_auth: bool = False) -> None:
        if store is None and not no_auth:
            raise ValueError("a token store is needed unless authentication is off")
        self.store = store
        self.no_auth = no_auth
        self._cache: dict[str, tuple[float, Token | None]] = {}
        self._lock = threading.Lock()

    def token(self, request: Request) -> Token | None:
        """The request's token; ``Unauthorized`` without a valid one (``None`` when auth is off)."""
        if self.no_auth:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthorized("authentication error: send Authorization: Bearer <token>")
        token = self._verify(secret.strip())
        if token is None:
            raise Unauthorized("authentication error: the token is not valid")
        return token

    def _verify(self, secret: str) -> Token | None:
        key = hash_secret(secret)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        assert self.store is not None
        token = self.store.verify(secret)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now + CACHE_SECONDS, token)
        return token

    def principal(self, token: Token | None, account_id: str) -> Principal:
        """The caller of a route of ``account_id``: ``Forbidden`` for a token of another account."""
        if token is not None and token.account_id != account_id:
            raise Forbidden(f"this token is not valid for account {account_id!r}")
        return Principal(account_id, token)
