"""Every page of the dashboard on a small deployment against a large one (issue 17: each page's
server time p95 with 1,000 queues and 10,000 workflow instances at most 3 x the same page with 10
queues and 10 instances).

Each size is one deployment, seeded once and served by a real ``conveyor serve`` app on 127.0.0.1
(uvicorn in a thread): ``QUEUES`` queues made by the public API (every tenth with a worker consumer
no worker runs, so the overview has "no worker" rows), each with 30 minutes of history at the
default 10 s interval (180 points, written through the history's table API as the recorder writes
them); a queue ``orders`` whose consumer dead-letters into ``orders-dlq``, which holds 30 messages;
a workflow ``bulk`` of ``INSTANCES`` instances (``create_batch``, three paused); a migration job
(from a moto S3 bucket, no worker runs it); a CDN with two imported packages; a prober fleet with
one round; a bucket of 130 objects and a KV namespace of 120 keys. The other sections are the same
size in both deployments: only the queues and the instances grow.

Every size's deployment is seeded first and served at once; a logged-in HTTP client of each
fetches each page once to warm it, then ``--rounds`` times, the sizes taking turns request by
request (so a shared machine's load weighs on every size alike); each page's median and p95 round
trip (server time plus a local socket) are printed per size, and as ``PAGE_cpu`` the CPU time
of the benchmark's process a request (client and servers: on a loaded machine it moves less than
the wall time, which includes waiting for a core), then the ratio
of the p95s, large / small, against the target (``met``: at most 3). The pages, in order: the
overview and its 3-second poll (sorted by name, and by backlog: every queue ranked), a queue's
page with its live figures and chart data, a dead letter queue's page (its browse: peeked
messages and the redrive form), the workflows, a workflow's
instances (first page, a page deep in the list by cursor, the ``paused`` filter, the id search),
one instance, the migrations and their poll, a job, the CDN's packages, a package and a version,
the prober's fleets, a fleet and a round, the buckets, a bucket, an object, the KV namespaces, a
namespace and a value.

    python benchmarks/bench_dashboard.py [--quick] [--postgres] [--rounds N]
        [--sizes 10x10,1000x10000] [--pages overview,poll,...]

``--quick``: 5 rounds a page. ``--postgres``: a scratch schema of the test PostgreSQL for each
size. ``--sizes``: QUEUESxINSTANCES of each deployment (two sizes give the ratios).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import httpx  # noqa: E402

import conveyor  # noqa: E402
from conveyor import cdn  # noqa: E402
from conveyor.cdn.importer import import_tree  # noqa: E402
from conveyor.engine.history import QueuePoint  # noqa: E402
from conveyor.model import ConsumerSettings  # noqa: E402
from conveyor.prober import ProbeTarget  # noqa: E402
from conveyor.server.testing import RunningServer, running_server  # noqa: E402
from conveyor.storage.service import SHARED_DIRECTORIES_VARIABLE  # noqa: E402
from harness import emit, percentile, quiet_logs, scratch_directory  # noqa: E402

ACCOUNT = "acme"
INTERVAL_MS = 10_000
POINTS = 180  # 30 minutes at the default interval
TARGET = 3.0
DEEP_PAGE = 150  # the deep instance page's number (or the last page of a shorter list)
NEXT = re.compile(r'href="\?([^"]+)" id="next-page"')
DLQ_MESSAGES = 30


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 requests a page")
    parser.add_argument("--rounds", type=int, help="requests a page (default 30, --quick 5)")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="a scratch schema of the test PostgreSQL (default: SQLite in a scratch directory)",
    )
    parser.add_argument("--url", help=argparse.SUPPRESS)  # an older spelling of --postgres
    parser.add_argument("--sizes", default="10x10,1000x10000", help="QUEUESxINSTANCES, comma-separated")
    parser.add_argument("--pages", default="", help="only these pages (comma-separated names)")
    return parser.parse_args()


def _sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for part in text.split(","):
        queues, _, instances = part.partition("x")
        sizes.append((int(queues), int(instances or queues)))
    return sizes


# -- seeding --------------------------------------------------------------------------------------
def seed_queues(server: RunningServer, queues: int) -> None:
    """``queues`` queues by the public API (a tenth with a worker consumer), and their history."""
    cv = server.service.client(ACCOUNT)
    infos = []
    for n in range(queues):
        name = f"queue-{n:05d}"
        infos.append(cv.create_queue(name))
        if n % 10 == 0:
            cv.queue(name).add_consumer("worker", script_name=f"script-{n}")
    orders = cv.create_queue("orders")
    dlq = cv.create_queue("orders-dlq")
    orders.add_consumer("http_pull", settings=ConsumerSettings(max_retries=1), dead_letter_queue="orders-dlq")
    dlq.send_batch([{"body": {"order": n, "note": "x" * 200}} for n in range(DLQ_MESSAGES)])
    now = cv.engine.clock.now_ms()
    history = server.service.history()
    for n, info in enumerate([*infos, orders, dlq]):
        history.record(
            [
                QueuePoint(
                    info.id,
                    f"{ACCOUNT}/{info.name}",
                    now - (POINTS - i) * INTERVAL_MS,
                    (n * 7 + i) % 500,
                    (n + i) % 60_000,
                    i % 5,
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


def seed_workflow(server: RunningServer, instances: int) -> None:
    wf = server.service.client(ACCOUNT).put_workflow("bulk")
    for start in range(0, instances, 100):
        wf.create_batch([{"id": f"b{k:05d}", "params": {"k": k}} for k in range(start, min(instances, start + 100))])
    for k in sorted({0, instances // 3, instances - 1}):
        wf.get(f"b{k:05d}").pause()


def seed_sections(server: RunningServer, scratch: Path, s3: object, postgres: bool) -> dict[str, str]:
    """The migration job, CDN, prober, bucket and KV the other pages show; their ids."""
    from tests.slurper.conftest import s3_source
    from tests.storage.s3_server import S3Server

    assert isinstance(s3, S3Server)
    cv = server.service.client(ACCOUNT)
    shared = Path(os.environ[SHARED_DIRECTORIES_VARIABLE]) / scratch.name if postgres else None

    def bucket_url(name: str) -> str | None:
        return (shared / name).as_uri() if shared is not None else None

    source = s3.new_bucket()
    s3_client = s3.client()
    for n in range(3):
        s3_client.put_object(Bucket=source, Key=f"k{n}", Body=b"x" * 10)  # type: ignore[attr-defined]
    cv.create_bucket(f"copy-{source}", url=bucket_url(f"copy-{source}"))
    job = cv.slurper.create_job(source=s3_source(s3, source), target={"vendor": "r2", "bucket": f"copy-{source}"})
    if shared is not None:
        cdn.init(cv, primary_url=(shared / "cdn").as_uri(), staging_url=(shared / "cdn-staging").as_uri())
    else:
        cdn.init(cv)
    libs = scratch / "cdnjs" / "ajax" / "libs"  # scratch: this deployment's own folder
    for path, data in {
        "alpha/1.0.0/alpha.js": b"var alpha = 1;\n",
        "alpha/1.0.0/css/alpha.css": b".alpha{color:red}",
        "alpha/1.1.0/alpha.js": b"var alpha = 2;\n",
        "beta.js/2.0.0/beta.js": b"export const beta = 2;",
    }.items():
        (libs / path).parent.mkdir(parents=True, exist_ok=True)
        (libs / path).write_bytes(data)
    import_tree(cv, libs)
    app = conveyor.App(cv)
    prober = conveyor.Prober(app, fleet="web", messages=0, schedule=None)

    @prober.check("ok")
    def ok(target: ProbeTarget) -> dict[str, str]:
        return {"address": target.address}

    prober.fleet.import_targets([{"address": f"host-{n}.example.com", "check": "ok"} for n in range(5)])
    round_id = prober.round(timeout=120).id
    media = cv.create_bucket("media", url=bucket_url("media"))
    for n in range(130):
        media.put(f"photos/{n:03d}.jpg", b"x" * n, content_type="image/jpeg")
    media.put("docs/readme.txt", b"hello", content_type="text/plain")
    kv = cv.kv("config", create=True)
    kv.put_many([{"key": f"user:{n:03d}", "value": str(n)} for n in range(120)])
    kv.put("doc", {"n": 1, "text": "y" * 300}, metadata={"by": "bench"})
    return {"job": job.id, "round": round_id, "namespace": kv.id}


def seed(
    server: RunningServer, queues: int, instances: int, scratch: Path, s3: object, postgres: bool
) -> dict[str, str]:
    began = time.monotonic()
    seed_queues(server, queues)
    seed_workflow(server, instances)
    ids = seed_sections(server, scratch, s3, postgres)
    print(f"seeded {queues} queues, {instances} instances in {time.monotonic() - began:.0f} s", file=sys.stderr)
    return ids


# -- the pages ------------------------------------------------------------------------------------
def deep_page(client: httpx.Client, base: str, instances: int) -> str:
    """Page DEEP_PAGE of the workflow's instances (or its last), found by walking the cursor."""
    query = deep = "order=desc"
    for _ in range(min(DEEP_PAGE, max(1, instances // 50)) - 1):
        found = NEXT.search(client.get(f"{base}?{query}").text)
        if found is None:
            break
        query = deep = found.group(1).replace("&amp;", "&")
    return f"{base}?{deep}"


def pages(client: httpx.Client, ids: dict[str, str], queues: int, instances: int) -> dict[str, str]:
    a = f"/dash/a/{ACCOUNT}"
    wf = f"{a}/workflows/bulk"
    middle = f"b{instances // 2:05d}"
    queue = f"{a}/q/queue-{queues // 2:05d}"
    return {
        "overview": a,
        "poll": f"{a}/rows",
        "poll_by_backlog": f"{a}/rows?sort=backlog&desc=1",
        "queue": queue,
        "queue_live": f"{queue}/live",
        "queue_history": f"{queue}/history",
        "dlq": f"{a}/q/orders-dlq",
        "workflows": f"{a}/workflows",
        "instances": wf,
        "instances_deep": deep_page(client, wf, instances),
        "instances_paused": f"{wf}?status=paused",
        "instances_id": f"{wf}?id={middle}",
        "instance": f"{wf}/i/{middle}",
        "migrations": f"{a}/migrations",
        "migrations_poll": f"{a}/migrations/rows",
        "job": f"{a}/migrations/{ids['job']}",
        "cdn": f"{a}/cdn",
        "cdn_package": f"{a}/cdn/p/alpha",
        "cdn_version": f"{a}/cdn/p/alpha/v/1.0.0",
        "prober": f"{a}/prober",
        "prober_fleet": f"{a}/prober/web",
        "prober_round": f"{a}/prober/web/r/{ids['round']}",
        "buckets": f"{a}/buckets",
        "bucket": f"{a}/buckets/media?prefix=photos/",
        "object": f"{a}/buckets/media/o/docs/readme.txt",
        "kv": f"{a}/kv",
        "kv_namespace": f"{a}/kv/{ids['namespace']}",
        "kv_value": f"{a}/kv/{ids['namespace']}/k/doc",
    }


CPU: dict[tuple[int, str], list[float]] = {}  # the process's CPU seconds a request, by client and path


def timed(client: httpx.Client, path: str, count: int, warm: bool = True) -> list[float]:
    """``count`` round trips of ``GET path`` (seconds); each one's CPU time (this process's: the
    client and the servers run in it) is added to ``CPU[id(client), path]``."""
    if warm:
        client.get(path).raise_for_status()
    times = []
    for _ in range(count):
        cpu = time.process_time()
        start = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - start)
        CPU.setdefault((id(client), path), []).append(time.process_time() - cpu)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:300]}")
    return times


