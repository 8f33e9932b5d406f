"""uvicorn's httptools protocol with bounds on what one connection may hold and for how long.

A client could otherwise keep a server busy without ever finishing a request: trickle an endless
header (httptools keeps it in memory until it is complete), open a socket and send nothing, stop
half-way through a head or a body, or open thousands of such sockets until the server runs out of
file descriptors and every request fails. :class:`BoundedProtocol` enforces
:class:`ConnectionLimits`:

- a request head (request line and headers, through the blank line) of at most ``max_head_bytes``,
  else 431 and the connection is closed;
- a complete head within ``head_seconds`` of a new connection or of a request's first byte, and a
  complete body within ``body_seconds`` of its head, else 408 and the connection is closed (a body
  the server itself is not reading yet, under flow control, is not the client's delay);
- at most ``max_connections`` connections. Past it, the connection that has waited longest for a
  request (a silent socket, an unfinished head, an idle keep-alive) is closed to make room; only when
  every connection is in a request (a long-polled one included) is the new one answered 503.

Idle keep-alive connections are closed by uvicorn after ``timeout_keep_alive``.

``HttpToolsProtocol`` is uvicorn's internal class, not its API: pyproject.toml allows only the minor
release of uvicorn this is tested with, and a new one is taken by relocking and running the suite.

>>> protocol = bounded_protocol(ConnectionLimits(max_connections=500))
>>> uvicorn.Config(app, http=protocol)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import resource
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

log = logging.getLogger("conveyor.server")

# Far above any real request head (Cloudflare's own limit on request headers is 32 KB).
MAX_HEAD_BYTES = 64 * 1024
HEAD_SECONDS = 10.0
BODY_SECONDS = 30.0
MAX_CONNECTIONS = 1000

_HEAD_END = b"\r\n\r\n"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one server lets each connection hold (see the module docstring)."""

    max_head_bytes: int = MAX_HEAD_BYTES
    head_seconds: float = HEAD_SECONDS
    body_seconds: float = BODY_SECONDS
    max_connections: int = MAX_CONNECTIONS


def _refusal(status: bytes, message: str) -> bytes:
    body = b'{"success":false,"errors":[{"code":10207,"message":"%s"}],"messages":[],"result":null}' % message.encode()
    return b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (
        status,
        len(body),
        body,
    )


class BoundedProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` under :class:`ConnectionLimits`; make one with :func:`bounded_protocol`."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()
    # The connections of this server waiting for a request, longest-waiting first.
    waiting: ClassVar[OrderedDict[BoundedProtocol, None]]

    _in_head = True
    _head_bytes = 0
    _tail = b""  # the last bytes of the head so far, to find a blank line split across reads
    _deadline: asyncio.TimerHandle | None = None

    # -- connections ----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.head_seconds, self._head_timed_out)
        self._wait()
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.waiting.pop(self, None)
        super().connection_lost(exc)

    def _wait(self) -> None:
        self.waiting[self] = None
        self.waiting.move_to_end(self)

    def _make_room(self) -> None:
        for victim in self.waiting:
            if victim is not self:
                self.waiting.pop(victim)
                victim._disarm()
                victim.transport.close()
                return
        log.warning("refusing a connection: all %d connections are in a request", self.limits.max_connections)
        self._refuse(b"503 Service Unavailable", f"the server is at its {self.limits.max_connections} connections")

    def _refuse(self, status: bytes, message: str) -> None:
        self._disarm()
        self.waiting.pop(self, None)
        if not self.transport.is_closing():
            self.transport.write(_refusal(status, message))
            self.transport.close()

    # -- deadlines ------------------------------------------------------------------------------
    def _arm(self, seconds: float, handler: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, handler)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_timed_out(self) -> None:
        self._deadline = None
        self._refuse(b"408 Request Timeout", f"the request head was not complete within {self.limits.head_seconds:g} s")

    def _body_timed_out(self) -> None:
        self._deadline = None
        if self.flow.read_paused:  # the server is behind, not the client
            self._arm(self.limits.body_seconds, self._body_timed_out)
            return
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()
            return
        self._refuse(b"408 Request Timeout", f"the request body was not complete within {self.limits.body_seconds:g} s")

    # -- parsing --------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if not self._in_head:
            super().data_received(data)
            return
        if self._head_bytes == 0 and self._deadline is None:
            self._arm(self.limits.head_seconds, self._head_timed_out)
        end = (self._tail + data).find(_HEAD_END)
        head = len(data) if end < 0 else end + len(_HEAD_END) - len(self._tail)
        if self._head_bytes + head > self.limits.max_head_bytes:
            self._refuse(b"431 Request Header Fields Too Large", self._too_large)
            return
        self._head_bytes += head
        self._tail = (self._tail + data)[-3:]
        super().data_received(data)
        # A head that ends in bare newlines has no blank line to find: the parser says where it ends.
        if self._in_head and self._head_bytes > self.limits.max_head_bytes:
            self._refuse(b"431 Request Header Fields Too Large", self._too_large)

    @property
    def _too_large(self) -> str:
        return f"the request head is over {self.limits.max_head_bytes} bytes"

    def on_headers_complete(self) -> None:
        self._in_head = False
        self.waiting.pop(self, None)
        self._arm(self.limits.body_seconds, self._body_timed_out)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()
        self._in_head, self._head_bytes, self._tail = True, 0, b""

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # idle now, not starting a pipelined request
            self._wait()


class HeadWithBody:
    """The transport one request's ``RequestResponseCycle`` writes to under :class:`OneWriteProtocol`:
    the response head is held back and written together with the body's first bytes — one
    ``send(2)`` for a small response instead of two (uvloop writes each ``transport.write`` at once;
    under load that second system call was about a quarter of a file server's CPU).

    Only a head that a body write will follow is held (not a ``HEAD`` request's: uvicorn writes no
    body for it); what is written before the response starts (``100 Continue``) passes at once;
    ``close`` writes a held head first."""

    __slots__ = ("_head", "_state", "cycle", "transport")

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle) -> None:
        self.transport = transport
        self.cycle = cycle
        self._head = b""
        self._state = 0  # 0: no head yet, 1: the head held, 2: the head written

    def write(self, data: bytes) -> None:
        if self._state == 1:
            self._state = 2
            self.transport.writelines([self._head, data])
            self._head = b""
        elif self._state == 0 and self.cycle.response_started and self.cycle.scope["method"] != "HEAD":
            self._state = 1
            self._head = data
        else:
            self.transport.write(data)

    def close(self) -> None:
        if self._state == 1:
            self.write(b"")
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class OneWriteProtocol(BoundedProtocol):
    """:class:`BoundedProtocol` whose responses' heads go out with their bodies (:class:`HeadWithBody`);
    make one with ``bounded_protocol(limits, OneWriteProtocol)``."""

    def on_headers_complete(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is not before:  # a new request (not an upgrade): its task has not run yet
            self.cycle.transport = HeadWithBody(self.transport, self.cycle)  # type: ignore[assignment]


def bounded_protocol(
    limits: ConnectionLimits, base: type[BoundedProtocol] = BoundedProtocol, **attributes: Any
) -> type[BoundedProtocol]:
    """A protocol class (``base`` or a subclass of it) for one server: its limits, its own record of
    waiting connections, and any class ``attributes`` the subclass needs."""
    waiting: OrderedDict[BoundedProtocol, None] = OrderedDict()
    return type(base.__name__, (base,), {"limits": limits, "waiting": waiting, **attributes})


# File descriptors kept for everything but client connections: database files (three per SQLite
# shard), PostgreSQL sockets, logs. Under a small open-file limit, half of it.
RESERVED_FILES = 1024


def fit_open_files(limits: ConnectionLimits) -> ConnectionLimits:
    """``limits``, with the process's open-file limit raised to hold them (up to the hard limit);
    ``max_connections`` lowered, with a warning, when even the hard limit cannot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = limits.max_connections + RESERVED_FILES
    if soft != resource.RLIM_INFINITY and soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft != resource.RLIM_INFINITY and soft < needed:
        fitted = max(soft // 2, soft - RESERVED_FILES)
        log.warning(
            "max connections lowered from %d to %d: the open-file limit is %d (the rest is kept for files)",
            limits.max_connections,
            fitted,
            soft,
        )
        return dataclasses.replace(limits, max_connections=fitted)
    return limits
