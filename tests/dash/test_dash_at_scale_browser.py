"""Issue 17's "done when (a real browser)" as one run: headless chromium (Debian's, driven by
Playwright) does every action of the queue, workflow, migration and CDN pages through the UI, each
with its confirmation, on ONE deployment seeded with 1,000 queues and 10,000 workflow instances,
served by a real ``conveyor serve`` process: log in, watch a backlog move while messages are sent,
peek (JSON, text, bytes, a folded long body), pause and resume delivery, purge with the name typed,
redrive a dead letter queue and see the messages come back, find one instance among 10,000 and
follow another's timeline, send it an event, pause, resume, restart and terminate it, pause, resume
and abort a migration between two real S3 servers, open a CDN package and version, and browse the
prober, a bucket and a KV namespace. In the same browser: a read-only session cannot write even by
crafting the post, a cross-site form post is refused, another account's queues never appear, and a
``<script>`` body renders inert (the ``page`` fixture fails a test whose page opened a dialog).

The deployment is seeded once for the module, through the public API before the server starts (the
server then finds it as an operator's directory): 1,000 queues made by four threads at once (each
makes and syncs its shard file; no batch create exists, and the files' syncs overlap), 10,000
instances by ``create_batch`` on a workflow no worker runs, the rest as the smaller browser tests
seed them. Screenshots of every page go to ``test-artifacts/dash/at-scale/`` (see tests/README.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

import conveyor
from conveyor import cdn
from conveyor.cdn.importer import import_tree
from conveyor.cdn.tarball import sri
from conveyor.prober import CheckFailed, ProbeTarget
from conveyor.slurper import Job
from conveyor.workflows.client import Workflow
from tests.dash.browser import ARTIFACTS
from tests.dash.test_dash_browser import browser, page  # the module's chromium, a fresh context a test
from tests.dash.test_dash_workflows_browser import MODULE as ORDERS_APP
from tests.server.process import CONVEYOR, ServeProcess, create_token, serve_process
from tests.slurper.conftest import pipeline_running, s3_source
from tests.storage.s3_server import S3Server, start_s3_server
from tests.waiting import wait_for

__all__ = ["browser", "page"]
# The module-scoped seeding counts against its first test: 1,000 synced shard files on a loaded machine.
pytestmark = pytest.mark.timeout(900)

ACCOUNT = "acme"
RIVAL = "rival"
QUEUES = 1000
INSTANCES = 10_000
SEED_THREADS = 4
HOSTILE = '<script>alert("hostile")</script>'
WAIT_MS = 60_000  # a loaded machine, and a server with 1,000 queues to record every second
SHOTS = ARTIFACTS / "at-scale"
# The migration: two objects a second, so the job still runs when the test pauses it.
OBJECTS, OBJECT_BYTES = 200, 4096
CDN_TREE = {
    "alpha/1.0.0/alpha.js": b"var alpha = 1;\n",
    "alpha/1.0.0/alpha.min.js": b"var alpha=1;",
    "alpha/1.1.0/alpha.js": b"var alpha = 2;\n",
    "beta.js/2.0.0/beta.js": b"export const beta = 2;",
}


@dataclasses.dataclass
class Deployment:
    served: ServeProcess
    client: conveyor.Conveyor  # a producer of the account on the same directory
    source_s3: S3Server
    target_s3: S3Server
    source_bucket: str
    prober_round: str

    @property
    def base(self) -> str:
        return f"{self.served.url}/dash/a/{ACCOUNT}"


@pytest.fixture(scope="module", autouse=True)
def patient_expectations() -> Iterator[None]:
    """Playwright's ``expect`` waits 5 s by default; pages of 1,000 queues on a loaded machine may
    take longer (the module's own waits, then Playwright's default again for the modules after)."""
    expect.set_options(timeout=WAIT_MS)
    try:
        yield
    finally:
        expect.set_options(timeout=5_000)


def shot(page: Page, name: str) -> None:
    """A full-page screenshot of what the browser shows, kept as a test artifact."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{name}.png", full_page=True)


