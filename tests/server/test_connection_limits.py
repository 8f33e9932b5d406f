"""Connections that send nothing, or stop half-way, are closed in bounded time; a flood of them does
not make real requests fail; the request head limit is exact. All against a real ``conveyor serve``."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.waiting import wait_for

from .process import ServeProcess, serve_process


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """A server with one-second deadlines."""
    data = tmp_path_factory.mktemp("deadlines") / "data"
    args = ("--head-timeout", "1", "--body-timeout", "1", "--keep-alive-timeout", "1")
    with serve_process(data, "acc1", *args) as running:
        yield running


def _socket(proc: ServeProcess) -> socket.socket:
    host, port = proc.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)))


def _until_closed(s: socket.socket, timeout: float = 10.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started = time.monotonic()
    s.settimeout(timeout)
    answer = b""
    try:
        while chunk := s.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    return answer, time.monotonic() - started


def _queue_id(proc: ServeProcess, name: str) -> str:
    r = httpx.post(
        f"{proc.url}/client/v4/accounts/acc1/queues",
        json={"queue_name": name},
        headers={"authorization": f"Bearer {proc.token}"},
    )
    assert r.status_code == 200, r.text
    return str(r.json()["result"]["queue_id"])


def test_a_connection_that_sends_nothing_is_answered_408_after_the_head_timeout(quick: ServeProcess) -> None:
    with _socket(quick) as s:
        answer, took = _until_closed(s)
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"the request head was not complete within 1 s" in answer
    assert 0.8 < took < 5


def test_an_unfinished_head_is_closed_after_the_head_timeout_however_it_trickles(quick: ServeProcess) -> None:
    with _socket(quick) as s:
        started = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        try:
            for _ in range(20):  # a byte every 0.2 s would keep a per-read timeout alive for ever
                time.sleep(0.2)
                s.sendall(b"X")
        except OSError:
            pass  # closed, as it should be
        answer, _ = _until_closed(s)
    assert answer.startswith(b"HTTP/1.1 408")
    assert time.monotonic() - started < 3.5


def test_an_unfinished_body_is_answered_408_after_the_body_timeout(quick: ServeProcess) -> None:
    qid = _queue_id(quick, "half-sent")
    with _socket(quick) as s:
        s.sendall(
            (
                f"POST /client/v4/accounts/acc1/queues/{qid}/messages HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {quick.token}\r\nContent-Type: application/json\r\n"
                'Content-Length: 100\r\n\r\n{"body"'
            ).encode()
        )
        answer, took = _until_closed(s)
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"the request body was not complete within 1 s" in answer
    assert took < 5
    log = next(quick.data.parent.glob("serve-*.log")).read_text()
    assert "Traceback" not in log


def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout(quick: ServeProcess) -> None:
    with _socket(quick) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer, took = _until_closed(s)
    assert answer.startswith(b"HTTP/1.1 200")
    assert 0.8 < took < 5


def test_a_request_the_server_holds_is_not_cut_by_the_head_or_body_timeout(quick: ServeProcess) -> None:
    qid = _queue_id(quick, "long-polled")
    r = httpx.post(
        f"{quick.url}/conveyor/v1/accounts/acc1/queues/{qid}/wait",
        json={"timeout": 2.5},
        headers={"authorization": f"Bearer {quick.token}"},
        timeout=10,
    )
    assert r.status_code == 200, r.text


def test_a_request_head_of_exactly_the_limit_passes_and_one_byte_more_is_431(quick: ServeProcess) -> None:
    def head(size: int) -> bytes:
        start, end = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ", b"\r\n\r\n"
        return start + b"a" * (size - len(start) - len(end)) + end

    for size, status in ((64 * 1024, b"200"), (64 * 1024 + 1, b"431")):
        with _socket(quick) as s:
            s.sendall(head(size))
            answer, _ = _until_closed(s)
        assert answer.startswith(b"HTTP/1.1 " + status), (size, answer[:80])
    with _socket(quick) as s:  # the same head, split across reads, is counted the same
        whole = head(64 * 1024 + 1)
        s.sendall(whole[:40_000])
        time.sleep(0.2)
        s.sendall(whole[40_000:])
        answer, _ = _until_closed(s)
    assert answer.startswith(b"HTTP/1.1 431")


def _open_sockets(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):  # closed by the server between the listing and the look
            count += os.readlink(fd).startswith("socket:")
    return count


def test_a_flood_of_silent_sockets_past_the_bound_does_not_fail_real_requests(tmp_path: Path) -> None:
    with serve_process(tmp_path / "data", "acc1", "--max-connections", "50") as proc:
        silent = [_socket(proc) for _ in range(400)]
        try:
            time.sleep(0.5)
            for i in range(20):
                r = httpx.get(proc.url + "/healthz", timeout=5)
                assert r.status_code == 200, i
            assert _open_sockets(proc.process.pid) <= 50 + 5  # + the listener and its own files
            closed = 0
            for s in silent[:300]:
                s.settimeout(0.01)
                with contextlib.suppress(TimeoutError, ConnectionResetError):
                    closed += s.recv(1) == b""
            assert closed > 250  # the oldest silent sockets made room
        finally:
            for s in silent:
                s.close()


def test_more_silent_sockets_than_the_open_file_limit_do_not_fail_real_requests(tmp_path: Path) -> None:
    # What was seen: under the usual limit of 1,024 open files, 1,100 silent sockets made every request fail.
    with serve_process(tmp_path / "data", "acc1", open_files=1024) as proc:
        silent = [_socket(proc) for _ in range(1100)]
        try:
            time.sleep(0.5)
            for i in range(10):
                assert httpx.get(proc.url + "/healthz", timeout=5).status_code == 200, i
            assert _open_sockets(proc.process.pid) <= 512 + 5  # half the files for connections
            log = (proc.data.parent / f"serve-{proc.url.rsplit(':', 1)[1]}.log").read_text()
            assert "max connections lowered from 1000 to 512: the open-file limit is 1024" in log
        finally:
            for s in silent:
                s.close()


def test_when_every_connection_is_in_a_request_a_new_one_is_answered_503(tmp_path: Path) -> None:
    with serve_process(tmp_path / "data", "acc1", "--max-connections", "5") as proc:
        qid = _queue_id(proc, "busy")
        busy = []
        try:
            for _ in range(5):
                s = _socket(proc)
                s.sendall(
                    (
                        f"POST /client/v4/accounts/acc1/queues/{qid}/messages HTTP/1.1\r\nHost: x\r\n"
                        f"Authorization: Bearer {proc.token}\r\nContent-Length: 100\r\n\r\n{{"
                    ).encode()
                )
                busy.append(s)
            time.sleep(0.3)
            with _socket(proc) as s:
                answer, _ = _until_closed(s)
            assert answer.startswith(b"HTTP/1.1 503")
            assert b"the server is at its 5 connections" in answer
        finally:
            for s in busy:
                s.close()
        wait_for(lambda: httpx.get(proc.url + "/healthz").status_code == 200, what="the server to serve again")
