"""Structured logs: every line carries the request id of the request that caused it.

``configure(json_lines=True)`` writes one JSON object per line (``ts``, ``level``, ``logger``,
``message``, ``request_id`` and any ``extra=`` fields); otherwise a readable line with the id, in
which control characters are escaped (``\\n``, ``\\x00``): a request path or any other text a client
chose can never start a line of its own.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged too.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "request_id"}


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


# C0 and C1 control characters and Unicode's line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    """``text`` with every control character written as its escape (``\\n``, ``\\x00``, ``\\u2028``)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class TextFormatter(logging.Formatter):
    """One line per record: the message's control characters escaped (a traceback, the server's
    own text, still follows on lines of its own)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escape_controls(super().formatMessage(record))


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        line.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(*, json_lines: bool = False, level: int = logging.INFO) -> None:
    """Send Conveyor's and uvicorn's logs to stderr, as JSON lines or as text, with request ids."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RequestIdFilter())
    if json_lines:
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"))
    for name in ("conveyor", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