def settle(url: str) -> None:
    """Bring a freshly seeded PostgreSQL deployment's history to the state a running one is in. The
    seeding writes 30 minutes of points in seconds (180 versions of each ``queue_latest`` row, 180,000
    history rows), and the first reads after it pay for that burst (hint bits, dead row versions,
    no statistics) for a few dozen requests; in a running deployment autovacuum has long dealt
    with it. What autovacuum does, done at once: ``VACUUM ANALYZE`` of the two history tables."""
    import psycopg  # the postgres extra, only for --postgres

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE queue_history, queue_latest")


def measure(
    urls: list[str], sizes: list[tuple[int, int]], count: int, only: set[str], scratch: Path, s3: object, postgres: bool
) -> list[dict[str, list[float]]]:
    """Seed every size's deployment (each served at once), then time each page on all of them in
    turn, request by request, so the machine's load moves every size's figures alike."""
    with ExitStack() as stack:
        clients, found = [], []
        for n, (url, (queues, instances)) in enumerate(zip(urls, sizes, strict=True)):
            server = stack.enter_context(running_server(url))
            ids = seed(server, queues, instances, scratch / f"d{n}", s3, postgres)
            client = stack.enter_context(httpx.Client(base_url=server.url, timeout=120))
            client.post("/dash/login", data={"token": server.tokens.create(ACCOUNT)[0]})
            clients.append(client)
            found.append(pages(client, ids, queues, instances))
        if postgres:
            for url in urls:
                settle(url)
        results: list[dict[str, list[float]]] = [{} for _ in sizes]
        for page in found[0]:
            if only and page not in only:
                continue
            for client, paths in zip(clients, found, strict=True):
                timed(client, paths[page], 0)  # warm
            for _ in range(count):
                for client, paths, result in zip(clients, found, results, strict=True):
                    result.setdefault(page, []).extend(timed(client, paths[page], 1, warm=False))
            for client, paths, result in zip(clients, found, results, strict=True):
                result[f"{page} cpu"] = CPU.pop((id(client), paths[page]))
        return results


