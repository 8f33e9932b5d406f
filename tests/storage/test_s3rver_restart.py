"""A disk-backed S3-compatible server restarted under a bucket: its objects and their metadata are
there after the restart, and the bucket keeps working on the same endpoint."""

from __future__ import annotations

from pathlib import Path

import boto3

import conveyor
from tests.storage.s3rver import start_s3rver


def test_objects_survive_a_restart_of_the_service(tmp_path: Path) -> None:
    data, logs = tmp_path / "s3", tmp_path / "logs"
    data.mkdir()
    logs.mkdir()
    server = start_s3rver(data, logs)
    port = int(server.endpoint.rsplit(":", 1)[1])
    try:
        boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id=server.access_key_id,
            aws_secret_access_key=server.secret_access_key,
        ).create_bucket(Bucket="kept")
        with conveyor.connect(f"sqlite://{tmp_path / 'deployment'}") as cv:
            b = cv.create_bucket(
                "mirror",
                url="s3://kept/p",
                endpoint=server.endpoint,
                region="us-east-1",
                access_key_id=server.access_key_id,
                secret_access_key=server.secret_access_key,
            )
            before = b.put("a/b.txt", b"kept across a restart", content_type="text/plain", metadata={"m": "1"})
        server.stop()
        server = start_s3rver(data, logs, port)
        with conveyor.connect(f"sqlite://{tmp_path / 'deployment'}") as cv:
            b = cv.bucket("mirror")
            body = b.get("a/b.txt")
            assert (body.bytes(), body.info) == (b"kept across a restart", before)
            b.put("after", b"new")
            assert [o.key for o in b.list()] == ["a/b.txt", "after"]
    finally:
        server.stop()