def seed_queues(cv: conveyor.Conveyor) -> None:
    """1,000 plain queues by ``create_queue``, four at a time, and the few the tests act on."""
    with ThreadPoolExecutor(SEED_THREADS) as pool:
        made = list(pool.map(lambda n: cv.create_queue(f"queue-{n:04d}"), range(QUEUES)))
    assert len(made) == QUEUES
    for name in ("orders", "jobs", "work", "work-dlq", "guarded"):
        cv.create_queue(name)
    jobs = cv.queue("jobs")
    jobs.send(HOSTILE, content_type="text")
    jobs.send({"order": 1, "note": "json"})
    jobs.send(b"\x00\x01\xfe\xff", content_type="bytes")
    jobs.send("long " * 400, content_type="text")
    cv.queue("guarded").send_batch([{"body": n} for n in range(3)])
    work, dlq = cv.queue("work"), cv.queue("work-dlq")
    work.add_pull_consumer(max_retries=0, dead_letter_queue="work-dlq")
    work.send_batch([{"body": {"order": n}} for n in range(3)])
    work.ack(retries=[m.lease_id for m in work.pull(batch_size=3)])
    assert dlq.metrics().backlog_count == 3


def seed_instances(cv: conveyor.Conveyor) -> None:
    """10,000 instances of a workflow no worker runs (they stay queued), 100 a batch; three paused."""
    wf = cv.put_workflow("bulk")
    for start in range(0, INSTANCES, 100):
        assert not wf.create_batch([{"id": f"b{k:05d}", "params": {"k": k}} for k in range(start, start + 100)]).errors
    for instance_id in ("b00007", "b04321", "b09990"):
        wf.get(instance_id).pause()


def seed_storage_and_prober(cv: conveyor.Conveyor) -> str:
    """A bucket, a KV namespace, and one prober round (one target up, one down); the round's id."""
    bucket = cv.create_bucket("media")
    for n in range(3):
        bucket.put(f"photos/{n}.txt", f"photo {n}".encode(), content_type="text/plain")
    bucket.put("readme.txt", b"hello", content_type="text/plain", metadata={"owner": HOSTILE})
    kv = cv.kv("settings", create=True)
    kv.put("theme", {"dark": True, "note": HOSTILE})
    kv.put("blob", b"\x00\x01<script>")
    prober = conveyor.Prober(conveyor.App(cv), fleet="web", messages=0, schedule=None)

    @prober.check("local")
    def local(target: ProbeTarget) -> dict[str, str]:
        if "down" in target.address:
            raise CheckFailed(HOSTILE)
        return {"ok": "yes"}

    prober.fleet.import_targets([{"address": a, "check": "local"} for a in ("up.example", "down.example")])
    return prober.round(timeout=120).id


def seed_cdn(cv: conveyor.Conveyor, root: Path) -> None:
    cdn.init(cv)
    libs = root / "cdnjs" / "ajax" / "libs"
    for path, data in CDN_TREE.items():
        (libs / path).parent.mkdir(parents=True, exist_ok=True)
        (libs / path).write_bytes(data)
    assert import_tree(cv, libs)["imported"] == ["alpha", "beta.js"]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("dash-at-scale")
    data = root / "data"
    for logs in ("source-moto", "target-moto"):
        (root / logs).mkdir()
    source_s3 = start_s3_server(root / "source-moto")
    target_s3 = start_s3_server(root / "target-moto")
    cv = conveyor.connect(f"sqlite://{data}", account_id=ACCOUNT)
    try:
        # The few queues of the CDN, prober and buckets first: every queue made republishes the
        # catalog snapshot, whose cost grows with the queues already there.
        seed_cdn(cv, root)
        round_id = seed_storage_and_prober(cv)
        seed_queues(cv)
        seed_instances(cv)
        with conveyor.connect(f"sqlite://{data}", account_id=RIVAL) as rival:
            rival.create_queue("rival-payroll").send({"salary": "secret"})
        source_bucket = source_s3.new_bucket()
        s3 = source_s3.client()
        for n in range(OBJECTS):
            s3.put_object(Bucket=source_bucket, Key=f"photos/{n:03d}.jpg", Body=bytes([n]) * OBJECT_BYTES)  # type: ignore[attr-defined]
        with serve_process(data, ACCOUNT, "--history-interval", "1") as served:
            yield Deployment(served, cv, source_s3, target_s3, source_bucket, round_id)
    finally:
        cv.close()
        source_s3.stop()
        target_s3.stop()


