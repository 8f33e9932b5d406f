"""The dashboard's overview with many queues: the server time of the overview page
(``GET /dash/a/ACCOUNT``) and of its 3-second poll (``GET /dash/a/ACCOUNT/rows``) on a deployment of
10 queues and of 1,000, each queue with 30 minutes of history at the default 10-second interval
(180 points a queue, written through the history's table API as the recorder writes them). A real
``conveyor serve`` app on 127.0.0.1 (uvicorn in a thread), a logged-in session; prints each page's
median and p95 per size, and 1,000 / 10 (issue 17 holds it to at most 3).

    python benchmarks/bench_dashboard.py [--quick] [--postgres] [--sizes 10,1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import httpx  # noqa: E402

from conveyor.engine.history import QueuePoint  # noqa: E402
from conveyor.server.testing import RunningServer, running_server  # noqa: E402
from harness import emit, percentile, quiet_logs, ratio, scratch_directory  # noqa: E402

ACCOUNT = "acme"
INTERVAL_MS = 10_000
POINTS = 180  # 30 minutes at the default interval


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 requests a page")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="a scratch schema of the test PostgreSQL (default: SQLite in a scratch directory)",
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)  # an older spelling of --postgres
    parser.add_argument("--sizes", default="10,1000", help="queue counts, comma-separated")
    return parser.parse_args()


def seed(server: RunningServer, queues: int) -> None:
    """``queues`` queues made by the public API, and their history points."""
    cv = server.service.client(ACCOUNT)
    infos = [cv.create_queue(f"queue-{n:05d}") for n in range(queues)]
    now = cv.engine.clock.now_ms()
    history = server.service.history()
    for n, info in enumerate(infos):
        history.record(
            [
                QueuePoint(
                    info.id,
                    f"{ACCOUNT}/{info.name}",
                    now - (POINTS - i) * INTERVAL_MS,
                    (n * 7 + i) % 500,
                    0,
                    0,
                    i % 3,
                    i * 10,
                    i * 9,
                    i,
                    0,
                    i % 4,
                )
                for i in range(POINTS)
            ]
        )


def timed(client: httpx.Client, path: str, count: int) -> list[float]:
    client.get(path).raise_for_status()  # warm
    times = []
    for _ in range(count):
        start = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - start)
        response.raise_for_status()
    return times


def measure(url: str, queues: int, count: int) -> dict[str, list[float]]:
    with running_server(url) as server:
        seed(server, queues)
        secret, _ = server.tokens.create(ACCOUNT)
        client = httpx.Client(base_url=server.url, timeout=120)
        client.post("/dash/login", data={"token": secret})
        pages = {"overview": f"/dash/a/{ACCOUNT}", "poll": f"/dash/a/{ACCOUNT}/rows"}
        return {name: timed(client, path, count) for name, path in pages.items()}


def main() -> None:
    args = _arguments()
    quiet_logs()
    count = 5 if args.quick else 30
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, list[float]]] = {}
    for queues in sizes:
        if args.postgres or args.url:
            from tests.engine.postgres.support import drop_schema, new_schema, schema_url

            schema = new_schema()
            try:
                results[queues] = measure(schema_url(schema), queues, count)
            finally:
                drop_schema(schema)
        else:
            with scratch_directory("dashboard") as directory:
                results[queues] = measure(f"sqlite://{directory / 'data'}", queues, count)
        for page, times in results[queues].items():
            engine = "postgresql" if args.postgres or args.url else "sqlite"
            emit(f"dashboard {page} median", statistics.median(times) * 1000, "ms", count, queues=queues, engine=engine)
            emit(f"dashboard {page} p95", percentile(times, 95) * 1000, "ms", count, queues=queues, engine=engine)
    if len(sizes) == 2:
        small, large = sizes
        for page in ("overview", "poll"):
            ratio(
                f"dashboard {page} p95 {large} / {small} queues",
                percentile(results[large][page], 95),
                percentile(results[small][page], 95),
                count,
            )


if __name__ == "__main__":
    main()
