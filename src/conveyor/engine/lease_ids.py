"""Lease ids, as both engines write and read them: ``<shard>-<seq>-<token>`` in lowercase hex.

``shard`` is the shard's number within its queue, ``seq`` the message's sequence number in that
shard, ``token`` the random token of the delivery (a fresh one per lease call). An ack, retry or
renewal acts on the message only while its current lease carries the same token, so an id from an
earlier delivery changes nothing. Every part fits in a signed 64-bit integer, as both databases
store them.
"""

from __future__ import annotations

# The warnings an ack, retry or renewal gets for a lease id that changed nothing.
MALFORMED = "malformed lease id"
MISSING = "message not found: it was already acked, purged, expired or dead-lettered"
SUPERSEDED = "lease superseded: the message was delivered again since, so this call changed nothing"
_LIMIT = 2**63


def lease_id(shard: int, seq: int, token: int) -> str:
    prefix, suffix = lease_id_parts(shard, token)
    return f"{prefix}{seq:x}{suffix}"


def lease_id_parts(shard: int, token: int) -> tuple[str, str]:
    """What one lease call's ids have around the seq: ``f"{prefix}{seq:x}{suffix}"`` is
    ``lease_id(shard, seq, token)``, made once per call rather than once per message."""
    return f"{shard:x}-", f"-{token:x}"


def parse_lease_id(lid: str) -> tuple[int, int, int] | None:
    """``(shard, seq, token)``, or ``None`` for a string that is no lease id."""
    parts = lid.split("-")
    if len(parts) != 3:
        return None
    try:
        shard, seq, token = int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)
    except ValueError:
        return None
    if not (0 <= shard < _LIMIT and 0 <= seq < _LIMIT and 0 <= token < _LIMIT):
        return None
    return shard, seq, token
