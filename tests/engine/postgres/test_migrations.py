"""Versioned migrations: applied once, in order, on first connect or by ``migrate``; newer schemas refused."""

from __future__ import annotations

import json
import threading

import psycopg
import pytest

import conveyor
from conveyor.engine.postgres import migrate
from conveyor.engine.postgres.migrate import available


def applied_versions(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [v for (v,) in conn.execute("SELECT version FROM conveyor_migrations ORDER BY version")]


def test_migrate_applies_every_shipped_migration_once_and_records_it(pg_url: str) -> None:
    shipped = [v for v, _ in available()]
    assert shipped[0] == 1
    assert migrate(pg_url) == shipped
    assert migrate(pg_url) == []
    assert applied_versions(pg_url) == shipped


def test_first_connect_migrates_a_new_schema(pg_url: str) -> None:
    with conveyor.connect(pg_url) as cv:
        cv.create_queue("q").send("x", content_type="text")
    assert applied_versions(pg_url) == [v for v, _ in available()]
    assert migrate(pg_url) == []


def test_concurrent_first_connects_apply_each_migration_exactly_once(pg_url: str) -> None:
    results: list[list[int]] = []
    threads = [threading.Thread(target=lambda: results.append(migrate(pg_url))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(v for r in results for v in r) == [v for v, _ in available()]


def test_a_database_with_a_newer_schema_is_refused_and_left_alone(pg_url: str) -> None:
    migrate(pg_url)
    with psycopg.connect(pg_url) as conn:
        conn.execute("INSERT INTO conveyor_migrations (version, name) VALUES (9999, '9999_future.sql')")
    with pytest.raises(conveyor.CorruptStorage, match="schema version 9999"):
        conveyor.connect(pg_url)
    assert applied_versions(pg_url)[-1] == 9999


def test_the_migrate_command_applies_pending_migrations_then_reports_none(pg_url: str) -> None:
    from click.testing import CliRunner

    from conveyor.cli.main import cli

    first = CliRunner().invoke(cli, ["--url", pg_url, "migrate", "--json"])
    again = CliRunner().invoke(cli, ["--url", pg_url, "migrate"])
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert json.loads(first.output) == {"applied": [v for v, _ in available()]}
    assert "up to date" in again.output


def test_a_version_1_database_keeps_its_messages_through_the_upgrade(pg_url: str, schema: str) -> None:
    from importlib import resources

    first = resources.files("conveyor.engine.postgres.migrations").joinpath("0001_initial.sql").read_text()
    with psycopg.connect(pg_url) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(
            "CREATE TABLE conveyor_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(first.encode())
        conn.execute("INSERT INTO conveyor_migrations (version, name) VALUES (1, '0001_initial.sql')")
        conn.execute("INSERT INTO queues VALUES ('q1', 'old', 'now', 'now', 0, false, 345600)")
        conn.execute("INSERT INTO shards (queue_id, shard_no, created_ms) VALUES ('q1', 0, 0)")
        conn.execute("CREATE TABLE messages_1 PARTITION OF messages FOR VALUES IN (1)")
        conn.execute("INSERT INTO shard_stats (shard_key, slot, backlog_count, backlog_bytes) VALUES (1, 0, 1, 3)")
        conn.execute(
            "INSERT INTO messages (shard_key, id, timestamp_ms, visible_at_ms, content_type, body)"
            " VALUES (1, 'm1', 5, 5, 'text', 'old')"
        )
    assert migrate(pg_url) == [v for v, _ in available() if v > 1]
    with conveyor.connect(pg_url) as cv:
        q = cv.queue("old")
        assert q.metrics() == conveyor.Metrics(1, 3, 5)
        q.add_pull_consumer()
        assert [m.body for m in q.pull()] == ["old"]


def test_migration_5_moves_plain_queue_names_into_account_local(pg_url: str) -> None:
    from conveyor.client.connect import open_engine
    from conveyor.model import ConsumerSettings, NewMessage, QueueSettings

    # The database as Conveyor left it before accounts: plain names, migration 5 not applied.
    raw = open_engine(pg_url)
    try:
        emails = raw.create_queue("emails", QueueSettings())
        raw.create_queue("jobs", QueueSettings())
        raw.create_queue("local/jobs", QueueSettings())  # made through a server before the upgrade
        raw.add_consumer(emails.queue_id, "http_pull", "", ConsumerSettings(), "emails-dlq")
        raw.enqueue(emails.queue_id, [NewMessage(b'"kept"', "json", 0)])
    finally:
        raw.close()
    with psycopg.connect(pg_url) as conn:
        conn.execute("DELETE FROM conveyor_migrations WHERE version = 5")
    assert migrate(pg_url) == [5]
    with conveyor.connect(pg_url) as cv:
        assert [q.queue_name for q in cv.list_queues()] == ["emails", "jobs"]
        queue = cv.queue("emails")
        assert [m.body for m in queue.peek()] == ["kept"]
        assert queue.consumer().dead_letter_queue == "emails-dlq"  # type: ignore[union-attr]
    with conveyor.connect(pg_url, account_id="unqualified") as aside:
        assert [q.queue_name for q in aside.list_queues()] == ["jobs"]


def test_migration_11_keeps_a_workflow_record_as_its_codes_settings_and_first_version(pg_url: str) -> None:
    migrate(pg_url)
    undo = (
        "DROP TABLE workflow_versions",
        "DROP INDEX workflow_instances_by_status",
        "ALTER TABLE workflows DROP COLUMN code_settings, DROP COLUMN code_version, DROP COLUMN overrides",
        "DELETE FROM conveyor_migrations WHERE version = 11",
    )
    settings = json.dumps({"script_name": "jobs:download", "max_steps": 9})
    with psycopg.connect(pg_url) as conn:
        for statement in undo:
            conn.execute(statement)  # the database as migration 10 left it
        conn.execute("INSERT INTO workflows VALUES ('local', 'old', %s, 'v-old', 1000, 2000, 5, 6)", (settings,))
    assert migrate(pg_url) == [11]
    with conveyor.connect(pg_url) as cv:
        record = cv.workflow("old").record
        assert (record.settings.max_steps, record.code_settings, record.code_version) == (9, record.settings, "v-old")
        assert (record.class_name, record.script_name) == ("download", "jobs")
        assert [(v.id, v.created_ms, v.has_code) for v in cv.workflow("old").versions()] == [("v-old", 6, True)]


def test_migration_24_fills_the_newest_point_table_from_the_recorded_points(pg_url: str) -> None:
    from conveyor.engine.history import QueuePoint, open_history

    migrate(pg_url)
    with psycopg.connect(pg_url) as conn:  # the database as migration 23 left it, with points recorded
        conn.execute("DROP TABLE queue_latest")
        conn.execute("DELETE FROM conveyor_migrations WHERE version = 24")
        points = (("acme/a", 1_000, 10), ("acme/a", 3_000, 50), ("acme/a", 2_000, 20), ("acme/b", 5_000, 0))
        for name, at, sent in points:
            conn.execute(
                "INSERT INTO queue_history VALUES ('q', %s, %s, %s, 0, 0, 0, %s, 0, 0, 0, 0)",
                (name, at, at // 1000, sent),
            )
    assert migrate(pg_url) == [24]
    with conveyor.connect(pg_url) as cv:
        store = open_history(cv.engine.deployment())
        try:
            names = ["acme/a", "acme/b"]
            assert store.latest(names, 0) == store.newest(names, 0, 2)
            assert [p.at_ms for p in store.latest(names, 0)["acme/a"]] == [2_000, 3_000]
            assert store.latest_figures("acme/", 0, "sent") == {"acme/a": 30.0, "acme/b": 0.0}
            store.record([QueuePoint("q", "acme/b", 6_000, 1, 0, 0, 0, 7, 0, 0, 0, 0)])
            assert [p.at_ms for p in store.latest(names, 0)["acme/b"]] == [5_000, 6_000]
        finally:
            store.close()
