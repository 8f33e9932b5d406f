"""Event notifications in R2's shape: which rules a write matches, and the message each sends.

The message body (``reference/cloudflare-platform.md`` §5)::

    {"account": "local", "action": "PutObject", "bucket": "cdn",
     "object": {"key": "a.js", "size": 12, "eTag": "..."},     # no size or eTag for deletions
     "eventTime": "2026-01-02T03:04:05.678Z",
     "copySource": {"bucket": "cdn", "object": "b.js"}}        # CopyObject only
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from conveyor.storage.errors import InvalidNotificationRule
from conveyor.storage.model import ACTION_GROUPS, ACTIONS, Action, NotificationRule, from_ms
from conveyor.storage.names import check_prefix

MAX_RULES_PER_BUCKET = 100
MAX_DESCRIPTION = 256


@dataclasses.dataclass(frozen=True)
class Event:
    """One write to report: the object's key and, unless it was deleted, its size and etag."""

    action: Action
    key: str
    size: int | None = None
    etag: str | None = None
    copy_source: tuple[str, str] | None = None  # (bucket, key) of a CopyObject


def check_actions(actions: Any) -> tuple[Action, ...]:
    if isinstance(actions, str) or not isinstance(actions, Iterable):
        raise InvalidNotificationRule(f"actions must be a list of {', '.join(ACTIONS)}, not {actions!r}")
    chosen: list[Action] = []
    for action in actions:
        expanded = ACTION_GROUPS.get(action, (action,)) if isinstance(action, str) else (action,)
        for one in expanded:
            if one not in ACTIONS:
                raise InvalidNotificationRule(
                    f"action {one!r} is unknown; use {', '.join(ACTIONS)} (or object-create, object-delete)"
                )
            if one not in chosen:
                chosen.append(one)
    if not chosen:
        raise InvalidNotificationRule("a notification rule needs at least one action")
    return tuple(chosen)


def check_rule(actions: Any, prefix: Any, suffix: Any, description: Any) -> tuple[tuple[Action, ...], str, str, str]:
    chosen = check_actions(actions)
    check_prefix(prefix)
    check_prefix(suffix, "suffix")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise InvalidNotificationRule(f"description must be a string of at most {MAX_DESCRIPTION} characters")
    return chosen, prefix, suffix, description


def overlaps(rule: NotificationRule, actions: Sequence[Action], prefix: str, suffix: str) -> bool:
    """Whether a new rule for the same queue could fire for an event ``rule`` fires for (R2 refuses
    such rules: one write would be reported twice)."""
    if not set(rule.actions) & set(actions):
        return False
    prefixes_meet = rule.prefix.startswith(prefix) or prefix.startswith(rule.prefix)
    suffixes_meet = rule.suffix.endswith(suffix) or suffix.endswith(rule.suffix)
    return prefixes_meet and suffixes_meet


def matches(rule: NotificationRule, event: Event) -> bool:
    return event.action in rule.actions and event.key.startswith(rule.prefix) and event.key.endswith(rule.suffix)


def message(account: str, bucket: str, event: Event, now_ms: int) -> str:
    """The JSON body R2 sends for ``event``."""
    obj: dict[str, Any] = {"key": event.key}
    if event.size is not None:
        obj["size"] = event.size
    if event.etag is not None:
        obj["eTag"] = event.etag
    body: dict[str, Any] = {
        "account": account,
        "action": event.action,
        "bucket": bucket,
        "object": obj,
        "eventTime": from_ms(now_ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{now_ms % 1000:03d}Z",
    }
    if event.copy_source is not None:
        body["copySource"] = {"bucket": event.copy_source[0], "object": event.copy_source[1]}
    return json.dumps(body, separators=(",", ":"))
