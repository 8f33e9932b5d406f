"""``cdn import``: an ``ajax/libs`` tree copied byte for byte into the primary and a mirror on
moto_server, fanned out by package over a queue; ``cdn audit``: a mirror object deleted or
corrupted behind Conveyor's back is found, repaired from the primary, and counted on /metrics;
``cdn serve`` as a command."""

from __future__ import annotations

import gzip
import signal
from pathlib import Path

import brotli
import httpx
import orjson
import pytest

import conveyor
from conveyor import cdn
from conveyor.cdn.audit import audit
from conveyor.cdn.errors import InvalidImportTree
from conveyor.cdn.importer import import_tree
from conveyor.cdn.metadata import METADATA_NAMESPACE, Catalog
from conveyor.cdn.tarball import sri
from tests.cdn.conftest import bucket_urls, cdn_command, cdn_server, s3_bucket
from tests.cli.support import Cli
from tests.storage.s3_server import S3Server

TREE = {
    "alpha/1.0.0/alpha.js": b"var alpha = 1;\n" * 30,
    "alpha/1.0.0/alpha.min.js": b"var alpha=1;",
    "alpha/1.0.0/css/alpha.css": b".alpha{color:red}",
    "alpha/1.0.0/fonts/alpha.woff2": b"wOF2 alpha",
    "alpha/1.1.0/alpha.js": b"var alpha = 2;\n" * 30,
    "alpha/1.1.0/alpha.min.js": b"var alpha=2;",
    "beta.js/2.0.0/beta.js": b"export const beta = 2;",
}
ALPHA = {
    "description": "The alpha library",
    "keywords": ["alpha", "first"],
    "filename": "alpha.min.js",
    "license": "MIT",
    "author": {"name": "Ada"},
    "repository": {"type": "git", "url": "https://example.com/alpha.git"},
}


def write_tree(root: Path) -> Path:
    libs = root / "ajax" / "libs"
    for path, data in TREE.items():
        (libs / path).parent.mkdir(parents=True, exist_ok=True)
        (libs / path).write_bytes(data)
    (libs / "alpha" / "package.json").write_bytes(orjson.dumps(ALPHA))
    return root


def init_with_mirror(cv: conveyor.Conveyor, s3: S3Server) -> conveyor.Bucket:
    mirror = s3_bucket(cv, s3, "cdn-mirror")
    cdn.init(cv, mirror="cdn-mirror", **bucket_urls(cv))  # type: ignore[arg-type]
    return mirror


def test_an_ajax_libs_tree_is_imported_byte_for_byte_into_both_buckets_and_kv(
    cv: conveyor.Conveyor, s3_server: S3Server, tmp_path: Path
) -> None:
    mirror = init_with_mirror(cv, s3_server)
    tree = write_tree(tmp_path / "cdnjs")
    assert import_tree(cv, tree) == {"packages": 2, "imported": ["alpha", "beta.js"], "failed": []}
    primary = cv.bucket("cdn")
    for path, data in TREE.items():
        for bucket in (primary, mirror):
            assert bucket.get(path).bytes() == data
            if not path.endswith(".woff2"):
                assert brotli.decompress(bucket.get(path + ".br").bytes()) == data
                assert gzip.decompress(bucket.get(path + ".gz").bytes()) == data
    assert not primary.exists("alpha/1.0.0/fonts/alpha.woff2.br")
    catalog = Catalog(cv.kv(METADATA_NAMESPACE))
    assert catalog.versions("alpha") == ["1.1.0", "1.0.0"]
    assert catalog.files("alpha", "1.0.0") == ["alpha.js", "alpha.min.js", "css/alpha.css", "fonts/alpha.woff2"]
    assert catalog.sris("alpha", "1.0.0") == {  # of the tree's bytes: nothing regenerated
        "alpha/1.0.0/alpha.js": sri(TREE["alpha/1.0.0/alpha.js"]),
        "alpha/1.0.0/alpha.min.js": sri(TREE["alpha/1.0.0/alpha.min.js"]),
        "alpha/1.0.0/css/alpha.css": sri(TREE["alpha/1.0.0/css/alpha.css"]),
    }
    assert catalog.package("alpha") == {
        "name": "alpha",
        "description": "The alpha library",
        "keywords": ["alpha", "first"],
        "version": "1.1.0",
        "filename": "alpha.min.js",
        "license": "MIT",
        "author": "Ada",
        "repository": {"type": "git", "url": "https://example.com/alpha.git"},
    }
    assert catalog.package("beta.js") == {"name": "beta.js", "description": "", "keywords": [], "version": "2.0.0"}
    with cdn_server(cv) as server, httpx.Client(base_url=server.url) as client:
        answer = client.get("/ajax/libs/alpha/1.0.0/alpha.min.js", headers={"Accept-Encoding": "identity"})
        assert answer.content == TREE["alpha/1.0.0/alpha.min.js"]
        assert client.get("/libraries", params={"search": "first"}).json()["results"][0]["name"] == "alpha"
    # Again: every version is in the version list already, nothing is written.
    assert import_tree(cv, tree / "ajax" / "libs")["imported"] == ["alpha", "beta.js"]
    assert catalog.versions("alpha") == ["1.1.0", "1.0.0"]