@contextmanager
def deployment(postgres: bool, scratch: Path) -> Iterator[str]:
    if not postgres:
        yield f"sqlite://{scratch / 'data'}"
        return
    from bench_postgres import drop_partitions
    from tests.engine.postgres.cluster import server_url
    from tests.engine.postgres.support import drop_schema, new_schema, schema_url

    schema = new_schema()
    try:
        yield schema_url(schema)
    finally:
        drop_partitions(server_url(), schema)
        drop_schema(schema)


def main() -> None:
    args = _arguments()
    quiet_logs()
    count = args.rounds or (5 if args.quick else 30)
    sizes = _sizes(args.sizes)
    only = {p for p in args.pages.split(",") if p}
    postgres = bool(args.postgres or args.url)
    engine = "postgresql" if postgres else "sqlite"
    from tests.storage.s3_server import start_s3_server

    with scratch_directory("dashboard") as scratch:
        s3 = start_s3_server(scratch)
        os.environ[SHARED_DIRECTORIES_VARIABLE] = str(scratch / "shared")
        try:
            with ExitStack() as stack:
                urls = [stack.enter_context(deployment(postgres, scratch / f"d{n}")) for n in range(len(sizes))]
                measured = measure(urls, sizes, count, only, scratch, s3, postgres)
        finally:
            s3.stop()
    results = dict(zip(sizes, measured, strict=True))
    for (queues, instances), found in results.items():
        for page, times in found.items():
            size = {"queues": queues, "instances": instances, "engine": engine}
            name = page.replace(" ", "_")  # "overview cpu": the process's CPU time a request
            emit(f"dashboard {name} median", statistics.median(times) * 1000, "ms", count, **size)
            emit(f"dashboard {name} p95", percentile(times, 95) * 1000, "ms", count, **size)
    if len(sizes) == 2:
        small, large = results[sizes[0]], results[sizes[1]]
        for page in small:
            value = percentile(large[page], 95) / percentile(small[page], 95)
            emit(
                f"dashboard {page.replace(' ', '_')} p95 {sizes[1][0]}x{sizes[1][1]} / {sizes[0][0]}x{sizes[0][1]}",
                value,
                "ratio",
                count,
                engine=engine,
                target=TARGET,
                met=value <= TARGET,
                medians=round(statistics.median(large[page]) / statistics.median(small[page]), 2),
            )


if __name__ == "__main__":
    main()
