"""Every route declares who may call it (server/access.py), and a real server on 127.0.0.1 holds each
kind of token to that: read-only tokens off every write route, queue-scoped tokens off account-wide
routes and off other queues, operator tokens off every account route; nothing changes when refused."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.routing import Route

import conveyor
from conveyor.server.access import PUBLIC, DeclaredRoute, Scope, check_declared, declared
from conveyor.server.app import build_app, health
from conveyor.server.testing import RunningServer
from conveyor.workflows import remote
from conveyor.workflows.client import COMPONENT
from conveyor.workflows.databases import open_store
from conveyor.workflows.model import StepRow

from .conftest import ACCOUNT

WORKER_ID = "e" * 32
UNKNOWN = "0" * 32


def _routes(server: RunningServer) -> list[DeclaredRoute]:
    """The routes a bearer token calls: the dashboard's take its session cookie instead, and
    tests/dash checks them the same ways (read-only, operator, other accounts, CSRF)."""
    routes = build_app(server.service).routes
    assert all(isinstance(r, DeclaredRoute) for r in routes)
    return [r for r in routes if isinstance(r, DeclaredRoute) and r.access.scope is not Scope.SESSION]


def _method(route: DeclaredRoute) -> str:
    assert route.methods is not None
    return next(m for m in route.methods if m != "HEAD")


# The KV namespace ``setup`` made on each server (by URL), for the KV routes' {namespace_id}, the
# version of its workflow, for the Workflows routes' {version_id}, and its migration job, for the
# Super Slurper routes' {job_id}.
_namespace_ids: dict[str, str] = {}
_version_ids: dict[str, str] = {}
_job_ids: dict[str, str] = {}


# The arguments the workflow store's reading routes need (the body of every other route is ``{}``).
_STORE_READS: dict[str, dict[str, Any]] = {
    "get_workflow": {"name": "w"},
    "list_workflows": {},
    "get_instance": {"workflow": "w", "instance_id": "i"},
    "list_instances": {
        "workflow": "w",
        "status": None,
        "start_ms": None,
        "end_ms": None,
        "after": None,
        "limit": 10,
        "descending": False,
    },
    "steps": {"workflow": "w", "instance_id": "i"},
    "counter_value": {"counter": "c"},
    "list_versions": {"workflow": "w"},
    "get_version": {"workflow": "w", "version_id": "v"},
    "instance_counts": {"workflow": "w"},
    "instances_by_trace": {"trace_id": "0" * 32, "limit": 10},
}
_STORE_PREFIX = remote.PATH.split("{method}")[0]


def _call(server: RunningServer, route: DeclaredRoute, secret: str, **params: str) -> httpx.Response:
    names = {"account_id": ACCOUNT, "consumer_id": UNKNOWN, "worker_id": WORKER_ID, "rule_id": UNKNOWN}
    names |= {"bucket_name": "walked", "key": "k", "queue_id": UNKNOWN}  # the bucket routes
    names |= {"namespace_id": _namespace_ids.get(server.url, UNKNOWN), "key_name": "k"}  # the KV routes
    names |= {"job_id": _job_ids.get(server.url, UNKNOWN)}  # the Super Slurper routes
    names |= {"workflow_name": "walked", "instance_id": "i", "event_type": "e"}  # the Workflows routes
    names |= {"version_id": _version_ids.get(server.url, UNKNOWN)}
    names |= {"fleet": "walked", "round_id": UNKNOWN}  # the prober routes
    path = route.path.replace(":path}", "}").format(**{**names, **params})
    if path.endswith("/instances/i/step"):
        path += "?name=s-1&type=step"
    method = _method(route)
    body: dict[str, Any] | None = {} if method in ("POST", "PUT", "PATCH") else None
    if route.path.startswith(_STORE_PREFIX) and route.access.read_only:
        body = _STORE_READS[route.path.removeprefix(_STORE_PREFIX)]
    return httpx.request(method, server.url + path, headers={"authorization": f"Bearer {secret}"}, json=body)


def _state(cv: conveyor.Conveyor) -> list[tuple[Any, ...]]:
    """What a refused request must leave as it was: every queue, its settings, consumers and messages."""
    return [
        (q.queue_name, q.settings, [(c.type, c.settings) for c in q.consumers], cv.queue_by_id(q.queue_id).metrics())
        for q in cv.list_queues()
    ]


@pytest.fixture
def setup(server: RunningServer) -> tuple[conveyor.Conveyor, conveyor.Queue, conveyor.Queue, str]:
    """Queue ``emails`` (a pull consumer, one message) and ``billing`` (one message), and the consumer id."""
    admin = server.connect(ACCOUNT)
    emails = admin.create_queue("emails")
    consumer = emails.add_pull_consumer()
    emails.send({"n": 1})
    billing = admin.create_queue("billing")
    billing.send({"n": 2})
    admin.create_bucket("walked").put("k", b"an object for the bucket routes' walk")
    meta = admin.create_kv_namespace("meta")
    meta.put("k", "v")
    _namespace_ids[server.url] = meta.id
    in_walked = {"vendor": "r2", "bucket": "walked"}
    created = httpx.post(
        f"{server.url}/client/v4/accounts/{ACCOUNT}/slurper/jobs",
        headers={"authorization": f"Bearer {server.tokens.create(ACCOUNT)[0]}"},
        json={"source": in_walked, "target": in_walked},
    )
    _job_ids[server.url] = created.json()["result"]["id"]
    walked = admin.put_workflow("walked")
    walked.create(id="i")
    _version_ids[server.url] = walked.record.version_id
    # A step of instance i, as a run records it (no worker runs the workflow).
    store = server.service.store(COMPONENT, open_store)
    claim = store.claim(ACCOUNT, "walked", "i", "walk", 1)
    assert claim is not None
    config = '{"retries": {"limit": 0, "delay": 0, "backoff": "constant"}, "timeout": 1000}'
    step = StepRow("step:s:1", 0, "step", "s", "complete", "1", "[]", config, 1, 2)
    store.save_step(ACCOUNT, "walked", "i", claim.instance.epoch, step, run_token=claim.instance.run_token)
    return admin, emails, billing, consumer.consumer_id


def test_every_route_of_the_app_declares_its_access(server: RunningServer) -> None:
    routes = _routes(server)
    assert {r.path for r in routes} >= {"/metrics", "/healthz", "/client/v4/accounts/{account_id}/queues"}
    # Reading is GET, and peek (which reads without leasing); every other route writes.
    reads = {(_method(r), r.path) for r in routes if r.access.read_only and r.access.scope is not Scope.PUBLIC}
    store_reads = {_STORE_PREFIX + method for method, read_only in remote.METHODS.items() if read_only}
    assert store_reads == {_STORE_PREFIX + method for method in _STORE_READS}
    assert {p for m, p in reads if m != "GET"} == {
        "/client/v4/accounts/{account_id}/queues/{queue_id}/messages/peek",
        "/client/v4/accounts/{account_id}/storage/kv/namespaces/{namespace_id}/bulk/get",
        *store_reads,
    }
    assert all(r.access.read_only for r in routes if _method(r) == "GET")
    for route in routes:
        if route.access.catalog_write:
            assert "{queue_id}" in route.path
        if route.access.scope is Scope.QUEUE:
            assert "{queue_id}" in route.path or "{queue_name}" in route.path, route.path


def test_an_undeclared_route_is_refused_before_it_can_be_served() -> None:
    check_declared([declared("/healthz", health, "GET", PUBLIC)])
    with pytest.raises(TypeError, match="'/raw' declares no access"):
        check_declared([declared("/healthz", health, "GET", PUBLIC), Route("/raw", health)])


def test_a_read_only_token_is_refused_on_every_write_route_and_changes_nothing(
    server: RunningServer, setup: tuple[conveyor.Conveyor, conveyor.Queue, conveyor.Queue, str]
) -> None:
    admin, emails, _, consumer_id = setup
    read_only = server.tokens.create(ACCOUNT, read_only=True)[0]
    before = _state(admin)
    writes = [r for r in _routes(server) if not r.access.read_only]
    assert len(writes) >= 20
    for route in writes:
        r = _call(server, route, read_only, queue_id=emails.id, consumer_id=consumer_id, queue_name="emails")
        assert r.status_code == 403, (route.path, _method(route), r.text)
        assert "read-only" in r.text
    assert _state(admin) == before
    for route in (r for r in _routes(server) if r.access.read_only and r.access.scope is not Scope.PUBLIC):
        r = _call(server, route, read_only, queue_id=emails.id, consumer_id=consumer_id, queue_name="emails")
        assert r.status_code == 200, (route.path, r.text)


def test_a_queue_scoped_token_is_refused_on_other_queues_as_if_unknown_and_on_account_wide_routes(
    server: RunningServer, setup: tuple[conveyor.Conveyor, conveyor.Queue, conveyor.Queue, str]
) -> None:
    admin, emails, billing, consumer_id = setup
    scoped = server.tokens.create(ACCOUNT, queues=("emails",))[0]
    before = _state(admin)
    routes = _routes(server)
    on_queues = [r for r in routes if r.access.scope is Scope.QUEUE]
    assert len(on_queues) >= 30
    for route in on_queues:
        hidden = _call(server, route, scoped, queue_id=billing.id, queue_name="billing")
        unknown = _call(server, route, scoped, queue_id=UNKNOWN, queue_name="nothing-here")
        assert hidden.status_code == unknown.status_code == 404, (route.path, _method(route), hidden.text)
        if "{queue_id}" in route.path:
            assert "billing" not in hidden.text
        expected = (
            unknown.json()["errors"][0]["message"].replace(UNKNOWN, billing.id).replace("nothing-here", "billing")
        )
        assert hidden.json()["errors"][0]["message"] == expected
    account_wide = [r for r in routes if r.access.scope is Scope.ACCOUNT]
    assert account_wide
    for route in account_wide:
        r = _call(server, route, scoped)
        assert r.status_code == 403 and "account-wide" in r.text, (route.path, r.text)
    assert _state(admin) == before
    # Allowed where declared: its own queue's routes, and the account's routes limited to its queues.
    for route in (r for r in routes if r.access.read_only and r.access.scope in (Scope.QUEUE, Scope.TOKEN_QUEUES)):
        r = _call(server, route, scoped, queue_id=emails.id, consumer_id=consumer_id, queue_name="emails")
        assert r.status_code == 200, (route.path, r.text)
    listed = httpx.get(
        f"{server.url}/client/v4/accounts/{ACCOUNT}/queues", headers={"authorization": f"Bearer {scoped}"}
    ).json()["result"]
    assert [q["queue_name"] for q in listed] == ["emails"]
    with conveyor.connect(server.url, token=scoped, account_id=ACCOUNT) as cv:
        queue = cv.queue("emails")
        queue.send({"n": 3})
        pulled = queue.pull(batch_size=10)
        assert queue.ack(acks=[m.lease_id for m in pulled]).ack_count == 2
        queue.update(delivery_delay=5)


def test_an_operator_token_reads_metrics_and_is_refused_on_every_account_route(
    server: RunningServer, setup: tuple[conveyor.Conveyor, conveyor.Queue, conveyor.Queue, str]
) -> None:
    admin, emails, _, consumer_id = setup
    operator = server.tokens.create_operator()[0]
    before = _state(admin)
    for route in _routes(server):
        r = _call(server, route, operator, queue_id=emails.id, consumer_id=consumer_id, queue_name="emails")
        if route.access.operator:
            assert r.status_code == 200, (route.path, r.text)
        else:
            assert r.status_code == 403 and "operator" in r.text, (route.path, r.text)
    assert _state(admin) == before


def test_another_accounts_token_is_refused_on_every_account_route_and_changes_nothing(
    server: RunningServer, setup: tuple[conveyor.Conveyor, conveyor.Queue, conveyor.Queue, str]
) -> None:
    admin, emails, _, consumer_id = setup
    stranger = server.tokens.create("other-account")[0]
    before = _state(admin)
    on_account = [r for r in _routes(server) if "{account_id}" in r.path]
    assert len(on_account) >= 30
    for route in on_account:
        r = _call(server, route, stranger, queue_id=emails.id, consumer_id=consumer_id, queue_name="emails")
        assert r.status_code == 403, (route.path, _method(route), r.text)
        assert "not valid for account" in r.text and "emails" not in r.text
    assert _state(admin) == before
