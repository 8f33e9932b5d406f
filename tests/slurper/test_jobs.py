"""Migration jobs end to end: a real moto server as the source, a Conveyor bucket (or a moto
bucket) as the target, the pipeline's consumers on the deployment's real queues."""

from __future__ import annotations

import gzip
import hashlib
import random
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

import conveyor
from conveyor.egress import EgressPolicy, EgressRefused
from conveyor.errors import InvalidRequest
from conveyor.slurper import InvalidJob, InvalidJobState, JobNotFound
from conveyor.slurper.endpoints import MAX_PARTS, MIN_PART_SIZE, PART_SIZE, S3Target, part_size
from conveyor.slurper.errors import ChecksumMismatch
from conveyor.slurper.model import Endpoint
from conveyor.slurper.pipeline import DEAD_LETTER_QUEUE, LIFECYCLE_QUEUE, LIST_QUEUE, TRANSFER_QUEUE, FailureWindow
from conveyor.slurper.rules import ByteRate
from conveyor.slurper.store import job_store
from conveyor.storage.errors import BucketNotFound, BucketUnauthorized, BucketUnreachable
from tests.slurper.conftest import local_bucket, pipeline_running, s3_source, wait_for
from tests.storage.s3_server import S3Server
from tests.waiting import wait_for as wait_for_condition


def fill(s3: S3Server, count: int = 240) -> tuple[str, dict[str, tuple[bytes, str, dict[str, str]]]]:
    """A source bucket of ``count`` objects: empty ones, nested prefixes, unicode keys, custom
    metadata and content types, sizes up to 200 KB: its name, and what each key holds."""
    rng = random.Random(count)
    bucket = s3.new_bucket()
    client: Any = s3.client()
    objects: dict[str, tuple[bytes, str, dict[str, str]]] = {}
    for i in range(count):
        key = [f"flat-{i:04d}.bin", f"a/b/c/deep-{i}.txt", f"ünïcødé/写真 {i}.jpg", f"sp ace/+plus%{i}"][i % 4]
        data = b"" if i % 17 == 0 else rng.randbytes(rng.choice([1, 100, 4096, 200_000]))
        content_type = ["application/octet-stream", "text/plain", "image/jpeg", "application/x-thing"][i % 4]
        metadata = {"index": str(i), "colour": "blue"} if i % 3 else {}
        client.put_object(Bucket=bucket, Key=key, Body=data, ContentType=content_type, Metadata=metadata)
        objects[key] = (data, content_type, metadata)
    return bucket, objects


