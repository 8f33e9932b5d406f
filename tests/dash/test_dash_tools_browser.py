"""The dashboard's migrations and CDN in a real browser (Debian's chromium, headless, driven by
Playwright) against a real ``conveyor serve``: a migration between two real S3 servers (two
moto_servers) is watched, paused through the UI with its confirmation, resumed, and aborted with
its id typed, and a read-only session's crafted pause is refused; a CDN seeded by ``cdn import``
of a small ``ajax/libs`` tree is searched and a package's version opened with its SRIs.
Screenshots go to ``test-artifacts/dash/``."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

import conveyor
from conveyor import cdn
from conveyor.cdn.importer import import_tree
from conveyor.cdn.tarball import sri
from conveyor.slurper import Job
from tests.dash.browser import screenshot_path
from tests.dash.test_dash_browser import (  # the browser, a server, and a client of its deployment
    ACCOUNT,
    WAIT_MS,
    browser,
    client,
    log_in,
    page,
    served,
)
from tests.server.process import ServeProcess, create_token
from tests.slurper.conftest import pipeline_running, s3_source
from tests.storage.conftest import s3_server as s3_server  # the source's moto_server
from tests.storage.s3_server import S3Server, start_s3_server

__all__ = ["browser", "client", "page", "served"]
# The worker's cap lets two objects through a second, one after the other: the page sees the count
# move every few seconds (a batch of ten is counted at once), and the job runs for over a minute,
# so it is still running when it is paused.
OBJECTS, OBJECT_BYTES = 200, 4096
BYTES_PER_SECOND = 2 * OBJECT_BYTES


@pytest.fixture
def target_s3(tmp_path: Path) -> Iterator[S3Server]:
    """A second moto_server, the migration's target."""
    logs = tmp_path / "target-moto"
    logs.mkdir()
    server = start_s3_server(logs)
    yield server
    server.stop()


def test_pause_a_running_migration_between_two_s3_servers(
    page: Page, served: ServeProcess, client: conveyor.Conveyor, s3_server: S3Server, target_s3: S3Server
) -> None:
    source = s3_server.new_bucket()
    s3 = s3_server.client()
    for n in range(OBJECTS):
        s3.put_object(Bucket=source, Key=f"photos/{n:03d}.jpg", Body=bytes([n]) * OBJECT_BYTES)  # type: ignore[attr-defined]
    target = target_s3.new_bucket()
    job = client.slurper.create_job(source=s3_source(s3_server, source), target=s3_source(target_s3, target))
    assert isinstance(job, Job)
    with pipeline_running(client, max_bytes_per_second=BYTES_PER_SECOND):
        log_in(page, served)
        page.get_by_role("link", name="Migrations", exact=True).click()
        row = page.locator(f'tr[data-job="{job.id}"]')
        expect(row.locator(".job-status")).to_have_text("running")
        progressed = re.compile(r"^[1-9]\d* / ")  # the rows' poll shows objects copied
        expect(row.locator("td.objects")).to_have_text(progressed, timeout=WAIT_MS)
        page.screenshot(path=screenshot_path("migrations"), full_page=True)
        row.get_by_role("link").click()
        expect(page.locator("#live-status")).to_have_text("running")
        expect(page.get_by_text(source, exact=True)).to_be_visible()
        page.screenshot(path=screenshot_path("migration-running"), full_page=True)

        confirm = page.get_by_role("button", name="Yes, pause the job")
        expect(confirm).to_be_hidden()  # the confirmation is one step away
        page.get_by_text("Pause…").click()
        confirm.click()
        expect(page.get_by_role("status")).to_have_text("Done: paused.")
        expect(page.locator("#live-status")).to_have_text("paused")
        assert job.info().status == "paused"
        page.get_by_label("Log type").select_option("migrationPause")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("#logs tr")).to_have_count(1)
        expect(page.locator("#logs")).to_contain_text("migrationPause")
        page.screenshot(path=screenshot_path("migration-paused"), full_page=True)

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
    content = page.content()
    assert s3_server.secret_access_key not in content and target_s3.secret_access_key not in content


TREE = {
    "alpha/1.0.0/alpha.js": b"var alpha = 1;\n",
    "alpha/1.0.0/alpha.min.js": b"var alpha=1;",
    "alpha/1.0.0/css/alpha.css": b".alpha{color:red}",
    "alpha/1.1.0/alpha.js": b"var alpha = 2;\n",
    "beta.js/2.0.0/beta.js": b"export const beta = 2;",
}


def test_open_a_cdn_packages_version_and_its_sris(
    page: Page, served: ServeProcess, client: conveyor.Conveyor, tmp_path: Path
) -> None:
    cdn.init(client)
    libs = tmp_path / "cdnjs" / "ajax" / "libs"
    for path, data in TREE.items():
        (libs / path).parent.mkdir(parents=True, exist_ok=True)
        (libs / path).write_bytes(data)
    assert import_tree(client, libs)["imported"] == ["alpha", "beta.js"]
    log_in(page, served)
    page.get_by_role("link", name="CDN", exact=True).click()
    expect(page.locator("tr[data-package]")).to_have_count(2)
    page.get_by_label("Name or words").fill("alp")
    expect(page.locator("tr[data-package]")).to_have_count(1)
    page.screenshot(path=screenshot_path("cdn"), full_page=True)
    page.get_by_role("link", name="alpha", exact=True).click()
    expect(page.locator('tr[data-version="1.1.0"] .tag')).to_have_text("published")
    page.screenshot(path=screenshot_path("cdn-package"), full_page=True)
    page.get_by_role("link", name="1.0.0", exact=True).click()
    expect(page.locator('tr[data-file="alpha.min.js"] td.sri')).to_have_text(sri(TREE["alpha/1.0.0/alpha.min.js"]))
    expect(page.locator('tr[data-file="css/alpha.css"] td.sri')).to_have_text(sri(TREE["alpha/1.0.0/css/alpha.css"]))
    page.screenshot(path=screenshot_path("cdn-version"), full_page=True)


def test_a_read_only_browser_session_cannot_pause_a_migration_even_by_crafting_the_post(
    page: Page, served: ServeProcess, client: conveyor.Conveyor, s3_server: S3Server
) -> None:
    source = s3_server.new_bucket()
    s3_server.client().put_object(Bucket=source, Key="one", Body=b"1")  # type: ignore[attr-defined]
    client.create_bucket("copy")
    job = client.slurper.create_job(source=s3_source(s3_server, source), target={"vendor": "r2", "bucket": "copy"})
    reader = dataclasses.replace(served, token=create_token(served.data, ACCOUNT, "--read-only"))
    log_in(page, reader)
    page.goto(f"{served.url}/dash/a/{ACCOUNT}/migrations/{job.id}")
    expect(page.locator("#live-status")).to_have_text("running")
    expect(page.get_by_text("Pause…")).to_have_count(0)
    expect(page.get_by_role("button", name="Abort")).to_have_count(0)
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value")  # the logout form's
    crafted = page.request.post(
        f"{served.url}/dash/a/{ACCOUNT}/migrations/{job.id}/pause",
        form={"csrf": csrf or "", "confirm": "yes"},
        headers={"origin": served.url},
    )
    assert crafted.status == 403 and "read-only" in crafted.text()
    assert job.info().status == "running"
    page.screenshot(path=screenshot_path("migration-read-only"), full_page=True)
