"""A queue with a corrupt shard stays manageable: listing shows it with its error (embedded, the CLI
and REST) instead of failing, deleting it is refused unless forced, and a forced delete removes it
and keeps the damaged files aside, saying where; the other queues are untouched throughout."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
from click.testing import CliRunner, Result

import conveyor
from conveyor.cli.main import cli
from conveyor.server.testing import running_server

from .seeded_storage import MESSAGES_PER_QUEUE, SeededDirectory, stored_numbers


def garble_header(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(os.urandom(100) + data[100:])


def words(text: str) -> str:
    """``text`` with its line breaks (rich wraps at the terminal's width) as spaces."""
    return " ".join(text.split())


def stored_files(seeded: SeededDirectory) -> dict[Path, bytes]:
    """The catalog and shard files (the snapshot is republished by any open)."""
    return {p: data for p, data in seeded.files().items() if "snapshot" not in p.parts}


def conveyor_cli(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_list_shows_the_damaged_queue_with_its_error(seeded: SeededDirectory) -> None:
    garble_header(seeded.shard(seeded.victim_id))
    with conveyor.connect(seeded.url) as cv:
        listed = {q.queue_name: q.storage_error for q in cv.list_queues()}
    assert listed["kept"] is None
    error = listed["victim"]
    assert error is not None and error.startswith(f"shards/{seeded.victim_id}.0.db is corrupt or not a database")
    assert str(seeded.data_dir) not in error, "the deployment's absolute path is not part of the listing"


def test_cli_queues_list_shows_the_damaged_queue_in_the_table_and_json(seeded: SeededDirectory) -> None:
    garble_header(seeded.shard(seeded.victim_id))

    table = conveyor_cli("--url", seeded.url, "queues", "list")
    assert table.exit_code == 0, table.output
    assert "damaged" in words(table.stdout) and f"shards/{seeded.victim_id}.0.db is corrupt" in words(table.stdout)
    assert "conveyor doctor" in words(table.stdout)

    listed = conveyor_cli("--url", seeded.url, "queues", "list", "--json")
    assert listed.exit_code == 0, listed.output
    errors = {q["queue_name"]: q.get("storage_error") for q in json.loads(listed.stdout)}
    assert errors["kept"] is None and "is corrupt or not a database" in errors["victim"]


def test_delete_of_a_damaged_queue_is_refused_without_force_and_changes_nothing(seeded: SeededDirectory) -> None:
    garble_header(seeded.shard(seeded.victim_id))
    before = stored_files(seeded)

    refused = conveyor_cli("--url", seeded.url, "queues", "delete", "victim", "--yes")
    assert refused.exit_code == 1
    assert "has damaged storage" in refused.stderr and "conveyor queues delete --force victim" in refused.stderr

    assert stored_files(seeded) == before


def test_forced_delete_removes_the_damaged_queue_and_keeps_its_files_aside(seeded: SeededDirectory) -> None:
    shard = seeded.shard(seeded.victim_id)
    garble_header(shard)
    damaged = shard.read_bytes()

    deleted = conveyor_cli("--url", seeded.url, "queues", "delete", "victim", "--force", "--yes", "--json")
    assert deleted.exit_code == 0, deleted.output
    (kept_aside,) = json.loads(deleted.stdout)["kept_aside"]

    assert kept_aside.startswith("damaged/") and kept_aside.endswith(f"-{seeded.victim_id}.0.db")
    assert (seeded.data_dir / kept_aside).read_bytes() == damaged
    assert not shard.exists()
    with conveyor.connect(seeded.url) as cv:
        assert [q.queue_name for q in cv.list_queues()] == ["kept"]
        assert stored_numbers(cv, "kept") == list(range(MESSAGES_PER_QUEUE))
        cv.create_queue("victim").send({"n": 1})  # the name is free again, on a new shard file


def test_forced_delete_asks_for_confirmation_and_says_where_the_files_went(seeded: SeededDirectory) -> None:
    garble_header(seeded.shard(seeded.victim_id))

    aborted = conveyor_cli("--url", seeded.url, "queues", "delete", "victim", "--force", input="kept\n")
    assert aborted.exit_code == 1 and "delete aborted" in aborted.stderr
    assert seeded.shard(seeded.victim_id).exists()

    deleted = conveyor_cli("--url", seeded.url, "queues", "delete", "victim", "--force", input="victim\n")
    assert deleted.exit_code == 0, deleted.output
    assert "has damaged storage" in deleted.stderr
    assert "its damaged files are kept in damaged/" in words(deleted.stdout)


def test_damaged_queue_over_http_lists_and_force_deletes(data_dir: Path) -> None:
    url = f"sqlite://{data_dir}"
    with running_server(url) as server, server.connect("acc1") as cv:
        for name in ("kept", "victim"):
            cv.create_queue(name).send_batch([{"body": n} for n in range(10)])
        victim_id = cv.queue("victim").id
    garble_header(data_dir / "shards" / f"{victim_id}.0.db")

    with running_server(url) as server:
        secret, _ = server.tokens.create("acc1")
        answer = httpx.get(
            f"{server.url}/client/v4/accounts/acc1/queues", headers={"Authorization": f"Bearer {secret}"}
        )
        assert answer.status_code == 200, answer.text
        listed = {q["queue_name"]: q for q in answer.json()["result"]}
        assert "storage_error" not in listed["kept"]
        assert listed["victim"]["storage_error"].startswith(f"shards/{victim_id}.0.db is corrupt")

        remote = ("--url", server.url, "--token", secret, "--account-id", "acc1")
        table = conveyor_cli(*remote, "queues", "list")
        assert table.exit_code == 0, table.output
        assert "damaged" in words(table.stdout)

        deleted = conveyor_cli(*remote, "queues", "delete", "victim", "--force", "--yes")
        assert deleted.exit_code == 0, deleted.output
        assert "its damaged files are kept in damaged/" in words(deleted.stdout)
        with server.connect("acc1") as cv:
            assert [q.queue_name for q in cv.list_queues()] == ["kept"]
            assert cv.queue("kept").metrics().backlog_count == 10
    assert list((data_dir / "damaged").glob(f"*-{victim_id}.0.db"))
