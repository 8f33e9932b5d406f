"""Conveyor on PostgreSQL against the raw limit and against its peers, in one run on the local server.

The raw limit: the same 1 KB rows, in a table with the same columns and indexes as Conveyor's
``messages``, inserted with one multi-row ``INSERT`` per batch of 100 (binary parameters, bodies
encoded before the clock starts), then leased (``UPDATE ... WHERE seq IN (SELECT ... FOR UPDATE
SKIP LOCKED)``, committed without waiting for the WAL flush, as Conveyor commits leases) and
deleted (committed and flushed) per batch of 100 — plain SQL, no queue logic.
For reference it also times the one-statement destructive take (``DELETE ... RETURNING``, no lease,
so a crashed consumer loses its batch). Conveyor does the same work through ``send_batch`` of the
same bytes (content type ``bytes``) and through a worker (``App.consumer(max_batch_size=100,
max_batch_timeout=0)``) that leases and then acks; and, in the raw consumers' very shape, with
threads that ``pull`` a batch and then ``ack`` it. Both sides use the same number of threads, each
on its own schema of the same server.

The peers, procrastinate (on this PostgreSQL), Celery and Dramatiq (each on the local Redis and on
RabbitMQ), run in an environment of their own (``benchmarks/.peers-pg/``, git-ignored), made by this
script, as ``python bench_postgres.py --peer SYSTEM COUNT CONCURRENCY``. End to end means: enqueue N
one-KB JSON messages from one thread (one call per message, the peers' way; Conveyor also with
``send_batch``), then one worker process with the same concurrency processes them all with a no-op
handler, acknowledging each only after it ran (Celery with ``task_acks_late``).

Many queues: a deployment's size must not show in the cost of one queue's calls (each queue's
messages are a partition of their own, so a statement planned over every partition grows with the
deployment). ``--only many-queues`` times, on the last of 10 queues and then on the last of 1,000,
one-message sends, a batch of 100, a pull + ack of 10 and a metrics read, and prints each as the
1,000 queues' p50 over the 10 queues' (a guard, not an issue's target: about 1 is right).

Usage: ``.venv/bin/python benchmarks/bench_postgres.py [--quick] [--only limits|peers|many-queues]``;
one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness import body, emit, encoded_body, peer_environment, peer_process_environment, quiet_logs, ratio  # noqa: E402

PEERS = HERE / ".peers-pg"
PINS = (
    "procrastinate==3.10.0",
    "psycopg[binary]==3.3.9",
    "celery[redis]==5.7.0",
    "dramatiq[redis,rabbitmq]==2.2.1",
    "pika==1.4.4",
)
SERVER = os.environ.get("CONVEYOR_BENCH_PG", "postgresql://127.0.0.1:5432/test")
REDIS = "redis://127.0.0.1:6379/14"
RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"  # kombu's spelling of the vhost "/"
RABBITMQ_PIKA = "amqp://guest:guest@127.0.0.1:5672/%2F"  # pika's
BATCH = 100
THREADS = 4

RAW_SCHEMA = """
CREATE TABLE raw_messages (
    seq           bigserial PRIMARY KEY,
    id            text NOT NULL,
    timestamp_ms  bigint NOT NULL,
    visible_at_ms bigint NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    lease         bigint,
    content_type  text NOT NULL,
    body          bytea NOT NULL
);
CREATE INDEX raw_messages_visible ON raw_messages (visible_at_ms);
"""
RAW_INSERT = """
INSERT INTO raw_messages (id, timestamp_ms, visible_at_ms, content_type, body)
SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::text[], %b::bytea[])
"""
RAW_LEASE = """
UPDATE raw_messages SET visible_at_ms = %s, attempts = attempts + 1, lease = %s WHERE seq IN (
    SELECT seq FROM raw_messages WHERE visible_at_ms <= %s ORDER BY visible_at_ms LIMIT %s FOR UPDATE SKIP LOCKED
) RETURNING seq, body
"""
RAW_DELETE = "DELETE FROM raw_messages WHERE seq = ANY(%s) AND lease = %s"
RAW_TAKE = """
DELETE FROM raw_messages WHERE seq IN (
    SELECT seq FROM raw_messages WHERE visible_at_ms <= %s ORDER BY visible_at_ms LIMIT %s FOR UPDATE SKIP LOCKED
) RETURNING body
"""


# -- shared -----------------------------------------------------------------------------------------
@contextmanager
def scratch_schema(prefix: str) -> Iterator[str]:
    """A URL whose search_path is a new schema, dropped afterwards."""
    import psycopg

    schema = f"bench_{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{SERVER}?options={quote(f'-csearch_path={schema}')}"
    finally:
        drop_partitions(SERVER, schema)
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def drop_partitions(server: str, schema: str) -> None:
    """Drop a schema's message partitions 100 at a time: one ``DROP SCHEMA ... CASCADE`` of a
    deployment of 1,000 queues (a partition each) takes more locks than the server's lock table holds."""
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        found = "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE 'messages\\_%%'"
        names = [name for (name,) in conn.execute(found, (schema,))]
        for start in range(0, len(names), 100):
            tables = ", ".join(f'"{schema}"."{name}"' for name in names[start : start + 100])
            conn.execute(f"DROP TABLE IF EXISTS {tables} CASCADE")


