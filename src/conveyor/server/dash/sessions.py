"""The dashboard's sessions: log in with a Conveyor token, then a signed cookie.

A person pastes a token into the login form (a POST); the server verifies it like a bearer token and
sets ``conveyor_dash``: the token's hash (never the token) and a random session id, signed with the
deployment's key (:func:`deployment_secret`, kept in the catalog so every server on one database
accepts every server's sessions) and timestamped (``SESSION_SECONDS``). Every page request verifies
the signature and the age and looks the token up again, so a revoked token ends its sessions. The
cookie is ``HttpOnly``, ``SameSite=Strict``, ``Secure`` when served over https, scoped to ``/dash``.

Every write (a POST) carries a CSRF token: an HMAC of the session id under the deployment key, in a
form field (``csrf``) or the ``X-CSRF-Token`` header, compared in constant time; and a POST whose
``Origin`` is another site's is refused whatever it carries.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from conveyor.deployment import Deployment
from conveyor.engine.sqlfile import load_queries
from conveyor.engine.sqlite.storage import translate_error
from conveyor.errors import Forbidden, InvalidRequest, QueueNotFound, Unauthorized
from conveyor.server.tokens import Token

COOKIE = "conveyor_dash"
SESSION_SECONDS = 12 * 3600
SECRET_NAME = "dashboard-session"
SQLITE = load_queries("conveyor.server.dash", "secrets_sqlite.sql")
POSTGRES = load_queries("conveyor.server.dash", "secrets_postgres.sql")


def deployment_secret(deployment: Deployment) -> str:
    """The deployment's session-signing key, made by the first server that asks (each server offers
    a fresh one; the first offer stored wins, so all of them end up with the same)."""
    offer = {"name": SECRET_NAME, "secret": secrets.token_urlsafe(48), "now": int(time.time() * 1000)}
    if deployment.kind == "sqlite":
        path = Path(deployment.location) / "catalog.db"
        try:
            with sqlite3.connect(path, isolation_level=None, timeout=60.0) as conn:
                conn.execute(SQLITE["create_table"])
                conn.execute(SQLITE["offer"], offer)
                row = conn.execute(SQLITE["read"], {"name": SECRET_NAME}).fetchone()
            conn.close()
        except sqlite3.Error as exc:
            raise translate_error(exc, str(path)) from None
    elif deployment.kind == "postgresql":
        from conveyor.engine.postgres.database import ReadPool

        pool = ReadPool(deployment.location, max_size=1)
        try:

            def offer_and_read(conn: Any) -> Any:
                conn.execute(POSTGRES["offer"], offer)
                return conn.execute(POSTGRES["read"], {"name": SECRET_NAME}).fetchone()

            row = pool.run(offer_and_read, "read the dashboard's key")
        finally:
            pool.close()
    else:
        raise InvalidRequest("the dashboard is served by the server that owns the deployment, not over a server URL")
    return str(row[0])


@dataclass(frozen=True, slots=True)
class Session:
    """A logged-in person: the token they logged in with (``None`` on a server without auth, where
    ``account_id`` is the account they chose) and the session's CSRF token."""

    token: Token | None
    account_id: str
    csrf: str

    @property
    def operator(self) -> bool:
        return self.token is not None and self.token.operator

    @property
    def read_only(self) -> bool:
        return self.token is not None and self.token.read_only

    def check_account(self, account_id: str) -> None:
        """``QueueNotFound``-like 404 for an account the session may not see (an operator sees all)."""
        if not self.operator and account_id != self.account_id:
            raise QueueNotFound(f"account {account_id!r} has nothing here for this session")

    @property
    def whole_account(self) -> bool:
        """Whether the token reaches its whole account (not some queues only): workflows,
        migrations and the CDN need it, as over the REST API."""
        return self.token is None or not self.token.queues

    def check_account_wide(self, what: str) -> None:
        if not self.whole_account:
            raise Forbidden(f"this session's token is limited to some queues; {what} are account-wide")

    def sees(self, queue_name: str) -> bool:
        return self.token is None or self.token.allows_queue(queue_name)

    def check_write(self) -> None:
        if self.read_only:
            raise Forbidden("this session's token is read-only")


class SessionSigner:
    """Signs and checks session cookies and CSRF tokens with the deployment's key."""

    def __init__(self, secret: str, max_age: int = SESSION_SECONDS) -> None:
        self._key = secret.encode()
        self._serializer = URLSafeTimedSerializer(secret, salt="conveyor-dash-session")
        self.max_age = max_age

    def cookie_value(self, token_hash: str, account_id: str) -> str:
        return self._serializer.dumps({"h": token_hash, "a": account_id, "s": secrets.token_urlsafe(16)})

    def load(self, value: str) -> dict[str, str] | None:
        """The cookie's content, or ``None`` if it is forged, altered or older than ``max_age``."""
        try:
            data = self._serializer.loads(value, max_age=self.max_age)
        except BadSignature:
            return None
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("h", "a", "s")):
            return None
        return {k: data[k] for k in ("h", "a", "s")}

    def csrf(self, session_id: str) -> str:
        return hmac.new(self._key, b"csrf:" + session_id.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, session_id: str, given: str) -> None:
        if not given or not hmac.compare_digest(self.csrf(session_id), given):
            raise Forbidden("the form's CSRF token is missing or wrong: reload the page and try again")


def check_same_origin(request: Request) -> None:
    """Refuse a POST whose ``Origin`` (sent by browsers on cross-site posts) is not this server."""
    origin = request.headers.get("origin")
    if origin is None:  # not a browser's cross-site post (browsers send Origin on every POST)
        return
    expected = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin != expected:
        raise Forbidden("a form posted from another site is refused")


def set_cookie(response: Response, request: Request, value: str, max_age: int) -> None:
    response.set_cookie(
        COOKIE,
        value,
        max_age=max_age,
        path="/dash",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path="/dash", httponly=True, samesite="strict", secure=request.url.scheme == "https")


def no_session() -> Unauthorized:
    return Unauthorized("log in to the dashboard first")
