"""Durable workflows on Conveyor's queues, with Cloudflare Workflows' semantics.

>>> app = conveyor.App(cv)
>>> @app.workflow("download-package")
... def download(event: conveyor.WorkflowEvent, step: conveyor.WorkflowStep) -> dict:
...     meta = step.do("fetch metadata", lambda: fetch(event.payload["name"]))
...     step.sleep("cool down", "30 seconds")
...     done = step.wait_for_event("compressed", type="file-compressed", timeout="1 hour")
...     return {"files": meta["count"], "event": done.payload}
>>> app.start()
>>> inst = cv.workflow("download-package").create(params={"name": "jquery"})
>>> inst.send_event("file-compressed", {"path": "jquery.min.js.br"})
>>> inst.status().status
'complete'

The parts: :mod:`.store` (the durable transitions, one contract) with its SQL implementation
(:mod:`.sql_store`, :mod:`.databases`); :mod:`.runtime` (steps, replay, fencing); :mod:`.execution`
(the internal queues and the push handler); :mod:`.client` (handles); :mod:`.registration`
(``@app.workflow``); :mod:`.records` (records a PUT makes, ``cv.put_workflow``); :mod:`.counter`
(``cv.counter``, fan-in); :mod:`.schedules` (cron); :mod:`.retention`.
"""

from conveyor.workflows.client import BatchError, BatchResult, Instance, Workflow
from conveyor.workflows.counter import AsyncCounter, Counter
from conveyor.workflows.durations import parse_duration
from conveyor.workflows.errors import (
    InstanceExists,
    InstanceNotFound,
    InvalidInstanceId,
    InvalidInstanceState,
    InvalidStepConfig,
    InvalidWorkflowName,
    NonRetryableError,
    PayloadTooLarge,
    StepNotFound,
    StepTimeout,
    WorkflowNotFound,
    WorkflowStepError,
    WorkflowVersionNotFound,
)
from conveyor.workflows.model import (
    Attempt,
    InstancePage,
    InstanceStatus,
    InstanceSummary,
    ReceivedEvent,
    Retries,
    StepRecord,
    WorkflowEvent,
    WorkflowOverrides,
    WorkflowRecord,
    WorkflowVersion,
)
from conveyor.workflows.runtime import AsyncWorkflowStep, WorkflowStep
from conveyor.workflows.store import WorkflowStore

__all__ = [
    "AsyncCounter",
    "AsyncWorkflowStep",
    "Attempt",
    "BatchError",
    "BatchResult",
    "Counter",
    "Instance",
    "InstanceExists",
    "InstanceNotFound",
    "InstancePage",
    "InstanceStatus",
    "InstanceSummary",
    "InvalidInstanceId",
    "InvalidInstanceState",
    "InvalidStepConfig",
    "InvalidWorkflowName",
    "NonRetryableError",
    "PayloadTooLarge",
    "ReceivedEvent",
    "Retries",
    "StepNotFound",
    "StepRecord",
    "StepTimeout",
    "Workflow",
    "WorkflowEvent",
    "WorkflowNotFound",
    "WorkflowOverrides",
    "WorkflowRecord",
    "WorkflowStep",
    "WorkflowStepError",
    "WorkflowStore",
    "WorkflowVersion",
    "WorkflowVersionNotFound",
    "parse_duration",
]
