"""A Hypothesis stateful test of the engine interface against a small in-memory model.

The machine drives one queue of a real engine (a fresh deployment per example, a hand-moved clock)
through sends, leases, heartbeats, acks, retries with delays, releases, retention expiry, purges and
the passing of time, and after every step checks that the engine agrees with the model:

- the backlog (count, bytes, oldest timestamp) and the lifetime counters match;
- a leased message is not leased again before its lease ends, and ``attempts`` counts deliveries;
- acked (or dropped, expired, purged) messages never come back;
- settling a superseded or finished lease warns and changes nothing.

Engines are pluggable: add a factory to ``ENGINES`` and the whole machine runs against it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conformance.support import FakeClock
from conveyor.engine.base import Clock, Engine
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.model import Counters, DeliveryPolicy, Metrics, NewMessage, QueueSettings, StoredMessage


def postgres_engine(directory: Path, clock: Clock) -> Engine:
    """A PostgreSQL engine on a throwaway schema of the real server (started if it is down)."""
    from postgres.support import ThrowawayEngine

    engine = ThrowawayEngine()
    engine.clock = clock
    return engine


# name -> factory(empty directory, clock) -> a fresh engine on its own deployment.
ENGINES: dict[str, Callable[[Path, Clock], Engine]] = {
    "sqlite": lambda directory, clock: SQLiteEngine(directory, clock=clock),
    "postgres": postgres_engine,
}

RETENTION_SECONDS = 60  # the minimum, so that expiry happens within a run
POLICY = DeliveryPolicy(max_retries=2, dead_letter_queue=None)  # 3 deliveries, then dropped


@dataclass
class Stored:
    """The model of one stored message."""

    body: bytes
    timestamp_ms: int
    visible_at_ms: int
    attempts: int = 0
    lease: str | None = None  # the lease id of the latest delivery; None before it and after a retry


class EngineModel(RuleBasedStateMachine):
    engine_name = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="conveyor-model-"))
        self.clock = FakeClock(start_ms=1_700_000_000_000)
        self.engine = ENGINES[self.engine_name](self.directory, self.clock)
        self.messages: dict[bytes, Stored] = {}
        self.gone: set[bytes] = set()
        self.counters = Counters()
        self.sent = 0
        # Every lease id handed out, current or stale: settling stale ones must change nothing.
        self.lease_ids: list[str] = []

    @initialize()
    def create_queue(self) -> None:
        self.queue_id = self.engine.create_queue(
            "q", QueueSettings(message_retention_period=RETENTION_SECONDS)
        ).queue_id

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- model helpers ------------------------------------------------------------------------
    def now(self) -> int:
        return self.clock.now_ms()

    def by_lease(self, lease_id: str) -> Stored | None:
        """The message whose current delivery ``lease_id`` is, if any."""
        return next((m for m in self.messages.values() if m.lease == lease_id), None)

    def remove(self, m: Stored, **counter: int) -> None:
        del self.messages[m.body]
        self.gone.add(m.body)
        self.count(**counter)

    def count(self, **changes: int) -> None:
        self.counters = _replace(self.counters, {name: getattr(self.counters, name) + n for name, n in changes.items()})

    def model_metrics(self) -> Metrics:
        stored = list(self.messages.values())
        oldest = min((m.timestamp_ms for m in stored), default=0)
        return Metrics(len(stored), sum(len(m.body) for m in stored), oldest)

    # -- rules --------------------------------------------------------------------------------
    @rule(
        sizes=st.lists(st.integers(0, 40), min_size=1, max_size=3),
        delays=st.lists(st.sampled_from([0, 0, 1, 5, 30, 90]), min_size=3, max_size=3),
    )
    def send(self, sizes: list[int], delays: list[int]) -> None:
        batch = []
        for size, delay in zip(sizes, delays, strict=False):
            self.sent += 1
            body = f"{self.sent}:".encode() + b"x" * size
            batch.append(NewMessage(body, "bytes", delay))
            self.messages[body] = Stored(body, self.now(), self.now() + delay * 1000)
        self.count(sent=len(batch))
        assert self.engine.enqueue(self.queue_id, batch) == self.model_metrics()

    def some_leases(self, data: st.DataObject, min_size: int = 1) -> list[str]:
        return data.draw(st.lists(st.sampled_from(self.lease_ids), min_size=min_size, max_size=3, unique=True))

    @rule(n=st.integers(1, 4), visibility_s=st.sampled_from([1, 5, 30]))
    def lease(self, n: int, visibility_s: int) -> None:
        now = self.now()
        deliverable = {b for b, m in self.messages.items() if m.visible_at_ms <= now}
        exhausted = {b for b in deliverable if self.messages[b].attempts >= POLICY.max_deliveries}
        got: list[StoredMessage] = self.engine.lease(self.queue_id, n, visibility_s * 1000, POLICY)
        for s in got:
            assert s.body not in self.gone, "a settled message came back"
            assert s.body in deliverable, "leased before its lease, delay or retry delay ended"
            assert s.body not in exhausted, "delivered more than max_retries + 1 times"
            m = self.messages[s.body]
            assert (s.attempts, s.timestamp_ms) == (m.attempts + 1, m.timestamp_ms)
            m.attempts, m.lease, m.visible_at_ms = s.attempts, s.lease_id, now + visibility_s * 1000
        # Exhausted messages the lease picked were dropped instead of delivered; see which.
        still = {p.body for p in self.engine.peek(self.queue_id, 1_000)}
        dropped = {b for b in exhausted if b not in still}
        for body in dropped:
            self.remove(self.messages[body], dropped=1)
        assert len(got) + len(dropped) == min(n, len(deliverable))
        self.lease_ids += [s.lease_id for s in got]

    @precondition(lambda self: bool(self.lease_ids))
    @rule(data=st.data(), visibility_s=st.sampled_from([1, 10]))
    def extend(self, data: st.DataObject, visibility_s: int) -> None:
        lease_ids = self.some_leases(data)
        self.engine.extend(self.queue_id, lease_ids, visibility_s * 1000)
        for lease_id in lease_ids:
            if (m := self.by_lease(lease_id)) is not None:
                m.visible_at_ms = self.now() + visibility_s * 1000

    @precondition(lambda self: bool(self.lease_ids))
    @rule(data=st.data())
    def settle(self, data: st.DataObject) -> None:
        acks = self.some_leases(data, min_size=0)
        delays = st.sampled_from([0, 1, 20])
        retries = [(lid, data.draw(delays)) for lid in self.some_leases(data, min_size=0) if lid not in acks]
        result = self.engine.settle(self.queue_id, acks, retries, POLICY)
        stale = set()
        acked = retried = dropped = 0
        for lease_id in acks:
            if (m := self.by_lease(lease_id)) is None:
                stale.add(lease_id)
            else:
                self.remove(m, acked=1)
                acked += 1
        for lease_id, delay in retries:
            if (m := self.by_lease(lease_id)) is None:
                stale.add(lease_id)
            elif m.attempts >= POLICY.max_deliveries:
                self.remove(m, dropped=1)
                dropped += 1
            else:
                m.lease, m.visible_at_ms = None, self.now() + delay * 1000
                self.count(retried=1)
                retried += 1
        assert (result.acked, result.retried, result.dropped, result.dead_lettered) == (acked, retried, dropped, 0)
        assert set(result.warnings) == stale, "stale leases must warn, current ones must not"

    @precondition(lambda self: bool(self.lease_ids))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        lease_ids = self.some_leases(data)
        self.engine.release(self.queue_id, lease_ids)
        for lease_id in lease_ids:
            if (m := self.by_lease(lease_id)) is not None:
                m.lease, m.visible_at_ms, m.attempts = None, self.now(), max(m.attempts - 1, 0)

    @rule()
    def expire(self) -> None:
        cutoff = self.now() - RETENTION_SECONDS * 1000
        old = [m for m in self.messages.values() if m.timestamp_ms < cutoff]
        for m in old:
            self.remove(m, expired=1)
        assert self.engine.expire() == ({self.queue_id: len(old)} if old else {})

    @precondition(lambda self: bool(self.messages))
    @rule()
    def purge(self) -> None:
        count = len(self.messages)
        for m in list(self.messages.values()):
            self.remove(m)
        assert self.engine.purge(self.queue_id) == count

    @rule(seconds=st.sampled_from([0.001, 0.5, 1, 5, 20, 60]))
    def advance_time(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def backlog_matches(self) -> None:
        assert self.engine.metrics(self.queue_id) == self.model_metrics()

    @invariant()
    def counters_match(self) -> None:
        now = self.now()
        in_flight = sum(1 for m in self.messages.values() if m.lease is not None and m.visible_at_ms > now)
        assert self.engine.counters(self.queue_id) == _replace(self.counters, {"in_flight": in_flight})

    @invariant()
    def next_visible_matches(self) -> None:
        expected = min((m.visible_at_ms for m in self.messages.values()), default=None)
        assert self.engine.next_visible_ms(self.queue_id) == expected


def _replace(counters: Counters, values: dict[str, int]) -> Counters:
    fields = {name: getattr(counters, name) for name in Counters.__dataclass_fields__}
    return Counters(**{**fields, **values})


def model_test(engine_name: str, max_examples: int) -> type:
    """The machine against one engine, as a test case; examples sized to the suite's time budget."""
    machine = type(f"EngineModel_{engine_name}", (EngineModel,), {"engine_name": engine_name})
    budget = settings(
        max_examples=max_examples,
        stateful_step_count=50,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    test_case: type = budget(machine).TestCase  # type: ignore[attr-defined]
    return test_case


TestSQLiteEngineAgainstModel = model_test("sqlite", max_examples=300)
TestPostgresEngineAgainstModel = model_test("postgres", max_examples=40)
