"""OpenTelemetry spans of a run, in processes of their own (a tracer provider is set once per
process): with an SDK configured, the creator's span parents each run's ``workflow`` span (a run
that unwinds to sleep is no error), which parents each ``step`` attempt span (a failed attempt
marked ERROR), which parents the ``send`` span whose id the message carries; without
opentelemetry imported, Conveyor imports none of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUN = """
import json, sys, time
import conveyor

cv = conveyor.connect("sqlite://" + sys.argv[1])
out = cv.create_queue("out")
out.add_pull_consumer()
app = conveyor.App(cv, grace_period=5)
tries = []

def flaky():
    tries.append(1)
    if len(tries) == 1:
        raise RuntimeError("first try fails")
    return out.send({"n": 1}).id

@app.workflow("traced")
def traced(event, step):
    sent = step.do("flaky", flaky, retries=conveyor.Retries(limit=1, delay=0))
    step.sleep("nap", 0.05)  # the run unwinds and a second run finishes the instance
    return sent

def run(create):
    app.start()
    try:
        inst = create()
        deadline = time.monotonic() + 20
        while inst.status().status != "complete":
            assert time.monotonic() < deadline, inst.status()
            time.sleep(0.02)
    finally:
        app.stop(grace=5)
    (m,) = out.pull()
    return inst.status().trace_id, m.traceparent
"""

WITH_SDK = (
    """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
"""
    + RUN
    + """
def create():
    with trace.get_tracer("test").start_as_current_span("request"):
        return cv.workflow("traced").create(id="one")

trace_id, message = run(create)
spans = [
    {
        "name": s.name,
        "trace": format(s.context.trace_id, "032x"),
        "id": format(s.context.span_id, "016x"),
        "parent": format(s.parent.span_id, "016x") if s.parent else None,
        "kind": s.kind.name,
        "status": s.status.status_code.name,
        "attributes": dict(s.attributes or {}),
    }
    for s in exporter.get_finished_spans()
]
print(json.dumps({"trace_id": trace_id, "message": message, "spans": spans}))
"""
)

WITHOUT = (
    RUN
    + """
trace_id, message = run(lambda: cv.workflow("traced").create(id="one"))
print(json.dumps({"trace_id": trace_id, "message": message,
                  "imported": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))
"""
)


def _python(script: str, tmp_path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "data")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_sdk_records_the_run_the_attempts_and_the_send_as_one_tree_of_spans(tmp_path: Path) -> None:
    found = _python(WITH_SDK, tmp_path)
    spans = {}
    for span in found["spans"]:
        spans.setdefault(span["name"], []).append(span)
    (request,) = spans["request"]
    assert {s["trace"] for s in found["spans"]} == {request["trace"]} == {found["trace_id"]}
    runs = spans["workflow traced"]
    assert len(runs) == 2 and all(r["parent"] == request["id"] for r in runs)
    assert all(r["status"] != "ERROR" for r in runs), "a run that sleeps, or completes, has not failed"
    first, second = spans["step flaky"]
    assert first["status"] == "ERROR" and second["status"] != "ERROR"
    assert (first["attributes"]["conveyor.attempt"], second["attributes"]["conveyor.attempt"]) == (1, 2)
    assert {first["parent"], second["parent"]} <= {r["id"] for r in runs}
    (send,) = spans["send out"]
    assert send["kind"] == "PRODUCER" and send["parent"] == second["id"]
    assert found["message"][:53] == f"00-{send['trace']}-{send['id']}-"


def test_without_opentelemetry_imported_none_of_it_is_loaded_and_the_trace_still_flows(tmp_path: Path) -> None:
    found = _python(WITHOUT, tmp_path)
    assert found["imported"] == []
    assert found["message"][3:35] == found["trace_id"]