def in_threads(threads: int, work: Callable[[int], None]) -> float:
    """Run ``work(i)`` on ``threads`` threads at once; returns the wall time."""
    started = time.perf_counter()
    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - started


def batches(count: int) -> Iterator[range]:
    for start in range(0, count, BATCH):
        yield range(start, min(count, start + BATCH))


# -- the raw limit ----------------------------------------------------------------------------------
def raw_send(url: str, count: int, threads: int) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RAW_SCHEMA)
    chunks = list(batches(count))
    rows = [encoded_body(i) for i in range(count)]
    lock = threading.Lock()

    def work(_: int) -> None:
        with psycopg.connect(url) as conn:
            while True:
                with lock:
                    if not chunks:
                        return
                    chunk = chunks.pop()
                now = time.time_ns() // 1_000_000
                ids = [os.urandom(16).hex() for _ in chunk]
                conn.execute(
                    RAW_INSERT,
                    (ids, [now] * len(chunk), [now] * len(chunk), ["json"] * len(chunk), [rows[i] for i in chunk]),
                )
                conn.commit()

    return in_threads(threads, work)


def raw_consume(url: str, count: int, threads: int, *, lease: bool) -> float:
    """Drain ``raw_messages``: with ``lease``, each batch leased (an UPDATE with a visibility
    timeout, committed) and then deleted (committed), as any queue with leases must; without,
    taken by one destructive ``DELETE ... RETURNING`` (no lease: a crash loses the batch)."""
    import psycopg

    done = [0]
    lock = threading.Lock()

    def work(_: int) -> None:
        with psycopg.connect(url) as conn:
            while True:
                now = time.time_ns() // 1_000_000
                if lease:
                    # As Conveyor leases: committed without waiting for the WAL flush.
                    conn.execute("SET LOCAL synchronous_commit TO off")
                    token = int.from_bytes(os.urandom(7))
                    got = conn.execute(RAW_LEASE, (now + 30_000, token, now, BATCH)).fetchall()
                    conn.commit()
                    conn.execute(RAW_DELETE, ([seq for seq, _ in got], token))
                else:
                    got = conn.execute(RAW_TAKE, (now, BATCH)).fetchall()
                conn.commit()
                with lock:
                    done[0] += len(got)
                    if done[0] >= count or not got:
                        return

    return in_threads(threads, work)


# -- Conveyor ---------------------------------------------------------------------------------------
def conveyor_send(url: str, count: int, threads: int) -> float:
    """``send_batch`` of the raw rows' very bytes (content type ``bytes``: no JSON encoding)."""
    import conveyor

    cv = conveyor.connect(url)
    q = cv.create_queue("bench")
    chunks = list(batches(count))
    bodies = [encoded_body(i) for i in range(count)]
    lock = threading.Lock()

    def work(_: int) -> None:
        while True:
            with lock:
                if not chunks:
                    return
                chunk = chunks.pop()
            q.send_batch([{"body": bodies[i], "content_type": "bytes"} for i in chunk])

    try:
        return in_threads(threads, work)
    finally:
        cv.close()


def conveyor_consume(url: str, count: int, concurrency: int) -> float:
    """Drain the queue ``bench`` (filled by :func:`conveyor_send`) with one worker."""
    import conveyor

    cv = conveyor.connect(url)
    app = conveyor.App(cv)

    @app.consumer("bench", max_batch_size=BATCH, max_batch_timeout=0, max_concurrency=concurrency)
    def handle(batch: conveyor.MessageBatch) -> None:
        return None

    started = time.perf_counter()
    app.start()
    dispatcher = app.dispatchers["bench"]
    while dispatcher.handled < count:
        time.sleep(0.001)
    elapsed = time.perf_counter() - started
    app.stop()
    cv.close()
    return elapsed


