"""The workflow pages in a real browser (Debian's chromium via Playwright) against a real ``conveyor
serve`` and a real ``conveyor worker`` process running a real workflow: follow an instance from the
workflows list to its timeline and its trace, and do every action through the UI with its
confirmation — send an event (a bad payload first), pause, resume, restart from a step, terminate.
Screenshots go to ``test-artifacts/dash/``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

import conveyor
from tests.dash import test_dash_browser as shared
from tests.dash.browser import screenshot_path
from tests.server.process import CONVEYOR, ServeProcess, serve_process
from tests.waiting import wait_for

ACCOUNT = "acme"
browser, page, log_in = shared.browser, shared.page, shared.log_in  # the same fixtures and login
HOSTILE = '<script>alert("boom")</script>'
MODULE = """
import conveyor

app = conveyor.App()
tries = {}


@app.workflow("orders")
def orders(event, step):
    def charge():
        tries[event.instance_id] = tries.get(event.instance_id, 0) + 1
        if tries[event.instance_id] == 1:
            raise ValueError("card declined <b>once</b>")
        return {"charged": event.payload["amount"]}

    charged = step.do("charge", charge, retries=conveyor.Retries(limit=2, delay=0.5, backoff="constant"))
    step.sleep("settle", 1)
    approval = step.wait_for_event("approval", type="approve", timeout=3600)
    shipped = step.do("ship", lambda: {"to": approval.payload})
    return {"charged": charged, "shipped": shipped}
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    with serve_process(tmp_path / "data", ACCOUNT) as running:
        yield running


@pytest.fixture
def worker(served: ServeProcess, tmp_path: Path) -> Iterator[conveyor.Conveyor]:
    """``conveyor worker orders_app:app`` against the server, as a worker on another host runs; yields
    a client of the same account on the deployment itself."""
    (tmp_path / "orders_app.py").write_text(MODULE)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "worker.log"
    url = f"sqlite://{served.data}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [CONVEYOR, "--url", served.url, "--token", served.token, "--account", ACCOUNT, "worker", "orders_app:app"],
            env=env,
            stdout=out,
            stderr=out,
            cwd=tmp_path,
        )
    cv = conveyor.connect(url, account_id=ACCOUNT)
    try:
        wait_for(lambda: _registered(cv), timeout=60, what="the worker to register the workflow")
        yield cv
    finally:
        cv.close()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _registered(cv: conveyor.Conveyor) -> bool:
    try:
        return cv.workflow("orders").has_worker()
    except conveyor.WorkflowNotFound:
        return False


def status_of(page: Page, expected: str) -> None:
    """Reload the instance's page until it shows ``expected`` (the page does not poll)."""

    def shown() -> bool:
        page.reload()
        return page.locator("#instance-status").inner_text() == expected

    wait_for(shown, timeout=60, poll=0.5, what=f"the page to show {expected}")


def test_follow_an_instance_and_send_it_an_event(page: Page, served: ServeProcess, worker: conveyor.Conveyor) -> None:
    wf = worker.workflow("orders")
    inst = wf.create({"amount": 42, "note": HOSTILE}, id="order-1")
    wf.create({"amount": 7}, id="order-2")
    wait_for(lambda: inst.status().status == "waiting" and len(inst.status().steps) == 3, timeout=60, poll=0.2)
    log_in(page, served)
    page.get_by_role("link", name="Workflows").click()
    row = page.locator('tr[data-workflow="orders"]')
    expect(row).to_be_visible()
    expect(row).not_to_contain_text("no worker")
    page.screenshot(path=screenshot_path("workflows"), full_page=True)
    row.get_by_role("link", name="orders").click()
    expect(page.locator("tr[data-instance]")).to_have_count(2)
    page.screenshot(path=screenshot_path("workflow-instances"), full_page=True)
    page.get_by_role("link", name="order-1").click()

    expect(page.locator("#instance-status")).to_have_text("waiting")
    expect(page.locator("#params")).to_contain_text(json.dumps(HOSTILE))  # shown as the text it is
    charge = page.locator('tr[data-step="charge-1"]')
    expect(charge.locator("rect.bar.failed")).to_have_count(1)
    expect(charge.locator("rect.bar.ok")).to_have_count(1)
    expect(page.get_by_text("Attempt 1: ValueError: card declined <b>once</b>")).to_be_visible()
    expect(page.locator('tr[data-step="settle-1"] rect.bar.sleep')).to_have_count(1)
    expect(page.locator('tr[data-step="approval-1"] rect.bar.wait')).to_have_count(1)
    page.screenshot(path=screenshot_path("instance-timeline"), full_page=True)

    page.get_by_label("Send an event: its type").fill("approve")
    page.get_by_label("Payload (JSON, may be empty)").fill('{"by": "ops"')
    page.get_by_label("Yes, send this event").check()
    page.get_by_role("button", name="Send event").click()
    expect(page.get_by_role("alert")).to_contain_text("the event payload is not JSON")
    page.screenshot(path=screenshot_path("instance-event-refused"), full_page=True)
    assert inst.status().status == "waiting"

    page.go_back()
    page.get_by_label("Send an event: its type").fill("approve")
    page.get_by_label("Payload (JSON, may be empty)").fill(json.dumps({"by": HOSTILE}))
    page.get_by_label("Yes, send this event").check()
    page.get_by_role("button", name="Send event").click()
    expect(page.get_by_role("status")).to_have_text("Done: event sent.")
    status_of(page, "complete")
    expect(page.locator("#output")).to_contain_text(json.dumps(HOSTILE))
    expect(page.locator('tr[data-step="ship-1"] rect.bar.ok')).to_have_count(1)
    page.screenshot(path=screenshot_path("instance-complete"), full_page=True)
    assert inst.status().output["shipped"] == {"to": {"by": HOSTILE}}

    page.locator("#trace-link").click()
    expect(page.locator("h1")).to_contain_text(inst.status().trace_id)
    expect(page.get_by_role("link", name="orders/order-1")).to_be_visible()
    page.screenshot(path=screenshot_path("trace"), full_page=True)


