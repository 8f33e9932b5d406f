"""``conveyor kv namespace ...`` and ``conveyor kv key ...``: effects, --json shapes, refusals."""

from __future__ import annotations

from pathlib import Path

import conveyor

from .support import Cli


def test_namespace_create_list_delete(run: Cli, client: conveyor.Conveyor) -> None:
    assert "Created KV namespace cdn-meta" in run.ok("kv", "namespace", "create", "cdn-meta").stdout
    created = run.json("kv", "namespace", "create", "other")
    assert created["title"] == "other" and len(created["id"]) == 32
    assert [n["title"] for n in run.json("kv", "namespace", "list")] == ["cdn-meta", "other"]
    assert "cdn-meta" in run.ok("kv", "namespace", "list").stdout
    run.ok("kv", "namespace", "delete", "--namespace-id", created["id"])
    run.ok("kv", "namespace", "delete", "--namespace", "cdn-meta")
    assert client.list_kv_namespaces() == []


def test_key_put_get_list_delete(run: Cli, client: conveyor.Conveyor, tmp_path: Path) -> None:
    run.ok("kv", "namespace", "create", "cdn-meta")
    run.ok(
        "kv", "key", "put", "jquery", "3.7.1", "--namespace", "cdn-meta", "--metadata", '{"sri": "x"}', "--ttl", "3600"
    )
    logo = tmp_path / "logo.png"
    logo.write_bytes(b"\x89PNG\x00")
    run.ok("kv", "key", "put", "logo", "--path", str(logo), "--namespace", "cdn-meta")
    kv = client.kv("cdn-meta")
    assert kv.get_with_metadata("jquery") == ("3.7.1", {"sri": "x"})
    assert kv.get("logo") == b"\x89PNG\x00"
    assert run.ok("kv", "key", "get", "jquery", "--namespace", "cdn-meta").stdout == "3.7.1"
    assert run.ok("kv", "key", "get", "logo", "--namespace", "cdn-meta").stdout_bytes == b"\x89PNG\x00"
    assert run.ok("kv", "key", "get", "jquery", "--metadata", "--namespace", "cdn-meta").stdout == '{"sri": "x"}\n'
    listed = run.json("kv", "key", "list", "--namespace", "cdn-meta", "--prefix", "j")
    assert (
        [k["name"] for k in listed] == ["jquery"] and listed[0]["metadata"] == {"sri": "x"} and listed[0]["expiration"]
    )
    run.ok("kv", "key", "delete", "jquery", "--namespace-id", kv.id)
    assert kv.get("jquery") is None


def test_refusals_are_one_line_with_their_codes(run: Cli, client: conveyor.Conveyor) -> None:
    run.fails("kv", "key", "list", "--namespace", "nope", code=10013)
    run.ok("kv", "namespace", "create", "n")
    run.fails("kv", "namespace", "create", "n", code=10014)
    run.fails("kv", "key", "put", "k", "v", "--namespace", "n", "--ttl", "10", code=10033)
    run.fails("kv", "key", "put", "k" * 513, "v", "--namespace", "n", code=10020)
    assert list(client.kv("n").list()) == []
    missing = run("kv", "key", "get", "nope", "--namespace", "n")
    assert missing.exit_code == 1 and "not found" in missing.stderr
    both = run("kv", "key", "put", "k", "--namespace", "n")
    assert both.exit_code == 1 and "VALUE" in both.stderr