def conveyor_pull_consume(url: str, count: int, threads: int) -> float:
    """Drain the queue ``bench`` with ``threads`` pull consumers (``pull`` then ``ack``), the raw
    consumers' shape: each thread leases a batch, then acks it."""
    import conveyor

    cv = conveyor.connect(url)
    q = cv.queue("bench")
    q.add_pull_consumer(batch_size=BATCH)

    def work(_: int) -> None:
        while pulled := q.pull(batch_size=BATCH):
            q.ack(acks=[m.lease_id for m in pulled])

    try:
        return in_threads(threads, work)
    finally:
        cv.close()


def conveyor_end_to_end(url: str, count: int, concurrency: int, batched: bool) -> dict[str, float]:
    import conveyor

    cv = conveyor.connect(url)
    q = cv.create_queue("bench")
    bodies = [body(i) for i in range(count)]
    started = time.perf_counter()
    if batched:
        for chunk in batches(count):
            q.send_batch([{"body": bodies[i]} for i in chunk])
    else:
        for b in bodies:
            q.send(b)
    enqueued = time.perf_counter()
    cv.close()
    return {"enqueue_seconds": enqueued - started, "consume_seconds": conveyor_consume(url, count, concurrency)}


# -- peers (run inside .peers-pg) -------------------------------------------------------------------
class Countdown:
    """Set once ``count`` tasks have run."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.lock = threading.Lock()
        self.done = threading.Event()

    def tick(self) -> None:
        with self.lock:
            self.left -= 1
            if self.left <= 0:
                self.done.set()


def peer_dramatiq(broker_kind: str, count: int, concurrency: int) -> dict[str, float]:
    import dramatiq  # type: ignore[import-not-found]

    broker: Any
    if broker_kind == "redis":
        from dramatiq.brokers.redis import RedisBroker  # type: ignore[import-not-found]

        broker = RedisBroker(url=REDIS)
    else:
        from dramatiq.brokers.rabbitmq import RabbitmqBroker  # type: ignore[import-not-found]

        broker = RabbitmqBroker(url=RABBITMQ_PIKA)
    dramatiq.set_broker(broker)
    countdown = Countdown(count)

    @dramatiq.actor(queue_name="bench", max_retries=0)  # type: ignore[untyped-decorator]
    def noop(payload: dict[str, Any]) -> None:
        countdown.tick()

    broker.flush_all()
    bodies = [body(i) for i in range(count)]
    started = time.perf_counter()
    for b in bodies:
        noop.send(b)
    enqueued = time.perf_counter()
    worker = dramatiq.Worker(broker, worker_threads=concurrency)
    worker.start()
    countdown.done.wait()
    finished = time.perf_counter()
    worker.stop()
    broker.close()
    return {"enqueue_seconds": enqueued - started, "consume_seconds": finished - enqueued}


def peer_celery(broker_kind: str, count: int, concurrency: int) -> dict[str, float]:
    from celery import Celery  # type: ignore[import-not-found]
    from celery.contrib.testing.worker import start_worker  # type: ignore[import-not-found]

    app = Celery("bench", broker=REDIS if broker_kind == "redis" else RABBITMQ)
    app.conf.update(task_ignore_result=True, task_acks_late=True, broker_connection_retry_on_startup=True)
    countdown = Countdown(count)

    @app.task(name="bench.noop")  # type: ignore[untyped-decorator]
    def noop(payload: dict[str, Any]) -> None:
        countdown.tick()

    app.control.purge()
    bodies = [body(i) for i in range(count)]
    started = time.perf_counter()
    for b in bodies:
        noop.delay(b)
    enqueued = time.perf_counter()
    with start_worker(app, pool="threads", concurrency=concurrency, perform_ping_check=False, loglevel="WARNING"):
        countdown.done.wait()
        finished = time.perf_counter()
    return {"enqueue_seconds": enqueued - started, "consume_seconds": finished - enqueued}


def peer_procrastinate(count: int, concurrency: int) -> dict[str, float]:
    import procrastinate  # type: ignore[import-not-found]

    with scratch_schema("procrastinate") as url:
        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

        @app.task(queue="bench", name="noop")  # type: ignore[untyped-decorator]
        def noop(payload: dict[str, Any]) -> None:
            return None

        with app.open():
            app.schema_manager.apply_schema()
            bodies = [body(i) for i in range(count)]
            started = time.perf_counter()
            for b in bodies:
                noop.defer(payload=b)
            enqueued = time.perf_counter()
            app.run_worker(queues=["bench"], concurrency=concurrency, wait=False, install_signal_handlers=False)
            finished = time.perf_counter()
    return {"enqueue_seconds": enqueued - started, "consume_seconds": finished - enqueued}


def run_peer_here(system: str, count: int, concurrency: int) -> dict[str, float]:
    if system == "procrastinate":
        return peer_procrastinate(count, concurrency)
    library, broker_kind = system.split("-")
    if library == "dramatiq":
        return peer_dramatiq(broker_kind, count, concurrency)
    return peer_celery(broker_kind, count, concurrency)


def peer_python() -> Path:
    return peer_environment(PEERS, PINS)


def run_peer(system: str, count: int, concurrency: int, attempts: int = 2) -> dict[str, float]:
    """One peer's run in its own environment; a failed run (a broker hiccup) is tried once more."""
    for attempt in range(1, attempts + 1):
        done = subprocess.run(
            [str(peer_python()), __file__, "--peer", system, str(count), str(concurrency)],
            capture_output=True,
            text=True,
            timeout=900,
            env=peer_process_environment(),
        )
        if done.returncode == 0:
            result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
            return result
        print(f"{system} failed (attempt {attempt}):\n{done.stderr[-3000:]}", file=sys.stderr, flush=True)
    raise RuntimeError(f"peer {system} failed {attempts} times; see stderr")


