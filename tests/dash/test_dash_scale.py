"""The overview of an account with 1,000 queues, each with 30 minutes of history at the default
10-second interval: it shows 50 queues a page, sorts and filters across all 1,000 (figures from each
queue's newest points), and draws each shown queue's sparkline from a point a minute. Its speed is
measured by benchmarks/bench_dashboard.py, not here."""

from __future__ import annotations

import re

import pytest

from conveyor.engine.history import QueuePoint
from conveyor.server.dash.pages import OVERVIEW_MINUTES, OVERVIEW_ROWS
from conveyor.server.testing import RunningServer
from tests.dash.conftest import logged_in

QUEUES = 1000
INTERVAL_MS = 10_000
POINTS = OVERVIEW_MINUTES * 60_000 // INTERVAL_MS  # 180
ROW = re.compile(r'<tr data-queue="([^"]+)">')


def seed(server: RunningServer) -> None:
    """1,000 queues by the public API; their history through the history's table API, as the
    recorder writes it. Queue n's newest backlog is n (queue-0999 the largest)."""
    cv = server.service.client("acme")
    made = [cv.create_queue(f"queue-{n:04d}") for n in range(QUEUES)]
    now = cv.engine.clock.now_ms()
    history = server.service.history()
    points = []
    for n, queue in enumerate(made):
        for i in range(POINTS):
            at = now - (POINTS - 1 - i) * INTERVAL_MS
            backlog = n if i == POINTS - 1 else (i * 7) % 50
            points.append(QueuePoint(queue.id, f"acme/{queue.name}", at, backlog, 0, 0, 0, i, i, 0, 0, 0))
    history.record(points)
    server.service.client("rival").create_queue("queue-rival")


# Making 1,000 queues makes (and syncs) 1,000 shard files: minutes on a loaded machine.
@pytest.mark.timeout(1800)
def test_an_overview_of_1000_queues_pages_sorts_and_filters_them_all(server: RunningServer) -> None:
    seed(server)
    secret, _ = server.tokens.create("acme")
    client = logged_in(server, secret)

    first = client.get("/dash/a/acme")
    assert first.status_code == 200
    names = ROW.findall(first.text)
    assert names == [f"queue-{n:04d}" for n in range(OVERVIEW_ROWS)]
    assert f"Queues 1–{OVERVIEW_ROWS} of {QUEUES}" in first.text and "page 1 of 20" in first.text
    assert "queue-rival" not in first.text
    sparks = re.findall(r'<polyline points="([^"]*)"', first.text)
    assert len(sparks) == OVERVIEW_ROWS
    assert all(len(spark.split()) <= OVERVIEW_MINUTES + 1 for spark in sparks)  # a point a minute, not 180

    by_backlog = client.get("/dash/a/acme/rows", params={"sort": "backlog", "desc": "1"}).text
    assert ROW.findall(by_backlog)[:3] == ["queue-0999", "queue-0998", "queue-0997"]
    assert '<td class="num backlog">999</td>' in by_backlog

    last = client.get("/dash/a/acme/rows", params={"page": "20"}).text
    assert ROW.findall(last)[-1] == "queue-0999" and "Queues 951–1000 of 1000" in last
    past_the_end = client.get("/dash/a/acme/rows", params={"page": "99"}).text
    assert ROW.findall(past_the_end) == ROW.findall(last)
    assert ROW.findall(client.get("/dash/a/acme/rows", params={"page": "x"}).text)[0] == "queue-0000"

    filtered = client.get("/dash/a/acme/rows", params={"q": "queue-01", "sort": "backlog", "desc": "1"}).text
    found = ROW.findall(filtered)
    assert len(found) == OVERVIEW_ROWS and found[0] == "queue-0199"
    assert "of 100 (of 1000)" in filtered
    one = client.get("/dash/a/acme/rows", params={"q": "queue-0500"}).text
    assert ROW.findall(one) == ["queue-0500"] and "page 1 of" not in one  # one page: no pager
