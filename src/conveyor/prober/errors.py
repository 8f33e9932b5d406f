"""The prober's refusals (codes 17001 and up: Cloudflare has no such product)."""

from __future__ import annotations

from conveyor.errors import ConveyorError, InvalidRequest


class InvalidTarget(InvalidRequest):
    """A target, a fleet name, an interval or a round's shape that is malformed or out of range."""

    code = 17001


class TargetNotFound(ConveyorError):
    """No target with this id or address in the fleet (another account's are not found either)."""

    code = 17002
    status = 404


class UnknownCheck(InvalidRequest):
    """A check name that no worker of the fleet registered (``@prober.check(name)``); names are
    looked up among registered functions only, never imported."""

    code = 17003


class NoProberWorker(ConveyorError):
    """A round asked of a fleet that no worker runs yet (its tick workflow does not exist)."""

    code = 17004
    status = 409
