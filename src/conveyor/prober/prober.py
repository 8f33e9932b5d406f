"""``Prober``: fan-out rounds of checks over a fleet, run by the worker whose code creates it.

>>> app = conveyor.App(cv)
>>> prober = conveyor.Prober(app, fleet="mcp", messages=19, per_message=5, at_a_time=3,
...                          schedule="*/5 * * * *")
>>> @prober.check("signing")
... def signing(target): ...
>>> app.run()                      # or: conveyor worker myprobes:app

What it puts on the app:

- the fleet's tick, a workflow ``prober-<fleet>`` with the cron ``schedule`` (so one tick starts one
  round however many workers run: the workflows' cron). A tick claims the due targets in one
  transaction (:meth:`ProbeStore.claim`) and sends them as ``messages`` messages of at most
  ``per_message`` job ids to the queue ``prober-<fleet>``; with ``messages=0`` it checks them one
  after another itself (the single loop);
- the consumer of that queue: each message is one invocation, checking ``at_a_time`` of its
  targets at once (the consumer's concurrency is automatic unless ``max_concurrency`` says);
- the sweeper, a coordinator service: jobs whose lease ran out become ``abandoned`` and their
  targets claimable again (claims sweep the fleet first too, so no target waits for it);
- on start, the fleet's record: its check names, shape and schedule (what ``conveyor probe
  targets add`` checks a check name against).

``prober.round()`` claims and fans out a round at once, from any process of the deployment, and
returns its :class:`RoundSummary` once every job of it has ended.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import logging
import secrets
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from conveyor import limits
from conveyor.consumer.app import App
from conveyor.errors import QueueExists, QueueNotFound
from conveyor.prober.checks import CheckFunction, HttpCheck, ProbeTarget, run_check
from conveyor.prober.errors import InvalidTarget
from conveyor.prober.fleet import Fleet, queue_name, workflow_name
from conveyor.prober.model import HTTP_CHECK, CheckOutcome, Job, Shape, check_check_name, parse_interval
from conveyor.prober.report import RoundSummary
from conveyor.prober.store import ClaimedRound, probe_store
from conveyor.workflows.model import Retries
from conveyor.workflows.schedules import check_cron

if TYPE_CHECKING:
    import ssl

    from conveyor.client.sync import Conveyor
    from conveyor.consumer.batch import MessageBatch
    from conveyor.workflows.model import WorkflowEvent
    from conveyor.workflows.runtime import WorkflowStep

log = logging.getLogger("conveyor.prober")
F = TypeVar("F", bound=CheckFunction)

DEFAULT_LEASE = 600.0
DEFAULT_TIMEOUT = 30.0
SWEEP_INTERVAL = 5.0
CLAIM_RETRIES = Retries(limit=5, delay=1.0, backoff="exponential")


def _ms(when: datetime.datetime) -> int:
    return round(when.timestamp() * 1000)


def _is_invocation(body: object) -> bool:
    """Whether ``body`` is ``{"round": str, "slot": int, "jobs": [str, ...]}``."""
    return (
        isinstance(body, dict)
        and isinstance(body.get("round"), str)
        and isinstance(body.get("slot"), int)
        and isinstance(body.get("jobs"), list)
        and all(isinstance(job, str) for job in body["jobs"])
    )


class Prober:
    """Fan-out rounds of checks over the fleet ``fleet`` of the app's account.

    ``conveyor``: the :class:`~conveyor.App` that runs it (or a client, for which one is made:
    ``prober.app``). ``messages`` × ``per_message`` × ``at_a_time``: the round's shape (``messages=0``:
    the single loop). ``schedule``: the cron of its rounds (None: only on demand). ``lease``: how long
    a job may stay claimed or running before the sweeper abandons it (seconds or ``"10 minutes"``);
    ``timeout``: how long one check may take (the ``http`` check's network timeout; a check still
    running after twice that is given up as failed); a message's waves of checks must fit in the
    lease, which its jobs get anew when its invocation begins. ``verify`` and
    ``min_cert_days``: the ``http`` check's CAs and how close a certificate's expiry fails it.
    """

    def __init__(
        self,
        conveyor: App | Conveyor,
        *,
        fleet: str = "default",
        messages: int = 19,
        per_message: int = 5,
        at_a_time: int = 3,
        schedule: str | None = "*/5 * * * *",
        lease: float | str = DEFAULT_LEASE,
        timeout: float = DEFAULT_TIMEOUT,
        verify: ssl.SSLContext | str | bool = True,
        min_cert_days: float = 7.0,
        max_concurrency: int | None = None,
        visibility_timeout_ms: int = limits.DEFAULT_VISIBILITY_TIMEOUT_MS,
    ) -> None:
        self.app = conveyor if isinstance(conveyor, App) else App(conveyor)
        self.conveyor = self.app.conveyor
        self.shape = Shape(messages, per_message, at_a_time)
        self.schedule = None if schedule is None else check_cron(schedule)
        self.lease_ms = parse_interval(lease, "lease")
        # A message's checks run in waves of at_a_time, each given up after twice the timeout: the
        # whole invocation fits in the lease its jobs got when it began (a single loop renews it
        # before each check).
        waves = 1 if messages == 0 else -(-per_message // at_a_time)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout * 2000 * waves < self.lease_ms
        ):
            raise InvalidTarget(
                f"timeout is {timeout!r}; it must be more than 0, and a message's {waves} wave(s) of checks, "
                f"each given up after twice the timeout, must fit in the lease ({lease!r})"
            )
        self.timeout = float(timeout)
        self._checks: dict[str, CheckFunction] = {
            HTTP_CHECK: HttpCheck(timeout=self.timeout, verify=verify, min_cert_days=min_cert_days)
        }
        self.fleet = Fleet(self.conveyor, fleet, checks=self._checks.keys())
        self.name = self.fleet.name
        self._queue = queue_name(self.name)
        self._ensure_queue()
        self.app.consumer(
            self._queue,
            max_batch_size=1,
            max_batch_timeout=0,
            max_concurrency=max_concurrency,
            visibility_timeout_ms=visibility_timeout_ms,
            handler_timeout=self.lease_ms / 1000,
        )(self.handle)
        self.app.workflow(workflow_name(self.name), schedules=None if self.schedule is None else [self.schedule])(
            self.tick
        )
        self.app.on_start(self._register)
        self.app.add_coordinator_service(f"prober-sweeper-{self.name}", SWEEP_INTERVAL, self.sweep)

    def __repr__(self) -> str:
        return f"Prober({self.name!r}, {self.shape})"

    def check(self, name: str) -> Callable[[F], F]:
        """Register ``fn(target)`` as the check ``name`` in this worker (plain or ``async``): it
        returns to pass (a dict is kept as details) or raises to fail (``CheckFailed``)."""
        check_check_name(name)
        if name in self._checks:
            raise InvalidTarget(f"check {name!r} is registered already" + (" (built in)" if name == HTTP_CHECK else ""))

        def register(fn: F) -> F:
            if not callable(fn):
                raise InvalidTarget(f"check {name!r}: {fn!r} is not a function")
            self._checks[name] = fn
            return fn

        return register

    @property
    def checks(self) -> list[str]:
        """The check names this worker runs."""
        return sorted(self._checks)

    # -- rounds -------------------------------------------------------------------------------
    def round(self, *, wait: bool = True, timeout: float | None = None) -> RoundSummary:
        """Claim the due targets and fan them out now (with ``messages=0``, check them here, one
        after another); with ``wait``, return once every job of the round has ended (the fleet's
        consumers must run somewhere: this app, or another worker), else at once."""
        now = self.conveyor.engine.clock.now_ms()
        round_id = f"round-{now}-{secrets.token_hex(3)}"
        claimed = self._claim(round_id, "round", now)
        if self.shape.messages == 0:
            self.run_jobs(round_id, 0, claimed.job_ids, 1)
        else:
            self._send(claimed)
        if wait:
            return self.fleet.wait_for_round(round_id, self.lease_ms / 1000 if timeout is None else timeout)
        summary = self.fleet.round(round_id)
        assert summary is not None
        return summary

    def tick(self, event: WorkflowEvent, step: WorkflowStep) -> dict[str, Any]:
        """The fleet's tick workflow: claim (once per instance, however often it is replayed), then
        fan out or run the single loop."""
        if event.schedule is not None:
            trigger, mark = "cron", _ms(event.schedule)
        else:
            given = event.payload.get("mark_ms") if isinstance(event.payload, dict) else None
            trigger = "now"
            mark = given if isinstance(given, int) and not isinstance(given, bool) else _ms(event.timestamp)
        slots = step.do("claim", lambda: self._claim(event.instance_id, trigger, mark).slots, retries=CLAIM_RETRIES)
        if self.shape.messages == 0:
            jobs = [job for slot in slots for job in slot]
            loop_seconds = 2 * self.timeout * len(jobs) + self.lease_ms / 1000
            step.do("check", lambda: self.run_jobs(event.instance_id, 0, jobs, 1), timeout=loop_seconds)
        else:
            step.do("send", lambda: self._send_slots(event.instance_id, slots), retries=CLAIM_RETRIES)
        return {"round": event.instance_id, "jobs": sum(len(s) for s in slots)}

    def _claim(self, round_id: str, trigger: str, mark_ms: int) -> ClaimedRound:
        store = probe_store(self.conveyor)
        clock = self.conveyor.engine.clock.now_ms
        claimed = store.claim(
            self.conveyor.deployment.account, self.name, round_id, trigger, mark_ms, self.shape, self.lease_ms, clock
        )
        log.info("fleet %s: round %s claimed %d targets", self.name, round_id, len(claimed.job_ids))
        return claimed

    def _send(self, claimed: ClaimedRound) -> None:
        self._send_slots(claimed.round.id, claimed.slots)

    def _send_slots(self, round_id: str, slots: Sequence[Sequence[str]]) -> None:
        """One message per slot; if sending fails, the round's jobs not started are cancelled (their
        targets claimable again at once) and the error propagates."""
        bodies = [{"body": {"round": round_id, "slot": n, "jobs": list(slot)}} for n, slot in enumerate(slots)]
        try:
            queue = self.conveyor.queue(self._queue)
            for start in range(0, len(bodies), limits.MAX_BATCH_MESSAGES):
                queue.send_batch(bodies[start : start + limits.MAX_BATCH_MESSAGES])
        except Exception:
            now = self.conveyor.engine.clock.now_ms()
            probe_store(self.conveyor).cancel_round(self.conveyor.deployment.account, self.name, round_id, now)
            raise

    def _ensure_queue(self) -> None:
        try:
            self.conveyor.queue(self._queue)
        except QueueNotFound:
            with contextlib.suppress(QueueExists):  # another process made it first
                self.conveyor.create_queue(self._queue)

    # -- invocations --------------------------------------------------------------------------
    def handle(self, batch: MessageBatch) -> None:
        """The fleet queue's consumer: one message is one invocation, ``at_a_time`` checks at once."""
        for message in batch.messages:
            body = message.body
            if not _is_invocation(body):
                # Anyone who may send to the account's queues may send here: a message not of a
                # round's shape is dropped (a job runs only if a round claimed it, whatever it says).
                log.warning("fleet %s: message %s is not a round's message; dropped", self.name, message.id)
            else:
                self.run_jobs(body["round"], body["slot"], body["jobs"], self.shape.at_a_time)
            message.ack()

    def run_jobs(self, round_id: str, slot: int, job_ids: Sequence[str], at_a_time: int) -> int:
        """Start, check and finish each job of one message (``slot`` of ``round_id``), ``at_a_time``
        at once; how many this call ran. The jobs waiting their turn have their lease renewed when
        the invocation starts (and, one at a time, before each check of a single loop)."""
        store = probe_store(self.conveyor)
        account = self.conveyor.deployment.account

        def renew() -> None:
            store.renew(account, self.name, round_id, slot, self.lease_ms, self.conveyor.engine.clock.now_ms())

        if at_a_time == 1:
            ran = 0
            for job_id in job_ids:
                renew()
                ran += self._run_job(job_id)
            return ran
        renew()
        with concurrent.futures.ThreadPoolExecutor(min(at_a_time, len(job_ids)), "conveyor-probe") as pool:
            return sum(pool.map(self._run_job, job_ids))

    def _run_job(self, job_id: str) -> bool:
        store = probe_store(self.conveyor)
        runner = uuid.uuid4().hex
        job = store.start(job_id, runner, self.lease_ms, self.conveyor.engine.clock.now_ms())
        if job is None:
            return False  # started by another delivery of its message, or ended (abandoned, cancelled)
        outcome = self._check(job)
        if not store.finish(job, runner, outcome, self.conveyor.engine.clock.now_ms()):
            log.warning(
                "fleet %s: job %s (%s) ended before its check did (its lease ran out)", self.name, job.id, job.address
            )
        return True

    def _check(self, job: Job) -> CheckOutcome:
        fn = self._checks.get(job.check)
        if fn is None:
            return CheckOutcome(
                False, 0, f"no check named {job.check!r} is registered in this worker (it has {', '.join(self.checks)})"
            )
        target = ProbeTarget(job.target_id, job.address, job.host, job.check)
        result: list[CheckOutcome] = []
        # A plain function cannot be stopped: past twice its timeout (the http check's phases each
        # have one) its outcome is given up on, and the job finished as failed within its lease.
        thread = threading.Thread(
            target=lambda: result.append(run_check(fn, target)), daemon=True, name="conveyor-check"
        )
        thread.start()
        thread.join(2 * self.timeout)
        if not result:
            return CheckOutcome(
                False, round(2 * self.timeout * 1000), f"the check did not finish within {2 * self.timeout:g} s"
            )
        return result[0]

    # -- maintenance --------------------------------------------------------------------------
    def sweep(self) -> int:
        """Abandon the fleet's jobs whose lease ran out (the coordinator runs this every few seconds)."""
        store = probe_store(self.conveyor)
        count = store.sweep_fleet(self.conveyor.deployment.account, self.name, self.conveyor.engine.clock.now_ms())
        if count:
            log.warning("fleet %s: %d jobs abandoned (their lease ran out)", self.name, count)
        return count

    def _register(self) -> None:
        probe_store(self.conveyor).register(
            self.conveyor.deployment.account,
            self.name,
            self.checks,
            self.shape,
            self.schedule,
            self.lease_ms,
            self.conveyor.engine.clock.now_ms(),
        )
