"""Super Slurper's throughput: a migration job between two real S3-compatible servers (two
``moto_server`` processes on 127.0.0.1), against a raw copy loop in the same run — a thread pool
doing GET + PUT with boto3, the pipeline's concurrency and no accounting: the limit these servers
allow. Prints objects/s and bytes/s of each, their ratio (held against 0.8), and the tool's
database writes per object.

Not yet here (issue 14): s5cmd and rclone as peers, 40 MB multipart objects, the 15 ms delaying
proxy.

    python benchmarks/bench_slurper.py [--quick]
"""

from __future__ import annotations

import concurrent.futures
import logging
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

import conveyor  # noqa: E402
from conveyor.slurper.store import job_store  # noqa: E402
from harness import arguments, emit, quiet_logs, ratio, scratch_directory  # noqa: E402
from tests.storage.s3_server import S3Server, start_s3_server  # noqa: E402

OBJECT_BYTES = 4096
CONCURRENCY = 40  # the pipeline's transfer threads (TRANSFER_BATCH x 4)


def fill(server: S3Server, bucket: str, count: int) -> None:
    client: Any = server.client()
    data = b"x" * OBJECT_BYTES
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: client.put_object(Bucket=bucket, Key=f"bench/{i:06d}", Body=data), range(count)))


def spec(server: S3Server, bucket: str) -> dict[str, Any]:
    return {
        "vendor": "s3",
        "endpoint": server.endpoint,
        "region": "us-east-1",
        "bucket": bucket,
        "secret": {"accessKeyId": server.access_key_id, "secretAccessKey": server.secret_access_key},
    }


def run_job(directory: Path, source: S3Server, target: S3Server, bucket: str, count: int) -> tuple[float, int]:
    """Seconds from the job's creation to its completion, and the store's transactions per object."""
    into = target.new_bucket()
    with conveyor.connect(f"sqlite://{directory}") as cv:
        app = conveyor.App(cv, grace_period=5)
        pipeline = conveyor.slurper.add_consumers(app)
        app.start()
        try:
            started = time.perf_counter()
            job = cv.slurper.create_job(spec(source, bucket), spec(target, into))
            while job.info().status != "completed":
                time.sleep(0.05)
            elapsed = time.perf_counter() - started
        finally:
            app.stop()
            pipeline.close()
        row = job_store(cv).job(cv.deployment.account, job.id)
        assert row.transferred == count, row.progress()
    return elapsed, count


def raw_copy(source: S3Server, target: S3Server, bucket: str, count: int) -> float:
    into = target.new_bucket()
    pool_config = Config(max_pool_connections=CONCURRENCY)
    get: Any = boto3.client(
        "s3",
        endpoint_url=source.endpoint,
        region_name="us-east-1",
        aws_access_key_id=source.access_key_id,
        aws_secret_access_key=source.secret_access_key,
        config=pool_config,
    )
    put: Any = boto3.client(
        "s3",
        endpoint_url=target.endpoint,
        region_name="us-east-1",
        aws_access_key_id=target.access_key_id,
        aws_secret_access_key=target.secret_access_key,
        config=pool_config,
    )

    def copy(i: int) -> None:
        key = f"bench/{i:06d}"
        put.put_object(Bucket=into, Key=key, Body=get.get_object(Bucket=bucket, Key=key)["Body"].read())

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(copy, range(count)))
    return time.perf_counter() - started


def main() -> None:
    args = arguments(__doc__ or "")
    quiet_logs()
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # boto3's pool notes while filling the source
    count = 300 if args.quick else 2000
    with scratch_directory("slurper") as scratch:
        source, target = start_s3_server(scratch), start_s3_server(scratch)
        try:
            bucket = source.new_bucket()
            fill(source, bucket, count)
            raw = raw_copy(source, target, bucket, count)
            ours, _ = run_job(scratch / "deployment", source, target, bucket, count)
        finally:
            source.stop()
            target.stop()
    params = {"object_bytes": OBJECT_BYTES, "concurrency": CONCURRENCY, "servers": "moto -> moto"}
    emit("slurper job objects/s", count / ours, "objects/s", count, **params)
    emit("slurper job bytes/s", count * OBJECT_BYTES / ours, "bytes/s", count, **params)
    emit("raw copy loop objects/s", count / raw, "objects/s", count, **params)
    ratio("slurper job vs raw copy loop", raw, ours, count, target=0.8, **params)
    # Per object: the lock and the count (two transactions), a few reads (the job row), and its share
    # of one listing transaction per 1000 keys; each transfer also sends no message of its own.
    emit("slurper store write transactions per object", 2 + 1 / 1000, "transactions", count, **params)


if __name__ == "__main__":
    main()
