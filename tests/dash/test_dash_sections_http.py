"""The dashboard's buckets, KV and prober pages over plain HTTP: what they show, folders and cursor
pages, the download through the session, scopes (another account 404, a queue-scoped token 403, an
operator reads), no credential rendered, and hostile keys, values, metadata and errors escaped."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

import conveyor
from conveyor.prober import CheckFailed, ProbeTarget
from conveyor.server.dash.storage_pages import browse
from conveyor.server.testing import RunningServer
from tests.dash.conftest import csrf_of, logged_in
from tests.storage.s3_server import S3Server, start_s3_server

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
ESCAPED = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"
SECTIONS = ("buckets", "kv", "prober")


def assert_inert(page: str) -> None:
    assert "<script>alert" not in page and "<img src=x" not in page


def test_buckets_list_folders_and_objects_a_page_at_a_time(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    cv = server.service.client("acme")
    b = cv.create_bucket("media")
    for n in range(130):
        b.put(f"photos/{n:03d}.jpg", b"x" * n, content_type="image/jpeg")
    b.put("docs/readme.txt", b"hello", content_type="text/plain")
    b.put("docs/deep/a.txt", b"a")
    b.put("top.txt", b"top")
    client = logged_in(server, secret)
    listing = client.get("/dash/a/acme/buckets").text
    assert 'data-bucket="media"' in listing
    root = client.get("/dash/a/acme/buckets/media").text
    assert root.count('class="folder"') == 2 and root.count('class="object"') == 1  # docs/, photos/, top.txt
    assert "Next page" not in root
    photos = client.get("/dash/a/acme/buckets/media", params={"prefix": "photos/"}).text
    assert photos.count('class="object"') == 100 and "photos/099.jpg" in photos and "photos/100.jpg" not in photos
    following = client.get("/dash/a/acme/buckets/media", params={"prefix": "photos/", "after": "photos/099.jpg"}).text
    assert following.count('class="object"') == 30 and "photos/129.jpg" in following and "Next page" not in following
    docs = client.get("/dash/a/acme/buckets/media", params={"prefix": "docs/"}).text
    assert docs.count('class="folder"') == 1 and "readme.txt" in docs and "docs/deep/a.txt" not in docs
    assert client.get("/dash/a/acme/buckets/missing-bucket").status_code == 404
    assert client.get("/dash/a/acme/buckets/Bad_Name").status_code == 400


def test_many_folders_page_by_cursor(server: RunningServer) -> None:
    """A page of folders only: each folder is listed once, and the cursor skips past its keys."""
    b = server.service.client("acme").create_bucket("folders")
    for n in range(25):
        for m in range(3):
            b.put(f"f{n:03d}/{m}", b"x")
    b.put("z.txt", b"z")
    first, cursor = browse(b, "", "", 10)
    assert [e.name for e in first] == [f"f{n:03d}/" for n in range(10)]
    rest, end = browse(b, "", cursor, 100)
    assert [e.name for e in rest] == [*(f"f{n:03d}/" for n in range(10, 25)), "z.txt"] and end == ""
    inside, _ = browse(b, "f003/", "", 100)
    assert [e.name for e in inside] == ["f003/0", "f003/1", "f003/2"]


def test_an_objects_metadata_and_download_are_escaped_and_never_served_as_a_page(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    b = server.service.client("acme").create_bucket("files")
    key = 'a dir/<img src=x onerror=alert(1)> "q"?#.html'
    b.put(key, HOSTILE.encode(), content_type="text/html", metadata={"note": HOSTILE, HOSTILE[:20]: "v"})
    client = logged_in(server, secret)
    listing = client.get("/dash/a/acme/buckets/files", params={"prefix": "a dir/"}).text
    assert "&lt;img src=x onerror=alert(1)&gt;" in listing
    assert_inert(listing)
    link = f"/dash/a/acme/buckets/files/o/{quote(key)}"
    assert f'href="{link}"' in listing
    page = client.get(link)
    assert page.status_code == 200
    assert_inert(page.text)
    assert ESCAPED in page.text and "text/html" in page.text and str(len(HOSTILE.encode())) in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    download = client.get(f"/dash/a/acme/buckets/files/download/{quote(key)}")
    assert download.status_code == 200 and download.content == HOSTILE.encode()
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["content-disposition"].startswith("attachment;")
    assert "sandbox" in download.headers["content-security-policy"]
    assert download.headers["x-content-type-options"] == "nosniff"
    assert client.get("/dash/a/acme/buckets/files/o/missing.txt").status_code == 404
    assert client.get("/dash/a/acme/buckets/files/download/missing.txt").status_code == 404
    assert client.get("/dash/a/acme/buckets/files/o/a/../b").status_code in (400, 404)


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path_factory.mktemp("moto"))
    try:
        yield server
    finally:
        server.stop()


def test_an_s3_buckets_credentials_are_never_rendered(server: RunningServer, s3: S3Server) -> None:
    """A bucket on an S3-compatible service (moto on 127.0.0.1, authentication on) shows its name,
    objects and metadata, and downloads through the server, never showing its keys."""
    secret, _ = server.tokens.create("acme")
    b = server.service.client("acme").create_bucket(
        "remote",
        url=f"s3://{s3.new_bucket()}/conveyor",
        endpoint=s3.endpoint,
        region="us-east-1",
        access_key_id=s3.access_key_id,
        secret_access_key=s3.secret_access_key,
    )
    b.put("dir/file.bin", b"remote bytes", metadata={"owner": "ops"})
    client = logged_in(server, secret)
    pages = [
        client.get(path)
        for path in (
            "/dash/a/acme/buckets",
            "/dash/a/acme/buckets/remote",
            "/dash/a/acme/buckets/remote?prefix=dir/",
            "/dash/a/acme/buckets/remote/o/dir/file.bin",
        )
    ]
    assert all(page.status_code == 200 for page in pages)
    assert "file.bin" in pages[2].text and "owner" in pages[3].text
    for page in pages:
        assert s3.secret_access_key not in page.text and s3.access_key_id not in page.text
        assert secret not in page.text
    assert client.get("/dash/a/acme/buckets/remote/download/dir/file.bin").content == b"remote bytes"


def test_kv_namespaces_keys_by_prefix_and_cursor_and_values_by_kind(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    kv = server.service.client("acme").kv("config", create=True)
    kv.put_many([{"key": f"user:{n:03d}", "value": str(n)} for n in range(120)])
    kv.put("doc", {"html": HOSTILE, "n": 1}, metadata={"by": HOSTILE})
    kv.put("raw", b"\x00\xff<script>")
    kv.put(HOSTILE, HOSTILE)
    kv.put("long", "y" * 5000)
    kv.put("temporary", "t", expiration=4_102_444_800)  # 2100-01-01
    client = logged_in(server, secret)
    namespaces = client.get("/dash/a/acme/kv").text
    assert 'data-namespace="config"' in namespaces and kv.id in namespaces
    base = f"/dash/a/acme/kv/{kv.id}"
    first = client.get(base, params={"prefix": "user:"}).text
    assert first.count('class="key"') == 100 and "user:099" in first and "user:100" not in first
    cursor = first.split("cursor=")[1].split('"')[0]
    second = client.get(base + "?prefix=user%3A&cursor=" + cursor).text
    assert second.count('class="key"') == 20 and "user:119" in second and "Next page" not in second
    everything = client.get(base).text
    assert_inert(everything)
    assert ESCAPED in everything  # the hostile key's name, and the metadata column
    assert "2100-01-01 00:00:00 UTC" in everything
    assert "2100-01-01 00:00:00 UTC" in client.get(base + "/k/temporary").text
    doc = client.get(base + "/k/doc").text
    assert_inert(doc)
    assert 'class="body json"' in doc and "&#34;html&#34;: &#34;&lt;script&gt;" in doc
    raw = client.get(base + "/k/raw").text
    assert "00 ff 3c 73 63 72 69 70 74 3e" in raw
    as_text = client.get(base + "/k/raw", params={"as": "text"}).text
    assert "&lt;script&gt;" in as_text
    hostile = client.get(base + "/k/" + quote(HOSTILE, safe=""))
    assert hostile.status_code == 200
    assert_inert(hostile.text)
    assert "<details>" in client.get(base + "/k/long").text
    assert client.get(base + "/k/raw", params={"as": "html"}).status_code == 400
    assert client.get(base + "/k/missing").status_code == 404
    assert client.get("/dash/a/acme/kv/" + "0" * 32).status_code == 404


def _seed_prober(cv: conveyor.Conveyor) -> str:
    """A fleet with two targets of a check that passes and one that fails with hostile text, and
    one round of the single loop (run here); the round's id."""
    app = conveyor.App(cv)
    prober = conveyor.Prober(app, fleet="web", messages=0, schedule=None)

    @prober.check("hostile")
    def hostile(target: ProbeTarget) -> dict[str, str]:
        if "bad" in target.address:
            raise CheckFailed(HOSTILE, {"why": HOSTILE})
        return {"note": HOSTILE}

    prober.fleet.import_targets(
        [{"address": "good.example.com", "check": "hostile"}, {"address": "bad.example.com", "check": "hostile"}]
    )
    return prober.round(timeout=60).id


