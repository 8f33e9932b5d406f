"""The storage's coordinator services: ``storage-outbox`` sends notifications a crash left unsent,
``storage-lifecycle`` runs the buckets' lifecycle rules, ``storage-orphans`` removes the bytes of
local puts that died before their commit. They run where the coordinator leads (an
App's worker, ``conveyor serve``), on the deployment-wide engine, for every account."""

from __future__ import annotations

import threading
from pathlib import Path

from conveyor.broker.coordinator import Coordinator
from conveyor.engine.base import Engine
from conveyor.storage.database import FILE_NAME
from conveyor.storage.service import StorageService, open_storage

OUTBOX_INTERVAL = 1.0
# The sweep leaves an outbox row this young to the process that wrote it, which is sending it now;
# older ones it sends (a duplicate only if that process is alive but slower than this).
OUTBOX_GRACE_MS = 2000
LIFECYCLE_INTERVAL = 60.0
ORPHAN_INTERVAL = 600.0


class StorageMaintenance:
    """Opens the deployment's storage when it first has some (a SQLite deployment without
    ``storage.db`` has no buckets: nothing to do, no file made)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._service: StorageService | None = None
        self._lock = threading.Lock()

    def _storage(self) -> StorageService | None:
        with self._lock:
            if self._service is None:
                deployment = self.engine.deployment()
                if deployment.kind == "http":
                    return None
                if deployment.kind == "sqlite" and not (Path(deployment.location) / FILE_NAME).exists():
                    return None
                self._service = open_storage(deployment, self.engine.clock, self.engine)
            return self._service

    def send_outbox(self) -> int:
        service = self._storage()
        return 0 if service is None else service.send_pending(older_than_ms=OUTBOX_GRACE_MS)

    def run_lifecycle(self) -> int:
        service = self._storage()
        return 0 if service is None else service.expire()

    def sweep_orphans(self) -> int:
        service = self._storage()
        return 0 if service is None else service.sweep_orphans()

    def close(self) -> None:
        with self._lock:
            if self._service is not None:
                self._service.close()
                self._service = None


def add_storage_services(coordinator: Coordinator, engine: Engine) -> StorageMaintenance:
    """Add the storage services to ``coordinator`` (before it starts); close the result with it."""
    maintenance = StorageMaintenance(engine)
    coordinator.add_service("storage-outbox", OUTBOX_INTERVAL, maintenance.send_outbox)
    coordinator.add_service("storage-lifecycle", LIFECYCLE_INTERVAL, maintenance.run_lifecycle)
    coordinator.add_service("storage-orphans", ORPHAN_INTERVAL, maintenance.sweep_orphans)
    return maintenance
