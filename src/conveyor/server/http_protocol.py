"""uvicorn's httptools protocol with a bound on the request head.

httptools keeps a header (and uvicorn the URL) in memory until it is complete, however long: one
client trickling an endless header could grow the server by megabytes a second. This protocol counts
the bytes of each request head and answers 431 (and closes) once they pass ``MAX_HEAD_BYTES``; a
connection then holds at most that much plus one read.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# Far above any real request head (Cloudflare's own limit on request headers is 32 KB).
MAX_HEAD_BYTES = 64 * 1024

_REFUSAL = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_BODY = (
    b'{"success":false,"errors":[{"code":10207,"message":"the request head is over %d bytes"}],'
    b'"messages":[],"result":null}' % MAX_HEAD_BYTES
)


class BoundedHeadProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` that refuses request heads over ``MAX_HEAD_BYTES``."""

    _in_head = True
    _head_bytes = 0

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self.transport.write(_REFUSAL % (len(_BODY), _BODY))
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0
