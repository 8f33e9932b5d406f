"""Super Slurper through Cloudflare's own SDK (``client.r2.super_slurper.*``) against a real server on
127.0.0.1: a job from a moto bucket into a bucket of the account, run by a worker of the pipeline."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudflare
import httpx
import pytest
from click.testing import CliRunner
from cloudflare import Cloudflare

import conveyor
from conveyor.cli.main import cli
from conveyor.egress import ENVIRONMENT_VARIABLE
from conveyor.server.testing import RunningServer, running_server
from tests.slurper.conftest import pipeline_running
from tests.storage.s3_server import S3Server

ACCOUNT = "acc1"


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RunningServer, conveyor.Conveyor]]:
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "127.0.0.1")  # the test's moto server is on loopback
    with (
        running_server(f"sqlite://{tmp_path / 'data'}") as server,
        conveyor.connect(f"sqlite://{tmp_path / 'data'}", account_id=ACCOUNT) as worker_side,
    ):
        yield server, worker_side


def sdk(server: RunningServer, account: str = ACCOUNT) -> Cloudflare:
    return Cloudflare(api_token=server.tokens.create(account)[0], base_url=server.url + "/client/v4", max_retries=0)


def source_of(s3: S3Server, bucket: str, **extra: Any) -> dict[str, Any]:
    return {
        "vendor": "s3",
        "bucket": bucket,
        "endpoint": s3.endpoint,
        "region": "us-east-1",
        "secret": {"access_key_id": s3.access_key_id, "secret_access_key": s3.secret_access_key},
        **extra,
    }


def test_the_sdk_creates_a_job_follows_its_progress_and_reads_its_logs(
    served: tuple[RunningServer, conveyor.Conveyor], s3_server: S3Server
) -> None:
    server, cv = served
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for i in range(30):
        client.put_object(Bucket=bucket, Key=f"k/{i:02d}", Body=bytes([i]) * i, ContentType="text/plain")
    cv.create_bucket("dest")
    cf = sdk(server)
    jobs = cf.r2.super_slurper.jobs
    target = {"vendor": "r2", "bucket": "dest", "secret": {"access_key_id": "unused", "secret_access_key": "unused"}}
    created = jobs.create(account_id=ACCOUNT, source=source_of(s3_server, bucket), target=target, overwrite=True)
    assert created is not None and created.id
    with pipeline_running(cv, page_size=10):
        deadline = time.monotonic() + 60
        while (progress := jobs.progress(created.id, account_id=ACCOUNT)).status != "completed":
            assert time.monotonic() < deadline, progress
            time.sleep(0.2)
    assert (progress.objects, progress.transferred_objects, progress.skipped_objects, progress.failed_objects) == (
        30,
        30,
        0,
        0,
    )
    got = jobs.get(created.id, account_id=ACCOUNT)
    assert got is not None and got.status == "completed" and got.overwrite is True and got.finished_at
    assert got.source is not None and got.source.bucket == bucket and got.source.vendor == "s3"
    assert got.target is not None and got.target.bucket == "dest" and got.target.jurisdiction == "default"
    raw = httpx.get(
        f"{server.url}/client/v4/accounts/{ACCOUNT}/slurper/jobs/{created.id}",
        headers={"authorization": f"Bearer {server.tokens.create(ACCOUNT)[0]}"},
    ).text
    assert s3_server.secret_access_key not in raw and "secret" not in raw
    assert "createdAt" in raw and "finishedAt" in raw and "pathPrefix" in raw
    logs = list(jobs.logs.list(created.id, account_id=ACCOUNT))
    assert [entry.log_type for entry in logs] == ["migrationStart", "migrationComplete"]
    assert [entry.log_type for entry in jobs.logs.list(created.id, account_id=ACCOUNT, limit=1, offset=1)] == [
        "migrationComplete"
    ]
    assert [j.id for j in jobs.list(account_id=ACCOUNT)] == [created.id]
    assert cv.bucket("dest").get("k/29").bytes() == bytes([29]) * 29


def test_pause_resume_and_abort_answer_a_string_and_change_the_status(
    served: tuple[RunningServer, conveyor.Conveyor], s3_server: S3Server
) -> None:
    server, cv = served
    bucket = s3_server.new_bucket()
    cv.create_bucket("dest")
    jobs = sdk(server).r2.super_slurper.jobs
    job_id = jobs.create(
        account_id=ACCOUNT,
        source=source_of(s3_server, bucket),
        target={"vendor": "r2", "bucket": "dest", "secret": {"access_key_id": "a", "secret_access_key": "b"}},
    ).id  # type: ignore[union-attr]
    paused = jobs.pause(job_id, account_id=ACCOUNT)
    assert isinstance(paused, str) and "paused" in paused
    assert jobs.get(job_id, account_id=ACCOUNT).status == "paused"  # type: ignore[union-attr]
    assert "resumed" in str(jobs.resume(job_id, account_id=ACCOUNT))
    assert "aborted" in str(jobs.abort(job_id, account_id=ACCOUNT))
    assert jobs.get(job_id, account_id=ACCOUNT).status == "aborted"  # type: ignore[union-attr]
    with pytest.raises(cloudflare.ConflictError):
        jobs.resume(job_id, account_id=ACCOUNT)
    second = jobs.create(
        account_id=ACCOUNT,
        source=source_of(s3_server, bucket),
        target={"vendor": "r2", "bucket": "dest", "secret": {"access_key_id": "a", "secret_access_key": "b"}},
    )
    assert jobs.abort_all(account_id=ACCOUNT) == "1 jobs aborted"
    assert jobs.get(second.id, account_id=ACCOUNT).status == "aborted"  # type: ignore[union-attr]
    with pytest.raises(cloudflare.NotFoundError):
        sdk(server, "other").r2.super_slurper.jobs.get(job_id, account_id="other")


def test_prechecks_and_bad_jobs_answer_clearly_without_echoing_secrets(
    served: tuple[RunningServer, conveyor.Conveyor], s3_server: S3Server
) -> None:
    server, cv = served
    bucket = s3_server.new_bucket()
    cv.create_bucket("dest")
    cf = sdk(server)
    precheck = cf.r2.super_slurper.connectivity_precheck
    ok = precheck.source(account_id=ACCOUNT, **source_of(s3_server, bucket))  # type: ignore[arg-type]
    assert ok is not None and ok.connectivity_status == "success"
    wrong = source_of(s3_server, bucket)
    wrong["secret"] = {"access_key_id": s3_server.access_key_id, "secret_access_key": "wrong-secret-value"}
    refused = precheck.source(account_id=ACCOUNT, **wrong)  # type: ignore[arg-type]
    assert refused is not None and refused.connectivity_status == "error"
    target = precheck.target(
        account_id=ACCOUNT, bucket="dest", secret={"access_key_id": "a", "secret_access_key": "b"}, vendor="r2"
    )
    assert target is not None and target.connectivity_status == "success"
    missing = precheck.target(
        account_id=ACCOUNT, bucket="absent", secret={"access_key_id": "a", "secret_access_key": "b"}, vendor="r2"
    )
    assert missing is not None and missing.connectivity_status == "error"
    with pytest.raises(cloudflare.AuthenticationError) as unauthorized:
        cf.r2.super_slurper.jobs.create(
            account_id=ACCOUNT,
            source=wrong,
            target={"vendor": "r2", "bucket": "dest", "secret": {"access_key_id": "a", "secret_access_key": "b"}},
        )  # type: ignore[arg-type]
    assert "wrong-secret-value" not in str(unauthorized.value) and "credentials were refused" in str(unauthorized.value)
    headers = {"authorization": f"Bearer {server.tokens.create(ACCOUNT)[0]}"}
    url = f"{server.url}/client/v4/accounts/{ACCOUNT}/slurper/jobs"
    unknown = httpx.post(
        url,
        headers=headers,
        json={
            "source": {"vendor": "s3", "bucket": bucket, "endpoint": s3_server.endpoint, "colour": "red"},
            "target": {"vendor": "r2", "bucket": "dest"},
        },
    )
    assert unknown.status_code == 400 and "colour" in unknown.text
    gcs = httpx.post(
        url,
        headers=headers,
        json={"source": {"vendor": "gcs", "bucket": "b"}, "target": {"vendor": "r2", "bucket": "dest"}},
    )
    assert gcs.status_code == 400 and "not supported yet" in gcs.text
    assert httpx.get(url + "?limit=0", headers=headers).status_code == 400
    assert cf.r2.super_slurper.jobs.list(account_id=ACCOUNT).result == []


def test_a_client_of_the_server_and_the_cli_over_http_run_the_same_jobs(
    served: tuple[RunningServer, conveyor.Conveyor], s3_server: S3Server
) -> None:
    server, cv = served
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for i in range(9):
        client.put_object(Bucket=bucket, Key=f"h/{i}", Body=b"y" * (i + 1))
    cv.create_bucket("dest")
    token = server.tokens.create(ACCOUNT)[0]
    with conveyor.connect(server.url, token=token, account_id=ACCOUNT) as remote:
        job = remote.slurper.create_job(source_of(s3_server, bucket), {"vendor": "r2", "bucket": "dest"})
        with pipeline_running(cv, page_size=4):
            deadline = time.monotonic() + 60
            while (progress := job.progress()).status != "completed":
                assert time.monotonic() < deadline, progress
                time.sleep(0.1)
        assert (progress.objects, progress.transferred_objects, progress.transferred_bytes) == (9, 9, 45)
        assert progress.listing_finished and progress.listed_bytes == 45
        assert [j.id for j in remote.slurper.list_jobs()] == [job.id]
        assert [e.log_type for e in remote.slurper.job(job.id).logs()] == ["migrationStart", "migrationComplete"]
        assert [e.log_type for e in job.logs(log_type="migrationComplete")] == ["migrationComplete"]
        with pytest.raises(conveyor.errors.InvalidRequest, match="log_type is 'sideways'; it must be one of"):
            job.logs(log_type="sideways")
        over_http = ["--url", server.url, "--token", token, "--account", ACCOUNT, "--json"]
        typed = CliRunner().invoke(cli, [*over_http, "slurper", "jobs", "logs", job.id, "--type", "migrationStart"])
        assert typed.exit_code == 0, typed.output
        assert [e["logType"] for e in json.loads(typed.stdout)] == ["migrationStart"]
        with pytest.raises(conveyor.slurper.InvalidJobState):
            job.pause()
        with pytest.raises(conveyor.slurper.JobNotFound):
            remote.slurper.job("no-such-job")
        with pytest.raises(conveyor.slurper.InvalidJob, match=r"unknown field 'colour'"):
            remote.slurper.create_job(
                {**source_of(s3_server, bucket), "colour": "red"}, {"vendor": "r2", "bucket": "dest"}
            )
        second = remote.slurper.create_job(source_of(s3_server, bucket), {"vendor": "r2", "bucket": "dest"})
        assert second.pause().status == "paused"
        result = CliRunner().invoke(
            cli, ["--url", server.url, "--token", token, "--account", ACCOUNT, "slurper", "jobs", "list", "--json"]
        )
        assert result.exit_code == 0, result.output
        assert [j["status"] for j in json.loads(result.stdout)] == ["paused", "completed"]
        assert remote.slurper.abort_all() == 1
