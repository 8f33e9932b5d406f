"""A Hypothesis stateful test of the engine interface against a small in-memory model.

The machine drives a real engine (a fresh deployment per example, a hand-moved clock) through
sends from two producers (two engine instances on the same deployment, so both shards of a
two-shard queue fill), leases, heartbeats, acks, retries with delays, releases, dead-lettering,
redrive, retention expiry, purges and the passing of time. After every step it checks that the
engine agrees with the model:

- the backlog (count, bytes, oldest timestamp), the next visible time and the lifetime counters
  match, for the queue and for its dead letter queue;
- a leased message is not leased again before its lease ends, and ``attempts`` counts deliveries;
- acked (or dropped, expired, purged) messages never come back; ids and timestamps never change;
- settling a superseded or finished lease warns and changes nothing.

Engines are pluggable: add a factory to ``ENGINES`` and a test case at the bottom.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conveyor.engine.base import Clock, Engine
from conveyor.engine.sqlite import SQLiteEngine
from conveyor.errors import QueueNotFound
from conveyor.model import Counters, DeliveryPolicy, Metrics, NewMessage, QueueSettings, StoredMessage
from tests.conformance.support import FakeClock


def postgres_engine(directory: Path, clock: Clock) -> Engine:
    """A PostgreSQL engine on a throwaway schema of the real server (started if it is down); the
    schema's name is kept in ``directory`` so that a second call opens the same deployment."""
    from tests.engine.postgres.support import ThrowawayEngine, new_schema

    marker = directory / "postgres-schema"
    if not marker.exists():
        marker.write_text(new_schema())
    engine = ThrowawayEngine(marker.read_text())
    engine.clock = clock
    return engine


# name -> factory(directory, clock) -> an engine; called twice with one directory, it opens the
# same deployment twice (two producer processes).
ENGINES: dict[str, Callable[[Path, Clock], Engine]] = {
    "sqlite": lambda directory, clock: SQLiteEngine(directory, clock=clock),
    "postgres": postgres_engine,
}

RETENTION_SECONDS = 60  # the minimum, so that expiry happens within a run
DLQ = "dlq"


@dataclass
class Stored:
    """The model of one stored message."""

    body: bytes
    timestamp_ms: int
    visible_at_ms: int
    attempts: int = 0
    lease: str | None = None  # the lease id of the latest delivery; None before it and after a retry
    id: str | None = None  # learnt at the first delivery


def counted(counters: Counters, **changes: int) -> Counters:
    fields = {name: getattr(counters, name) for name in Counters.__dataclass_fields__}
    return Counters(**{**fields, **{name: fields[name] + n for name, n in changes.items()}})


def metrics_of(messages: dict[bytes, Stored]) -> Metrics:
    stored = list(messages.values())
    oldest = min((m.timestamp_ms for m in stored), default=0)
    return Metrics(len(stored), sum(len(m.body) for m in stored), oldest)