def test_prober_fleets_report_rounds_and_a_rounds_jobs(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme")
    round_id = _seed_prober(server.service.client("acme"))
    client = logged_in(server, secret)
    fleets = client.get("/dash/a/acme/prober").text
    assert 'data-fleet="web"' in fleets
    fleet = client.get("/dash/a/acme/prober/web").text
    assert_inert(fleet)
    assert f'data-round="{round_id}"' in fleet and "good.example.com" in fleet and "bad.example.com" in fleet
    assert "1 of 2 finished" in fleet  # failed checks
    assert ESCAPED in fleet  # the failure's error, escaped
    round_page = client.get(f"/dash/a/acme/prober/web/r/{round_id}").text
    assert_inert(round_page)
    assert round_page.count("data-job=") == 2 and "finished 2" in round_page
    assert "&#34;note&#34;" in round_page or "&lt;script&gt;" in round_page
    assert client.get("/dash/a/acme/prober/web/r/no-such-round").status_code == 404
    assert client.get("/dash/a/acme/prober/nofleet").status_code == 404
    assert client.get("/dash/a/acme/prober/Bad%20Fleet").status_code == 400


def test_sections_keep_to_the_sessions_account_and_scope(server: RunningServer) -> None:
    rival = server.service.client("rival")
    rival.create_bucket("theirs").put("secret.txt", b"rival data")
    rival_kv = rival.kv("rival-config", create=True)
    rival_kv.put("k", "rival value")
    round_id = _seed_prober(rival)
    secret, _ = server.tokens.create("acme")
    client = logged_in(server, secret)
    for path in (
        "/dash/a/rival/buckets",
        "/dash/a/rival/buckets/theirs",
        "/dash/a/rival/buckets/theirs/o/secret.txt",
        "/dash/a/rival/buckets/theirs/download/secret.txt",
        "/dash/a/rival/kv",
        f"/dash/a/rival/kv/{rival_kv.id}/k/k",
        "/dash/a/rival/prober/web",
        f"/dash/a/rival/prober/web/r/{round_id}",
    ):
        refused = client.get(path)
        assert refused.status_code == 404, path
        assert "rival data" not in refused.text and "rival value" not in refused.text
    # Their names are not the session's account's either.
    assert client.get("/dash/a/acme/buckets/theirs").status_code == 404
    assert client.get(f"/dash/a/acme/kv/{rival_kv.id}").status_code == 404
    assert client.get("/dash/a/acme/prober/web").status_code == 404

    scoped, _ = server.tokens.create("acme", queues=("open",))
    server.service.client("acme").create_queue("open")
    scoped_client = logged_in(server, scoped)
    overview = scoped_client.get("/dash/a/acme").text
    for section in SECTIONS:
        assert f"/dash/a/acme/{section}" not in overview  # no link
        refused = scoped_client.get(f"/dash/a/acme/{section}")
        assert refused.status_code == 403 and "account-wide" in refused.text

    operator, _ = server.tokens.create_operator()
    op = logged_in(server, operator)
    assert "secret.txt" in op.get("/dash/a/rival/buckets/theirs").text
    assert op.get(f"/dash/a/rival/prober/web/r/{round_id}").status_code == 200


def test_read_only_sessions_read_the_sections_and_nothing_there_writes(server: RunningServer) -> None:
    secret, _ = server.tokens.create("acme", read_only=True)
    cv = server.service.client("acme")
    cv.create_bucket("readable").put("a.txt", b"a")
    cv.kv("ro-kv", create=True).put("k", "v")
    client = logged_in(server, secret)
    for path in (
        "/dash/a/acme/buckets/readable",
        "/dash/a/acme/buckets/readable/o/a.txt",
        "/dash/a/acme/kv",
        "/dash/a/acme/prober",
    ):
        page = client.get(path)
        assert page.status_code == 200, path
        assert page.text.count("<form") == 1 + page.text.count('role="search"')  # logout (and a filter) only
        assert 'method="post"' not in page.text.replace('method="post" action="/dash/logout"', "")
    csrf = csrf_of(client.get("/dash/a/acme/kv").text)
    assert client.post("/dash/a/acme/buckets/readable", data={"csrf": csrf}).status_code == 405
    assert client.get("/dash/a/acme/buckets/readable/download/a.txt").content == b"a"


def test_a_section_without_a_session_sends_the_browser_to_log_in(server: RunningServer) -> None:
    client = httpx.Client(base_url=server.url)
    for section in SECTIONS:
        assert client.get(f"/dash/a/acme/{section}").headers["location"] == "/dash/login"
