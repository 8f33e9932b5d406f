"""The bucket methods of :class:`conveyor.Conveyor` (``cv.create_bucket``, ``cv.bucket``, ...),
kept here so the client imports this package only when a bucket is used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from conveyor.deployment import Deployment
from conveyor.egress import EgressPolicy
from conveyor.engine.base import Clock
from conveyor.storage.bucket import Bucket
from conveyor.storage.model import BucketInfo
from conveyor.storage.service import StorageService, open_storage

if TYPE_CHECKING:
    from conveyor.client.sync import Conveyor
    from conveyor.storage.remote import RemoteStorage

COMPONENT = "storage"
# The deployment's own storage, or a server's (connect("http://...")).
Storage = Union[StorageService, "RemoteStorage"]


def storage_of(cv: Conveyor) -> Storage:
    # Notifications go by queue id, resolved in the account when the rule was added; the
    # deployment-wide engine also sends what other accounts' writes left in the outbox.
    engine = cv.engine.deployment_engine() or cv.engine

    def opener(deployment: Deployment, clock: Clock) -> Storage:
        if deployment.kind == "http":
            from conveyor.storage.remote import RemoteStorage

            return RemoteStorage(deployment)
        return open_storage(deployment, clock, engine)

    return cv.component(COMPONENT, opener)


def account_of(cv: Conveyor) -> str:
    return cv.deployment.account


def create_bucket(
    cv: Conveyor,
    name: str,
    *,
    url: str | None = None,
    endpoint: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    egress: EgressPolicy | None = None,
) -> Bucket:
    service = storage_of(cv)
    info = service.create_bucket(
        account_of(cv),
        name,
        url=url,
        endpoint=endpoint,
        region=region,
        access_key_id=access_key_id,
        secret_access_key=secret_access_key,
        egress=egress,
    )
    return Bucket(cv, service, account_of(cv), info)


def bucket(cv: Conveyor, name: str) -> Bucket:
    service = storage_of(cv)
    return Bucket(cv, service, account_of(cv), service.bucket(account_of(cv), name))


def list_buckets(cv: Conveyor) -> list[BucketInfo]:
    return storage_of(cv).list_buckets(account_of(cv))


def delete_bucket(cv: Conveyor, name: str) -> None:
    storage_of(cv).delete_bucket(account_of(cv), name)
