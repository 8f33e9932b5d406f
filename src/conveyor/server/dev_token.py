"""One development token per deployment directory, for ``conveyor serve --dev-token ACCOUNT`` (``make run``).

Every other secret is shown once and never stored. The dev token is the one exception, so that a
server restarted in development prints the same token instead of piling up new ones: its secret is
kept in ``DEV_TOKEN_FILE`` inside the deployment directory, readable by its owner only. A dev token
that was revoked, or that answers for another account, is replaced by a new one (the old one revoked).

>>> secret = dev_token(store, Path(".conveyor"), "local")   # the same secret on every start
"""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.errors import StorageError
from conveyor.server.tokens import TokenStore

DEV_TOKEN_FILE = "dev-token"


def dev_token(store: TokenStore, directory: Path, account_id: str) -> str:
    """The secret of the directory's dev token for ``account_id``, made (and saved) if needed."""
    path = directory / DEV_TOKEN_FILE
    kept = _read(path)
    if kept is not None:
        token = store.verify(kept)
        if token is not None and token.account_id == account_id and not token.read_only and not token.queues:
            path.chmod(0o600)
            return kept
        if token is not None:
            store.revoke(token.token_id)
    secret, _ = store.create(account_id)
    _write(path, secret)
    return secret


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read the dev token file {path}: {exc.strerror}") from None


def _write(path: Path, secret: str) -> None:
    """Replace ``path`` with ``secret`` at once, never readable by anyone but the owner."""
    partial = path.with_name(path.name + ".new")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file left by a crash
            os.write(fd, secret.encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(partial, path)
    except OSError as exc:
        raise StorageError(f"cannot write the dev token file {path}: {exc.strerror}") from None