# -- the run ----------------------------------------------------------------------------------------
def report(system: str, result: dict[str, float], count: int, **params: Any) -> float:
    enqueue, consume = result["enqueue_seconds"], result["consume_seconds"]
    emit(f"pg_{system}_enqueue_throughput", count / enqueue, "msg/s", count, **params)
    emit(f"pg_{system}_consume_throughput", count / consume, "msg/s", count, **params)
    emit(f"pg_{system}_end_to_end_throughput", count / (enqueue + consume), "msg/s", count, **params)
    return count / (enqueue + consume)


def wal_position() -> int:
    """The server's WAL insert position in bytes (``pg_current_wal_lsn``)."""
    import psycopg

    with psycopg.connect(SERVER) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def limits(count: int, threads: int, rounds: int) -> None:
    """Send and consume, raw and through Conveyor; throughput and WAL written per message.

    Raw and Conveyor alternate for ``rounds`` rounds and the medians are reported, so that a burst
    of load from elsewhere on this shared machine cannot land on one side only. WAL bytes are read
    off the whole server, so other sessions' writes meanwhile count too: a ceiling.
    """
    figures: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[[], float]) -> None:
        before = wal_position()
        seconds = fn()
        figures.setdefault(name, []).append(count / seconds)
        figures.setdefault(f"{name}_wal", []).append((wal_position() - before) / count)

    for _ in range(rounds):
        with scratch_schema("raw") as url:
            timed("raw_insert", lambda: raw_send(url, count, threads))
            timed("raw_lease_then_delete", lambda: raw_consume(url, count, threads, lease=True))
        with scratch_schema("raw") as url:
            raw_send(url, count, threads)
            timed("raw_delete_returning", lambda: raw_consume(url, count, threads, lease=False))
        with scratch_schema("conveyor") as url:
            timed("conveyor_send_batch", lambda: conveyor_send(url, count, threads))
            timed("conveyor_consume", lambda: conveyor_consume(url, count, threads))
        with scratch_schema("conveyor") as url:
            conveyor_send(url, count, threads)
            timed("conveyor_pull_ack", lambda: conveyor_pull_consume(url, count, threads))
    params: dict[str, Any] = {"threads": threads, "batch": BATCH, "body_bytes": 1024, "rounds": rounds}
    median = {name: statistics.median(values) for name, values in figures.items()}
    for name in (
        "raw_insert",
        "raw_lease_then_delete",
        "raw_delete_returning",
        "conveyor_send_batch",
        "conveyor_consume",
        "conveyor_pull_ack",
    ):
        emit(f"pg_{name}_throughput", median[name], "msg/s", count, each=[round(v) for v in figures[name]], **params)
        emit(f"pg_{name}_wal_bytes_per_message", median[f"{name}_wal"], "bytes", count, **params)
    for ours, raw, target in (
        ("conveyor_send_batch", "raw_insert", 0.7),
        ("conveyor_consume", "raw_lease_then_delete", 0.5),
        ("conveyor_consume", "raw_delete_returning", None),
        ("conveyor_pull_ack", "raw_lease_then_delete", 0.5),
    ):
        each = [round(a / b, 3) for a, b in zip(figures[ours], figures[raw], strict=True)]
        ratio(f"pg_{ours}_vs_{raw}", median[ours], median[raw], count, target=target, each_round=each, **params)