@pytest.fixture(scope="module")
def worker(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workflow]:
    """``conveyor worker orders_app:app`` against the server, as a worker on another host runs it."""
    served = deployment.served
    home = tmp_path_factory.mktemp("orders-worker")
    (home / "orders_app.py").write_text(ORDERS_APP)
    env = {**os.environ, "PYTHONPATH": str(home), "PYTHONUNBUFFERED": "1"}
    with (home / "worker.log").open("wb") as out:
        process = subprocess.Popen(
            [CONVEYOR, "--url", served.url, "--token", served.token, "--account", ACCOUNT, "worker", "orders_app:app"],
            env=env,
            stdout=out,
            stderr=out,
            cwd=home,
        )
    try:
        wait_for(lambda: _registered(deployment.client), timeout=90, what="the worker to register the workflow")
        yield deployment.client.workflow("orders")
    finally:
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


def log_in(page: Page, served: ServeProcess, token: str | None = None) -> None:
    page.set_default_timeout(WAIT_MS)
    page.goto(served.url + "/dash")
    expect(page).to_have_url(served.url + "/dash/login")
    page.get_by_label("Conveyor token").fill(token or served.token)
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{served.url}/dash/a/{ACCOUNT}")


# -- queues ---------------------------------------------------------------------------------------


def test_log_in_and_watch_a_backlog_move_among_1000_queues(page: Page, deployment: Deployment) -> None:
    log_in(page, deployment.served)
    expect(page.locator("tr[data-queue]")).to_have_count(50)
    expect(page.locator("tr.pager")).to_contain_text(re.compile(r"Queues 1–50 of 10\d\d "))
    shot(page, "01-overview")
    page.get_by_label("Name contains").fill("orders")
    row = page.locator('tr[data-queue="orders"]')
    expect(page.locator("tr[data-queue]")).to_have_count(1)
    backlog = row.locator("td.backlog")
    expect(backlog).to_have_text("0", timeout=WAIT_MS)
    orders = deployment.client.queue("orders")
    orders.send_batch([{"body": n} for n in range(5)])
    expect(backlog).to_have_text("5", timeout=WAIT_MS)
    orders.send_batch([{"body": n} for n in range(10)])
    expect(backlog).to_have_text("15", timeout=WAIT_MS)
    shot(page, "02-overview-backlog-moved")
    page.get_by_label("Name contains").fill("")
    page.get_by_label("Sort by").select_option("backlog")
    page.get_by_label("descending").check()
    expect(page.locator("tr[data-queue]").first).to_have_attribute("data-queue", "orders")
    shot(page, "03-overview-by-backlog")


def test_peek_pause_resume_and_purge_a_queue(page: Page, deployment: Deployment) -> None:
    log_in(page, deployment.served)
    page.get_by_label("Name contains").fill("jobs")
    expect(page.locator("tr[data-queue]")).to_have_count(1)
    page.get_by_role("link", name="jobs", exact=True).click()
    expect(page.locator("#live-backlog")).to_have_text("4")
    expect(page.locator("article.message")).to_have_count(4)
    expect(page.get_by_text(HOSTILE, exact=True)).to_be_visible()  # the <script> body as text
    expect(page.locator("pre.body.json").first).to_contain_text('"order": 1')
    expect(page.locator("pre.body.hex").first).to_contain_text("00 01 fe ff")
    folded = page.locator("article.message details")
    expect(folded).to_have_count(1)
    expect(folded.locator("summary pre")).to_have_text(re.compile(r"^(long ){10}.*…$"))
    folded.locator("summary").click()
    expect(folded).to_have_attribute("open", "")
    expect(folded.locator("summary pre")).to_be_hidden()  # unfolded, the body shows once, whole
    expect(folded.locator("pre.body")).to_have_count(2)
    expect(folded.locator("pre.body").nth(1)).to_have_text(("long " * 400).strip())
    shot(page, "04-queue-peek")

    jobs = deployment.client.queue("jobs")
    page.get_by_role("button", name="Pause delivery").click()
    expect(page.locator("#live-delivery")).to_have_text("paused")
    assert jobs.info().settings.delivery_paused
    shot(page, "05-queue-paused")
    page.get_by_role("button", name="Resume delivery").click()
    expect(page.locator("#live-delivery")).to_have_text("on")
    assert not jobs.info().settings.delivery_paused

    purge = page.get_by_role("button", name="Purge")
    page.get_by_label("Purge: delete every message").fill("job")
    expect(purge).to_be_disabled()
    page.get_by_label("Purge: delete every message").fill("jobs")
    purge.click()
    expect(page.get_by_role("status")).to_have_text("Done: purged 4.")
    expect(page.locator("#live-backlog")).to_have_text("0")
    assert jobs.metrics().backlog_count == 0
    shot(page, "06-queue-purged")


