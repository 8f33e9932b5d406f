"""The dashboard's CDN over plain HTTP, against a real server whose account has a CDN: packages
imported from an ``ajax/libs`` tree and configured ones, a package's versions by publish state
(published, in progress, failed), a version's files with their SRIs, the last audit's counts, and
the refusals (accounts without a CDN, other accounts, queue-scoped sessions); hostile text shows as
text."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from conveyor import cdn
from conveyor.cdn.audit import audit
from conveyor.cdn.importer import import_tree
from conveyor.cdn.registry import Dist
from conveyor.cdn.store import CdnStore
from conveyor.cdn.tarball import sri
from conveyor.server.testing import RunningServer, running_server
from conveyor.storage.service import SHARED_DIRECTORIES_VARIABLE
from tests.cdn.conftest import package_config, write_config
from tests.dash.conftest import logged_in
from tests.dash.test_dash_migrations import make_job
from tests.engine.postgres.support import drop_schema, new_schema, schema_url
from tests.storage.conftest import s3_server as s3_server  # the migration's source
from tests.storage.s3_server import S3Server

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
TREE = {
    "alpha/1.0.0/alpha.js": b"var alpha = 1;\n",
    "alpha/1.0.0/css/alpha.css": b".alpha{color:red}",
    "alpha/1.1.0/alpha.js": b"var alpha = 2;\n",
    "beta.js/2.0.0/beta.js": b"export const beta = 2;",
}


def seed_cdn(server: RunningServer, root: Path, account: str = "acme") -> None:
    """The account's CDN: ``alpha`` and ``beta.js`` imported from a tree, ``gamma`` configured with
    a version in progress and one the pipeline failed (with a hostile reason)."""
    cv = server.service.client(account)
    cdn.init(cv)
    libs = root / "ajax" / "libs"
    for path, data in TREE.items():
        (libs / path).parent.mkdir(parents=True, exist_ok=True)
        (libs / path).write_bytes(data)
    (libs / "alpha" / "package.json").write_bytes(orjson.dumps({"description": HOSTILE, "keywords": ["first"]}))
    assert import_tree(cv, root)["imported"] == ["alpha", "beta.js"]
    cdn.add(cv, write_config(root, package_config("gamma", ["*.js"])))
    store = CdnStore.open(cv.deployment)
    try:
        dist = Dist("https://registry.example/gamma-1.0.0.tgz", None, None)
        store.queue_version(account, "gamma", "1.0.0", dist, now_ms=1)
        store.queue_version(account, "gamma", "0.9.0", dist, now_ms=1)
        store.record_failure(account, "gamma", "0.9.0", HOSTILE, now_ms=2)
    finally:
        store.close()


def test_packages_versions_and_files_with_their_sri(server: RunningServer, tmp_path: Path) -> None:
    secret, _ = server.tokens.create("acme")
    seed_cdn(server, tmp_path / "cdnjs")
    client = logged_in(server, secret)
    assert 'href="/dash/a/acme/cdn"' in client.get("/dash/a/acme").text
    page = client.get("/dash/a/acme/cdn")
    assert page.status_code == 200
    for name in ("alpha", "beta.js", "gamma"):
        assert f'data-package="{name}"' in page.text
    assert "No audit has run yet" in page.text
    by_name = client.get("/dash/a/acme/cdn/rows", params={"q": "bet"}).text
    assert 'data-package="beta.js"' in by_name and 'data-package="alpha"' not in by_name
    by_keyword = client.get("/dash/a/acme/cdn/rows", params={"q": "first"}).text  # the CDN's search index
    assert 'data-package="alpha"' in by_keyword and 'data-package="gamma"' not in by_keyword
    alpha = client.get("/dash/a/acme/cdn/p/alpha").text
    assert 'data-version="1.1.0"' in alpha and 'data-version="1.0.0"' in alpha
    assert alpha.index('data-version="1.1.0"') < alpha.index('data-version="1.0.0"')  # newest first
    assert 'id="count-published">2<' in alpha
    version = client.get("/dash/a/acme/cdn/p/alpha/v/1.0.0").text
    assert sri(TREE["alpha/1.0.0/alpha.js"]) in version and sri(TREE["alpha/1.0.0/css/alpha.css"]) in version
    assert 'data-file="css/alpha.css"' in version and 'id="version-state">published<' in version
    gamma = client.get("/dash/a/acme/cdn/p/gamma").text
    assert 'id="count-in-progress">1<' in gamma and 'id="count-failed">1<' in gamma
    failed = client.get("/dash/a/acme/cdn/p/gamma/v/0.9.0").text
    assert 'id="version-state">failed<' in failed
    assert client.get("/dash/a/acme/cdn/p/gamma/v/9.9.9").status_code == 404
    assert client.get("/dash/a/acme/cdn/p/nothing-here").status_code == 404
    assert client.get("/dash/a/acme/cdn/p/alpha/v/..%2f..").status_code == 404
    for shown in (page.text, alpha, failed, gamma):
        assert "<script>alert" not in shown and "<img src=x" not in shown
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in failed and "&lt;script&gt;" in alpha
    assert secret not in page.text


def test_the_last_audits_counts_show_its_divergences(server: RunningServer, tmp_path: Path) -> None:
    secret, _ = server.tokens.create("acme", read_only=True)
    seed_cdn(server, tmp_path / "cdnjs")
    cv = server.service.client("acme")
    cv.bucket("cdn").delete("alpha/1.0.0/alpha.js")
    report = audit(cv)
    assert report.counts[("cdn", "missing")] == 1
    page = logged_in(server, secret).get("/dash/a/acme/cdn").text
    assert "1 divergent object(s)" in page
    assert '<tr class="divergent"><td>cdn</td><td>missing</td><td class="num">1</td></tr>' in page
    assert 'method="post"' not in page.split("<main")[1]  # the CDN pages are read-only: no audit button


def test_accounts_without_a_cdn_others_and_queue_scoped_sessions_see_none(
    server: RunningServer, tmp_path: Path
) -> None:
    secret, _ = server.tokens.create("acme")
    client = logged_in(server, secret)
    assert client.get("/dash/a/acme/cdn").status_code == 404  # no cdn.db at all yet
    seed_cdn(server, tmp_path / "cdnjs", account="rival")
    overview = client.get("/dash/a/acme").text
    assert "/cdn" not in overview
    assert client.get("/dash/a/acme/cdn").status_code == 404
    assert client.get("/dash/a/rival/cdn").status_code == 404
    assert client.get("/dash/a/rival/cdn/p/alpha").status_code == 404
    scoped_secret, _ = server.tokens.create("rival", queues=("orders",))
    scoped = logged_in(server, scoped_secret)
    assert scoped.get("/dash/a/rival/cdn").status_code == 404
    assert "/cdn" not in scoped.get("/dash/a/rival").text
    operator = logged_in(server, server.tokens.create_operator()[0])
    assert 'data-package="alpha"' in operator.get("/dash/a/rival/cdn").text


def test_the_cdn_and_migrations_pages_on_a_postgres_deployment(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    monkeypatch.setenv(SHARED_DIRECTORIES_VARIABLE, str(shared))
    schema = new_schema()
    try:
        with running_server(schema_url(schema)) as server:
            cv = server.service.client("acme")
            cdn.init(cv, primary_url=(shared / "cdn").as_uri(), staging_url=(shared / "cdn-staging").as_uri())
            libs = tmp_path / "cdnjs" / "ajax" / "libs"
            (libs / "alpha" / "1.0.0").mkdir(parents=True)
            (libs / "alpha" / "1.0.0" / "alpha.js").write_bytes(TREE["alpha/1.0.0/alpha.js"])
            assert import_tree(cv, libs)["imported"] == ["alpha"]
            job = make_job(server, s3_server, bucket_url=(shared / "copy").as_uri())
            client = logged_in(server, server.tokens.create("acme")[0])
            overview = client.get("/dash/a/acme").text
            assert 'href="/dash/a/acme/cdn"' in overview and 'href="/dash/a/acme/migrations"' in overview
            assert 'data-package="alpha"' in client.get("/dash/a/acme/cdn").text
            version = client.get("/dash/a/acme/cdn/p/alpha/v/1.0.0").text
            assert sri(TREE["alpha/1.0.0/alpha.js"]) in version
            page = client.get(f"/dash/a/acme/migrations/{job.id}").text
            assert "migrationStart" in page and s3_server.secret_access_key not in page
            assert [e.log_type for e in job.logs(log_type="migrationStart")] == ["migrationStart"]
            assert job.logs(log_type="migrationAbort") == []
    finally:
        drop_schema(schema)
