"""Tokens belong to the deployment (its catalog), not to one server: every server of a deployment
accepts the same ones, the CLI manages the deployment it is pointed at, an older ``tokens.db`` is
imported once, ``make run``'s dev token is kept, and a full disk is one line of error."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from conveyor.engine.sqlite import SQLiteEngine
from conveyor.model import QueueSettings
from conveyor.server.accounts import qualify
from tests.engine.postgres.support import ThrowawayEngine, schema_url

from .process import CONVEYOR, create_token, serve_process


def _status(url: str, token: str, account: str = "acc1") -> int:
    r = httpx.get(f"{url}/client/v4/accounts/{account}/queues", headers={"authorization": f"Bearer {token}"})
    return r.status_code


def _conveyor(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CONVEYOR, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)


def _eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_every_server_on_one_postgres_database_accepts_and_revokes_the_same_tokens(tmp_path: Path) -> None:
    engine = ThrowawayEngine()
    engine.close()
    url = schema_url(engine.schema)
    elsewhere = tmp_path / "operator"
    elsewhere.mkdir()
    # Each server runs in a directory of its own: nothing about tokens may depend on the directory.
    with (
        serve_process(tmp_path / "a" / "data", "acc1", url=url) as first,
        serve_process(tmp_path / "b" / "data", "acc1", url=url) as second,
    ):
        made = _conveyor(elsewhere, "--url", url, "tokens", "create", "--account", "acc1")
        assert made.returncode == 0, made.stderr
        secret = made.stdout.strip().splitlines()[-1]
        token_id = made.stdout.split()[1]
        assert _status(first.url, secret) == 200
        assert _status(second.url, secret) == 200
        assert _status(second.url, first.token) == 200 and _status(first.url, second.token) == 200

        revoked = _conveyor(elsewhere, "--url", url, "tokens", "revoke", token_id)
        assert revoked.returncode == 0, revoked.stderr
        assert _eventually(lambda: _status(first.url, secret) == 401 and _status(second.url, secret) == 401, 3.0)
    assert not (elsewhere / ".conveyor").exists()


def test_tokens_commands_against_a_server_url_are_refused_and_write_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "CONVEYOR_URL": "http://127.0.0.1:8787"}
    for args in (("create", "--account", "acc1"), ("list",), ("revoke", "abc")):
        done = _conveyor(tmp_path, "tokens", *args, env=env)
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: tokens live in the deployment's catalog")
        assert "where the deployment is" in lines[0]
        assert "cvt_" not in done.stdout
    assert list(tmp_path.iterdir()) == []


# The tokens file of a Conveyor before tokens moved into the catalog, made as it made it.
_OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    token_id   TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    account_id TEXT NOT NULL,
    read_only  INTEGER NOT NULL,
    queues     TEXT NOT NULL,
    created_on TEXT NOT NULL
);
"""


def _old_tokens_file(path: Path, secret: str, queues: str = "[]") -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(_OLD_SCHEMA)
    digest = hashlib.sha256(secret.encode()).hexdigest()
    conn.execute(
        "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, ?)", ("0ld70ken", digest, "acc1", 0, queues, "2026-01-01T00:00:00Z")
    )
    conn.commit()
    conn.close()


def test_an_older_deployment_and_its_tokens_db_upgrade_in_place_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    older = SQLiteEngine(data)  # a deployment with a catalog.db of its own, and no tokens table in it
    older.create_queue(qualify("acc1", "kept"), QueueSettings())
    older.close()
    old_secret = "cvt_" + "x" * 43
    _old_tokens_file(data / "tokens.db", old_secret)
    with serve_process(data, "acc1") as proc:
        assert _status(proc.url, old_secret) == 200
        listed = httpx.get(
            f"{proc.url}/client/v4/accounts/acc1/queues", headers={"authorization": f"Bearer {old_secret}"}
        )
        assert [q["queue_name"] for q in listed.json()["result"]] == ["kept"]
    assert not (data / "tokens.db").exists()
    assert (data / "tokens.db.imported").exists()
    with serve_process(data, "acc1") as proc:  # a restart: the token is the deployment's now
        assert _status(proc.url, old_secret) == 200
        listed = _conveyor(tmp_path, "--url", f"sqlite://{data}", "tokens", "list", "--json")
        assert [t["token_id"] for t in json.loads(listed.stdout)].count("0ld70ken") == 1
        assert _conveyor(tmp_path, "--url", f"sqlite://{data}", "tokens", "revoke", "0ld70ken").returncode == 0
        assert _eventually(lambda: _status(proc.url, old_secret) == 401, 3.0)


