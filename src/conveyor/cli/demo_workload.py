"""The demo's workload: the consumers ``conveyor demo`` runs, and what they measure.

- ``orders``: a fast handler; it records each message's latency from send to handler start.
- ``pings``: batches of one, sent one at a time, for the latency of an idle queue.
- ``payments``: a handler with a bug — it declines "expired" cards and raises — until the fix is
  "deployed" (``fixed = True``); with one retry allowed, declined payments land in the dead letter
  queue, and a redrive brings them back.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field

import conveyor

ORDERS, PINGS, PAYMENTS, PAYMENTS_DLQ = "orders", "pings", "payments", "payments-dlq"
# One payment in this many has an expired card: the bug declines it.
EXPIRED_EVERY = 25


class PaymentDeclined(Exception):
    """What the buggy payments handler raises."""


@dataclass
class Throughput:
    """Messages handled by one consumer, and when."""

    handled: int = 0
    first_start: float = 0.0
    last_end: float = 0.0
    latencies: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, batch: conveyor.MessageBatch, started: float) -> None:
        # Each body carries its send time (time.time() before the send call), so the latency counts
        # the durable write as well as the wait in the queue.
        lags = [started - m.body["t"] for m in batch.messages]
        ended = time.time()
        with self._lock:
            self.latencies.extend(lags)
            self.handled += len(batch.messages)
            self.first_start = min(self.first_start or started, started)
            self.last_end = max(self.last_end, ended)

    def rate(self) -> float:
        span = self.last_end - self.first_start
        return self.handled / span if span > 0 else 0.0

    def latency_summary_ms(self) -> dict[str, float]:
        return {"p50": round(self.percentile_ms(50), 2), "p99": round(self.percentile_ms(99), 2)}

    def percentile_ms(self, p: int) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0] * 1000 if self.latencies else 0.0
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[p - 1] * 1000


@dataclass
class Payments:
    """The payments consumer's state: the bug's switch and what it did."""

    fixed: bool = False
    charged: int = 0
    declined: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, batch: conveyor.MessageBatch) -> None:
        declined = 0
        for m in batch.messages:
            if m.body["card"] == "expired" and not self.fixed:
                declined += 1
                continue
            m.ack()  # explicit acks survive the raise below: only the declined ones are retried
        with self._lock:
            self.charged += len(batch.messages) - declined
            self.declined += declined
        if declined:
            raise PaymentDeclined(f"{declined} expired cards declined")


@dataclass
class Workload:
    orders: Throughput = field(default_factory=Throughput)
    pings: Throughput = field(default_factory=Throughput)
    payments: Payments = field(default_factory=Payments)

    def app(self, cv: conveyor.Conveyor) -> conveyor.App:
        app = conveyor.App(cv, grace_period=5.0)

        @app.consumer(ORDERS, max_batch_size=100, max_batch_timeout=0.05)
        def handle_order(batch: conveyor.MessageBatch) -> None:
            self.orders.record(batch, time.time())

        @app.consumer(PINGS, max_batch_size=1, max_batch_timeout=0)
        def handle_ping(batch: conveyor.MessageBatch) -> None:
            self.pings.record(batch, time.time())

        app.consumer(
            PAYMENTS,
            max_batch_size=20,
            max_batch_timeout=0.05,
            max_retries=1,
            retry_delay=0,
            dead_letter_queue=PAYMENTS_DLQ,
        )(self.payments.handle)
        return app


def payment(n: int) -> dict[str, object]:
    return {"payment": n, "amount_cents": 100 + n % 9_900, "card": "expired" if n % EXPIRED_EVERY == 0 else "valid"}
