"""The refusals of workflows (each a :class:`~conveyor.errors.ConveyorError` with a code), and the
exceptions a workflow's code raises or sees.

Codes 13001-13010 are Conveyor's own: Cloudflare's Workflows API names its errors
(``instance.already_exists``) instead of numbering them.
"""

from __future__ import annotations

from conveyor.errors import ConveyorError, InvalidRequest


class InvalidWorkflowName(InvalidRequest):
    code = 13001


class InvalidInstanceId(InvalidRequest):
    code = 13002


class WorkflowNotFound(ConveyorError):
    code = 13003
    status = 404


class InstanceNotFound(ConveyorError):
    code = 13004
    status = 404


class InstanceExists(ConveyorError):
    """``instance.already_exists``: ids are unique per workflow and never reused, even after delete."""

    code = 13005
    status = 409


class PayloadTooLarge(InvalidRequest):
    """Params, a step result or an event payload over 1 MiB, or not JSON-encodable."""

    code = 13006
    status = 413


class InvalidInstanceState(ConveyorError):
    """An action the instance's status does not allow (a second resume, terminating a finished one)."""

    code = 13007
    status = 409


class InvalidStepConfig(InvalidRequest):
    """A bad step name, duration, retry setting or workflow setting."""

    code = 13008


class WorkflowVersionNotFound(ConveyorError):
    code = 13009
    status = 404


class StepNotFound(ConveyorError):
    """An instance has no step of that name, occurrence and type (``instances.step``)."""

    code = 13010
    status = 404


class NonRetryableError(Exception):
    """Raised from a step's function: the step fails at once, without its remaining retries.

    >>> raise conveyor.NonRetryableError("bad tarball")
    """

    def __init__(self, message: str = "", name: str = "NonRetryableError") -> None:
        super().__init__(message)
        self.name = name


class WorkflowStepError(Exception):
    """Raised inside the workflow when a step failed for good (retries used up, non-retryable, or
    timed out waiting for an event); ``name`` and ``message`` are the last attempt's error. Uncaught,
    it errors the instance."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


class StepTimeout(Exception):
    """An attempt of a step ran past its ``timeout``."""