def test_a_postgres_deployment_of_an_older_schema_gains_the_tokens_table_in_place(tmp_path: Path) -> None:
    engine = ThrowawayEngine()
    engine.create_queue(qualify("acc1", "kept"), QueueSettings())
    engine.close()
    url = schema_url(engine.schema)
    with psycopg.connect(url, autocommit=True) as conn:  # back to the schema before tokens moved in
        conn.execute("DROP TABLE tokens")
        conn.execute("DELETE FROM conveyor_migrations WHERE name = '0004_tokens.sql'")
    with serve_process(tmp_path / "data", "acc1", url=url) as proc:
        listed = httpx.get(
            f"{proc.url}/client/v4/accounts/acc1/queues", headers={"authorization": f"Bearer {proc.token}"}
        )
        assert [q["queue_name"] for q in listed.json()["result"]] == ["kept"]


def test_a_postgres_deployment_imports_the_tokens_file_it_is_given(tmp_path: Path) -> None:
    engine = ThrowawayEngine()
    engine.close()
    url = schema_url(engine.schema)
    old = tmp_path / "etc" / "tokens.db"
    old.parent.mkdir()
    old_secret = "cvt_" + "y" * 43
    _old_tokens_file(old, old_secret, queues='["emails"]')
    with serve_process(tmp_path / "data", "acc1", "--tokens-db", str(old), url=url) as proc:
        r = httpx.get(f"{proc.url}/client/v4/accounts/acc1/queues", headers={"authorization": f"Bearer {old_secret}"})
        assert r.status_code == 200 and r.json()["result"] == []
        created = httpx.post(
            f"{proc.url}/client/v4/accounts/acc1/queues",
            json={"queue_name": "other"},
            headers={"authorization": f"Bearer {old_secret}"},
        )
        assert created.status_code == 403  # the import kept the token's queue scope
    assert not old.exists() and (old.parent / "tokens.db.imported").exists()
    with serve_process(tmp_path / "data", "acc1", "--tokens-db", str(old), url=url) as proc:  # the same command again
        assert _status(proc.url, old_secret) == 200
    typo = _conveyor(tmp_path, "--url", url, "serve", "--tokens-db", str(tmp_path / "tokens.bd"))
    assert typo.returncode == 1
    assert typo.stderr.strip().splitlines()[-1].startswith("error: there is no tokens file")


def _dev_token(data: Path) -> str:
    with serve_process(data, "acc1", "--dev-token", "local") as proc:
        log = next(data.parent.glob("serve-*.log"))
        assert _eventually(lambda: "conveyor.connect(" in log.read_text(), 10)
        line = next(x for x in log.read_text().splitlines() if "conveyor.connect(" in x)
        secret = line.split("token='")[1].split("'")[0]
        assert _status(proc.url, secret, "local") == 200
    log.unlink()
    return secret


def test_the_dev_token_is_kept_per_directory_owner_only_and_replaced_once_revoked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = _dev_token(data)
    assert _dev_token(data) == first
    kept = data / "dev-token"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert kept.read_text().strip() == first
    listed = _conveyor(tmp_path, "--url", f"sqlite://{data}", "tokens", "list", "--json")
    tokens = json.loads(listed.stdout)
    local = [t for t in tokens if t["account_id"] == "local"]
    assert len(local) == 1  # no pile of old dev tokens
    assert _conveyor(tmp_path, "--url", f"sqlite://{data}", "tokens", "revoke", local[0]["token_id"]).returncode == 0
    replaced = _dev_token(data)
    assert replaced != first and kept.read_text().strip() == replaced


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 4 MB filesystem (tmpfs), unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_tokens_create_on_a_full_disk_is_one_line_of_error(small_disk: Path) -> None:
    data = small_disk / "data"
    create_token(data, "acc1")  # the deployment exists, with its catalog
    with open(small_disk / "filler", "wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError:
            pass
    done = _conveyor(small_disk, "--url", f"sqlite://{data}", "tokens", "create", "--account", "acc2")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "full" in lines[0] and "(code 10251)" in lines[0]
    assert "cvt_" not in done.stdout
