"""The prober's REST shapes (Conveyor's own routes: Cloudflare has no such product). Requests are
structs of their own, every field checked again by :mod:`conveyor.prober.fleet`; answers are the
model's dataclasses themselves (:class:`~conveyor.prober.model.Target`, ``FleetRow``,
``RoundSummary``, ``Report``), which msgspec encodes and decodes as they are.

>>> wire.decode(b'[{"address": "https://mcp.example.com/health", "interval": "12h"}]', list[ProbeTargetRequest])
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from conveyor.prober.errors import InvalidTarget
from conveyor.wire.decoding import Shape


class ProbeTargetRequest(Shape, kw_only=True):
    """A target to add: its address, and optionally its check (``http``), interval and host."""

    refusal = InvalidTarget

    address: str
    check: str | UnsetType = UNSET
    interval: float | str | UnsetType = UNSET
    host: str | UnsetType = UNSET

    def fields(self) -> dict[str, Any]:
        """The fields given (those left out take the fleet's defaults)."""
        return {k: v for k, v in msgspec.structs.asdict(self).items() if v is not UNSET}


class ProbeTargetsAdded(msgspec.Struct):
    added: int
    already_listed: int


class ProbeTargetsRemoved(msgspec.Struct):
    removed: list[str]


class ProbeRoundStarted(msgspec.Struct):
    id: str