def test_redrive_a_dead_letter_queue_and_see_the_messages_come_back(page: Page, deployment: Deployment) -> None:
    log_in(page, deployment.served)
    page.get_by_label("Name contains").fill("work")
    page.get_by_role("link", name="work-dlq", exact=True).click()
    expect(page.locator("article.message")).to_have_count(3)
    shot(page, "07-dlq")
    page.get_by_label("Redrive: send this dead letter queue's messages back to").select_option("work")
    redrive = page.get_by_role("button", name="Redrive")
    page.get_by_label("Type work-dlq to confirm.", exact=True).fill("work")
    expect(redrive).to_be_disabled()
    page.get_by_label("Type work-dlq to confirm.", exact=True).fill("work-dlq")
    redrive.click()
    expect(page.get_by_role("status")).to_have_text("Done: redriven 3.")
    expect(page.locator("article.message")).to_have_count(0)
    page.get_by_role("link", name="Queues", exact=True).click()
    page.get_by_label("Name contains").fill("work")
    page.get_by_role("link", name="work", exact=True).click()
    expect(page.locator("article.message")).to_have_count(3)
    expect(page.locator("pre.body.json").first).to_contain_text('"order"')
    shot(page, "08-redriven")
    assert deployment.client.queue("work").metrics().backlog_count == 3


# -- workflows ------------------------------------------------------------------------------------


def test_find_one_instance_among_ten_thousand(page: Page, deployment: Deployment) -> None:
    log_in(page, deployment.served)
    page.get_by_role("link", name="Workflows", exact=True).click()
    row = page.locator('tr[data-workflow="bulk"]')
    expect(row.locator("td.count-queued")).to_have_text(str(INSTANCES - 3))
    expect(row.locator("td.count-paused")).to_have_text("3")
    shot(page, "09-workflows")
    row.get_by_role("link", name="bulk").click()
    rows = page.locator("tr[data-instance]")
    expect(rows).to_have_count(50)
    page.get_by_role("link", name="Next 50").click()
    expect(rows.first).to_have_attribute("data-instance", "b09949")
    shot(page, "10-workflow-10k-page-2")
    page.get_by_label("Status", exact=True).select_option("paused")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(3)
    page.get_by_role("link", name="Clear").click()
    page.get_by_label("Instance id").fill("b04321")
    page.keyboard.press("Enter")
    expect(rows).to_have_count(1)
    page.get_by_role("link", name="b04321").click()
    expect(page.locator("#instance-status")).to_have_text("paused")
    expect(page.locator("#params")).to_contain_text('"k": 4321')
    shot(page, "11-instance-of-10k")


def _status_shown(page: Page, expected: str) -> None:
    """Reload the instance's page until it shows ``expected`` (the page does not poll)."""

    def shown() -> bool:
        page.reload()
        return page.locator("#instance-status").inner_text() == expected

    wait_for(shown, timeout=90, poll=0.5, what=f"the page to show {expected}")


