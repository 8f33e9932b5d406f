"""Lifecycle rules: objects under a prefix expire at an age, by the coordinator's service on the
engine's clock, each deletion sent as LifecycleDeletion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import conveyor
from conveyor.broker.coordinator import Coordinator
from conveyor.storage import InvalidLifecycleRule, ObjectNotFound, RuleNotFound
from conveyor.storage.facade import storage_of
from conveyor.storage.maintenance import add_storage_services
from conveyor.storage.service import INLINE_LIMIT
from tests.storage.conftest import make_bucket


class ManualClock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def now_ms(self) -> int:
        return self.ms


@pytest.fixture
def clock(cv: conveyor.Conveyor) -> ManualClock:
    clock = ManualClock()
    cv.engine.clock = clock  # before the storage opens: it reads time from the engine's clock
    return clock


def test_objects_under_the_prefix_expire_at_the_age(cv: conveyor.Conveyor, clock: ManualClock, tmp_path: Path) -> None:
    cv.create_queue("deleted").add_pull_consumer()
    b = make_bucket(cv, "local", "staging", tmp_path, None)
    b.add_notification("deleted", actions=["object-delete"])
    rule = b.add_lifecycle_rule(max_age_seconds=3600, prefix="tmp/")
    assert [(r.rule_id, r.prefix, r.max_age_seconds) for r in b.lifecycle_rules()] == [(rule.rule_id, "tmp/", 3600)]
    b.put("tmp/old", b"1")
    b.put("keep/old", b"2")
    clock.ms += 1800 * 1000
    b.put("tmp/young", b"3")
    service = storage_of(cv)
    assert service.expire() == 0
    clock.ms += 1800 * 1000  # tmp/old is an hour old now
    assert service.expire() == 1
    assert [o.key for o in b.list()] == ["keep/old", "tmp/young"]
    with pytest.raises(ObjectNotFound):
        b.get("tmp/old")
    bodies = [json.loads(m.body) if isinstance(m.body, str) else m.body for m in cv.queue("deleted").pull()]
    assert [(m["action"], m["object"]) for m in bodies] == [("LifecycleDeletion", {"key": "tmp/old"})]


def test_removing_a_rule_stops_expiry(cv: conveyor.Conveyor, clock: ManualClock, tmp_path: Path) -> None:
    b = make_bucket(cv, "local", "staging", tmp_path, None)
    rule = b.add_lifecycle_rule(max_age_seconds=60)
    b.put("k", b"v")
    b.remove_lifecycle_rule(rule.rule_id)
    with pytest.raises(RuleNotFound):
        b.remove_lifecycle_rule(rule.rule_id)
    clock.ms += 3600 * 1000
    assert storage_of(cv).expire() == 0
    assert b.exists("k")


@pytest.mark.parametrize("age", [0, -1, 1.5, True, "60"])
def test_bad_ages_are_refused(cv: conveyor.Conveyor, tmp_path: Path, age: object) -> None:
    b = make_bucket(cv, "local", "staging", tmp_path, None)
    with pytest.raises(InvalidLifecycleRule, match="max_age_seconds"):
        b.add_lifecycle_rule(max_age_seconds=age)  # type: ignore[arg-type]
    assert b.lifecycle_rules() == []


def test_the_coordinator_runs_the_storage_services(tmp_path: Path) -> None:
    with conveyor.connect(f"sqlite://{tmp_path}") as cv:
        clock = ManualClock()
        cv.engine.clock = clock
        b = cv.create_bucket("staging")
        b.add_lifecycle_rule(max_age_seconds=10)
        b.put("k", b"v")
        clock.ms += 11_000
        engine = cv.engine.deployment_engine()
        assert engine is not None
        coordinator = Coordinator(engine)
        maintenance = add_storage_services(coordinator, engine)
        services = {name: fn for name, _, fn in coordinator.services}
        assert services["storage-lifecycle"]() == 1
        assert services["storage-outbox"]() == 0
        maintenance.close()
        assert not b.exists("k")


def test_a_deployment_without_buckets_gets_no_storage_file(tmp_path: Path) -> None:
    with conveyor.connect(f"sqlite://{tmp_path}") as cv:
        cv.create_queue("q")
        engine = cv.engine.deployment_engine()
        assert engine is not None
        maintenance = add_storage_services(Coordinator(engine), engine)
        assert maintenance.run_lifecycle() == 0 and maintenance.send_outbox() == 0
        maintenance.close()
    assert not (tmp_path / "storage.db").exists()


def test_orphan_bytes_of_a_put_that_never_committed_are_swept(tmp_path: Path) -> None:
    import os

    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        clock = ManualClock()
        cv.engine.clock = clock
        b = cv.create_bucket("cdn")
        kept = b"a row names me" + bytes(INLINE_LIMIT)  # a file, not a small object kept in its row
        b.put("kept/a", kept)
        directory = tmp_path / "data" / "buckets" / "local" / "cdn"
        orphan = directory / "crashed" / "put"
        orphan.parent.mkdir()
        orphan.write_bytes(b"no row")
        young = directory / "young"
        young.write_bytes(b"maybe a put in flight")
        hour_ago = clock.ms / 1000 - 3601
        os.utime(orphan, (hour_ago, hour_ago))
        os.utime(directory / "kept" / "a", (hour_ago, hour_ago))
        os.utime(young, (clock.ms / 1000, clock.ms / 1000))
        assert storage_of(cv).sweep_orphans() == 1
        assert not orphan.exists() and young.exists()
        assert b.get("kept/a").bytes() == kept
        assert [o.key for o in b.list()] == ["kept/a"]
