"""The dashboard's workflow pages with 10 instances against the same pages with 10,000, in one run.

Two deployments, each served by a real ``conveyor serve`` app (uvicorn on 127.0.0.1, in this
process): one whose workflow has 10 instances, one whose has 10,000 (seeded with ``create_batch``,
a workflow no worker runs, three of them paused). A logged-in HTTP client times each page's round
trip (server time plus a local socket): the account's workflows, a workflow's first page, a page
deep in the list (page 150 of 200 by cursor, or the last page of the small one), the rare status
filter (``paused``), the id search, and one instance. The figure is the p95 in seconds; the ratio
of the 10,000-instance page to the 10-instance page is held against issue 17's target, ``≤ 3``.

Usage: ``.venv/bin/python benchmarks/bench_dash_workflows.py [--rounds N] [--postgres]``; one JSON
line per measurement (``harness.emit``); ``--postgres`` runs on the local server
(``$CONVEYOR_BENCH_PG``) instead of SQLite.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from conveyor.server.testing import running_server  # noqa: E402
from harness import emit, scratch_directory  # noqa: E402

SERVER = os.environ.get("CONVEYOR_BENCH_PG", "postgresql://127.0.0.1:5432/test")
NEXT = re.compile(r'href="\?([^"]+)" id="next-page"')
TARGET = 3.0
SIZES = (10, 10_000)
DEEP_PAGE = 150


@contextmanager
def deployment(postgres: bool) -> Iterator[str]:
    if not postgres:
        with scratch_directory("bench-dash-wf") as path:
            yield f"sqlite://{path / 'data'}"
        return
    import psycopg

    schema = f"bench_dash_{secrets.token_hex(4)}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"{SERVER}?options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def pages(client: httpx.Client, total: int) -> dict[str, str]:
    """The paths timed, found on the seeded deployment (the deep page by walking its cursor)."""
    base = "/dash/a/acme/workflows/bulk"
    query: str | None = "order=desc"
    deep = query
    for _ in range(min(DEEP_PAGE, max(1, total // 50)) - 1):
        found = NEXT.search(client.get(f"{base}?{query}").text)
        if found is None:
            break
        query = deep = found.group(1).replace("&amp;", "&")
    return {
        "workflows": "/dash/a/acme/workflows",
        "first_page": base,
        "deep_page": f"{base}?{deep}",
        "status_paused": f"{base}?status=paused",
        "id_search": f"{base}?id=b{total // 2:05d}",
        "instance": f"{base}/i/b{total // 2:05d}",
    }


def measure(url: str, total: int, rounds: int) -> dict[str, float]:
    with running_server(url) as server:
        wf = server.service.client("acme").put_workflow("bulk")
        for start in range(0, total, 100):
            wf.create_batch([{"id": f"b{k:05d}", "params": {"k": k}} for k in range(start, min(total, start + 100))])
        for k in (0, total // 3, total - 1):
            wf.get(f"b{k:05d}").pause()
        client = httpx.Client(base_url=server.url, timeout=60)
        client.post("/dash/login", data={"token": server.tokens.create("acme")[0]})
        found = pages(client, total)
        p95s = {}
        for name, path in found.items():
            assert client.get(path).status_code == 200, path  # warm
            times = []
            for _ in range(rounds):
                began = time.perf_counter()
                response = client.get(path)
                times.append(time.perf_counter() - began)
                assert response.status_code == 200
            p95 = statistics.quantiles(times, n=20)[18]
            p95s[name] = p95
            emit(f"dash_wf_{name}", p95, "s (p95)", rounds, instances=total, median=round(statistics.median(times), 5))
        client.close()
        return p95s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    results = {}
    for total in SIZES:
        with deployment(args.postgres) as url:
            results[total] = measure(url, total, args.rounds)
    small, large = results[SIZES[0]], results[SIZES[1]]
    engine = "postgresql" if args.postgres else "sqlite"
    for name in small:
        value = large[name] / small[name]
        emit(
            f"dash_wf_{name}_10k_vs_10", value, "ratio", args.rounds, engine=engine, target=TARGET, met=value <= TARGET
        )


if __name__ == "__main__":
    main()