def test_follow_an_instances_timeline_and_do_every_action(page: Page, deployment: Deployment, worker: Workflow) -> None:
    inst = worker.create({"amount": 42, "note": HOSTILE}, id="order-1")
    wait_for(lambda: inst.status().status == "waiting" and len(inst.status().steps) == 3, timeout=90, poll=0.2)
    log_in(page, deployment.served)
    page.get_by_role("link", name="Workflows", exact=True).click()
    row = page.locator('tr[data-workflow="orders"]')
    expect(row).not_to_contain_text("no worker")
    row.get_by_role("link", name="orders").click()
    page.get_by_role("link", name="order-1").click()
    expect(page.locator("#instance-status")).to_have_text("waiting")
    expect(page.locator("#params")).to_contain_text(json.dumps(HOSTILE))
    charge = page.locator('tr[data-step="charge-1"]')
    expect(charge.locator("rect.bar.failed")).to_have_count(1)
    expect(charge.locator("rect.bar.ok")).to_have_count(1)
    expect(page.get_by_text("Attempt 1: ValueError: card declined <b>once</b>")).to_be_visible()
    expect(page.locator('tr[data-step="settle-1"] rect.bar.sleep')).to_have_count(1)
    expect(page.locator('tr[data-step="approval-1"] rect.bar.wait')).to_have_count(1)
    shot(page, "12-instance-timeline")

    page.get_by_label("Yes, pause this instance").check()
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_role("status")).to_have_text("Done: paused.")
    expect(page.locator("#instance-status")).to_have_text("paused")
    assert inst.status().status == "paused"
    shot(page, "13-instance-paused")
    page.get_by_label("Yes, resume this instance").check()
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("status")).to_have_text("Done: resumed.")
    _status_shown(page, "waiting")

    page.get_by_label("Restart from").select_option(label="settle-1 (sleep)")
    page.get_by_label("Yes, restart this instance").check()
    page.get_by_role("button", name="Restart").click()
    expect(page.get_by_role("status")).to_have_text("Done: restarted.")
    wait_for(lambda: inst.status().status == "waiting" and len(inst.status().steps) == 3, timeout=90, poll=0.2)
    assert len({s.name: s for s in inst.status().steps}["charge-1"].attempts) == 2  # kept: restarted at the sleep
    _status_shown(page, "waiting")
    shot(page, "14-instance-restarted")

    page.get_by_label("Send an event: its type").fill("approve")
    page.get_by_label("Payload (JSON, may be empty)").fill(json.dumps({"by": HOSTILE}))
    page.get_by_label("Yes, send this event").check()
    page.get_by_role("button", name="Send event").click()
    expect(page.get_by_role("status")).to_have_text("Done: event sent.")
    _status_shown(page, "complete")
    expect(page.locator('tr[data-step="ship-1"] rect.bar.ok')).to_have_count(1)
    shot(page, "15-instance-complete")
    assert inst.status().output["shipped"] == {"to": {"by": HOSTILE}}
    page.locator("#trace-link").click()
    expect(page.locator("h1")).to_contain_text(inst.status().trace_id)
    shot(page, "16-trace")

    other = worker.create({"amount": 3}, id="order-2")
    wait_for(lambda: other.status().status == "waiting", timeout=90, poll=0.2)
    page.goto(f"{deployment.base}/workflows/orders/i/order-2")
    typed = page.get_by_label("Terminate: end this instance for good.")
    button = page.get_by_role("button", name="Terminate")
    typed.fill("order-")
    expect(button).to_be_disabled()
    typed.fill("order-2")
    button.click()
    expect(page.get_by_role("status")).to_have_text("Done: terminated.")
    expect(page.locator("#instance-status")).to_have_text("terminated")
    assert other.status().status == "terminated"
    shot(page, "17-instance-terminated")


# -- migrations, CDN, prober, buckets and KV ------------------------------------------------------


