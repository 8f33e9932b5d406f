"""The dashboard's migrations over plain HTTP, against a real server and a real S3-compatible source
(moto_server): the jobs list and a job's page without any secret, live figures, logs filtered by
type and escaped, pause / resume / abort with their confirmations, and the refusals (CSRF,
read-only, queue-scoped and other accounts' sessions)."""

from __future__ import annotations

import datetime
import re

from conveyor.server.dash import migrations, views
from conveyor.server.testing import RunningServer
from conveyor.slurper import Job, JobProgress
from conveyor.slurper.store import job_store
from tests.dash.conftest import csrf_of, logged_in
from tests.slurper.conftest import pipeline_running, s3_source, wait_for
from tests.storage.conftest import s3_server as s3_server  # the moto_server the sources live on
from tests.storage.s3_server import S3Server

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def make_job(
    server: RunningServer, s3: S3Server, account: str = "acme", bucket_url: str | None = None, **extra: object
) -> Job:
    """A job of ``account`` from a moto bucket of three objects into a Conveyor bucket (at
    ``bucket_url`` if given). No worker runs its pipeline, so it stays as the test leaves it."""
    bucket = s3.new_bucket()
    client = s3.client()
    for n in range(3):
        client.put_object(Bucket=bucket, Key=f"k{n}", Body=b"x" * 10)  # type: ignore[attr-defined]
    cv = server.service.client(account)
    cv.create_bucket(f"copy-{bucket}", url=bucket_url)
    job = cv.slurper.create_job(
        source=s3_source(s3, bucket, **extra), target={"vendor": "r2", "bucket": f"copy-{bucket}"}
    )
    assert isinstance(job, Job)
    return job


def test_jobs_and_a_jobs_page_show_source_target_and_progress_but_never_a_secret(
    server: RunningServer, s3_server: S3Server
) -> None:
    secret, _ = server.tokens.create("acme")
    job = make_job(server, s3_server, pathPrefix="photos/")
    client = logged_in(server, secret)
    overview = client.get("/dash/a/acme").text
    assert 'href="/dash/a/acme/migrations"' in overview  # the navigation shows the tool
    listing = client.get("/dash/a/acme/migrations")
    assert listing.status_code == 200 and job.id in listing.text and "running" in listing.text
    rows = client.get("/dash/a/acme/migrations/rows").text
    assert f'data-job="{job.id}"' in rows
    page = client.get(f"/dash/a/acme/migrations/{job.id}")
    assert page.status_code == 200
    assert s3_server.endpoint in page.text and "photos/" in page.text
    live = client.get(f"/dash/a/acme/migrations/{job.id}/live").text
    assert 'id="live-status">running<' in live
    for shown in (overview, listing.text, rows, page.text, live):
        assert s3_server.secret_access_key not in shown and s3_server.access_key_id not in shown
        assert secret not in shown


