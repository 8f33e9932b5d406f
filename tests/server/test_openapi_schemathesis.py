"""Schemathesis against ``/openapi.json``: generated requests never cause a 5xx, and every answer
matches the schema the document gives for it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from conveyor.server.openapi import document
from conveyor.server.testing import RunningServer, running_server

schema = schemathesis.openapi.from_dict(document())
CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.content_type_conformance,
    checks.status_code_conformance,
]


@dataclass
class Target:
    server: RunningServer
    headers: dict[str, str]
    queue_id: str
    consumer_id: str


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    data: Path = tmp_path_factory.mktemp("schemathesis") / "data"
    with running_server(f"sqlite://{data}") as server:
        cv = server.connect("acc1")
        q = cv.create_queue("fuzzed")
        consumer = q.add_pull_consumer()
        q.send_batch([{"body": {"n": i}} for i in range(20)])
        cv.put_workflow("fuzzed").create(id="fuzzed")
        secret, _ = server.tokens.create("acc1")
        yield Target(server, {"authorization": f"Bearer {secret}"}, q.id, consumer.consumer_id)


def test_openapi_document_is_served(target: Target) -> None:
    r = httpx.get(target.server.url + "/openapi.json")
    assert r.status_code == 200 and r.json() == document()


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_conforms_to_its_openapi_document(case: schemathesis.Case, target: Target) -> None:
    # Aim most requests at real things (this account, a queue that exists), so they get past 404.
    params = case.path_parameters or {}
    if "account_id" in params:
        params["account_id"] = "acc1"
    if "queue_id" in params and case.operation.method.upper() != "DELETE":
        params["queue_id"] = target.queue_id
    if "consumer_id" in params and case.operation.method.upper() != "DELETE":
        params["consumer_id"] = target.consumer_id
    if "queue_name" in params:
        params["queue_name"] = "fuzzed"
    for name in ("workflow_name", "instance_id"):
        if name in params and case.operation.method.upper() != "DELETE":
            params[name] = "fuzzed"
    case.call_and_validate(base_url=target.server.url, headers=target.headers, checks=CHECKS)
