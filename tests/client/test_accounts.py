"""Embedded use works in an account: ``local`` unless ``account_id=`` says otherwise; the raw engine
(what ``conveyor serve`` and the coordinator use) sees every account's queues by qualified name; a
directory made before accounts existed upgrades its plain names into ``local``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import conveyor
from conveyor.client.connect import open_engine
from conveyor.engine.accounts import AccountEngine
from conveyor.engine.base import Engine, prefix_range
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres.catalog import Q as POSTGRES_QUERIES
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.engine.sqlite.catalog import Q as SQLITE_QUERIES
from conveyor.model import ConsumerSettings, QueueSettings
from tests.conformance.support import FakeClock


def test_embedded_connect_works_in_account_local(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    with conveyor.connect(url) as cv:
        q = cv.create_queue("emails")
        q.add_pull_consumer(dead_letter_queue="emails-dlq")
        assert [i.queue_name for i in cv.list_queues()] == ["emails"]
        assert q.consumer() is not None and q.consumer().dead_letter_queue == "emails-dlq"  # type: ignore[union-attr]
    raw = open_engine(url)
    try:
        [info] = raw.list_queues()
        assert info.queue_name == "local/emails"
        assert info.consumers[0].dead_letter_queue == "local/emails-dlq"
    finally:
        raw.close()


def test_two_accounts_on_one_directory_stay_separate(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    with conveyor.connect(url, account_id="acc-a") as a, conveyor.connect(url, account_id="acc-b") as b:
        qa = a.create_queue("emails")
        qb = b.create_queue("emails")
        qa.send("for a", content_type="text")
        assert [m.body for m in a.queue("emails").peek()] == ["for a"]
        assert b.queue("emails").peek() == []
        with pytest.raises(conveyor.QueueNotFound):
            b.queue_by_id(qa.id)
        with pytest.raises(conveyor.QueueNotFound):
            conveyor.connect(url).queue("emails")  # account local has none
        assert qa.id != qb.id


def test_an_invalid_account_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(conveyor.InvalidRequest, match="invalid account id 'a/b'"):
        conveyor.connect(f"sqlite://{tmp_path / 'data'}", account_id="a/b")
    with pytest.raises(conveyor.InvalidRequest, match="invalid account id"):
        conveyor.connect(f"sqlite://{tmp_path / 'data'}", account_id="acc1\n")


def test_retention_still_expires_messages_of_an_embedded_deployment(tmp_path: Path) -> None:
    # The coordinator's duties need the raw engine: an embedded view that owns it may run them.
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        clock = FakeClock()
        cv.engine.clock = clock
        q = cv.create_queue("short", message_retention_period=60)
        q.send("old", content_type="text")
        clock.advance(61)
        assert cv.engine.deployment_engine() is not None
        assert cv.engine.expire() == {q.id: 1}


def make_old_directory(data: Path) -> None:
    """A directory as Conveyor wrote it before accounts (catalog schema 1: plain queue names)."""
    raw = open_engine(f"sqlite://{data}")
    try:
        emails = raw.create_queue("emails", QueueSettings())
        raw.create_queue("jobs", QueueSettings())
        raw.create_queue("local/jobs", QueueSettings())  # made through a server before the upgrade
        raw.add_consumer(emails.queue_id, "http_pull", "", ConsumerSettings(), "emails-dlq")
        raw.enqueue(emails.queue_id, [conveyor.model.NewMessage(b'"kept"', "json", 0)])
    finally:
        raw.close()
    with sqlite3.connect(data / "catalog.db") as conn:
        conn.execute("PRAGMA user_version = 1")


def test_an_old_directory_upgrades_its_plain_names_into_account_local(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_old_directory(data)
    with conveyor.connect(f"sqlite://{data}") as cv:
        assert [q.queue_name for q in cv.list_queues()] == ["emails", "jobs"]
        emails = cv.queue("emails")
        assert [m.body for m in emails.peek()] == ["kept"]
        consumer = emails.consumer()
        assert consumer is not None and consumer.dead_letter_queue == "emails-dlq"
    # The plain `jobs` did not overwrite account local's own `jobs`: it moved aside, whole.
    with conveyor.connect(f"sqlite://{data}", account_id="unqualified") as aside:
        assert [q.queue_name for q in aside.list_queues()] == ["jobs"]
    with sqlite3.connect(data / "catalog.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        names = sorted(name for (name,) in conn.execute("SELECT name FROM queues"))
        assert names == ["local/emails", "local/jobs", "unqualified/jobs"]


def raw_engine(client: conveyor.Conveyor) -> Engine:
    engine = client.engine
    return engine.inner if isinstance(engine, AccountEngine) else engine


@pytest.mark.parametrize("engine_name", ["sqlite", "postgres"])
def test_an_account_lists_its_own_queues_and_not_those_of_accounts_whose_ids_it_begins(
    conveyor_client: conveyor.Conveyor,
) -> None:
    raw = raw_engine(conveyor_client)
    # Neighbours in name order: "acc1-b/..." sorts before "acc1/...", "acc10/..." after it.
    for account in ("acc1", "acc1-b", "acc10", "acc1_"):
        for name in ("b-jobs", "a-emails"):
            AccountEngine(raw, account).create_queue(name, QueueSettings())
    raw.create_queue("acc1", QueueSettings())  # a plain name equal to the account id

    assert [q.queue_name for q in AccountEngine(raw, "acc1").list_queues()] == ["a-emails", "b-jobs"]
    assert [q.queue_name for q in raw.list_queues("acc1/")] == ["acc1/a-emails", "acc1/b-jobs"]
    assert [q.queue_name for q in AccountEngine(raw, "acc1").list_queues("b-")] == ["b-jobs"]
    assert len(raw.list_queues()) == 9


def test_listing_an_account_does_not_read_another_accounts_damaged_queue(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    with conveyor.connect(url, account_id="acc1") as mine, conveyor.connect(url, account_id="acc2") as theirs:
        mine.create_queue("emails")
        broken = theirs.create_queue("broken")
        (tmp_path / "data" / "shards" / f"{broken.id}.0.db").write_bytes(b"not a database" * 512)
    raw = open_engine(url)
    try:
        assert [(q.queue_name, q.storage_error is None) for q in raw.list_queues()] == [
            ("acc1/emails", True),
            ("acc2/broken", False),
        ]
        with conveyor.connect(url, account_id="acc1") as mine:
            assert [(q.queue_name, q.storage_error) for q in mine.list_queues()] == [("emails", None)]
    finally:
        raw.close()


@pytest.mark.parametrize("engine_name", ["sqlite", "postgres"])
def test_the_prefix_listing_is_an_index_range_on_queue_names(conveyor_client: conveyor.Conveyor) -> None:
    raw = raw_engine(conveyor_client)
    raw.create_queue("acc1/emails", QueueSettings())
    low, high = prefix_range("acc1/")
    if isinstance(raw, PostgresEngine):
        import psycopg

        with psycopg.connect(raw.url) as db:
            db.execute("SET enable_seqscan = off")  # a tiny table: show the index can answer the range
            for name in ("queues_listed_in_range", "names_in_range"):
                plan = db.execute("EXPLAIN " + POSTGRES_QUERIES[name], {"low": low, "high": high})
                text = "\n".join(row[0] for row in plan)
                assert "on queues_name_bytewise" in text and "Seq Scan on queues" not in text, text
    else:
        assert isinstance(raw, SQLiteEngine)
        with sqlite3.connect(raw.directory / "catalog.db") as db:
            for name in ("queues_listed_in_range", "names_in_range"):
                query = "EXPLAIN QUERY PLAN " + SQLITE_QUERIES[name]
                plan = db.execute(query, {"low": low, "high": high}).fetchall()
                assert "USING " in plan[0][3] and "INDEX" in plan[0][3] and "(name>? AND name<?)" in plan[0][3], plan
