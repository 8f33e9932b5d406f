"""The workflow list pages with 10,000 instances (seeded with create_batch, a workflow no worker
runs so they stay put): the workflows page counts them, a workflow's pages walk every instance
once by cursor, in order, and a status filter and the id search find the few they should. No
timing is asserted; ``benchmarks/bench_dash_workflows.py`` measures the pages."""

from __future__ import annotations

import re

from conveyor.server.testing import RunningServer
from tests.dash.conftest import logged_in

TOTAL = 10_000
PAUSED = ("b00000", "b04321", "b09999")
NEXT = re.compile(r'href="\?([^"]+)" id="next-page"')
W = "/dash/a/acme/workflows"


def seed(server: RunningServer, name: str, total: int) -> None:
    wf = server.service.client("acme").put_workflow(name)
    for start in range(0, total, 100):
        done = wf.create_batch([{"id": f"b{k:05d}", "params": {"k": k}} for k in range(start, start + 100)])
        assert not done.errors
    for instance_id in PAUSED:
        wf.get(instance_id).pause()


def test_ten_thousand_instances_count_filter_and_page(server: RunningServer) -> None:
    seed(server, "bulk", TOTAL)
    client = logged_in(server, server.tokens.create("acme")[0])
    listed = client.get(W).text
    assert re.search(r'count-queued"><a href="[^"]+">9997</a>', listed)
    assert re.search(r'count-paused"><a href="[^"]+">3</a>', listed)

    seen: list[str] = []
    query: str | None = "order=asc"
    pages = 0
    while query is not None:
        page = client.get(f"{W}/bulk?{query}")
        assert page.status_code == 200
        seen += re.findall(r'<tr data-instance="([^"]+)">', page.text)
        found = NEXT.search(page.text)
        query = None if found is None else found.group(1).replace("&amp;", "&")
        pages += 1
    assert pages == TOTAL // 50
    assert seen == [f"b{k:05d}" for k in range(TOTAL)]

    newest = client.get(f"{W}/bulk").text
    assert re.findall(r'<tr data-instance="([^"]+)">', newest)[:2] == ["b09999", "b09998"]
    paused = client.get(f"{W}/bulk", params={"status": "paused"}).text
    assert re.findall(r'<tr data-instance="([^"]+)">', paused) == list(reversed(PAUSED))
    assert NEXT.search(paused) is None
    one = client.get(f"{W}/bulk", params={"id": "b05000"}).text
    assert re.findall(r'<tr data-instance="([^"]+)">', one) == ["b05000"]
    assert client.get(f"{W}/bulk/i/b05000").status_code == 200
