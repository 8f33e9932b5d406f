"""``cdn serve`` serves the account that the CDN's ``public_account`` names (``cdn init
--public-account``), not the connection's own, where they differ."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import conveyor
from conveyor import cdn
from conveyor.cdn.importer import import_tree
from conveyor.cdn.server import CdnApp
from tests.cdn.conftest import cdn_server
from tests.cdn.test_import_audit import TREE, write_tree


def test_cdn_serve_serves_the_public_account_of_the_cdn(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'data'}"
    with conveyor.connect(url, account_id="ops") as ops, conveyor.connect(url, account_id="site") as site:
        cdn.init(site)
        assert import_tree(site, write_tree(tmp_path / "cdnjs"))["imported"] == ["alpha", "beta.js"]
        cdn.init(ops, primary="ops-cdn", staging="ops-cdn-staging", public_account="site")
        assert cdn.status(ops)["packages"] == 0  # nothing of its own

        with cdn_server(ops) as server:
            assert httpx.get(f"{server.url}/stats").json() == {"libraries": 2}
            answer = httpx.get(f"{server.url}/ajax/libs/beta.js/2.0.0/beta.js", headers={"Accept-Encoding": "identity"})
            assert answer.content == TREE["beta.js/2.0.0/beta.js"]

        with cdn_server(site) as server:  # a CDN whose public account is its own serves itself
            assert httpx.get(f"{server.url}/libraries/alpha").json()["version"] == "1.1.0"

    with conveyor.connect(url, account_id="lone") as lone:
        cdn.init(lone, primary="lone-cdn", staging="lone-cdn-staging", public_account="nobody")
        with pytest.raises(cdn.CdnNotInitialized, match="account 'nobody' has no CDN"):
            CdnApp(lone)
