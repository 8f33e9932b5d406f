"""``/metrics`` in Prometheus' text format.

Per queue (read from the engine at scrape time): backlog, backlog bytes, oldest message age, in
flight, the lifetime counters (sent, acked, retried, dead-lettered, expired) and the consumer's
concurrency (running batches when this process runs the worker, else its configured cap). Per
account and route: request latency histograms.

A scrape sees its token's scope (:class:`MetricsScope`): an account's token its account's queues
and requests; a queue-scoped token those queues only, and no request histograms (they count the
account's other queues' requests too); an operator token (or a server without auth) everything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from conveyor.engine.base import Engine
from conveyor.errors import ConveyorError
from conveyor.server.accounts import split

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# The running concurrency of a queue's consumer in this process, if it runs one: (account, queue) -> n.
ConcurrencySource = Callable[[str, str], int | None]


@dataclass(frozen=True, slots=True)
class MetricsScope:
    """What one scrape may see: ``None`` is every account, or every queue of the accounts."""

    accounts: frozenset[str] | None = None
    queues: frozenset[str] | None = None

    def sees_queue(self, account: str, queue: str) -> bool:
        in_account = self.accounts is None or account in self.accounts
        return in_account and (self.queues is None or queue in self.queues)

    @property
    def sees_requests(self) -> bool:
        return self.queues is None


EVERYTHING = MetricsScope()


class RequestMetrics:
    """The server's own metrics, in a registry of its own (so several servers can share a process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "conveyor_http_request_duration_seconds",
            "Time to answer an HTTP request, by account (empty before authentication), method, route "
            "template and status.",
            ["account", "method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def observe(self, account: str, method: str, route: str, status: int, seconds: float) -> None:
        self.latency.labels(account, method, route, str(status)).observe(seconds)


class ScopedRequests(Collector):
    """The request histograms' samples of the accounts a scrape may see."""

    def __init__(self, requests: RequestMetrics, scope: MetricsScope) -> None:
        self.requests = requests
        self.scope = scope

    def collect(self) -> Iterator[Metric]:
        if not self.scope.sees_requests:
            return
        for family in self.requests.latency.collect():
            if self.scope.accounts is not None:
                family.samples = [s for s in family.samples if s.labels.get("account") in self.scope.accounts]
            yield family


class QueueCollector(Collector):
    """Per-queue metrics of the queues a scrape may see."""

    def __init__(self, engine: Engine, scope: MetricsScope, concurrency: ConcurrencySource | None = None) -> None:
        self.engine = engine
        self.scope = scope
        self.concurrency = concurrency

    def collect(self) -> Iterator[Metric]:
        labels = ["account", "queue"]
        gauges = {
            "backlog": GaugeMetricFamily("conveyor_queue_backlog_messages", "Messages stored.", labels=labels),
            "bytes": GaugeMetricFamily("conveyor_queue_backlog_bytes", "Bytes of stored bodies.", labels=labels),
            "age": GaugeMetricFamily(
                "conveyor_queue_oldest_message_age_seconds", "Age of the oldest stored message.", labels=labels
            ),
            "in_flight": GaugeMetricFamily("conveyor_queue_in_flight_messages", "Messages leased now.", labels=labels),
            "concurrency": GaugeMetricFamily(
                "conveyor_consumer_concurrency",
                "Batches of the queue's consumer running now (or its max_concurrency cap when no worker runs here).",
                labels=labels,
            ),
        }
        counters = {
            name: CounterMetricFamily(
                f"conveyor_queue_{name}_messages", f"Messages {name.replace('_', '-')}.", labels=labels
            )
            for name in ("sent", "acked", "retried", "dead_lettered", "expired")
        }
        now_ms = self.engine.clock.now_ms()
        for queue in self.engine.list_queues():
            account, name = split(queue.queue_name)
            if not self.scope.sees_queue(account, name):
                continue
            try:
                m = self.engine.metrics(queue.queue_id)
                c = self.engine.counters(queue.queue_id)
            except ConveyorError:
                continue  # deleted while we looked
            key = [account, name]
            gauges["backlog"].add_metric(key, m.backlog_count)
            gauges["bytes"].add_metric(key, m.backlog_bytes)
            age = (now_ms - m.oldest_message_timestamp_ms) / 1000 if m.oldest_message_timestamp_ms else 0.0
            gauges["age"].add_metric(key, max(0.0, age))
            gauges["in_flight"].add_metric(key, c.in_flight)
            for counter in counters:
                counters[counter].add_metric(key, getattr(c, counter))
            running = self.concurrency(account, name) if self.concurrency else None
            if running is None and queue.consumers:
                running = queue.consumers[0].settings.max_concurrency
            if running is not None:
                gauges["concurrency"].add_metric(key, running)
        yield from gauges.values()
        yield from counters.values()


def render(
    engine: Engine,
    requests: RequestMetrics,
    scope: MetricsScope,
    concurrency: ConcurrencySource | None = None,
) -> bytes:
    """The exposition text: the per-queue metrics and request histograms ``scope`` may see."""
    registry = CollectorRegistry()
    registry.register(QueueCollector(engine, scope, concurrency))
    registry.register(ScopedRequests(requests, scope))
    return generate_latest(registry)