def test_pause_resume_and_abort_a_migration_between_two_s3_servers(page: Page, deployment: Deployment) -> None:
    cv = deployment.client
    target = deployment.target_s3.new_bucket()
    job = cv.slurper.create_job(
        source=s3_source(deployment.source_s3, deployment.source_bucket), target=s3_source(deployment.target_s3, target)
    )
    assert isinstance(job, Job)
    with pipeline_running(cv, max_bytes_per_second=2 * OBJECT_BYTES):
        log_in(page, deployment.served)
        page.get_by_role("link", name="Migrations", exact=True).click()
        row = page.locator(f'tr[data-job="{job.id}"]')
        expect(row.locator(".job-status")).to_have_text("running")
        expect(row.locator("td.objects")).to_have_text(re.compile(r"^[1-9]\d* / "), timeout=WAIT_MS)
        shot(page, "18-migrations")
        row.get_by_role("link").click()
        expect(page.locator("#live-status")).to_have_text("running")
        shot(page, "19-migration-running")

        confirm = page.get_by_role("button", name="Yes, pause the job")
        expect(confirm).to_be_hidden()
        page.get_by_text("Pause…").click()
        confirm.click()
        expect(page.get_by_role("status")).to_have_text("Done: paused.")
        expect(page.locator("#live-status")).to_have_text("paused")
        assert job.info().status == "paused"
        page.get_by_label("Log type").select_option("migrationPause")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("#logs")).to_contain_text("migrationPause")
        shot(page, "20-migration-paused")

        page.get_by_text("Resume…").click()
        page.get_by_role("button", name="Yes, resume the job").click()
        expect(page.get_by_role("status")).to_have_text("Done: resumed.")
        assert job.info().status == "running"
        abort = page.get_by_role("button", name="Abort")
        page.get_by_label("Abort: end the job for good").fill(job.id[:8])
        expect(abort).to_be_disabled()
        page.get_by_label("Abort: end the job for good").fill(job.id)
        abort.click()
        expect(page.get_by_role("status")).to_have_text("Done: aborted.")
        expect(page.locator("#live-status")).to_have_text("aborted")
        assert job.info().status == "aborted"
        shot(page, "21-migration-aborted")
    content = page.content()
    assert deployment.source_s3.secret_access_key not in content
    assert deployment.target_s3.secret_access_key not in content


def test_open_a_cdn_package_and_version(page: Page, deployment: Deployment) -> None:
    log_in(page, deployment.served)
    page.get_by_role("link", name="CDN", exact=True).click()
    expect(page.locator("tr[data-package]")).to_have_count(2)
    page.get_by_label("Name or words").fill("alp")
    expect(page.locator("tr[data-package]")).to_have_count(1)
    shot(page, "22-cdn")
    page.get_by_role("link", name="alpha", exact=True).click()
    expect(page.locator('tr[data-version="1.1.0"] .tag')).to_have_text("published")
    shot(page, "23-cdn-package")
    page.get_by_role("link", name="1.0.0", exact=True).click()
    expected = sri(CDN_TREE["alpha/1.0.0/alpha.min.js"])
    expect(page.locator('tr[data-file="alpha.min.js"] td.sri')).to_have_text(expected)
    shot(page, "24-cdn-version")


def test_browse_the_prober_buckets_and_kv(page: Page, deployment: Deployment) -> None:
    log_in(page, deployment.served)
    page.get_by_role("link", name="Prober", exact=True).click()
    shot(page, "25-prober")
    page.get_by_role("link", name="web").click()
    round_id = deployment.prober_round
    expect(page.locator(f'tr[data-round="{round_id}"]')).to_be_visible()
    shot(page, "26-prober-fleet")
    page.get_by_role("link", name=round_id).click()
    expect(page.locator("tr[data-job]")).to_have_count(2)
    expect(page.locator("table.jobs")).to_contain_text(HOSTILE)
    shot(page, "27-prober-round")

    page.get_by_role("link", name="Buckets", exact=True).click()
    expect(page.locator('tr[data-bucket="media"]')).to_be_visible()
    shot(page, "28-buckets")
    page.get_by_role("link", name="media").click()
    page.get_by_role("link", name="photos/").click()
    expect(page.locator("tr.object")).to_have_count(3)
    shot(page, "29-bucket-folder")
    page.go_back()
    page.get_by_role("link", name="readme.txt").click()
    expect(page.locator("dl.metadata")).to_contain_text(HOSTILE)
    shot(page, "30-object")

    page.get_by_role("link", name="KV", exact=True).click()
    shot(page, "31-kv")
    page.get_by_role("link", name="settings").click()
    expect(page.locator("tr.key")).to_have_count(2)
    shot(page, "32-kv-namespace")
    page.get_by_role("link", name="theme").click()
    expect(page.locator("pre.body.json")).to_contain_text('"dark": true')
    shot(page, "33-kv-value")


