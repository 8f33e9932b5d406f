"""Embedded use works in an account: ``local`` unless ``account_id=`` says otherwise; the raw engine
(what ``conveyor serve`` and the coordinator use) sees every account's queues by qualified name; a
directory made before accounts existed upgrades its plain names into ``local``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import conveyor
from conformance.support import FakeClock
from conveyor.client.connect import open_engine
from conveyor.model import ConsumerSettings, QueueSettings


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
