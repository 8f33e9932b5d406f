"""Every client says where its deployment keeps its state, and opens each part beside the queues once."""

from __future__ import annotations

from pathlib import Path

import conveyor
from conveyor.deployment import Deployment
from conveyor.engine.accounts import AccountEngine
from conveyor.engine.base import Clock
from conveyor.server.testing import running_server
from tests.engine.postgres.support import fresh_client


class Store:
    def __init__(self, deployment: Deployment, clock: Clock) -> None:
        self.deployment, self.clock, self.closed = deployment, clock, False

    def close(self) -> None:
        self.closed = True


def test_sqlite_deployment_names_the_directory_and_the_account(tmp_path: Path) -> None:
    with conveyor.connect(f"sqlite://{tmp_path}", account_id="acc1") as cv:
        assert cv.deployment == Deployment("sqlite", str(tmp_path), "acc1")
        assert cv.engine.deployment_engine() is not None
        assert cv.engine.deployment_engine().deployment() == Deployment("sqlite", str(tmp_path))  # type: ignore[union-attr]


def test_postgres_deployment_names_the_database() -> None:
    with fresh_client() as raw:  # the raw engine: deployment-wide, no account
        assert raw.deployment == Deployment("postgresql", raw.url)
        view = conveyor.Conveyor(AccountEngine(raw.engine, "acc1"), raw.url)
        assert view.deployment == Deployment("postgresql", raw.url, "acc1")


def test_remote_deployment_carries_the_token_but_never_shows_it(tmp_path: Path) -> None:
    with running_server(f"sqlite://{tmp_path}") as server:
        secret = server.tokens.create("acc1")[0]
        with conveyor.connect(server.url, token=secret, account_id="acc1") as cv:
            assert cv.deployment == Deployment("http", server.url, "acc1", secret)
            assert secret not in repr(cv.deployment)


def test_a_component_opens_once_and_closes_with_the_client(tmp_path: Path) -> None:
    cv = conveyor.connect(f"sqlite://{tmp_path}")
    store = cv.component("test", Store)
    assert cv.component("test", Store) is store
    assert store.deployment.account == "local"
    assert store.clock is cv.engine.clock
    cv.close()
    assert store.closed
