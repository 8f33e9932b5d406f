"""A token learns nothing outside its scope: not on /metrics, not from a 404, not from the request
histograms; an operator token sees across accounts. Against a real ``conveyor serve``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from .process import CONVEYOR, ServeProcess, create_token, serve_process

LATENCY = "conveyor_http_request_duration_seconds_count"


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve_process(tmp_path_factory.mktemp("scope") / "data", "acc1") as running:
        yield running


def _call(proc: ServeProcess, method: str, path: str, token: str, **kw: object) -> httpx.Response:
    return httpx.request(method, proc.url + path, headers={"authorization": f"Bearer {token}"}, **kw)  # type: ignore[arg-type]


def _create(proc: ServeProcess, token: str, account: str, name: str) -> str:
    r = _call(proc, "POST", f"/client/v4/accounts/{account}/queues", token, json={"queue_name": name})
    assert r.status_code == 200, r.text
    return str(r.json()["result"]["queue_id"])


def _samples(text: str) -> list[tuple[str, dict[str, str]]]:
    return [(s.name, s.labels) for family in text_string_to_metric_families(text) for s in family.samples]


def test_a_queue_scoped_token_sees_only_its_queues_and_an_out_of_scope_id_is_unknown(proc: ServeProcess) -> None:
    qa = _create(proc, proc.token, "acc1", "qa")
    hidden = _create(proc, proc.token, "acc1", "secret-b")
    scoped = create_token(proc.data, "acc1", "--queue", "qa")
    base = "/client/v4/accounts/acc1/queues"

    metrics = _call(proc, "GET", "/metrics", scoped)
    assert metrics.status_code == 200
    queues = {labels["queue"] for _, labels in _samples(metrics.text) if "queue" in labels}
    assert queues == {"qa"}
    assert "secret-b" not in metrics.text
    assert not any(name == LATENCY for name, _ in _samples(metrics.text))  # they count secret-b's requests

    unknown = "0" * 32
    for method, suffix, body in [
        ("GET", "", None),
        ("GET", "/metrics", None),
        ("POST", "/messages", {"body": 1}),
        ("POST", "/messages/pull", {}),
    ]:
        out_of_scope = _call(proc, method, f"{base}/{hidden}{suffix}", scoped, json=body)
        missing = _call(proc, method, f"{base}/{unknown}{suffix}", scoped, json=body)
        assert out_of_scope.status_code == missing.status_code == 404
        assert "secret-b" not in out_of_scope.text
        assert out_of_scope.json()["errors"] == [
            {**e, "message": e["message"].replace(unknown, hidden)} for e in missing.json()["errors"]
        ]
    assert _call(proc, "GET", f"{base}/{qa}", scoped).status_code == 200


def test_request_histograms_are_per_account_and_an_operator_token_sees_every_account(proc: ServeProcess) -> None:
    other = create_token(proc.data, "acc2")
    _create(proc, other, "acc2", "theirs")
    _create(proc, proc.token, "acc1", "mine")

    own = _samples(_call(proc, "GET", "/metrics", proc.token).text)
    assert {labels["account"] for name, labels in own if name == LATENCY} == {"acc1"}
    assert not any(labels.get("account") == "acc2" for _, labels in own)
    theirs = _samples(_call(proc, "GET", "/metrics", other).text)
    assert {labels["account"] for name, labels in theirs if name == LATENCY} == {"acc2"}

    operator = _operator(proc)
    everything = _samples(_call(proc, "GET", "/metrics", operator).text)
    assert {"acc1", "acc2"} <= {labels["account"] for name, labels in everything if name == LATENCY}
    assert {("acc1", "mine"), ("acc2", "theirs")} <= {
        (labels["account"], labels["queue"]) for _, labels in everything if "queue" in labels
    }
    refused = _call(proc, "GET", "/client/v4/accounts/acc1/queues", operator)
    assert refused.status_code == 403 and "operator token reads /metrics only" in refused.text


def _operator(proc: ServeProcess) -> str:
    out = subprocess.run(
        [CONVEYOR, "--url", f"sqlite://{proc.data}", "tokens", "create", "--operator"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.strip().splitlines()[-1]