def test_a_tree_import_cannot_take_is_refused_naming_the_problem(cv: conveyor.Conveyor, tmp_path: Path) -> None:
    cdn.init(cv, **bucket_urls(cv))  # type: ignore[arg-type]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidImportTree, match="has no package directory"):
        import_tree(cv, tmp_path / "empty")
    (tmp_path / "bad" / "ajax" / "libs" / "no spaces" / "1.0.0").mkdir(parents=True)
    with pytest.raises(InvalidImportTree, match="'no spaces' is not a package name"):
        import_tree(cv, tmp_path / "bad")


def test_audit_finds_and_repairs_a_deleted_and_a_corrupted_mirror_object(
    cv: conveyor.Conveyor, s3_server: S3Server, tmp_path: Path
) -> None:
    mirror = init_with_mirror(cv, s3_server)
    import_tree(cv, write_tree(tmp_path / "cdnjs"))
    clean = audit(cv)
    objects = sum(1 if p.endswith(".woff2") else 3 for p in TREE)
    assert (clean.objects, clean.divergences) == (objects, [])
    assert clean.counts == {("cdn", "ok"): objects, ("cdn-mirror", "ok"): objects}
    s3 = s3_server.client()
    service_bucket, prefix = mirror.info.url.removeprefix("s3://").split("/", 1)
    s3.delete_object(Bucket=service_bucket, Key=f"{prefix}/alpha/1.0.0/alpha.js")  # type: ignore[attr-defined]
    s3.put_object(  # type: ignore[attr-defined]
        Bucket=service_bucket, Key=f"{prefix}/beta.js/2.0.0/beta.js.gz", Body=b"not gzip"
    )
    found = audit(cv)
    assert sorted((d.bucket, d.key, d.problem, d.repaired) for d in found.divergences) == [
        ("cdn-mirror", "alpha/1.0.0/alpha.js", "missing", False),
        ("cdn-mirror", "beta.js/2.0.0/beta.js.gz", "size", False),
    ]
    assert found.counts[("cdn-mirror", "missing")] == 1 and found.counts[("cdn", "ok")] == objects
    with cdn_server(cv) as server:
        metrics = httpx.get(server.url + "/metrics").text
    assert 'conveyor_cdn_audit_objects{bucket="cdn-mirror",outcome="missing"} 1' in metrics
    repaired = audit(cv, repair=True)
    assert [d.repaired for d in repaired.divergences] == [True, True]
    assert repaired.counts[("cdn-mirror", "repaired")] == 2
    assert mirror.get("alpha/1.0.0/alpha.js").bytes() == TREE["alpha/1.0.0/alpha.js"]
    after = audit(cv)
    assert after.divergences == [] and after.counts[("cdn-mirror", "ok")] == objects


def test_import_and_audit_from_the_command_line(tmp_path: Path) -> None:
    run = Cli(f"sqlite://{tmp_path / 'data'}")
    run.json("cdn", "init")
    result = run.json("cdn", "import", str(write_tree(tmp_path / "cdnjs")))
    assert result == {"packages": 2, "imported": ["alpha", "beta.js"], "failed": []}
    report = run.json("cdn", "audit")
    assert report["counts"] == {"cdn/ok": 19} and report["divergences"] == []
    assert "is not a package name" in run.fails("cdn", "import", str(_bad_tree(tmp_path)), code=17009)


def _bad_tree(root: Path) -> Path:
    (root / "bad" / "ajax" / "libs" / "a b" / "1.0.0").mkdir(parents=True)
    return root / "bad"


def test_cdn_serve_runs_as_a_command_of_two_processes_until_terminated(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    run = Cli(url)
    run.json("cdn", "init")
    run.json("cdn", "import", str(write_tree(tmp_path / "cdnjs")))
    with cdn_command(url, tmp_path / "serve.log", "serve", "--processes", "2", timeout=60) as (server, served):
        for _ in range(20):  # new connections, taken by either process
            assert httpx.get(served + "/stats").json() == {"libraries": 2}
            answer = httpx.get(served + "/ajax/libs/beta.js/2.0.0/beta.js", headers={"Accept-Encoding": "identity"})
            assert answer.content == TREE["beta.js/2.0.0/beta.js"]
        server.terminate()
        assert server.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it shut down on
    with pytest.raises(httpx.ConnectError):  # its child has stopped too: nothing listens any more
        httpx.get(served + "/stats")
