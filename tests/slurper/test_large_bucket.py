"""A whole bucket the size the issue names: 3,000 objects from 0 B to 12 MB (nested prefixes,
unicode keys, custom metadata and content types) copied from a moto server into a Conveyor bucket
byte for byte, every object counted once."""

from __future__ import annotations

import concurrent.futures
import hashlib
import random
from pathlib import Path
from typing import Any

import conveyor
from tests.slurper.conftest import pipeline_running, s3_source, wait_for
from tests.storage.s3_server import S3Server

COUNT = 3_000
LARGE = 12_000_000  # a few objects this big: the target writes them in parts
SIZES = [0, 1, 100, 4096, 65_536]


def test_three_thousand_objects_up_to_12_mb_are_copied_byte_identical_and_counted_once(
    tmp_path: Path, s3_server: S3Server
) -> None:
    rng = random.Random(3000)
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    expected: dict[str, tuple[str, int, str, dict[str, str]]] = {}

    def put(i: int) -> None:
        key = [f"flat-{i:05d}", f"a/b/c/d/deep-{i}.txt", f"ünïcødé/写真 {i}.jpg", f"sp ace/+plus%{i}.css"][i % 4]
        size = LARGE + i if i % 1000 == 7 else SIZES[i % len(SIZES)]
        data = random.Random(i).randbytes(size)
        content_type = ["application/octet-stream", "text/plain", "image/jpeg", "text/css"][i % 4]
        metadata = {"index": str(i)} if i % 3 else {}
        client.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type, Metadata=metadata)
        expected[key] = (hashlib.sha256(data).hexdigest(), size, content_type, metadata)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(put, rng.sample(range(COUNT), COUNT)))
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        target = cv.create_bucket("all")
        job = cv.slurper.create_job(
            source=s3_source(s3_server, bucket),
            target={"vendor": "r2", "bucket": "all", "secret": {"accessKeyId": "x", "secretAccessKey": "y"}},
        )
        with pipeline_running(cv):
            wait_for(job, timeout=600)
        progress = job.progress()
        assert (progress.objects, progress.transferred_objects, progress.skipped_objects) == (COUNT, COUNT, 0)
        assert progress.failed_objects == 0
        assert progress.transferred_bytes == sum(size for _, size, _, _ in expected.values())
        assert sorted(o.key for o in target.list()) == sorted(expected)
        for key, (digest, size, content_type, metadata) in expected.items():
            info = target.head(key)
            assert (info.size, info.sha256, info.content_type, dict(info.metadata)) == (
                size,
                digest,
                content_type,
                metadata,
            ), key
        big = [k for k, (_, size, _, _) in expected.items() if size >= LARGE]
        assert len(big) == 3
        for key in big:
            assert hashlib.sha256(target.get(key).bytes()).hexdigest() == expected[key][0]