def test_an_account_without_jobs_has_no_migrations_link(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    client = logged_in(server, secret)
    assert "/migrations" not in client.get("/dash/a/acme").text
    assert "no migration jobs" in client.get("/dash/a/acme/migrations").text
    bad = client.get("/dash/a/acme/migrations", params={"offset": "-1"})
    assert bad.status_code == 400 and "offset" in bad.text


def test_logs_are_filtered_by_type_and_hostile_messages_and_keys_render_as_text(
    server: RunningServer, s3_server: S3Server
) -> None:
    secret, _ = server.tokens.create("acme")
    job = make_job(server, s3_server, pathPrefix=HOSTILE)
    store = job_store(server.service.client("acme"))
    store.log(job.id, 1, "importErrorRetryExhaustion", HOSTILE, HOSTILE)
    client = logged_in(server, secret)
    everything = client.get(f"/dash/a/acme/migrations/{job.id}").text
    assert "migrationStart" in everything and "importErrorRetryExhaustion" in everything
    assert "<script>alert" not in everything and "<img src=x" not in everything
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in everything
    only = client.get(f"/dash/a/acme/migrations/{job.id}", params={"type": "importErrorRetryExhaustion"}).text
    logs = only[only.index('id="logs"') :]
    assert "importErrorRetryExhaustion" in logs and "migrationStart" not in logs
    refused = client.get(f"/dash/a/acme/migrations/{job.id}", params={"type": "<nope>"})
    assert refused.status_code == 400 and "&lt;nope&gt;" in refused.text and "<nope>" not in refused.text
    assert [e.log_type for e in job.logs(log_type="migrationStart")] == ["migrationStart"]


def test_pause_resume_and_abort_need_their_confirmation_and_the_sessions_csrf_token(
    server: RunningServer, s3_server: S3Server
) -> None:
    secret, _ = server.tokens.create("acme")
    job = make_job(server, s3_server)
    client = logged_in(server, secret)
    base = f"/dash/a/acme/migrations/{job.id}"
    page = client.get(base).text
    assert "Pause…" in page and "Abort" in page and "Resume…" not in page
    csrf = csrf_of(page)
    assert client.post(base + "/pause", data={"confirm": "yes"}).status_code == 403
    assert (
        client.post(
            base + "/pause", data={"csrf": csrf, "confirm": "yes"}, headers={"origin": "https://evil.example"}
        ).status_code
        == 403
    )
    unconfirmed = client.post(base + "/pause", data={"csrf": csrf})
    assert unconfirmed.status_code == 400 and job.info().status == "running"
    paused = client.post(base + "/pause", data={"csrf": csrf, "confirm": "yes"})
    assert paused.status_code == 303 and paused.headers["location"] == base + "?done=paused"
    assert job.info().status == "paused"
    page = client.get(paused.headers["location"]).text
    assert "Resume…" in page and "Pause…" not in page and "Done: paused." in page
    assert client.post(base + "/resume", data={"csrf": csrf, "confirm": "yes"}).status_code == 303
    assert job.info().status == "running"
    wrong = client.post(base + "/abort", data={"csrf": csrf, "confirm": job.id[:8]})
    assert wrong.status_code == 400 and "type the job" in wrong.text and job.info().status == "running"
    assert client.post(base + "/abort", data={"csrf": csrf, "confirm": job.id}).status_code == 303
    assert job.info().status == "aborted"
    assert 'id="abort"' not in client.get(base).text  # an aborted job has no actions left
    too_late = client.post(base + "/pause", data={"csrf": csrf, "confirm": "yes"})
    assert too_late.status_code == 409 and job.info().status == "aborted"  # InvalidJobState, on an error page


def test_a_read_only_session_sees_no_buttons_and_its_writes_are_refused(
    server: RunningServer, s3_server: S3Server
) -> None:
    secret, _ = server.tokens.create("acme", read_only=True)
    job = make_job(server, s3_server)
    client = logged_in(server, secret)
    base = f"/dash/a/acme/migrations/{job.id}"
    page = client.get(base)
    assert page.status_code == 200 and "Pause…" not in page.text and 'id="abort"' not in page.text
    csrf = csrf_of(page.text)
    for change, confirm in (("pause", "yes"), ("abort", job.id)):
        refused = client.post(f"{base}/{change}", data={"csrf": csrf, "confirm": confirm})
        assert refused.status_code == 403 and "read-only" in refused.text
    assert job.info().status == "running"


def test_other_accounts_and_queue_scoped_sessions_see_no_jobs(server: RunningServer, s3_server: S3Server) -> None:
    theirs = make_job(server, s3_server, account="rival")
    mine = make_job(server, s3_server)
    secret, _ = server.tokens.create("acme")
    client = logged_in(server, secret)
    assert theirs.id not in client.get("/dash/a/acme/migrations").text
    assert client.get("/dash/a/rival/migrations").status_code == 404
    assert client.get(f"/dash/a/rival/migrations/{theirs.id}").status_code == 404
    assert client.get(f"/dash/a/acme/migrations/{theirs.id}").status_code == 404  # not this account's
    csrf = csrf_of(client.get("/dash/a/acme").text)
    stolen = client.post(f"/dash/a/acme/migrations/{theirs.id}/abort", data={"csrf": csrf, "confirm": theirs.id})
    assert (
        stolen.status_code == 404 and server.service.client("rival").slurper.job(theirs.id).info().status == "running"
    )
    scoped_secret, _ = server.tokens.create("acme", queues=("orders",))
    server.service.client("acme").create_queue("orders")
    scoped = logged_in(server, scoped_secret)
    assert "/migrations" not in scoped.get("/dash/a/acme").text
    assert scoped.get("/dash/a/acme/migrations").status_code == 404
    assert scoped.get(f"/dash/a/acme/migrations/{mine.id}").status_code == 404
    assert scoped.get("/dash/a/acme/migrations/not-a-job").status_code == 404
    operator_secret, _ = server.tokens.create_operator()
    operator = logged_in(server, operator_secret)
    seen = operator.get(f"/dash/a/rival/migrations/{theirs.id}")
    assert seen.status_code == 200 and "Pause…" not in seen.text
    refused = operator.post(
        f"/dash/a/rival/migrations/{theirs.id}/pause", data={"csrf": csrf_of(seen.text), "confirm": "yes"}
    )
    assert refused.status_code == 403


def test_live_figures_count_objects_and_bytes_as_a_worker_copies(server: RunningServer, s3_server: S3Server) -> None:
    secret, _ = server.tokens.create("acme")
    job = make_job(server, s3_server)
    client = logged_in(server, secret)
    with pipeline_running(server.service.client("acme")):
        wait_for(job)
    live = client.get(f"/dash/a/acme/migrations/{job.id}/live").text
    assert 'id="live-status">completed<' in live
    assert re.search(r'id="live-objects">3 / 3<', live) and "100%" in live and "30 B / 30 B" in live


def test_the_rate_and_eta_come_from_the_polls_of_the_last_minute() -> None:
    rates = views.RateBook()
    start = datetime.datetime(2026, 12, 4, tzinfo=datetime.UTC)

    def progress(done: int, copied: int, *, listed: bool = True, status: str = "running") -> JobProgress:
        return JobProgress("j1", start, status, 100, done, 0, 0, 100_000, copied, listed)  # type: ignore[arg-type]

    first = rates.figures(progress(10, 10_000), now_ms=1_000)
    assert (first.objects_per_s, first.eta_s, first.percent) == (None, None, 10.0)  # one sample: no rate yet
    later = rates.figures(progress(30, 30_000), now_ms=11_000)
    assert later.objects_per_s == 2.0 and later.bytes_per_s == 2_000.0 and later.eta_s == 35.0
    listing = rates.figures(progress(40, 40_000, listed=False), now_ms=21_000)
    assert listing.objects_per_s == 1.5 and listing.eta_s is None and listing.percent is None
    much_later = rates.figures(progress(50, 50_000), now_ms=200_000)  # older samples are forgotten
    assert much_later.objects_per_s is None
    paused = rates.figures(progress(50, 50_000, status="paused"), now_ms=210_000)
    assert paused.objects_per_s is None and paused.eta_s is None
    assert views.size(0) == "0 B" and views.size(1536) == "1.5 KiB" and views.duration(3725) == "1 h 2 min"


def test_an_endpoint_shows_without_credentials_written_into_its_url() -> None:
    shown = dict(migrations._shown({"vendor": "s3", "endpoint": "https://AKIA:s3cret@s3.example:9000/x", "keys": None}))
    assert shown == {"vendor": "s3", "endpoint": "https://s3.example:9000/x"}