# -- security in the same browser -----------------------------------------------------------------


def test_a_read_only_session_cannot_write_even_by_crafting_the_post(page: Page, deployment: Deployment) -> None:
    served = deployment.served
    reader = create_token(served.data, ACCOUNT, "--read-only")
    log_in(page, served, reader)
    page.goto(f"{deployment.base}/q/guarded")
    expect(page.locator("#live-backlog")).to_have_text("3")
    expect(page.get_by_role("button", name="Purge")).to_have_count(0)
    expect(page.get_by_role("button", name="Pause delivery")).to_have_count(0)
    shot(page, "34-read-only-queue")
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value")  # the logout form's: a real one
    for action, form in (("purge", {"confirm": "guarded"}), ("pause", {})):
        crafted = page.request.post(
            f"{deployment.base}/q/guarded/{action}",
            form={"csrf": csrf or "", **form},
            headers={"origin": served.url},
        )
        assert crafted.status == 403 and "read-only" in crafted.text(), (action, crafted.status)
    page.goto(f"{deployment.base}/workflows/bulk/i/b00001")
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    crafted = page.request.post(
        f"{deployment.base}/workflows/bulk/i/b00001/pause",
        form={"csrf": csrf or "", "confirm": "yes"},
        headers={"origin": served.url},
    )
    assert crafted.status == 403 and "read-only" in crafted.text()
    guarded = deployment.client.queue("guarded")
    assert guarded.metrics().backlog_count == 3 and not guarded.info().settings.delivery_paused
    assert deployment.client.workflow("bulk").get("b00001").status().status == "queued"


class _Attacker(BaseHTTPRequestHandler):
    """Serves a page that posts a purge form to the dashboard as soon as it loads."""

    target = ""
    csrf = ""

    def do_GET(self) -> None:
        body = (
            f'<form id="f" method="post" action="{self.target}">'
            f'<input name="csrf" value="{self.csrf}"><input name="confirm" value="guarded"></form>'
            '<script>document.getElementById("f").submit()</script>'
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_cross_site_form_post_is_refused(page: Page, deployment: Deployment) -> None:
    """Another origin's page posts a purge form with the session's real CSRF token (as if leaked):
    from ``localhost`` (another site: the SameSite cookie stays home) and from another port of
    127.0.0.1 (same site, another origin: the cookie goes, the Origin check refuses it)."""
    log_in(page, deployment.served)
    page.goto(f"{deployment.base}/q/guarded")
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value") or ""
    handler = type("Attacker", (_Attacker,), {"target": f"{deployment.base}/q/guarded/purge", "csrf": csrf})
    attacker = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        for host in ("localhost", "127.0.0.1"):
            with page.expect_response(f"{deployment.base}/q/guarded/purge") as posted:
                page.goto(f"http://{host}:{attacker.server_address[1]}/")
            assert posted.value.status in (303, 403), (host, posted.value.status)
            assert posted.value.request.method == "POST"
            page.wait_for_load_state()
            expect(page.locator("body")).not_to_contain_text("Done: purged")
            shot(page, f"35-cross-site-from-{host.replace('.', '-')}")
    finally:
        attacker.shutdown()
        attacker.server_close()
    assert deployment.client.queue("guarded").metrics().backlog_count == 3


def test_another_accounts_queues_never_appear(page: Page, deployment: Deployment) -> None:
    log_in(page, deployment.served)
    page.get_by_label("Name contains").fill("payroll")
    expect(page.get_by_text("No queue matches.")).to_be_visible()
    page.get_by_label("Name contains").fill("")
    for n in (1, 10, 21):  # the first, a middle and the last page of the 1,005
        page.goto(f"{deployment.base}?page={n}")
        expect(page.locator("tr[data-queue]").first).to_be_visible()
        assert "rival" not in page.content()
    for path in (f"/dash/a/{RIVAL}", f"/dash/a/{RIVAL}/q/rival-payroll", f"/dash/a/{ACCOUNT}/q/rival-payroll"):
        response = page.goto(deployment.served.url + path)
        assert response is not None and response.status == 404, path
        assert "salary" not in page.content()
    shot(page, "36-other-account-not-found")
