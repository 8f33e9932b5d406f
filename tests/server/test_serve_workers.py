"""``conveyor serve --worker APP --handlers MODULE``: a server runs only the code its operator named.

Every test drives a real ``conveyor serve`` process over HTTP; the consumers are registered the way
a tenant registers them (REST), or stored in the catalog the way an older deployment holds them.
"""

from __future__ import annotations

import contextlib
import json
import textwrap
import time
from pathlib import Path

import httpx

import conveyor
from conveyor.client.connect import open_engine
from conveyor.server.accounts import AccountEngine
from tests.waiting import wait_for

from .process import ServeProcess, create_token, serve_process

BASE = "/client/v4/accounts/acc1/queues"

SERVED = textwrap.dedent(
    """
    import json
    from pathlib import Path

    from helper import shout  # imported, not defined here: never a handler

    HERE = Path(__file__).parent

    def handle(batch):
        with (HERE / "handled.jsonl").open("a") as f:
            for m in batch.messages:
                if isinstance(m.body, dict) and m.body.get("poison"):
                    m.retry()
                else:
                    f.write(json.dumps(m.body) + "\\n")

    def _private(batch):
        (HERE / "private-called").touch()
    """
)
HELPER = 'from pathlib import Path\ndef shout(batch):\n    Path(__file__).with_name("helper-called").touch()\n'
CANARY = 'from pathlib import Path\nPath(__file__).with_name("canary-imported").touch()\ndef handle(batch):\n    pass\n'


def _code(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "served.py").write_text(SERVED)
    (code / "helper.py").write_text(HELPER)
    (code / "canary.py").write_text(CANARY)
    return code


def _headers(proc: ServeProcess) -> dict[str, str]:
    return {"authorization": f"Bearer {proc.token}"}