def test_pause_resume_restart_and_terminate_through_the_ui(
    page: Page, served: ServeProcess, worker: conveyor.Conveyor
) -> None:
    inst = worker.workflow("orders").create({"amount": 3}, id="order-9")
    wait_for(lambda: inst.status().status == "waiting" and len(inst.status().steps) == 3, timeout=60, poll=0.2)
    log_in(page, served)
    page.goto(f"{served.url}/dash/a/{ACCOUNT}/workflows/orders/i/order-9")

    page.get_by_label("Yes, pause this instance").check()
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status")).to_have_text("Done: paused.")
    expect(page.locator("#instance-status")).to_have_text("paused")
    assert inst.status().status == "paused"
    page.screenshot(path=screenshot_path("instance-paused"), full_page=True)

    page.get_by_label("Yes, resume this instance").check()
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("status")).to_have_text("Done: resumed.")
    status_of(page, "waiting")

    page.get_by_label("Restart from").select_option(label="settle-1 (sleep)")
    page.get_by_label("Yes, restart this instance").check()
    page.get_by_role("button", name="Restart").click()
    expect(page.get_by_role("status")).to_have_text("Done: restarted.")
    wait_for(lambda: inst.status().status == "waiting" and len(inst.status().steps) == 3, timeout=60, poll=0.2)
    steps = {s.name: s for s in inst.status().steps}
    assert len(steps["charge-1"].attempts) == 2  # kept: the restart began at the sleep
    page.reload()
    page.screenshot(path=screenshot_path("instance-restarted"), full_page=True)

    typed = page.get_by_label("Terminate: end this instance for good.")
    button = page.get_by_role("button", name="Terminate")
    typed.fill("order-")
    expect(button).to_be_disabled()
    typed.fill("order-9")
    button.click()
    expect(page.get_by_role("status")).to_have_text("Done: terminated.")
    expect(page.locator("#instance-status")).to_have_text("terminated")
    assert inst.status().status == "terminated"
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    page.screenshot(path=screenshot_path("instance-terminated"), full_page=True)


def test_browse_ten_thousand_instances(page: Page, served: ServeProcess) -> None:
    with conveyor.connect(f"sqlite://{served.data}", account_id=ACCOUNT) as cv:
        wf = cv.put_workflow("bulk")  # no worker runs it: its instances stay queued
        for start in range(0, 10_000, 100):
            assert not wf.create_batch(
                [{"id": f"b{k:05d}", "params": {"k": k}} for k in range(start, start + 100)]
            ).errors
        for instance_id in ("b00007", "b04321", "b09990"):
            wf.get(instance_id).pause()
    log_in(page, served)
    page.get_by_role("link", name="Workflows").click()
    row = page.locator('tr[data-workflow="bulk"]')
    expect(row.locator("td.count-queued")).to_have_text("9997")
    expect(row).to_contain_text("no worker")
    row.get_by_role("link", name="bulk").click()
    rows = page.locator("tr[data-instance]")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_attribute("data-instance", "b09999")
    page.get_by_role("link", name="Next 50").click()
    expect(rows.first).to_have_attribute("data-instance", "b09949")
    page.screenshot(path=screenshot_path("workflow-10k-page-2"), full_page=True)
    page.get_by_role("link", name="First page").click()
    expect(rows.first).to_have_attribute("data-instance", "b09999")

    page.get_by_label("Status", exact=True).select_option("paused")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(3)
    expect(page.get_by_role("link", name="Next 50")).to_have_count(0)
    page.screenshot(path=screenshot_path("workflow-10k-paused"), full_page=True)
    page.get_by_role("link", name="Clear").click()
    page.get_by_label("Instance id").fill("b04321")
    page.keyboard.press("Enter")
    expect(rows).to_have_count(1)
    page.get_by_role("link", name="b04321").click()
    expect(page.locator("#instance-status")).to_have_text("paused")
    expect(page.get_by_text("No step has run yet.")).to_be_visible()
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.screenshot(path=screenshot_path("instance-phone-dark"), full_page=True)
