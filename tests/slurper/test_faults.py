"""Faults under a running job. The pipeline's worker as a real process (``conveyor slurper worker``),
SIGKILLed between a copy and its count (a fault hook) and at random moments from outside; and the
target service (s3rver, which keeps its data on disk) stopped and started again mid-job. The job
still completes with exact counts (transferred + skipped + failed = listed, read from the tool's
tables), every object is in the target, and no object is written twice except those in flight at
a kill (counted through the target bucket's PutObject notifications)."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import conveyor
from conveyor.slurper.errors import ChecksumMismatch
from conveyor.slurper.pipeline import FAULT_VARIABLE, Pipeline
from conveyor.slurper.store import Listed, job_store
from tests import waiting
from tests.slurper.conftest import pipeline_running, s3_source, wait_for
from tests.storage.s3_server import S3Server
from tests.storage.s3rver import start_s3rver

CONVEYOR = Path(sys.executable).with_name("conveyor")


def _worker(url: str, logs: Path, fault: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != FAULT_VARIABLE}
    if fault is not None:
        env[FAULT_VARIABLE] = fault
    with (logs / "worker.log").open("ab") as out:
        return subprocess.Popen(
            [str(CONVEYOR), "--url", url, "slurper", "worker", "--visibility-timeout-ms", "2000"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _writes(cv: conveyor.Conveyor) -> collections.Counter[str]:
    """How many times each key was written to the target (its PutObject notifications)."""
    queue = cv.queue("writes")
    queue.add_pull_consumer() if queue.consumer() is None else None
    counts: collections.Counter[str] = collections.Counter()
    while batch := queue.pull(batch_size=100):
        counts.update(m.body["object"]["key"] for m in batch)
        queue.ack(acks=[m.lease_id for m in batch])
    return counts


def test_a_worker_killed_between_copy_and_count_and_at_random_still_counts_every_object_once(
    tmp_path: Path, s3_server: S3Server
) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    keys = [f"obj/{i:03d}" for i in range(150)]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=key.encode() * 50)
    kills = 0
    with conveyor.connect(url) as cv:
        cv.create_queue("writes")
        cv.create_bucket("dest").add_notification("writes", actions=["PutObject"])
        job = cv.slurper.create_job(source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "dest"})
        # Three workers die right after a copy, before its count: each at its 10th copy.
        for _ in range(3):
            worker = _worker(url, tmp_path, fault="after-copy:10")
            assert worker.wait(timeout=60) == -signal.SIGKILL
            kills += 1
        # Then workers killed from outside at random moments.
        rng = random.Random(7)
        while job.info().status != "completed" and kills < 8:
            worker = _worker(url, tmp_path)
            time.sleep(rng.uniform(1.0, 2.5))
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
            kills += 1
        worker = _worker(url, tmp_path)
        writes: collections.Counter[str] = collections.Counter()
        try:
            deadline = time.monotonic() + 120
            while job.info().status != "completed":
                assert time.monotonic() < deadline, job.progress()
                time.sleep(0.2)
            # A worker killed between an object's commit and its notification left that notification
            # in the storage's outbox: the live worker's coordinator sends it after its grace period.
            waiting.wait_for(
                lambda: writes.update(_writes(cv)) or set(writes) >= set(keys),
                timeout=60,
                what="a PutObject notification of every key",
                poll=0.2,
            )
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        row = job_store(cv).job(cv.deployment.account, job.id)
        assert row.objects == len(keys)
        assert (row.transferred, row.skipped, row.failed) == (len(keys), 0, 0)
        assert job_store(cv).key_states(job.id) == {"transferred": len(keys)}
        assert sorted(o.key for o in cv.bucket("dest").list()) == keys
        for key in keys:
            assert cv.bucket("dest").get(key).bytes() == key.encode() * 50
        writes.update(_writes(cv))
        assert set(writes) == set(keys)
        again = sum(n - 1 for n in writes.values())
        # Only copies in flight at a kill are written again: at most a transfer batch per kill.
        assert again <= kills * 10 * 4, writes


def test_the_target_restarted_mid_job_still_gets_every_object_once_counted(tmp_path: Path, s3_server: S3Server) -> None:
    data, logs = tmp_path / "s3rver", tmp_path / "logs"
    data.mkdir()
    logs.mkdir()
    target = start_s3rver(data, logs)
    port = int(target.endpoint.rsplit(":", 1)[1])
    try:
        target_client: Any = target.client()
        target_client.create_bucket(Bucket="restarted")
        bucket = s3_server.new_bucket()
        client: Any = s3_server.client()
        keys = [f"r/{i:03d}" for i in range(200)]
        for key in keys:
            client.put_object(Bucket=bucket, Key=key, Body=key.encode() * 20, Metadata={"k": key[-3:]})
        with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
            job = cv.slurper.create_job(
                source=s3_source(s3_server, bucket), target=s3_source(target, "restarted"), overwrite=True
            )
            with pipeline_running(cv, page_size=20, max_retries=6):
                deadline = time.monotonic() + 60
                while job.progress().transferred_objects < 40:
                    assert time.monotonic() < deadline, job.progress()
                    time.sleep(0.05)
                target.stop()
                time.sleep(2)
                target = start_s3rver(data, logs, port)
                wait_for(job, timeout=120)
            row = job_store(cv).job(cv.deployment.account, job.id)
            failures = [e.message for e in job.logs(limit=1000) if e.log_type != "migrationStart"]
            assert (row.objects, row.transferred, row.skipped, row.failed) == (len(keys), len(keys), 0, 0), failures
        listed = target_client.list_objects_v2(Bucket="restarted", MaxKeys=1000)
        assert sorted(o["Key"] for o in listed["Contents"]) == keys
        got = target_client.get_object(Bucket="restarted", Key="r/123")
        assert got["Body"].read() == b"r/123" * 20 and got["Metadata"] == {"k": "123"}
    finally:
        target.stop()


def test_a_redelivered_copy_of_an_overwriting_job_writes_over_an_object_the_target_cannot_describe(
    tmp_path: Path, s3_server: S3Server
) -> None:
    # A target killed while writing an object can be left unable to describe it: s3rver answers 500
    # to its HEAD (a metadata file left empty) until the object is written again. A redelivered
    # transfer looks before copying; an overwriting job copies over what it cannot look at.
    data, logs = tmp_path / "s3rver", tmp_path / "logs"
    data.mkdir()
    logs.mkdir()
    target = start_s3rver(data, logs)
    try:
        target_client: Any = target.client()
        target_client.create_bucket(Bucket="broken")
        target_client.put_object(Bucket="broken", Key="k/1", Body=b"half-written")
        bucket = s3_server.new_bucket()
        s3_server.client().put_object(Bucket=bucket, Key="k/1", Body=b"whole", Metadata={"m": "1"})
        with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
            job = cv.slurper.create_job(
                source=s3_source(s3_server, bucket), target=s3_source(target, "broken"), overwrite=True
            )
            (data / "broken" / "k" / "1._S3rver_metadata.json").write_bytes(b"")
            store = job_store(cv)
            row = store.find(job.id)
            assert row is not None
            assert store.record_listing(job.id, row.next_listing, [Listed("k/1", 5)], after="", done=True)
            assert store.lock_keys(job.id, [("k/1", "message-1")])[1][0].result == "locked"
            _, [again] = store.lock_keys(job.id, [("k/1", "message-1")])  # the same message's second delivery
            assert again.again
            pipeline = Pipeline(cv)
            try:
                assert pipeline._copy(row, "k/1", again) == ("transferred", 5, None)
            finally:
                pipeline.close()
        got = target_client.get_object(Bucket="broken", Key="k/1")
        assert got["Body"].read() == b"whole" and got["Metadata"] == {"m": "1"}
    finally:
        target.stop()


@pytest.mark.parametrize("target_kind", ["s3 single PUT", "s3 multipart", "conveyor bucket"])
def test_bytes_that_do_not_match_the_source_md5_are_refused_whichever_side_checks_them(
    tmp_path: Path, s3_server: S3Server, target_kind: str
) -> None:
    # A source serving bytes other than those its etag is the MD5 of (s3rver reading a content file
    # changed on disk under its metadata): a single PUT is checked by the etag the target answers, a
    # multipart upload and a Conveyor bucket by hashing the bytes on the way.
    # (The retry must copy it again, not take the failed copy for one whose count was lost: the
    # copy that failed its check is removed.)
    data, logs = tmp_path / "s3rver", tmp_path / "logs"
    data.mkdir()
    logs.mkdir()
    source = start_s3rver(data, logs)
    try:
        source_client: Any = source.client()
        source_client.create_bucket(Bucket="rotten")
        source_client.put_object(Bucket="rotten", Key="k", Body=b"a" * 4096)
        (data / "rotten" / "k._S3rver_object").write_bytes(b"b" * 4096)  # same size, another MD5
        with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
            if target_kind == "conveyor bucket":
                cv.create_bucket("dst")
                target: dict[str, Any] = {"vendor": "r2", "bucket": "dst"}
            else:
                target = s3_source(s3_server, s3_server.new_bucket())
            job = cv.slurper.create_job(source=s3_source(source, "rotten"), target=target)
            store = job_store(cv)
            row = store.find(job.id)
            assert row is not None
            assert store.record_listing(job.id, row.next_listing, [Listed("k", 4096)], after="", done=True)
            _, [locked] = store.lock_keys(job.id, [("k", "message-1")])
            pipeline = Pipeline(cv, multipart_threshold=1024 if target_kind == "s3 multipart" else 1024**2)
            try:
                with pytest.raises(ChecksumMismatch, match="MD5"):
                    pipeline._copy(row, "k", locked)
            finally:
                pipeline.close()
            if target_kind == "conveyor bucket":
                assert [o.key for o in cv.bucket("dst").list()] == []
            else:
                assert s3_server.keys(target["bucket"]) == []
    finally:
        source.stop()


def test_a_redelivered_copy_takes_an_object_written_since_the_job_began_only_if_it_matches_the_listing(
    tmp_path: Path, s3_server: S3Server
) -> None:
    # The failsafe counts a key as transferred, without copying, when a redelivered transfer finds
    # it in the target written after the job began (its earlier delivery copied it and died before
    # counting). An object there of another size or MD5 than the listing's is no such copy (one that
    # failed its check, say): it is copied again.
    source, target = s3_server.new_bucket(), s3_server.new_bucket()
    client: Any = s3_server.client()
    client.put_object(Bucket=source, Key="same", Body=b"whole")
    client.put_object(Bucket=source, Key="other", Body=b"whole")
    listed = {o["Key"]: o["ETag"].strip('"') for o in client.list_objects_v2(Bucket=source)["Contents"]}
    with conveyor.connect(f"sqlite://{tmp_path / 'data'}") as cv:
        job = cv.slurper.create_job(source=s3_source(s3_server, source), target=s3_source(s3_server, target))
        time.sleep(1.05 - time.time() % 1)  # into the next second: Last-Modified has whole seconds
        client.put_object(Bucket=target, Key="same", Body=b"whole")
        client.put_object(Bucket=target, Key="other", Body=b"wrong")  # same size, another MD5
        store = job_store(cv)
        row = store.find(job.id)
        assert row is not None
        keys = [Listed(k, 5, listed[k]) for k in ("other", "same")]
        assert store.record_listing(job.id, row.next_listing, keys, after="", done=True)
        store.lock_keys(job.id, [("other", "m-1"), ("same", "m-2")])
        _, again = store.lock_keys(job.id, [("other", "m-1"), ("same", "m-2")])  # their second deliveries
        pipeline = Pipeline(cv)
        try:
            assert pipeline._copy(row, "same", again[1]) == ("transferred", 5, None)
            assert pipeline._copy(row, "other", again[0]) == ("transferred", 5, None)
        finally:
            pipeline.close()
    assert client.get_object(Bucket=target, Key="other")["Body"].read() == b"whole"