class EngineModel(RuleBasedStateMachine):
    engine_name = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="conveyor-model-"))
        self.clock = FakeClock(start_ms=1_700_000_000_000)
        factory = ENGINES[self.engine_name]
        self.engines = [factory(self.directory, self.clock), factory(self.directory, self.clock)]
        self.messages: dict[bytes, Stored] = {}
        self.dead: dict[bytes, Stored] = {}
        self.gone: set[bytes] = set()
        self.counters = Counters()
        self.sent = 0
        # Every lease id handed out, current or stale: settling stale ones must change nothing.
        self.lease_ids: list[str] = []
        self.dlq_id: str | None = None
        self.shards = 1

    # Few retries, so that deliveries run out within a run (then: dead letter queue, or dropped).
    @initialize(shards=st.integers(1, 2), max_retries=st.integers(0, 2), dead_letter=st.booleans())
    def create_queue(self, shards: int, max_retries: int, dead_letter: bool) -> None:
        self.policy = DeliveryPolicy(max_retries, DLQ if dead_letter else None)
        self.shards = shards
        settings = QueueSettings(message_retention_period=RETENTION_SECONDS)
        self.queue_id = self.engines[0].create_queue("q", settings, shards).queue_id

    def teardown(self) -> None:
        for engine in self.engines:
            engine.close()
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
        self.counters = counted(self.counters, **counter)

    def exhaust(self, m: Stored) -> None:
        """Deliveries used up: to the dead letter queue (attempts restart) or dropped."""
        event("deliveries used up", "dead-lettered" if self.policy.dead_letter_queue else "dropped")
        if self.policy.dead_letter_queue is None:
            self.remove(m, dropped=1)
            return
        del self.messages[m.body]
        self.dead[m.body] = Stored(m.body, m.timestamp_ms, self.now(), id=m.id)
        self.counters = counted(self.counters, dead_lettered=1)
        if self.dlq_id is None:
            self.dlq_id = self.engines[0].get_queue(DLQ).queue_id

    def some_leases(self, data: st.DataObject, min_size: int = 1) -> list[str]:
        return data.draw(st.lists(st.sampled_from(self.lease_ids), min_size=min_size, max_size=3, unique=True))

    # -- rules --------------------------------------------------------------------------------
    @rule(
        producer=st.integers(0, 1),
        sizes=st.lists(st.integers(0, 40), min_size=1, max_size=3),
        delays=st.lists(st.sampled_from([0, 0, 1, 5, 30, 90]), min_size=3, max_size=3),
    )
    def send(self, producer: int, sizes: list[int], delays: list[int]) -> None:
        batch = []
        for size, delay in zip(sizes, delays, strict=False):
            self.sent += 1
            body = f"{self.sent}:".encode() + b"x" * size
            batch.append(NewMessage(body, "bytes", delay))
            self.messages[body] = Stored(body, self.now(), self.now() + delay * 1000)
        self.counters = counted(self.counters, sent=len(batch))
        assert self.engines[producer].enqueue(self.queue_id, batch).metrics == metrics_of(self.messages)

    @rule(via=st.integers(0, 1), n=st.integers(1, 4), visibility_s=st.sampled_from([1, 5, 30]))
    def lease(self, via: int, n: int, visibility_s: int) -> None:
        deliverable, exhausted = self.deliverable()
        got: list[StoredMessage] = self.engines[via].lease(self.queue_id, n, visibility_s * 1000, self.policy)
        self.check_lease(via, got, n, visibility_s, deliverable, exhausted, whole=True)

    def deliverable(self) -> tuple[set[bytes], set[bytes]]:
        """The messages a lease may take now, and those of them whose deliveries are used up."""
        now = self.now()
        deliverable = {b for b, m in self.messages.items() if m.visible_at_ms <= now}
        return deliverable, {b for b in deliverable if self.messages[b].attempts >= self.policy.max_deliveries}

    def check_lease(
        self,
        via: int,
        got: list[StoredMessage],
        n: int,
        visibility_s: int,
        deliverable: set[bytes],
        exhausted: set[bytes],
        *,
        whole: bool,
    ) -> None:
        """Check a lease of up to ``n`` that took ``got`` and apply it to the model; ``whole``: it
        may not stop short while deliverable messages wait."""
        now = self.now()
        for s in got:
            assert s.body not in self.gone, "a settled message came back"
            assert s.body in deliverable, "leased before its lease, delay or retry delay ended"
            assert s.body not in exhausted, "delivered more than max_retries + 1 times"
            m = self.messages[s.body]
            assert (s.attempts, s.timestamp_ms) == (m.attempts + 1, m.timestamp_ms)
            assert m.id in (None, s.id), "a message's id changed"
            m.attempts, m.lease, m.visible_at_ms, m.id = s.attempts, s.lease_id, now + visibility_s * 1000, s.id
        # Exhausted messages the lease picked went to the DLQ (or were dropped); see which.
        still = {p.body for p in self.engines[via].peek(self.queue_id, 1_000)}
        moved = {b for b in exhausted if b not in still}
        for body in moved:
            self.exhaust(self.messages[body])
        # Exhausted messages do not count toward ``n`` (an engine may lease more to fill it), but
        # the lease must not stop short while deliverable messages wait.
        assert len(got) <= n
        if whole:
            assert len(got) + len(moved) >= min(n, len(deliverable))
        self.lease_ids += [s.lease_id for s in got]

    @precondition(lambda self: bool(self.lease_ids))
    @rule(data=st.data(), via=st.integers(0, 1), visibility_s=st.sampled_from([1, 10]))
    def extend(self, data: st.DataObject, via: int, visibility_s: int) -> None:
        lease_ids = self.some_leases(data)
        self.engines[via].extend(self.queue_id, lease_ids, visibility_s * 1000)
        for lease_id in lease_ids:
            if (m := self.by_lease(lease_id)) is not None:
                m.visible_at_ms = self.now() + visibility_s * 1000

    @precondition(lambda self: bool(self.lease_ids))
    @rule(data=st.data(), via=st.integers(0, 1), then_lease=st.sampled_from([0, 0, 1, 3]))
    def settle(self, data: st.DataObject, via: int, then_lease: int) -> None:
        """``then_lease``: settle_and_lease, which leases too in the settle's transaction (a SQLite
        queue of one shard) or leases nothing."""
        acks = self.some_leases(data, min_size=0)
        delays = st.sampled_from([0, 1, 20])
        retries = [(lid, data.draw(delays)) for lid in self.some_leases(data, min_size=0) if lid not in acks]
        engine = self.engines[via]
        got: list[StoredMessage] = []
        if then_lease:
            result, got = engine.settle_and_lease(self.queue_id, acks, retries, self.policy, then_lease, 5_000)
        else:
            result = engine.settle(self.queue_id, acks, retries, self.policy)
        stale = set()
        acked = retried = exhausted = 0
        for lease_id in acks:
            if (m := self.by_lease(lease_id)) is None:
                stale.add(lease_id)
            else:
                self.remove(m, acked=1)
                acked += 1
        for lease_id, delay in retries:
            if (m := self.by_lease(lease_id)) is None:
                stale.add(lease_id)
            elif m.attempts >= self.policy.max_deliveries:
                self.exhaust(m)
                exhausted += 1
            else:
                m.lease, m.visible_at_ms = None, self.now() + delay * 1000
                self.counters = counted(self.counters, retried=1)
                retried += 1
        assert (result.acked, result.retried, result.dead_lettered + result.dropped) == (acked, retried, exhausted)
        assert set(result.warnings) == stale, "stale leases must warn, current ones must not"
        if stale:
            event("stale lease settled")
        if then_lease:
            # Leased after the settle, in its transaction: a retry due now may be delivered again.
            deliverable, exhausted = self.deliverable()
            merges = self.engine_name == "sqlite" and self.shards == 1 and bool(acks or retries)
            event("settled and leased", "in one transaction" if merges else "settled only")
            assert merges or not got
            self.check_lease(via, got, then_lease, 5, deliverable, exhausted, whole=merges)

    @precondition(lambda self: bool(self.lease_ids))
    @rule(data=st.data(), via=st.integers(0, 1))
    def release(self, data: st.DataObject, via: int) -> None:
        lease_ids = self.some_leases(data)
        self.engines[via].release(self.queue_id, lease_ids)
        for lease_id in lease_ids:
            if (m := self.by_lease(lease_id)) is not None:
                m.lease, m.visible_at_ms, m.attempts = None, self.now(), max(m.attempts - 1, 0)

    @precondition(lambda self: bool(self.dead))
    @rule(via=st.integers(0, 1))
    def redrive(self, via: int) -> None:
        assert self.dlq_id is not None
        assert self.engines[via].redrive(self.dlq_id, self.queue_id) == len(self.dead)
        for body, m in self.dead.items():
            self.messages[body] = Stored(body, m.timestamp_ms, self.now(), id=m.id)
        self.dead.clear()

    @rule()
    def expire(self) -> None:
        cutoff = self.now() - RETENTION_SECONDS * 1000
        old = [m for m in self.messages.values() if m.timestamp_ms < cutoff]
        for m in old:
            self.remove(m, expired=1)
        # The dead letter queue keeps the default retention (4 days): nothing of it expires here.
        assert self.engines[0].expire() == ({self.queue_id: len(old)} if old else {})

    @precondition(lambda self: bool(self.messages))
    @rule()
    def purge(self) -> None:
        count = len(self.messages)
        for m in list(self.messages.values()):
            self.remove(m)
        assert self.engines[0].purge(self.queue_id) == count

    @rule(seconds=st.sampled_from([0.001, 0.5, 1, 5, 20, 60]))
    def advance_time(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def backlog_matches(self) -> None:
        for engine in self.engines:
            assert engine.metrics(self.queue_id) == metrics_of(self.messages)

    @invariant()
    def counters_match(self) -> None:
        now = self.now()
        in_flight = sum(1 for m in self.messages.values() if m.lease is not None and m.visible_at_ms > now)
        expected = counted(self.counters, in_flight=in_flight - self.counters.in_flight)
        assert self.engines[0].counters(self.queue_id) == expected

    @invariant()
    def next_visible_matches(self) -> None:
        expected = min((m.visible_at_ms for m in self.messages.values()), default=None)
        assert self.engines[0].next_visible_ms(self.queue_id) == expected

    @invariant()
    def dead_letter_queue_matches(self) -> None:
        if self.dlq_id is None:
            try:
                self.engines[1].get_queue(DLQ)
            except QueueNotFound:
                return
            raise AssertionError("the dead letter queue exists before any message was dead-lettered")
        assert self.engines[1].metrics(self.dlq_id) == metrics_of(self.dead)
        assert self.engines[1].counters(self.dlq_id) == Counters()
        peeked = {p.body: p for p in self.engines[1].peek(self.dlq_id, 1_000)}
        assert set(peeked) == set(self.dead)
        for body, p in peeked.items():
            assert (p.id, p.timestamp_ms, p.attempts) == (self.dead[body].id, self.dead[body].timestamp_ms, 0)


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
TestPostgresEngineAgainstModel = model_test("postgres", max_examples=45)
