"""The prober: fan-out rounds of checks over a fleet of targets, on Conveyor's own queues.

A fleet's targets each name a host, a check (``http`` built in: status, latency, TLS certificate
expiry; others registered in the worker's code) and an interval (12 hours by default). On its cron
(every 5 minutes by default), or at once, a round claims the due targets and fans them out as
``messages`` messages of at most ``per_message`` targets, each invocation checking ``at_a_time`` at
once — ``messages=0`` is the old single loop:

>>> app = conveyor.App(cv)
>>> prober = conveyor.Prober(app, fleet="mcp", messages=19, per_message=5, at_a_time=3,
...                          schedule="*/5 * * * *")
>>> @prober.check("signing")
... def signing(target: conveyor.prober.ProbeTarget) -> dict: ...
>>> prober.fleet.add("https://mcp.example.com/health")
>>> prober.round()                  # RoundSummary(jobs=21, seconds=..., ...) once its jobs ended
>>> prober.fleet.report().host_overlaps
0

The parts:

- :mod:`.model` and :mod:`.errors`: what targets, jobs and rounds are; every bad value refused by
  name (``InvalidTarget``, ``UnknownCheck``, ``TargetNotFound``, ``NoProberWorker``).
- :mod:`.store`: ``ProbeStore``, the only code that writes the tool's tables (``prober.db`` in a
  SQLite deployment's directory, migration 0015 in a PostgreSQL one; both run ``queries.sql``).
  Claims are atomic however many claimers race: the database keeps one open job per target and
  per host (unique indexes), and a target's next due time moves with its job's finish.
- :mod:`.checks`: the check registry's contract, :class:`CheckFailed`, the ``http`` check.
- :mod:`.prober`: the :class:`Prober` (the tick workflow, the fan-out consumer, the sweeper).
- :mod:`.fleet`: :class:`Fleet`, a fleet's targets, rounds and report for any client;
  :mod:`.remote` its twin over ``conveyor serve``; :mod:`.report` the figures.
"""

from conveyor.prober.checks import CheckFailed, HttpCheck, ProbeTarget
from conveyor.prober.errors import InvalidTarget, NoProberWorker, TargetNotFound, UnknownCheck
from conveyor.prober.fleet import Fleet, FleetHandle, fleet, list_fleets
from conveyor.prober.model import CheckOutcome, Shape, Target
from conveyor.prober.prober import Prober
from conveyor.prober.report import Report, RoundSummary

__all__ = [
    "CheckFailed",
    "CheckOutcome",
    "Fleet",
    "FleetHandle",
    "HttpCheck",
    "InvalidTarget",
    "NoProberWorker",
    "ProbeTarget",
    "Prober",
    "Report",
    "RoundSummary",
    "Shape",
    "Target",
    "TargetNotFound",
    "UnknownCheck",
    "fleet",
    "list_fleets",
]