def _queue_with_consumer(proc: ServeProcess, name: str, script: str, dlq: str = "", **settings: int) -> str:
    headers = _headers(proc)
    created = httpx.post(proc.url + BASE, json={"queue_name": name}, headers=headers)
    qid: str = created.json()["result"]["queue_id"]
    body = {"type": "worker", "script_name": script, "settings": {"max_wait_time_ms": 50, **settings}}
    if dlq:
        body["dead_letter_queue"] = dlq
    answer = httpx.post(f"{proc.url}{BASE}/{qid}/consumers", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return qid


def _send(proc: ServeProcess, qid: str, *bodies: object) -> None:
    batch = {"messages": [{"body": b} for b in bodies]}
    assert httpx.post(f"{proc.url}{BASE}/{qid}/messages/batch", json=batch, headers=_headers(proc)).status_code == 200


def _backlog(proc: ServeProcess, qid: str) -> int:
    return int(httpx.get(f"{proc.url}{BASE}/{qid}/metrics", headers=_headers(proc)).json()["result"]["backlog_count"])


def _handled(code: Path) -> list[object]:
    path = code / "handled.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_serve_runs_only_handlers_its_command_line_names_and_never_imports_a_tenants_script(tmp_path: Path) -> None:
    code = _code(tmp_path)
    # No PYTHONPATH: the handler module is found in the current directory, as `conveyor worker` finds it.
    with serve_process(tmp_path / "data", "acc1", "--handlers", "served", cwd=code) as proc:
        good = _queue_with_consumer(proc, "good", "served:handle")
        hostile = {
            "canary": "canary:handle",  # importable, but not named by the operator
            "imported": "served:shout",  # a name the handler module merely imports
            "private": "served:_private",
            "system": "os:system",
            "browser": "antigravity:x",
            "exits": "unittest.__main__:x",
        }
        parked = {name: _queue_with_consumer(proc, name, script) for name, script in hostile.items()}
        for qid in parked.values():
            _send(proc, qid, "ls")
        _send(proc, good, {"n": 1}, {"n": 2})
        wait_for(lambda: _backlog(proc, good) == 0)
        time.sleep(6)  # past another refresh: a consumer with no worker is reported once, not every time
        assert sorted(_handled(code), key=str) == [{"n": 1}, {"n": 2}]
        assert all(_backlog(proc, qid) == 1 for qid in parked.values())
        assert proc.process.poll() is None
        log = proc.output()
    assert not (code / "canary-imported").exists()
    assert not (code / "helper-called").exists() and not (code / "private-called").exists()
    for name, script in hostile.items():
        assert log.count(f"queue acc1/{name}: push consumer {script!r}: no worker for this script") == 1, log


def test_consumer_with_a_dead_letter_queue_runs_under_serve(tmp_path: Path) -> None:
    code = _code(tmp_path)
    with serve_process(tmp_path / "data", "acc1", "--handlers", "served", cwd=code) as proc:
        qid = _queue_with_consumer(proc, "ab", "served:handle", "ab-dlq", max_retries=0)
        _send(proc, qid, {"n": 1}, {"poison": True})
        wait_for(lambda: _backlog(proc, qid) == 0)
        found = httpx.get(proc.url + BASE, params={"name": "ab-dlq"}, headers=_headers(proc)).json()["result"]
        assert len(found) == 1 and _backlog(proc, found[0]["queue_id"]) == 1
    assert _handled(code) == [{"n": 1}]
    assert "11003" not in proc.output()


def test_bad_stored_registrations_affect_only_their_own_queue_and_never_the_servers_start(tmp_path: Path) -> None:
    code = _code(tmp_path)
    data = tmp_path / "data"
    create_token(data, "acc1")
    # Rows as an older server stored them, unchecked: they are data, whatever they say.
    with contextlib.closing(open_engine(f"sqlite://{data}")) as raw:
        engine = AccountEngine(raw, "acc1")
        bad = {
            "dotted": (".x:y", conveyor.ConsumerSettings(), ""),
            "exits": ("unittest.__main__:x", conveyor.ConsumerSettings(), ""),
            "bad-dlq": ("served:handle", conveyor.ConsumerSettings(), "Not A Queue!"),
            "bad-settings": ("served:handle", conveyor.ConsumerSettings(batch_size=5000), ""),
        }
        for name, (script, settings, dlq) in bad.items():
            queue = engine.create_queue(name, conveyor.QueueSettings())
            engine.add_consumer(queue.queue_id, "worker", script, settings, dlq)
    for restart in range(2):  # the first start and a restart both serve, and the good consumer runs
        with serve_process(data, "acc1", "--handlers", "served", cwd=code) as proc:
            good = _queue_with_consumer(proc, f"good{restart}", "served:handle")
            _send(proc, good, {"restart": restart})
            wait_for(lambda: _backlog(proc, good) == 0)  # noqa: B023 - called before the loop moves on
            assert proc.process.poll() is None
            log = proc.output()
        for name in ("bad-dlq", "bad-settings"):
            assert log.count(f"queue acc1/{name}: push consumer 'served:handle': cannot start") == 1, log
    assert _handled(code) == [{"restart": 0}, {"restart": 1}]


def test_a_handler_module_that_cannot_load_is_reported_once_with_its_reason_and_loaded_when_it_can(
    tmp_path: Path,
) -> None:
    code = _code(tmp_path)
    (code / "broken.py").write_text("raise RuntimeError('the database is down')\n")
    args = ("--handlers", "later", "--handlers", "broken")
    with serve_process(tmp_path / "data", "acc1", *args, cwd=code) as proc:
        qid = _queue_with_consumer(proc, "later", "later:handle")
        _send(proc, qid, "hello")
        time.sleep(6)  # two tries
        log = proc.output()
        assert log.count("--handlers later: cannot load: cannot import module 'later': No module named 'later'") == 1
        broken = "--handlers broken: cannot load: importing it raised RuntimeError('the database is down')"
        assert log.count(broken) == 1
        assert _backlog(proc, qid) == 1
        (code / "later.py").write_text(
            "from pathlib import Path\n"
            "def handle(batch):\n"
            "    Path(__file__).with_name('later-handled').write_text(batch.messages[0].body)\n"
        )
        wait_for(lambda: _backlog(proc, qid) == 0)
        assert "--handlers later: loaded" in proc.output()
    assert (code / "later-handled").read_text() == "hello"


def test_serve_without_handlers_starts_and_says_none_are_loaded(tmp_path: Path) -> None:
    with serve_process(tmp_path / "data", "acc1") as proc:
        assert httpx.get(proc.url + "/healthz").status_code == 200
    assert "no handlers loaded" in proc.output()


def test_serve_worker_runs_the_operators_app(tmp_path: Path) -> None:
    code = _code(tmp_path)
    (code / "myapp.py").write_text(
        "import conveyor\n"
        "from served import handle\n"
        "app = conveyor.App()\n"
        "app.consumer('own', max_batch_timeout=0.05)(handle)\n"
    )
    data = tmp_path / "data"
    with conveyor.connect(f"sqlite://{data}") as cv:
        cv.create_queue("own").send({"own": True})
    with serve_process(data, "acc1", "--worker", "myapp:app", cwd=code) as proc:
        wait_for(lambda: _handled(code) == [{"own": True}])
        # Its handler also serves the API's consumers that name it.
        qid = _queue_with_consumer(proc, "api", "served:handle")
        _send(proc, qid, {"api": True})
        wait_for(lambda: _backlog(proc, qid) == 0)
        # The registry names both runs as each account knows them: the app's (account local) and the API's.
        with (
            conveyor.connect(f"sqlite://{data}") as local,
            conveyor.connect(f"sqlite://{data}", account_id="acc1") as acc,
        ):
            wait_for(lambda: _runs(local) == [("own", "served:handle")] and _runs(acc) == [("api", "served:handle")])
    assert _handled(code) == [{"own": True}, {"api": True}]


def _runs(cv: conveyor.Conveyor) -> list[tuple[str, str]]:
    return [(run.queue_name, run.script_name) for entry in cv.engine.list_workers() for run in entry.runs]
