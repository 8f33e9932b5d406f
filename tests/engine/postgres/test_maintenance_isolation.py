"""PostgreSQL's retention expiry isolates queues too: a queue whose partition refuses the delete (a
trigger raising, as a broken extension or a locked-down table would) is skipped and reported once;
the other queues expire, and the queue is reported again once it works."""

from __future__ import annotations

import logging

import psycopg
import pytest

import conveyor

from .support import ThrowawayEngine, schema_url


class ManualClock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def now_ms(self) -> int:
        return self.ms


def test_expiry_skips_a_failing_queue_and_expires_the_others(caplog: pytest.LogCaptureFixture) -> None:
    engine = ThrowawayEngine()
    clock = ManualClock()
    engine.clock = clock
    cv = conveyor.Conveyor(engine)
    ids = {}
    for name in ("kept", "victim"):
        q = cv.create_queue(name, message_retention_period=60)
        q.send_batch([{"body": n} for n in range(5)])
        ids[name] = q.id
    with psycopg.connect(schema_url(engine.schema), autocommit=True) as conn:
        (key,) = conn.execute("SELECT shard_key FROM shards WHERE queue_id = %s", (ids["victim"],)).fetchone()
        conn.execute(
            "CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'deletes refused on this partition'; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER refuse BEFORE DELETE ON messages_{key} FOR EACH ROW EXECUTE FUNCTION refuse_delete()"
        )
    clock.ms += 120_000
    caplog.set_level(logging.INFO)

    assert engine.expire() == {ids["kept"]: 5}
    assert engine.expire() == {}
    reports = [r.getMessage() for r in caplog.records if "queue victim " in r.getMessage()]
    assert len(reports) == 1 and "deletes refused on this partition" in reports[0]

    with psycopg.connect(schema_url(engine.schema), autocommit=True) as conn:
        conn.execute(f"DROP TRIGGER refuse ON messages_{key}")
    assert engine.expire() == {ids["victim"]: 5}
    assert engine.expiry_faults.failing() == {}
    cv.close()