def test_job_copies_every_object_byte_identical_with_content_type_and_metadata(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    source, objects = fill(s3_server)
    target = local_bucket(cv, "copied")
    job = cv.slurper.create_job(
        source=s3_source(s3_server, source),
        target={"vendor": "r2", "bucket": "copied", "secret": {"accessKeyId": "x", "secretAccessKey": "y"}},
    )
    queues = {q.queue_name for q in cv.list_queues()}
    assert {LIST_QUEUE, TRANSFER_QUEUE, LIFECYCLE_QUEUE, DEAD_LETTER_QUEUE} <= queues
    with pipeline_running(cv, page_size=50):
        wait_for(job)
    progress = job.progress()
    assert (progress.objects, progress.transferred_objects, progress.skipped_objects, progress.failed_objects) == (
        len(objects),
        len(objects),
        0,
        0,
    )
    assert progress.transferred_bytes == sum(len(d) for d, _, _ in objects.values())
    for key, (data, content_type, metadata) in objects.items():
        got = target.get(key)
        assert hashlib.sha256(got.bytes()).hexdigest() == hashlib.sha256(data).hexdigest(), key
        assert got.info.content_type == content_type
        assert dict(got.info.metadata) == metadata
    assert sorted(o.key for o in target.list()) == sorted(objects)
    types = [entry.log_type for entry in job.logs()]
    assert types[0] == "migrationStart" and types[-1] == "migrationComplete"
    info = job.info()
    assert info.finished_at is not None and info.status == "completed"
    assert "secret" not in str(info) and s3_server.secret_access_key not in str(info)


def test_every_list_and_transfer_message_delivered_twice_counts_each_key_once(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    source, objects = fill(s3_server, 120)
    local_bucket(cv, "twice")
    job = cv.slurper.create_job(source=s3_source(s3_server, source), target={"vendor": "r2", "bucket": "twice"})
    with pipeline_running(cv, page_size=25, copies=2):
        wait_for(job)
    row = job_store(cv).job(cv.deployment.account, job.id)
    assert row.objects == len(objects)
    assert row.transferred + row.skipped + row.failed == row.objects
    assert row.transferred == len(objects)
    assert job_store(cv).key_states(job.id) == {"transferred": len(objects)}
    assert sorted(o.key for o in cv.bucket("twice").list()) == sorted(objects)


def test_skip_existing_leaves_the_targets_objects_and_overwrite_replaces_them(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for key in ("keep", "new"):
        client.put_object(Bucket=bucket, Key=key, Body=b"from the source")
    target = local_bucket(cv, "existing")
    target.put("keep", b"already here!!!")  # the same size as the source's: unchanged
    skipping = cv.slurper.create_job(
        source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "existing"}, overwrite=False
    )
    with pipeline_running(cv):
        wait_for(skipping)
        progress = skipping.progress()
        assert (progress.objects, progress.transferred_objects, progress.skipped_objects) == (2, 1, 1)
        assert target.get("keep").bytes() == b"already here!!!"
        assert target.get("new").bytes() == b"from the source"
        target.put("keep", b"older than the next job")
        overwriting = cv.slurper.create_job(
            source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "existing"}
        )
        wait_for(overwriting)
    # "new" was written by no one after the second job started... but "keep" was older: copied again.
    assert target.get("keep").bytes() == b"from the source"
    assert overwriting.progress().transferred_objects == 2


def test_keys_and_path_prefix_choose_what_is_copied(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for key in ("photos/2020/a.jpg", "photos/2020b.jpg", "photos/2021/c.jpg", "docs/d.txt"):
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    local_bucket(cv, "prefixed")
    local_bucket(cv, "listed")
    by_prefix = cv.slurper.create_job(
        source=s3_source(s3_server, bucket, pathPrefix="photos/2020"), target={"vendor": "r2", "bucket": "prefixed"}
    )
    by_keys = cv.slurper.create_job(
        source=s3_source(s3_server, bucket, keys=["docs/d.txt", "photos/2021/c.jpg", "missing"]),
        target={"vendor": "r2", "bucket": "listed"},
    )
    with pipeline_running(cv):
        wait_for(by_prefix)
        wait_for(by_keys)
    assert sorted(o.key for o in cv.bucket("prefixed").list()) == ["photos/2020/a.jpg", "photos/2020b.jpg"]
    assert sorted(o.key for o in cv.bucket("listed").list()) == ["docs/d.txt", "photos/2021/c.jpg"]
    progress = by_keys.progress()
    assert (progress.objects, progress.transferred_objects, progress.failed_objects) == (3, 2, 1)
    failures = [e for e in by_keys.logs() if e.log_type == "importErrorRetryExhaustion"]
    assert [e.object_key for e in failures] == ["missing"]


def test_an_object_that_always_fails_is_counted_failed_logged_and_dead_lettered(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    # A content type longer than a Conveyor bucket keeps (256 bytes): that object always fails.
    for key in ("a", "b", "z"):
        content_type = "application/" + "x" * 300 if key == "b" else "text/plain"
        client.put_object(Bucket=bucket, Key=key, Body=b"x", ContentType=content_type)
    local_bucket(cv, "clash")
    job = cv.slurper.create_job(source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "clash"})
    with pipeline_running(cv, max_retries=1):
        wait_for(job)
        progress = job.progress()
        assert (progress.objects, progress.transferred_objects, progress.failed_objects) == (3, 2, 1)
        # The key is counted failed before its message is settled (then dead-lettered).
        dead_letters = cv.queue(DEAD_LETTER_QUEUE)
        wait_for_condition(lambda: dead_letters.metrics().backlog_count == 1, 30, "the dead letter", poll=0.05)
    (failure,) = [e for e in job.logs() if e.log_type == "importErrorRetryExhaustion"]
    assert failure.object_key == "b" and "after 2 attempts" in failure.message and "content type" in failure.message
    (dead,) = cv.queue(DEAD_LETTER_QUEUE).peek()
    assert dead.body == {"job": job.id, "key": "b"}
    assert sorted(o.key for o in cv.bucket("clash").list()) == ["a", "z"]


def test_a_target_bucket_of_s3_gets_the_same_objects(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    source, objects = fill(s3_server, 40)
    target_bucket = s3_server.new_bucket()
    job = cv.slurper.create_job(source=s3_source(s3_server, source), target=s3_source(s3_server, target_bucket))
    with pipeline_running(cv):
        wait_for(job)
    client: Any = s3_server.client()
    for key, (data, content_type, metadata) in objects.items():
        got = client.get_object(Bucket=target_bucket, Key=key)
        assert got["Body"].read() == data
        assert got["ContentType"] == content_type and got["Metadata"] == metadata
    assert "secret" not in str(job.info().target)


def test_an_object_above_the_multipart_threshold_reaches_an_s3_target_in_parts_byte_identical(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    # The default threshold (128 MiB) is lowered here, as a worker may (--multipart-threshold).
    threshold = part = MIN_PART_SIZE
    size = 2 * part + part // 2 + 1  # three parts: two whole, one short
    data = random.Random(7).randbytes(size)
    source, target_bucket = s3_server.new_bucket(), s3_server.new_bucket()
    client: Any = s3_server.client()
    client.put_object(Bucket=source, Key="big/one", Body=data, ContentType="video/mp4", Metadata={"take": "2"})
    client.put_object(Bucket=source, Key="big/under", Body=data[:threshold])
    job = cv.slurper.create_job(source=s3_source(s3_server, source), target=s3_source(s3_server, target_bucket))
    with pipeline_running(cv, multipart_threshold=threshold, part_size=part):
        wait_for(job)
    got = client.get_object(Bucket=target_bucket, Key="big/one")
    assert hashlib.sha256(got["Body"].read()).hexdigest() == hashlib.sha256(data).hexdigest()
    assert got["ContentType"] == "video/mp4" and got["Metadata"] == {"take": "2"}
    assert got["ETag"].strip('"').endswith("-3")  # S3's etag of an object uploaded in three parts
    under = client.get_object(Bucket=target_bucket, Key="big/under")
    assert under["Body"].read() == data[:threshold]
    assert under["ETag"].strip('"') == hashlib.md5(data[:threshold]).hexdigest()  # one PUT: its MD5
    assert job.progress().transferred_bytes == size + threshold


def test_an_object_under_the_threshold_is_streamed_in_one_put_without_being_held_in_memory(
    s3_server: S3Server,
) -> None:
    size, chunk = 24 * 1024 * 1024, 256 * 1024  # above the old 16 MiB threshold, in the source's chunks
    bucket = s3_server.new_bucket()
    target = S3Target(
        Endpoint("s3", bucket, s3_server.endpoint, "us-east-1", s3_server.access_key_id, s3_server.secret_access_key)
    )
    md5 = hashlib.md5()
    for i in range(size // chunk):
        md5.update(bytes([i % 251]) * chunk)

    def chunks(count: int) -> Iterator[bytes]:
        for i in range(count):
            yield bytes([i % 251]) * chunk

    try:
        tracemalloc.start()
        try:
            written = target.write(
                "streamed",
                chunks(size // chunk),
                size=size,
                content_type=None,
                metadata={},
                md5=md5.hexdigest(),
                verify=True,
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert written == size
        # A few chunks (and whatever else the process allocated meanwhile), not the object's 24 MiB.
        assert peak < size // 4
        head: Any = s3_server.client()
        assert head.head_object(Bucket=bucket, Key="streamed")["ETag"].strip('"') == md5.hexdigest()
        # A source that ends short, or runs long, fails the PUT: the service stores nothing.
        for count in (size // chunk - 1, size // chunk + 1):
            with pytest.raises(ChecksumMismatch, match="the source said"):
                target.write(f"bad-{count}", chunks(count), size=size, content_type=None, metadata={})
        assert sorted(s3_server.keys(bucket)) == ["streamed"]
    finally:
        target.close()


def test_a_worker_refuses_a_part_size_or_threshold_s3_does_not_allow(cv: conveyor.Conveyor) -> None:
    app = conveyor.App(cv)
    with pytest.raises(InvalidRequest, match="part_size is 1048576; it must be 5242880"):
        conveyor.slurper.add_consumers(app, part_size=1024 * 1024)
    with pytest.raises(InvalidRequest, match="multipart_threshold is -1"):
        conveyor.slurper.add_consumers(app, multipart_threshold=-1)
    with pytest.raises(InvalidRequest, match="5 GiB"):
        conveyor.slurper.add_consumers(app, multipart_threshold=6 * 1024**3)


def test_an_object_stored_gzip_encoded_is_copied_as_stored_not_decoded(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    stored = gzip.compress(b"a line of text\n" * 1000)
    source, target_bucket = s3_server.new_bucket(), s3_server.new_bucket()
    client: Any = s3_server.client()
    client.put_object(Bucket=source, Key="log.txt", Body=stored, ContentType="text/plain", ContentEncoding="gzip")
    job = cv.slurper.create_job(source=s3_source(s3_server, source), target=s3_source(s3_server, target_bucket))
    with pipeline_running(cv):
        wait_for(job)
    assert job.progress().transferred_objects == 1
    got = client.get_object(Bucket=target_bucket, Key="log.txt")
    assert got["Body"].read() == stored


def test_a_terabyte_object_fits_in_s3s_ten_thousand_parts() -> None:
    assert part_size(100 * 1024 * 1024) == PART_SIZE
    for size in (10**12, MAX_PARTS * PART_SIZE + 1, 5 * 1024**4):
        assert -(-size // part_size(size)) <= MAX_PARTS
        assert part_size(size) % (1024 * 1024) == 0


def test_pause_resume_and_abort_change_the_status_and_log_it(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    source, objects = fill(s3_server, 60)
    local_bucket(cv, "paused")
    job = cv.slurper.create_job(source=s3_source(s3_server, source), target={"vendor": "r2", "bucket": "paused"})
    assert job.pause().status == "paused"
    assert job.pause().status == "paused"  # again: nothing changes
    with pipeline_running(cv, page_size=10):
        time.sleep(1.5)
        assert job.progress().objects == 0  # a paused job lists nothing
        assert job.resume().status == "running"
        wait_for(job)
    assert job.progress().transferred_objects == len(objects)
    types = [e.log_type for e in job.logs()]
    assert types == ["migrationStart", "migrationPause", "migrationResume", "migrationComplete"]
    for change in (job.pause, job.resume, job.abort):
        with pytest.raises(InvalidJobState, match="is completed; it cannot"):
            change()
    other = cv.slurper.create_job(source=s3_source(s3_server, source), target={"vendor": "r2", "bucket": "paused"})
    assert cv.slurper.abort_all() == 1
    assert other.info().status == "aborted" and other.info().finished_at is not None
    assert other.logs()[-1].log_type == "migrationAbort"
    assert [j.id for j in cv.slurper.list_jobs()] == [other.id, job.id]
    assert [j.id for j in cv.slurper.list_jobs(limit=1, offset=1)] == [job.id]


def test_bad_sources_and_targets_are_refused_by_name_and_store_nothing(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    bucket = s3_server.new_bucket()
    local_bucket(cv, "dest")
    target = {"vendor": "r2", "bucket": "dest"}
    wrong_key = s3_source(s3_server, bucket)
    wrong_key["secret"] = {"accessKeyId": s3_server.access_key_id, "secretAccessKey": "not-the-secret"}
    with pytest.raises(BucketUnauthorized, match="credentials were refused") as refused:
        cv.slurper.create_job(source=wrong_key, target=target)
    assert "not-the-secret" not in str(refused.value)
    with pytest.raises(BucketNotFound, match="no bucket 'nope'"):
        cv.slurper.create_job(source=s3_source(s3_server, "nope"), target=target)
    with pytest.raises(BucketNotFound):
        cv.slurper.create_job(source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "absent"})
    unreachable = s3_source(s3_server, bucket, endpoint="http://127.0.0.1:9")
    with pytest.raises(BucketUnreachable, match=r"cannot reach http://127\.0\.0\.1:9"):
        cv.slurper.create_job(source=unreachable, target=target)
    # Source and target are checked at once; when both are wrong, the source's failure is the one said.
    with pytest.raises(BucketUnreachable, match=r"cannot reach http://127\.0\.0\.1:9"):
        cv.slurper.create_job(source=unreachable, target={"vendor": "r2", "bucket": "absent"})
    with pytest.raises(EgressRefused, match="loopback"):
        cv.slurper.create_job(source=s3_source(s3_server, bucket), target=target, egress=EgressPolicy())
    with pytest.raises(InvalidJob, match="unknown fields: colour"):
        cv.slurper.create_job(source=s3_source(s3_server, bucket, colour="red"), target=target)
    with pytest.raises(InvalidJob, match=r"source\.vendor must be one of s3, r2"):
        cv.slurper.create_job(source={"vendor": "ftp", "bucket": "b"}, target=target)
    with pytest.raises(InvalidJob, match=r"secret .* is required"):
        cv.slurper.create_job(source={"vendor": "s3", "bucket": "b"}, target=target)
    with pytest.raises(InvalidJob, match="pathPrefix or keys, not both"):
        cv.slurper.create_job(source=s3_source(s3_server, bucket, pathPrefix="a", keys=["a/b"]), target=target)
    with pytest.raises(InvalidJob, match="overwrite must be true or false"):
        cv.slurper.create_job(source=s3_source(s3_server, bucket), target=target, overwrite="yes")  # type: ignore[arg-type]
    assert cv.slurper.list_jobs() == []
    with pytest.raises(JobNotFound):
        cv.slurper.job("00000000-0000-0000-0000-000000000000")


def test_a_job_of_another_account_is_not_found(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    local_bucket(cv, "mine")
    job = cv.slurper.create_job(source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "mine"})
    with conveyor.connect(cv.url, account_id="other") as other:
        with pytest.raises(JobNotFound):
            other.slurper.job(job.id)
        assert other.slurper.list_jobs() == []
        assert other.slurper.abort_all() == 0
    assert job.info().status == "running"


def test_skip_existing_copies_again_what_changed_in_size_or_md5(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for key, data in (("same", b"1234"), ("grown", b"longer now"), ("new", b"n")):
        client.put_object(Bucket=bucket, Key=key, Body=data)
    target = local_bucket(cv, "partly")
    target.put("same", b"abcd")  # same size: a Conveyor bucket's etag is no MD5, so it counts as unchanged
    target.put("grown", b"short")
    s3_target = s3_server.new_bucket()
    client.put_object(Bucket=s3_target, Key="same", Body=b"abcd")  # same size, another MD5: changed
    time.sleep(0.01)
    into_bucket = cv.slurper.create_job(
        source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "partly"}, overwrite=False
    )
    into_s3 = cv.slurper.create_job(
        source=s3_source(s3_server, bucket), target=s3_source(s3_server, s3_target), overwrite=False
    )
    with pipeline_running(cv):
        wait_for(into_bucket)
        wait_for(into_s3)
    assert (into_bucket.progress().transferred_objects, into_bucket.progress().skipped_objects) == (2, 1)
    assert target.get("same").bytes() == b"abcd" and target.get("grown").bytes() == b"longer now"
    assert (into_s3.progress().transferred_objects, into_s3.progress().skipped_objects) == (3, 0)
    assert client.get_object(Bucket=s3_target, Key="same")["Body"].read() == b"1234"


def test_the_throttle_postpones_listing_while_transfers_fail_and_the_job_still_completes(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for i in range(40):  # every one refused by the target (a content type it does not keep)
        client.put_object(Bucket=bucket, Key=f"k{i:02d}", Body=b"x", ContentType="application/" + "x" * 300)
    local_bucket(cv, "refusing")
    job = cv.slurper.create_job(source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "refusing"})
    window = FailureWindow(seconds=1.5, minimum=4, ratio=0.5, delay=1)
    # Forty pages of one: listing does not wait for transfers, so enough pages must remain to be
    # listed when the first failures come in, however fast the listing is (each page is a queue hop;
    # the first four transfers fail a few hops after the first page).
    with pipeline_running(cv, page_size=1, max_retries=0, throttle=window) as app:
        wait_for(job, timeout=180)
    pipeline = app.pipeline  # type: ignore[attr-defined]
    assert pipeline.throttled >= 1
    assert (job.progress().objects, job.progress().failed_objects) == (40, 40)


def test_the_failure_window_spikes_on_failures_and_passes_with_time() -> None:
    now = [0.0]
    window = FailureWindow(seconds=10, minimum=4, ratio=0.5, clock=lambda: now[0])
    for failed in (True, True, True):
        window.record(failed)
    assert not window.spiking()  # too few to judge
    window.record(False)
    assert window.spiking()  # 3 of 4 failed
    for _ in range(4):
        window.record(False)
    assert not window.spiking()  # 3 of 8
    now[0] = 11.0
    assert not window.spiking() and len(window._outcomes) == 0


def test_a_dry_run_says_what_a_job_would_copy_and_skip_and_changes_nothing(
    cv: conveyor.Conveyor, s3_server: S3Server
) -> None:
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for key, data in (("dir/", b""), ("grown", b"longer now"), ("new", b"n"), ("same", b"1234")):
        client.put_object(Bucket=bucket, Key=key, Body=data)
    target = local_bucket(cv, "planned")
    target.put("same", b"abcd")
    target.put("grown", b"short")
    source, into = s3_source(s3_server, bucket), {"vendor": "r2", "bucket": "planned"}
    skipping = [(p.key, p.action, p.reason) for p in cv.slurper.plan(source, into, overwrite=False)]
    assert skipping == [
        ("dir/", "skip", "importSkippedEmptyObject"),
        ("grown", "copy", "changed"),
        ("new", "copy", "new"),
        ("same", "skip", "exists"),
    ]
    overwriting = [(p.key, p.action, p.reason) for p in cv.slurper.plan(source, into)]
    assert [r for _, _, r in overwriting] == ["importSkippedEmptyObject", "overwrite", "new", "overwrite"]
    assert cv.slurper.list_jobs() == []
    assert sorted(o.key for o in target.list()) == ["grown", "same"]
    with pytest.raises(BucketNotFound):
        list(cv.slurper.plan(source, {"vendor": "r2", "bucket": "absent"}))


def test_max_bytes_per_second_paces_a_workers_reads(cv: conveyor.Conveyor, s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for i in range(8):
        client.put_object(Bucket=bucket, Key=f"paced/{i}", Body=bytes([i]) * 65536)
    local_bucket(cv, "paced")
    job = cv.slurper.create_job(source=s3_source(s3_server, bucket), target={"vendor": "r2", "bucket": "paced"})
    with pipeline_running(cv, max_bytes_per_second=200_000):
        started = time.monotonic()
        wait_for(job)
        elapsed = time.monotonic() - started
    assert job.progress().transferred_bytes == 8 * 65536
    assert elapsed >= 8 * 65536 / 200_000 - 0.7, elapsed  # all but the first chunk waited its turn


def test_a_byte_rate_makes_callers_wait_their_turn() -> None:
    rate = ByteRate(1000)
    started = time.monotonic()
    for _ in range(4):
        rate.take(100)
    assert time.monotonic() - started >= 0.29
