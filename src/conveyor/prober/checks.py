"""Checks: functions the worker's own code registers by name (``@prober.check("signing")``), and
the built-in ``http`` check. A target names its check; the worker looks the name up among the
functions registered in its process and never imports anything a target or a row names.

A check gets the :class:`ProbeTarget` and either returns (the target passes; a returned dict is
kept as the run's details) or raises (it fails: :class:`CheckFailed` with a reason and details,
any other exception with its type and message). Plain and ``async`` functions both work.

>>> @prober.check("signing")
... def signing(target: ProbeTarget) -> dict:
...     signed = fetch_signature(target.address)
...     if not signed:
...         raise CheckFailed("no signature", {"address": target.address})
...     return {"signed": True}
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import inspect
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from conveyor.prober.model import CheckOutcome

CheckFunction = Callable[["ProbeTarget"], Any]
# OpenSSL's X509_V_ERR_CERT_HAS_EXPIRED.
CERT_HAS_EXPIRED = 10


@dataclasses.dataclass(frozen=True)
class ProbeTarget:
    """What a check is given: the target's id, address (a URL, or what the check understands),
    host, and the name of its check."""

    id: str
    address: str
    host: str
    check: str


class CheckFailed(Exception):
    """Raised by a check to fail its target with ``reason`` (and ``detail``, kept as JSON)."""

    def __init__(self, reason: str, detail: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = dict(detail or {})


def _json_detail(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {"result": value}


def run_check(fn: CheckFunction, target: ProbeTarget) -> CheckOutcome:
    """Run ``fn`` on ``target`` and time it; every exception becomes a failed outcome."""
    started = time.monotonic()
    try:
        result = fn(target)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except CheckFailed as exc:
        return CheckOutcome(False, _elapsed_ms(started), exc.reason, exc.detail)
    except Exception as exc:  # the check's own failure, whatever it is, is the target's outcome
        return CheckOutcome(False, _elapsed_ms(started), f"{type(exc).__name__}: {exc}")
    return CheckOutcome(True, _elapsed_ms(started), None, _json_detail(result))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _verification_error(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class HttpCheck:
    """The built-in ``http`` check: GET the target's URL (redirects not followed) within
    ``timeout`` seconds. It fails on a status of 400 or more, a connection error or timeout, a
    certificate that does not verify (an expired one says so), or one that expires within
    ``min_cert_days``. Details: ``status``, and for https ``cert_not_after`` and ``cert_days_left``.
    ``verify``: an ``ssl.SSLContext``, a CA bundle's path, or True (the system's CAs)."""

    def __init__(
        self, *, timeout: float = 30.0, verify: ssl.SSLContext | str | bool = True, min_cert_days: float = 7.0
    ) -> None:
        self.timeout = timeout
        self.min_cert_days = min_cert_days
        if isinstance(verify, str):
            verify = ssl.create_default_context(cafile=verify)
        elif verify is True:
            verify = ssl.create_default_context()
        self._verify = verify

    def __call__(self, target: ProbeTarget) -> dict[str, Any]:
        # A fresh connection for every check (no keep-alive): a probe measures the handshake too.
        limits = httpx.Limits(max_keepalive_connections=0)
        try:
            with (
                httpx.Client(verify=self._verify, timeout=self.timeout, limits=limits) as client,
                client.stream("GET", target.address, headers={"user-agent": "conveyor-prober"}) as response,
            ):
                detail: dict[str, Any] = {"status": response.status_code}
                detail.update(self._certificate(response))
                response.read()
        except httpx.TimeoutException:
            raise CheckFailed(f"no answer within {self.timeout:g} s") from None
        except httpx.TransportError as exc:
            failed = _verification_error(exc)
            if failed is not None and failed.verify_code == CERT_HAS_EXPIRED:
                raise CheckFailed("TLS certificate has expired", {"tls": failed.verify_message}) from None
            if failed is not None:
                raise CheckFailed(f"TLS certificate does not verify: {failed.verify_message}") from None
            raise CheckFailed(f"cannot connect: {exc}") from None
        if response.status_code >= 400:
            raise CheckFailed(f"HTTP {response.status_code}", detail)
        days = detail.get("cert_days_left")
        if days is not None and days < self.min_cert_days:
            raise CheckFailed(f"TLS certificate expires in {days:.1f} days", detail)
        return detail

    @staticmethod
    def _certificate(response: httpx.Response) -> dict[str, Any]:
        stream = response.extensions.get("network_stream")
        tls = stream.get_extra_info("ssl_object") if stream is not None else None
        cert = tls.getpeercert() if tls is not None else None
        if not cert or "notAfter" not in cert:
            return {}
        not_after = ssl.cert_time_to_seconds(str(cert["notAfter"]))
        return {
            "cert_not_after": datetime.datetime.fromtimestamp(not_after, datetime.UTC).isoformat(),
            "cert_days_left": round((not_after - time.time()) / 86_400, 2),
        }
