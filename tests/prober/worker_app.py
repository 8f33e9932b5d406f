"""The fault test's worker, run as a real process: ``conveyor --url URL worker
tests.prober.worker_app:app``. Short leases and visibility timeouts, so a killed worker's jobs
and messages come back within seconds."""

from __future__ import annotations

import conveyor

FLEET = "kill"
LEASE_SECONDS = 5
TIMEOUT_SECONDS = 2.0

app = conveyor.App(grace_period=1)
prober = conveyor.Prober(
    app,
    fleet=FLEET,
    messages=4,
    per_message=2,
    at_a_time=2,
    schedule=None,
    lease=LEASE_SECONDS,
    timeout=TIMEOUT_SECONDS,
    visibility_timeout_ms=2000,
)
