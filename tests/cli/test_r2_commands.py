"""``conveyor r2 ...``: buckets, notification and lifecycle rules, objects, with --json."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.support import Cli


def cli_of(tmp_path: Path) -> Cli:
    return Cli(f"sqlite://{tmp_path / 'data'}")


def test_buckets_are_created_listed_and_deleted(tmp_path: Path) -> None:
    run = cli_of(tmp_path)
    assert "Created bucket cdn" in run.ok("r2", "bucket", "create", "cdn").output
    listed = json.loads(run.ok("r2", "bucket", "list", "--json").output)
    assert [(b["name"], b["location"]) for b in listed] == [("cdn", "local")]
    run.ok("r2", "bucket", "delete", "cdn")
    assert json.loads(run.ok("r2", "bucket", "list", "--json").output) == []


def test_objects_are_put_got_listed_and_deleted(tmp_path: Path) -> None:
    run = cli_of(tmp_path)
    run.ok("r2", "bucket", "create", "cdn")
    source = tmp_path / "a.js"
    source.write_bytes(b"console.log(1)")
    put = json.loads(
        run.ok(
            "r2",
            "object",
            "put",
            "cdn/js/a.js",
            "--file",
            str(source),
            "--content-type",
            "application/javascript",
            "--metadata",
            "sri=x",
            "--json",
        ).output
    )
    assert (put["key"], put["size"], put["content_type"], put["metadata"]) == (
        "js/a.js",
        14,
        "application/javascript",
        {"sri": "x"},
    )
    assert run.ok("r2", "object", "get", "cdn/js/a.js").stdout_bytes == b"console.log(1)"
    target = tmp_path / "out.js"
    run.ok("r2", "object", "get", "cdn/js/a.js", "--file", str(target))
    assert target.read_bytes() == b"console.log(1)"
    run.ok("r2", "object", "put", "cdn/piped.txt", "--pipe", input=b"from stdin")
    keys = [o["key"] for o in json.loads(run.ok("r2", "object", "list", "cdn", "--json").output)]
    assert keys == ["js/a.js", "piped.txt"]
    assert json.loads(run.ok("r2", "object", "delete", "cdn/js/a.js", "--json").output)["existed"] is True


def test_notification_and_lifecycle_rules(tmp_path: Path) -> None:
    run = cli_of(tmp_path)
    run.ok("queues", "create", "written")
    run.ok("r2", "bucket", "create", "cdn")
    rule = json.loads(
        run.ok(
            "r2",
            "bucket",
            "notification",
            "create",
            "cdn",
            "--event-type",
            "object-create",
            "--queue",
            "written",
            "--suffix",
            ".js",
            "--json",
        ).output
    )
    assert rule["actions"] == ["PutObject", "CompleteMultipartUpload", "CopyObject"]
    listed = json.loads(run.ok("r2", "bucket", "notification", "list", "cdn", "--json").output)
    assert [r["rule_id"] for r in listed] == [rule["rule_id"]]
    run.ok("r2", "bucket", "notification", "delete", "cdn", "--queue", "written")
    assert json.loads(run.ok("r2", "bucket", "notification", "list", "cdn", "--json").output) == []
    life = json.loads(
        run.ok("r2", "bucket", "lifecycle", "add", "cdn", "--expire-days", "7", "--prefix", "tmp/", "--json").output
    )
    assert (life["prefix"], life["max_age_seconds"]) == ("tmp/", 7 * 86400)
    run.ok("r2", "bucket", "lifecycle", "remove", "cdn", "--id", life["rule_id"])
    assert json.loads(run.ok("r2", "bucket", "lifecycle", "list", "cdn", "--json").output) == []


def test_refusals_are_errors_that_say_why(tmp_path: Path) -> None:
    run = cli_of(tmp_path)
    missing = run("r2", "object", "get", "nope/key")
    assert missing.exit_code == 1 and "nope" in missing.output
    bad = run("r2", "object", "put", "no-key-given", "--pipe", input=b"x")
    assert bad.exit_code != 0 and "BUCKET/KEY" in bad.output
    run.ok("r2", "bucket", "create", "cdn")
    both = run("r2", "bucket", "lifecycle", "add", "cdn")
    assert both.exit_code != 0 and "--expire-days" in both.output
