"""``conveyor slurper jobs ...`` in-process against a SQLite deployment, with a moto source and the
pipeline running in this process: create from a file (the secret stays out of argv), follow,
read, control, and every refusal one ``error:`` line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import conveyor
from tests.cli.support import Cli
from tests.slurper.conftest import pipeline_running, s3_source
from tests.storage.s3_server import S3Server


def test_the_cli_creates_follows_and_controls_a_job(tmp_path: Path, s3_server: S3Server) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    run = Cli(url)
    bucket = s3_server.new_bucket()
    client: Any = s3_server.client()
    for i in range(12):
        client.put_object(Bucket=bucket, Key=f"dir/{i}", Body=b"x" * i)
    with conveyor.connect(url) as cv:
        cv.create_bucket("dest")
        source = tmp_path / "source.json"
        source.write_text(json.dumps(s3_source(s3_server, bucket)))
        planned = run.json(
            "slurper",
            "jobs",
            "create",
            "--source",
            f"@{source}",
            "--target",
            '{"vendor": "r2", "bucket": "dest"}',
            "--dry-run",
        )
        assert (planned["copy"], planned["skip"], planned["bytes"]) == (12, 0, sum(range(12)))
        assert (
            "would copy 12 objects"
            in run.ok(
                "slurper",
                "jobs",
                "create",
                "--source",
                f"@{source}",
                "--target",
                '{"vendor": "r2", "bucket": "dest"}',
                "--dry-run",
            ).stdout
        )
        assert run.json("slurper", "jobs", "list") == []
        created = run.json(
            "slurper", "jobs", "create", "--source", f"@{source}", "--target", '{"vendor": "r2", "bucket": "dest"}'
        )
        job_id = created["id"]
        listed = run.json("slurper", "jobs", "list")
        assert [j["id"] for j in listed] == [job_id] and listed[0]["status"] == "running"
        shown = run.ok("slurper", "jobs", "get", job_id, "--json").stdout
        assert s3_server.secret_access_key not in shown and json.loads(shown)["source"]["bucket"] == bucket
        with pipeline_running(cv, page_size=5):
            lines = run.ok("slurper", "jobs", "progress", job_id, "--watch", "--json").stdout.splitlines()
        final = json.loads(lines[-1])
        assert final["status"] == "completed"
        assert (final["objects"], final["transferredObjects"], final["skippedObjects"], final["failedObjects"]) == (
            12,
            12,
            0,
            0,
        )
        assert all(json.loads(line)["id"] == job_id for line in lines)
        summary = run.ok("slurper", "jobs", "progress", job_id).stdout
        assert "completed" in summary and "12 transferred" in summary
        logs = run.json("slurper", "jobs", "logs", job_id)
        assert [e["logType"] for e in logs] == ["migrationStart", "migrationComplete"]
        assert "migrationComplete" in run.ok("slurper", "jobs", "logs", job_id).stdout
        second = run.json(
            "slurper",
            "jobs",
            "create",
            "--source",
            f"@{source}",
            "--target",
            '{"vendor": "r2", "bucket": "dest"}',
            "--skip-existing",
        )["id"]
        assert run.json("slurper", "jobs", "pause", second)["status"] == "paused"
        assert run.json("slurper", "jobs", "resume", second)["status"] == "running"
        assert run.json("slurper", "jobs", "abort-all") == {"aborted": 1}
        assert "is aborted" in run.ok("slurper", "jobs", "abort", second).stdout
        run.fails("slurper", "jobs", "resume", second, code=16003)
        run.fails("slurper", "jobs", "get", "no-such-job", code=16002)
        run.fails(
            "slurper",
            "jobs",
            "create",
            "--source",
            '{"vendor": "s3"}',
            "--target",
            '{"vendor": "r2", "bucket": "dest"}',
            code=16001,
        )
        bad = run("slurper", "jobs", "create", "--source", "{not json", "--target", "{}")
        assert bad.exit_code == 1 and bad.stderr.startswith("error: --source is not valid JSON")


def test_the_worker_refuses_a_part_size_or_threshold_s3_does_not_allow(tmp_path: Path) -> None:
    run = Cli(f"sqlite://{tmp_path / 'data'}")
    for option, value in (("--part-size", "1048576"), ("--multipart-threshold", str(6 * 1024**3))):
        refused = run("slurper", "worker", option, value)
        assert refused.exit_code == 2 and option in refused.stderr and "is not in the range" in refused.stderr
