"""A Hypothesis stateful test of instance state transitions against a model.

The machine drives real instances of one workflow (a SQLite deployment, its store, the workflow's
internal queue and handler, a hand-moved clock) through create, pause, resume, terminate, restart
(from the start, or from a sleep), events, failing and succeeding attempts, the passing of time, and
actions taken while a step runs (a pause, a pause and resume, a terminate, a restart, an event).
The workflow::

    a = step.do("a", ..., retries=Retries(limit=1, delay=10, backoff="constant"))
    step.sleep("nap", 30)
    go = step.wait_for_event("go", type="go", timeout=60)
    b = step.do("b", ...)
    return {"a": a, "go": go.payload, "b": b}

Deliveries are the handler's, called by hand for every message the internal queue has due (the
way a worker would, one after another), so each example is deterministic. After every rule the
status of every instance (its step list with each step's outcome, the output, the error's name),
and how often each step's function ran, are what the model says; every refused action (a second
resume, a terminate of a finished instance, ...) raises its error and changes nothing.

``CONVEYOR_MODEL_PROFILE=thorough`` runs many more and longer examples than the suite's default.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

import conveyor
from conveyor.model import DeliveryPolicy
from conveyor.workflows import InstanceExists, InvalidInstanceState, InvalidStepConfig
from conveyor.workflows.execution import WorkflowHandler
from conveyor.workflows.model import FINISHED
from tests.conformance.support import FakeClock

settings.register_profile(
    "workflow-model", max_examples=40, stateful_step_count=40, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
settings.register_profile(
    "workflow-model-thorough", max_examples=400, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
PROFILE = "workflow-model-thorough" if os.environ.get("CONVEYOR_MODEL_PROFILE") == "thorough" else "workflow-model"

WORKFLOW = "model"
RETRY_DELAY_MS = 10_000
NAP_MS = 30_000
GO_TIMEOUT_MS = 60_000
MAX_INSTANCES = 4
# What a test may do while step b runs (on the step's thread, as another client would).
DURING_B = ("nothing", "pause", "pause and resume", "terminate", "restart", "event")
ACTIONS = ("pause", "resume", "terminate", "restart", "restart_from_the_sleep", "create_with_a_taken_id")


@dataclasses.dataclass
class Expected:
    """The model of one instance: its status and timers, and what its steps have stored."""

    status: str = "queued"
    resume_status: str | None = None
    paused_at: int | None = None
    wake_at: int | None = None
    waiting_for: str | None = None
    a_done: bool = False
    a_failures: int = 0
    a_retry_at: int | None = None
    nap_until: int | None = None
    nap_done: bool = False
    go_deadline: int | None = None
    go: int | None = None  # the payload the wait took
    go_timed_out: bool = False
    b_done: bool = False
    buffered: list[int] = dataclasses.field(default_factory=list)  # "go" events nobody took yet
    consumed: list[int] = dataclasses.field(default_factory=list)  # taken by the current "go" step
    output: Any = None
    error: str | None = None

    def restart(self, *, keep_a: bool) -> None:
        """Back to ``queued``, the stored steps from "nap" (or all) forgotten, their events buffered again."""
        fresh = Expected(buffered=self.consumed + self.buffered)
        if keep_a:
            fresh.a_done, fresh.a_failures, fresh.a_retry_at = self.a_done, self.a_failures, self.a_retry_at
        self.__dict__.update(fresh.__dict__)

    def steps(self) -> list[tuple[str, bool | None]]:
        """The steps status() should show, each with its success (None while unfinished)."""
        shown: list[tuple[str, bool | None]] = []
        if self.a_done or self.a_failures:
            shown.append(("a-1", True if self.a_done else (False if self.a_failures > 1 else None)))
        if self.nap_until is not None:
            shown.append(("nap-1", True if self.nap_done else None))
        if self.go_deadline is not None:
            shown.append(("go-1", True if self.go is not None else (False if self.go_timed_out else None)))
        if self.b_done:
            shown.append(("b-1", True))
        return shown

    def due(self, now: int) -> bool:
        """Whether a delivery now runs it."""
        if self.status == "queued":
            return True
        return self.status == "waiting" and (
            (self.wake_at is not None and self.wake_at <= now) or (self.waiting_for == "go" and bool(self.buffered))
        )


class InstanceModel(RuleBasedStateMachine):
    instances = Bundle("instances")

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="conveyor-instance-model-"))
        self.clock = FakeClock()
        self.cv = conveyor.connect(f"sqlite://{self.directory}")
        self.cv.engine.clock = self.clock
        app = conveyor.App(self.cv)
        app.workflow(WORKFLOW)(self._workflow)
        self.queue_id, spec = app.workflows[0].start(self.cv)
        assert isinstance(spec.handler, WorkflowHandler)
        self.handler = spec.handler
        self.wf = self.cv.workflow(WORKFLOW)
        self.expected: dict[str, Expected] = {}
        self.failing: dict[str, bool] = {}
        self.during_b: dict[str, str] = {}
        self.calls: Counter[tuple[str, str]] = Counter()
        self.expected_calls: Counter[tuple[str, str]] = Counter()
        self.seen_during_b: list[tuple[str, str, str]] = []  # (instance, when, status or error)
        self.expected_seen: list[tuple[str, str, str]] = []
        self.planned: dict[str, str] = {}  # the model's copy of during_b
        self.events_sent = 0

    def teardown(self) -> None:
        self.cv.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- the workflow and its step functions ----------------------------------------------------
    def _workflow(self, event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> dict[str, Any]:
        instance = event.instance_id
        retries = conveyor.Retries(limit=1, delay=RETRY_DELAY_MS / 1000, backoff="constant")
        a = step.do("a", lambda: self._a(instance), retries=retries)
        step.sleep("nap", NAP_MS / 1000)
        go = step.wait_for_event("go", type="go", timeout=GO_TIMEOUT_MS / 1000)
        b = step.do("b", lambda: self._b(instance))
        return {"a": a, "go": go.payload, "b": b}

    def _a(self, instance: str) -> str:
        self.calls[(instance, "a")] += 1
        if self.failing.get(instance, False):
            raise RuntimeError("a failed, as the test asked")
        return "a"

    def _b(self, instance: str) -> str:
        """Step b: what the test asked for happens while it runs. Nothing here may raise (a raise
        would be the step's failure): what it sees is recorded, and checked by ``deliver``."""
        self.calls[(instance, "b")] += 1
        inst = self.wf.get(instance)
        action = self.during_b.pop(instance, "nothing")
        self.seen_during_b.append((instance, "before", inst.status().status))
        try:
            if action in ("pause", "pause and resume"):
                inst.pause()
                self.seen_during_b.append((instance, "paused", inst.status().status))
                if action == "pause and resume":
                    inst.resume()
                    self.seen_during_b.append((instance, "resumed", inst.status().status))
            elif action == "terminate":
                inst.terminate()
            elif action == "restart":
                inst.restart()
            elif action == "event":
                inst.send_event("go", self.events_sent)
        except Exception as exc:  # recorded, and fails the rule that delivered
            self.seen_during_b.append((instance, action, repr(exc)))
        return "b"

    # -- the model of a run -------------------------------------------------------------------
    def _run(self, instance: str, e: Expected, now: int) -> None:
        """What one delivery does to a due instance, in the model."""
        e.status, e.wake_at, e.waiting_for = "running", None, None
        if not e.a_done:
            if e.a_retry_at is not None and e.a_retry_at > now:
                return self._suspend(e, e.a_retry_at)
            self.expected_calls[(instance, "a")] += 1
            if self.failing.get(instance, False):
                e.a_failures += 1
                if e.a_failures > 1:
                    return self._finish(e, "errored", error="RuntimeError")
                e.a_retry_at = now + RETRY_DELAY_MS
                return self._suspend(e, e.a_retry_at)
            e.a_done = True
        if not e.nap_done:
            if e.nap_until is None:
                e.nap_until = now + NAP_MS
            if now < e.nap_until:
                return self._suspend(e, e.nap_until)
            e.nap_done = True
        if e.go is None:
            if e.go_deadline is None:
                e.go_deadline = now + GO_TIMEOUT_MS
            if e.buffered:
                e.go = e.buffered.pop(0)
                e.consumed.append(e.go)
            elif now >= e.go_deadline:
                e.go_timed_out = True
                return self._finish(e, "errored", error="WorkflowTimeoutError")
            else:
                return self._suspend(e, e.go_deadline, "go")
        if e.b_done:  # stored before a pause that came while it ran: replayed, not run
            return self._finish(e, "complete", output={"a": "a", "go": e.go, "b": "b"})
        return self._run_b(instance, e, now)

    def _run_b(self, instance: str, e: Expected, now: int) -> None:
        self.expected_calls[(instance, "b")] += 1
        action = self.planned.pop(instance, "nothing")
        self.expected_seen += [(instance, "before", "running")]
        if action == "terminate":
            e.status = "terminated"  # b's result is not recorded: the run was fenced
            return None
        if action == "restart":
            e.restart(keep_a=False)
            return None
        if action == "event":
            e.buffered.append(self.events_sent)
        e.b_done = True
        if action == "pause":
            self.expected_seen += [(instance, "paused", "waitingForPause")]
            e.status, e.resume_status, e.paused_at, e.wake_at = "paused", "waiting", now, now
            return None
        if action == "pause and resume":
            self.expected_seen += [(instance, "paused", "waitingForPause"), (instance, "resumed", "running")]
        return self._finish(e, "complete", output={"a": "a", "go": e.go, "b": "b"})

    @staticmethod
    def _suspend(e: Expected, wake_at: int, waiting_for: str | None = None) -> None:
        e.status, e.wake_at, e.waiting_for = "waiting", wake_at, waiting_for

    @staticmethod
    def _finish(e: Expected, status: str, *, output: Any = None, error: str | None = None) -> None:
        e.status, e.output, e.error, e.wake_at, e.waiting_for = status, output, error, None, None

    # -- rules --------------------------------------------------------------------------------
    @initialize(target=instances)
    def create_the_first(self) -> str:
        return self.create()

    @precondition(lambda self: len(self.expected) < MAX_INSTANCES)
    @rule(target=instances)
    def create(self) -> str:
        instance = f"i{len(self.expected)}"
        self.wf.create(id=instance)
        self.expected[instance] = Expected()
        return instance

    def create_with_a_taken_id(self, instance: str) -> None:
        with pytest.raises(InstanceExists):
            self.wf.create(id=instance)

    @rule(instance=instances, action=st.sampled_from(ACTIONS))
    def act(self, instance: str, action: str) -> None:
        """One of the client's actions (one rule for them all, so that they do not crowd out the
        rules that let instances go on)."""
        getattr(self, action)(instance)

    @rule(instance=instances, failing=st.booleans())
    def make_step_a_fail(self, instance: str, failing: bool) -> None:
        self.failing[instance] = failing

    @rule(instance=instances, action=st.sampled_from(DURING_B))
    def while_step_b_runs(self, instance: str, action: str) -> None:
        self.during_b[instance] = action

    def pause(self, instance: str) -> None:
        e = self.expected[instance]
        if e.status in FINISHED or e.status == "paused":
            self._refused(lambda: self.wf.get(instance).pause())
            return
        self.wf.get(instance).pause()
        e.status, e.resume_status, e.paused_at = "paused", e.status, self.clock.now_ms()

    def resume(self, instance: str) -> None:
        e = self.expected[instance]
        if e.status != "paused":  # a second resume, or one of an instance never paused
            self._refused(lambda: self.wf.get(instance).resume())
            return
        self.wf.get(instance).resume()
        now = self.clock.now_ms()
        if e.wake_at is not None:
            e.wake_at += now - (e.paused_at or now)
        e.status, e.resume_status, e.paused_at = e.resume_status or "queued", None, None

    def terminate(self, instance: str) -> None:
        e = self.expected[instance]
        if e.status in FINISHED:
            self._refused(lambda: self.wf.get(instance).terminate())
            return
        self.wf.get(instance).terminate()
        e.status = "terminated"

    def restart(self, instance: str) -> None:
        self.wf.get(instance).restart()
        self.expected[instance].restart(keep_a=False)

    def restart_from_the_sleep(self, instance: str) -> None:
        e = self.expected[instance]
        if e.nap_until is None:
            with pytest.raises(InvalidStepConfig):
                self.wf.get(instance).restart(from_step={"name": "nap", "type": "sleep"})
            return
        self.wf.get(instance).restart(from_step={"name": "nap", "type": "sleep"})
        e.restart(keep_a=True)

    @rule(instance=instances, type=st.sampled_from(["go", "go", "other"]))
    def send_event(self, instance: str, type: str) -> None:
        e = self.expected[instance]
        self.events_sent += 1
        if e.status in FINISHED:
            self._refused(lambda: self.wf.get(instance).send_event(type, self.events_sent))
            return
        self.wf.get(instance).send_event(type, self.events_sent)
        if type == "go":
            e.buffered.append(self.events_sent)

    @rule(seconds=st.sampled_from([1, 5, 10, 30, 61]))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule(seconds=st.sampled_from([5, 10, 30, 61]))
    def time_passes_with_a_worker(self, seconds: int) -> None:
        self.clock.advance(seconds)
        self.deliver()

    @rule()
    def deliver(self) -> None:
        """Hand every due message of the internal queue to the handler, until none is left; in the
        model, run every due instance until none is."""
        self.seen_during_b.clear()
        self.expected_seen.clear()
        self.planned = dict(self.during_b)
        policy = DeliveryPolicy(max_retries=100)
        engine = self.cv.engine
        for _ in range(1000):
            leased = engine.lease(self.queue_id, 10, 60_000, policy)
            if not leased:
                break
            for message in leased:
                body = json.loads(message.body)
                self.handler.advance(body["id"], body["wake"], message.id, lambda error: None)
            engine.settle(self.queue_id, [m.lease_id for m in leased], [], policy)
        else:
            raise AssertionError("deliveries went on and on")
        now = self.clock.now_ms()
        for _ in range(100):
            due = [(i, e) for i, e in self.expected.items() if e.due(now)]
            if not due:
                break
            for instance, e in due:
                self._run(instance, e, now)
        assert sorted(self.seen_during_b) == sorted(self.expected_seen)
        for _, _, status in self.seen_during_b:
            event(f"an instance was {status}")
        assert self.during_b == self.planned, "step b ran for other instances than the model says"

    def _refused(self, action: Any) -> None:
        with pytest.raises(InvalidInstanceState) as refused:
            action()
        assert refused.value.code == 13007

    # -- what must hold after every rule ------------------------------------------------------
    @invariant()
    def every_instance_is_as_the_model_says(self) -> None:
        for instance, e in self.expected.items():
            s = self.wf.get(instance).status()
            shown = [(step.name, step.success) for step in s.steps]
            assert (s.status, shown) == (e.status, e.steps()), instance
            event(f"an instance was {s.status}")
            assert s.output == (e.output if e.status == "complete" else None), instance
            assert (s.error or {}).get("name") == (e.error if e.status == "errored" else None), instance

    @invariant()
    def each_step_function_ran_only_as_often_as_the_model_says(self) -> None:
        assert self.calls == self.expected_calls


TestInstanceModel = InstanceModel.TestCase
TestInstanceModel.settings = settings.get_profile(PROFILE)
