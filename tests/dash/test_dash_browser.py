"""The dashboard in a real browser (Debian's chromium, headless, driven by Playwright) against a
real ``conveyor serve`` whose coordinator records the history every half second: log in, watch a
backlog move while messages are sent, pause and resume, purge with its typed confirmation, redrive
a dead letter queue and see the messages come back. Screenshots go to ``test-artifacts/dash/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

import conveyor
from conveyor.prober import CheckFailed, ProbeTarget
from tests.dash.browser import chromium, screenshot_path
from tests.server.process import ServeProcess, serve_process

ACCOUNT = "acme"
HOSTILE = '<script>alert("hostile")</script>'
HOSTILE_HTML = b"<html><script>alert(1)</script></html>"
WAIT_MS = 30_000  # a loaded machine: the rows re-poll every 3 s, the history every 0.5 s


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServeProcess]:
    with serve_process(tmp_path / "data", ACCOUNT, "--history-interval", "0.5") as running:
        yield running


@pytest.fixture
def client(served: ServeProcess) -> Iterator[conveyor.Conveyor]:
    """A producer on the same deployment, as another process on the host would be."""
    cv = conveyor.connect(f"sqlite://{served.data}", account_id=ACCOUNT)
    try:
        yield cv
    finally:
        cv.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    path = chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    dialogs: list[str] = []

    def refuse(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    opened.on("dialog", refuse)
    try:
        yield opened
    finally:
        context.close()
    assert dialogs == [], f"a page opened a dialog (script ran): {dialogs}"


def log_in(page: Page, served: ServeProcess) -> None:
    page.goto(served.url + "/dash")
    expect(page).to_have_url(served.url + "/dash/login")
    page.get_by_label("Conveyor token").fill(served.token)
    page.keyboard.press("Enter")  # the keyboard alone logs in
    expect(page).to_have_url(f"{served.url}/dash/a/{ACCOUNT}")


def test_log_in_and_watch_a_backlog_move(page: Page, served: ServeProcess, client: conveyor.Conveyor) -> None:
    orders = client.create_queue("orders")
    client.create_queue("quiet")
    log_in(page, served)
    backlog = page.locator('tr[data-queue="orders"] td.backlog')
    expect(backlog).to_have_text("0")
    page.screenshot(path=screenshot_path("overview-empty"), full_page=True)
    orders.send_batch([{"body": n} for n in range(5)])
    expect(backlog).to_have_text("5")
    orders.send_batch([{"body": n} for n in range(10)])
    expect(backlog).to_have_text("15")
    expect(page.locator('tr[data-queue="orders"] svg.spark')).to_be_visible()
    page.screenshot(path=screenshot_path("overview-backlog"), full_page=True)
    page.emulate_media(color_scheme="dark")
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.screenshot(path=screenshot_path("overview-phone-dark"), full_page=True)
    page.get_by_label("Name contains").fill("qui")
    expect(page.locator('tr[data-queue="orders"]')).to_have_count(0)
    expect(page.locator('tr[data-queue="quiet"]')).to_have_count(1)


def test_pause_resume_and_purge_with_confirmation(page: Page, served: ServeProcess, client: conveyor.Conveyor) -> None:
    jobs = client.create_queue("jobs")
    jobs.send('<script>alert("hostile")</script>', content_type="text")
    jobs.send_batch([{"body": n} for n in range(3)])
    log_in(page, served)
    page.get_by_role("link", name="jobs").click()
    expect(page.locator("#live-backlog")).to_have_text("4")
    expect(page.get_by_text('<script>alert("hostile")</script>')).to_be_visible()
    page.screenshot(path=screenshot_path("queue"), full_page=True)

    page.get_by_role("button", name="Pause delivery").click()
    expect(page.locator("#live-delivery")).to_have_text("paused")
    assert jobs.info().settings.delivery_paused
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
    page.screenshot(path=screenshot_path("queue-purged"), full_page=True)


def test_redrive_a_dead_letter_queue_and_see_the_messages_come_back(
    page: Page, served: ServeProcess, client: conveyor.Conveyor
) -> None:
    work = client.create_queue("work")
    dlq = client.create_queue("work-dlq")
    work.add_pull_consumer(max_retries=0, dead_letter_queue="work-dlq")
    work.send_batch([{"body": {"order": n}} for n in range(3)])
    work.ack(retries=[m.lease_id for m in work.pull(batch_size=3)])
    assert dlq.metrics().backlog_count == 3
    log_in(page, served)
    page.goto(f"{served.url}/dash/a/{ACCOUNT}/q/work-dlq")
    expect(page.locator("article.message")).to_have_count(3)
    page.screenshot(path=screenshot_path("dlq"), full_page=True)
    page.get_by_label("Redrive: send this dead letter queue's messages back to").select_option("work")
    page.get_by_label("Type work-dlq to confirm.", exact=True).fill("work-dlq")
    page.get_by_role("button", name="Redrive").click()
    expect(page.get_by_role("status")).to_have_text("Done: redriven 3.")
    expect(page.locator("article.message")).to_have_count(0)
    page.goto(f"{served.url}/dash/a/{ACCOUNT}/q/work")
    expect(page.locator("article.message")).to_have_count(3)
    expect(page.locator("pre.body.json").first).to_contain_text('"order"')
    page.screenshot(path=screenshot_path("redriven"), full_page=True)
    assert work.metrics().backlog_count == 3 and dlq.metrics().backlog_count == 0


def test_browse_buckets_kv_and_the_prober(page: Page, served: ServeProcess, client: conveyor.Conveyor) -> None:
    """Every new section through its nav link, hostile names and values inert, an object downloaded
    through the session, screenshots of each page."""
    bucket = client.create_bucket("media")
    for n in range(3):
        bucket.put(f"photos/{n}.txt", f"photo {n}".encode(), content_type="text/plain")
    bucket.put(
        "photos/<img src=x onerror=alert(1)>.html", HOSTILE_HTML, content_type="text/html", metadata={"by": HOSTILE}
    )
    bucket.put("readme.txt", b"hello", content_type="text/plain", metadata={"owner": "ops"})
    kv = client.kv("settings", create=True)
    kv.put("theme", {"dark": True, "note": HOSTILE})
    kv.put(HOSTILE, HOSTILE)
    kv.put("blob", b"\x00\x01<script>")
    app = conveyor.App(client)
    prober = conveyor.Prober(app, fleet="web", messages=0, schedule=None)

    @prober.check("local")
    def local(target: ProbeTarget) -> dict[str, str]:
        if "down" in target.address:
            raise CheckFailed(HOSTILE)
        return {"ok": "yes"}

    prober.fleet.import_targets([{"address": a, "check": "local"} for a in ("up.example", "down.example")])
    round_id = prober.round(timeout=60).id

    log_in(page, served)
    page.get_by_role("link", name="Buckets", exact=True).click()
    expect(page.locator('tr[data-bucket="media"]')).to_be_visible()
    page.screenshot(path=screenshot_path("buckets"), full_page=True)
    page.get_by_role("link", name="media").click()
    expect(page.locator("tr.folder")).to_have_count(1)
    page.get_by_role("link", name="photos/").click()
    expect(page.locator("tr.object")).to_have_count(4)
    expect(page.get_by_text("<img src=x onerror=alert(1)>.html")).to_be_visible()
    page.screenshot(path=screenshot_path("bucket-folder"), full_page=True)
    page.get_by_role("link", name="<img src=x onerror=alert(1)>.html").click()
    expect(page.locator("dl.metadata")).to_contain_text(HOSTILE)
    page.screenshot(path=screenshot_path("object"), full_page=True)
    with page.expect_download() as downloading:
        page.locator("#download").click()
    assert Path(downloading.value.path()).read_bytes() == HOSTILE_HTML

    page.get_by_role("link", name="KV", exact=True).click()
    page.get_by_role("link", name="settings").click()
    expect(page.locator("tr.key")).to_have_count(3)
    page.screenshot(path=screenshot_path("kv-namespace"), full_page=True)
    page.get_by_label("Keys starting with").fill("th")
    page.keyboard.press("Enter")
    expect(page.locator("tr.key")).to_have_count(1)
    page.get_by_role("link", name="theme").click()
    expect(page.locator("pre.body.json")).to_contain_text('"dark": true')
    page.screenshot(path=screenshot_path("kv-value-json"), full_page=True)
    page.go_back()
    page.go_back()
    page.get_by_role("link", name=HOSTILE).click()
    expect(page.locator("pre.body.text")).to_have_text(HOSTILE)
    page.get_by_role("link", name="bytes").click()
    expect(page.locator("pre.body.hex")).to_be_visible()
    page.screenshot(path=screenshot_path("kv-value-hex"), full_page=True)

    page.get_by_role("link", name="Prober", exact=True).click()
    page.get_by_role("link", name="web").click()
    expect(page.locator(f'tr[data-round="{round_id}"]')).to_be_visible()
    expect(page.get_by_text("1 of 2 finished")).to_be_visible()
    page.screenshot(path=screenshot_path("prober-fleet"), full_page=True)
    page.get_by_role("link", name=round_id).click()
    expect(page.locator("tr[data-job]")).to_have_count(2)
    expect(page.locator("table.jobs")).to_contain_text(HOSTILE)
    page.screenshot(path=screenshot_path("prober-round"), full_page=True)