def peers(count: int, concurrency: int, peer_count: int) -> None:
    params: dict[str, Any] = {"worker_processes": 1, "concurrency": concurrency}
    with scratch_schema("e2e") as url:
        batched = report("conveyor_send_batch", conveyor_end_to_end(url, count, concurrency, True), count, **params)
    with scratch_schema("e2e") as url:
        single = report("conveyor_send", conveyor_end_to_end(url, count, concurrency, False), count, **params)
    figures: dict[str, float] = {}
    for system in ("dramatiq-redis", "dramatiq-rabbitmq", "celery-redis", "celery-rabbitmq", "procrastinate"):
        n = peer_count if system == "procrastinate" else count
        figures[system] = report(
            system.replace("-", "_"), run_peer(system, n, concurrency), n, pins=list(PINS), **params
        )
    for name, ours in (("send_batch", batched), ("send", single)):
        ratio(
            f"pg_conveyor_{name}_end_to_end_vs_dramatiq_redis",
            ours,
            figures["dramatiq-redis"],
            count,
            target=2 if name == "send_batch" else None,
            **params,
        )
        ratio(
            f"pg_conveyor_{name}_end_to_end_vs_procrastinate",
            ours,
            figures["procrastinate"],
            count,
            target=10 if name == "send_batch" else None,
            **params,
        )
        for system in ("dramatiq-rabbitmq", "celery-redis", "celery-rabbitmq"):
            ratio(
                f"pg_conveyor_{name}_end_to_end_vs_{system.replace('-', '_')}", ours, figures[system], count, **params
            )


# -- many queues -----------------------------------------------------------------------------------
def queue_calls(url: str, queues: int, rounds: int) -> dict[str, float]:
    """p50 seconds of each call on the last of ``queues`` queues (the others hold a message each)."""
    import conveyor

    cv = conveyor.connect(url)
    try:
        for n in range(queues - 1):
            cv.create_queue(f"q{n:04d}").send({"n": n})
        q = cv.create_queue("timed")
        q.add_pull_consumer()
        one = body(0)
        hundred = [{"body": body(i)} for i in range(BATCH)]
        calls: dict[str, Callable[[], object]] = {
            "send": lambda: q.send(one),
            "send_batch_100": lambda: q.send_batch(hundred),
            "pull_ack_10": lambda: q.ack([m.lease_id for m in q.pull(batch_size=10)]),
            "metrics": q.metrics,
        }
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():  # the calls take turns, so a burst of load hits each alike
                started = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - started)
        return {name: statistics.median(values) for name, values in times.items()}
    finally:
        cv.close()


def many_queues(rounds: int) -> None:
    p50: dict[int, dict[str, float]] = {}
    for queues in (10, 1_000):
        with scratch_schema(f"q{queues}") as url:
            p50[queues] = queue_calls(url, queues, rounds)
        for call, seconds in p50[queues].items():
            emit(f"postgres_{call}_p50_with_{queues}_queues", seconds * 1000, "ms", rounds)
    for call in p50[10]:
        emit(
            f"postgres_{call}_p50_1000_vs_10_queues",
            p50[1_000][call] / p50[10][call],
            "ratio",
            rounds,
            guard="about 1: a deployment's size is not in a queue's call",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts")
    parser.add_argument("--peer", nargs=3, metavar=("SYSTEM", "COUNT", "CONCURRENCY"), help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=("limits", "peers", "many-queues"), help="run one part")
    args = parser.parse_args()
    if args.peer:
        system, count, concurrency = args.peer
        print(json.dumps(run_peer_here(system, int(count), int(concurrency))), flush=True)
        return
    quiet_logs()
    count = 2_000 if args.quick else 30_000
    if args.only in (None, "limits"):
        limits(count, THREADS, rounds=1 if args.quick else 3)
    if args.only in (None, "peers"):
        e2e = 1_000 if args.quick else 10_000
        peers(e2e, THREADS, e2e // 2)
    if args.only in (None, "many-queues"):
        many_queues(rounds=50 if args.quick else 300)


if __name__ == "__main__":
    main()
