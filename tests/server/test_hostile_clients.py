"""Clients that send garbage, too much, too slowly, or hold thousands of idle connections."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from .process import ServeProcess, serve_process


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve_process(tmp_path_factory.mktemp("hostile") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def queue_path(proc: ServeProcess) -> str:
    r = httpx.post(
        f"{proc.url}/client/v4/accounts/{proc.account_id}/queues",
        json={"queue_name": "target"},
        headers={"authorization": f"Bearer {proc.token}"},
    )
    return f"/client/v4/accounts/{proc.account_id}/queues/{r.json()['result']['queue_id']}"


def _post(proc: ServeProcess, path: str, content: bytes) -> httpx.Response:
    headers = {"authorization": f"Bearer {proc.token}", "content-type": "application/json"}
    return httpx.post(proc.url + path, content=content, headers=headers)


@pytest.mark.parametrize("raw", [b"{", b'{"body": }', b"\xff\xfe", b'{"body": 1} trailing'])
def test_malformed_json_is_10208(proc: ServeProcess, queue_path: str, raw: bytes) -> None:
    r = _post(proc, queue_path + "/messages", raw)
    assert r.status_code == 400
    assert r.json()["errors"][0]["code"] == 10208


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/messages", b"[1, 2]"),
        ("/messages/batch", b'{"messages": {"body": 1}}'),
        ("/messages/ack", b'{"acks": [{"lease_id": 5}]}'),
        ("/messages/peek", b'{"batch_size": "ten"}'),
        ("/messages/pull", b'{"batch_size": 1.5}'),
    ],
)
def test_wrong_types_are_10207(proc: ServeProcess, queue_path: str, path: str, body: bytes) -> None:
    r = _post(proc, queue_path + path, body)
    assert r.status_code == 400, r.text
    assert r.json()["errors"][0]["code"] == 10207


def test_oversized_body_is_refused_from_its_content_length_before_it_is_sent(
    proc: ServeProcess, queue_path: str
) -> None:
    host, port = proc.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        head = (
            f"POST {queue_path}/messages/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {proc.token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
        )
        s.sendall(head.encode() + b'{"messages": [')  # a few bytes of the promised gigabyte
        s.settimeout(10)
        answer = ""
        while '"code"' not in answer and (chunk := s.recv(65536)):
            answer += chunk.decode("latin-1")
    assert answer.startswith("HTTP/1.1 413")
    assert '"code":10205' in answer


def test_oversized_chunked_body_is_cut_off_when_it_passes_the_limit(proc: ServeProcess, queue_path: str) -> None:
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        for _ in range(1000):  # would be 64 MB
            sent += 65536
            yield b" " * 65536

    headers = {"authorization": f"Bearer {proc.token}"}
    try:
        r = httpx.post(proc.url + queue_path + "/messages", content=chunks(), headers=headers, timeout=30)
        assert r.status_code == 413
    except (httpx.RemoteProtocolError, httpx.WriteError):
        pass  # the server may close the connection while the client is still writing
    assert sent < 64 * 1024 * 1024


def test_slow_client_does_not_block_others(proc: ServeProcess, queue_path: str) -> None:
    host, port = proc.url.removeprefix("http://").split(":")
    slow = socket.create_connection((host, int(port)))
    try:
        # A request that trickles in: the head, then one byte of a 100-byte body, then nothing.
        slow.sendall(
            (
                f"POST {queue_path}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {proc.token}\r\n"
                "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            ).encode()
        )
        for i in range(20):
            r = _post(proc, queue_path + "/messages", f'{{"body": {i}}}'.encode())
            assert r.status_code == 200
    finally:
        slow.close()


def test_thousands_of_idle_connections_cost_little_memory_and_block_nobody(proc: ServeProcess, queue_path: str) -> None:
    host, port = proc.url.removeprefix("http://").split(":")
    before = proc.rss_kib()
    idle = []
    try:
        for _ in range(3000):
            idle.append(socket.create_connection((host, int(port))))
        time.sleep(0.5)  # let the server accept them all
        r = _post(proc, queue_path + "/messages", b'{"body": "still here"}')
        assert r.status_code == 200
        grown = proc.rss_kib() - before
        assert grown < 200 * 1024, f"RSS grew by {grown} KiB for 3000 idle connections"
    finally:
        for s in idle:
            s.close()


def test_unknown_route_and_method_answer_in_the_envelope(proc: ServeProcess, queue_path: str) -> None:
    r = httpx.get(proc.url + "/client/v4/nothing-here", headers={"authorization": f"Bearer {proc.token}"})
    assert r.status_code == 404 and r.json()["success"] is False
    r = httpx.put(proc.url + queue_path + "/messages", headers={"authorization": f"Bearer {proc.token}"})
    assert r.status_code == 405 and r.json()["success"] is False


def test_endless_request_header_is_cut_off_with_431(proc: ServeProcess) -> None:
    host, port = proc.url.removeprefix("http://").split(":")
    before = proc.rss_kib()
    sent = 0
    answer = b""
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Endless: ")
        try:
            for _ in range(200):  # would be 50 MB
                s.sendall(b"a" * 262144)
                sent += 262144
        except OSError:
            pass  # the server closed the connection
        s.settimeout(5)
        # A reset may come before the answer can be read: the cut-off itself is what counts.
        with contextlib.suppress(OSError):
            answer = s.recv(4096)
    assert sent < 50 * 1024 * 1024
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431")
    assert proc.rss_kib() - before < 16 * 1024
