"""``conveyor doctor`` for an embedded deployment: every file checked, read-only, and per queue what
is wrong and what to do.

It checks the catalog and every shard in the shard map (the file is there once the map says it was
made; not cut short; Conveyor's application_id and a schema version this Conveyor reads or
upgrades; SQLite's ``quick_check``, or ``integrity_check`` when thorough; its counters readable),
files in ``shards/`` that no queue owns, and the catalog snapshot. Nothing is written: files are
opened read-only (``immutable`` when no write-ahead log lies beside them, so not even an empty log is
left behind). Queues are named as their account knows them (catalog name ``ACCOUNT/NAME``); a catalog
of an older schema is read as opening it will upgrade it, so a version 1 catalog's plain names show
in account ``local``, where the upgrade moves them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from conveyor.engine.accounts import split
from conveyor.engine.sqlite.catalog import UPGRADES as CATALOG_UPGRADES
from conveyor.engine.sqlite.catalog import VERSION as CATALOG_VERSION
from conveyor.engine.sqlite.catalog import Q as CATALOG_QUERIES
from conveyor.engine.sqlite.damaged import DAMAGED_DIR
from conveyor.engine.sqlite.shard import SCHEMA_VERSION as SHARD_VERSION
from conveyor.engine.sqlite.shard import UPGRADES as SHARD_UPGRADES
from conveyor.engine.sqlite.shard import Q as SHARD_QUERIES
from conveyor.engine.sqlite.snapshot import decode
from conveyor.engine.sqlite.storage import APPLICATION_ID, FILE_QUERIES, check_size_and_log, translate_error
from conveyor.errors import ConveyorError

# How many lines of a failed quick_check are reported.
CHECK_LINES = 5

RESTORE_OR_DELETE = (
    "restore the shard file (with its -wal) from a backup, or delete the queue with "
    "`conveyor --account {account} queues delete --force {name}` (its damaged files are kept in damaged/)"
)
# A plain catalog name (no account) is made only through the raw engine, which alone reaches it.
RESTORE_OR_DELETE_RAW = (
    "restore the shard file (with its -wal) from a backup, or delete the queue, which belongs to no account, "
    "through the raw engine: `conveyor.client.connect.open_engine(URL).delete_queue({queue_id!r}, force=True)` "
    "(its damaged files are kept in damaged/)"
)
RESTORE_CATALOG = (
    "restore catalog.db (with its -wal) from a backup; the shard files hold the messages and are left as they are"
)


@dataclass
class Problem:
    """One thing wrong with one file."""

    file: str  # relative to the deployment directory
    problem: str


@dataclass
class Upgrade:
    """A file of an older schema, which the engine upgrades when it opens it: not damage."""

    file: str  # relative to the deployment directory
    version: int
    upgraded_to: int


@dataclass
class QueueHealth:
    account_id: str  # "" for a queue the raw engine made without one
    queue_name: str  # as its account knows it
    queue_id: str
    shards: int
    backlog: int | None = None  # None when a shard cannot be read
    problems: list[Problem] = field(default_factory=list)

    @property
    def advice(self) -> str | None:
        if not self.problems:
            return None
        if not self.account_id:
            return RESTORE_OR_DELETE_RAW.format(queue_id=self.queue_id)
        return RESTORE_OR_DELETE.format(account=self.account_id, name=self.queue_name)


@dataclass
class DoctorReport:
    """What ``conveyor doctor`` found; ``ok`` when nothing is wrong."""

    directory: str
    catalog: list[Problem] = field(default_factory=list)
    queues: list[QueueHealth] = field(default_factory=list)
    snapshot: list[Problem] = field(default_factory=list)
    stray_files: list[Problem] = field(default_factory=list)
    kept_aside: list[str] = field(default_factory=list)
    upgrades: list[Upgrade] = field(default_factory=list)  # not problems: opening the deployment makes them

    @property
    def ok(self) -> bool:
        return not (self.catalog or self.snapshot or self.stray_files or any(q.problems for q in self.queues))


def examine(directory: Path, *, thorough: bool = False) -> DoctorReport:
    """Check every file of the deployment in ``directory``.

    >>> report = examine(Path("/var/lib/conveyor"))
    >>> report.ok, [(q.account_id, q.queue_name, q.advice) for q in report.queues if q.problems]
    (False, [('local', 'emails', 'restore the shard file (with its -wal) from a backup, or delete ...')])
    """
    report = DoctorReport(str(directory))
    catalog = directory / "catalog.db"
    try:
        shard_map, generation = _read_catalog(catalog, thorough, report)
    except (ConveyorError, sqlite3.Error) as exc:
        report.catalog.append(Problem("catalog.db", _relative(_message(exc, catalog), directory)))
        return report  # without the shard map, the shards cannot be told apart from strays
    _examine_queues(directory, shard_map, report, thorough)
    _examine_strays(directory, {f"{qid}.{n}.db" for qid, _, n, _ in shard_map}, report)
    report.snapshot.extend(_examine_snapshot(directory, generation))
    return report


# queue id, catalog name (ACCOUNT/NAME), shard number, materialized
ShardEntry = tuple[str, str, int, bool]


def _read_catalog(path: Path, thorough: bool, report: DoctorReport) -> tuple[list[ShardEntry], int]:
    """The shard map, named as after the upgrade on open, and the catalog's generation (the file's
    own: the snapshot beside it was published from the file as it is)."""
    conn, found = _open_read_only(path, CATALOG_VERSION, CATALOG_UPGRADES, thorough)
    try:
        generation = int(conn.execute(CATALOG_QUERIES["generation"]).fetchone()[0])
        if found < CATALOG_VERSION:
            report.upgrades.append(Upgrade(path.name, found, CATALOG_VERSION))
            upgraded = _upgraded_copy(conn, found, CATALOG_VERSION, CATALOG_UPGRADES)
            conn.close()
            conn = upgraded
        rows = conn.execute(CATALOG_QUERIES["shards_by_queue_name"]).fetchall()
    finally:
        conn.close()
    return [(qid, name, number, bool(made)) for qid, name, number, made in rows], generation


def _upgraded_copy(
    conn: sqlite3.Connection, found: int, version: int, upgrades: Mapping[int, str]
) -> sqlite3.Connection:
    """An in-memory copy of ``conn``'s file brought to ``version`` by the engine's own upgrade
    scripts, so the report shows what opening the deployment will find; the file is not written."""
    copy = sqlite3.connect(":memory:")
    try:
        conn.backup(copy)
        for step in range(found, version):
            copy.executescript(upgrades[step])
    except BaseException:
        copy.close()
        raise
    return copy


def _examine_queues(directory: Path, shard_map: list[ShardEntry], report: DoctorReport, thorough: bool) -> None:
    by_id: dict[str, QueueHealth] = {}
    for queue_id, qualified, number, made in shard_map:
        health = by_id.get(queue_id)
        if health is None:
            account_id, name = split(qualified)
            health = by_id[queue_id] = QueueHealth(account_id, name, queue_id, 0, 0)
            report.queues.append(health)
        health.shards += 1
        path = directory / "shards" / f"{queue_id}.{number}.db"
        relative = str(path.relative_to(directory))
        try:
            backlog, found = _examine_shard(path, made, thorough)
        except (ConveyorError, sqlite3.Error) as exc:
            health.problems.append(Problem(relative, _relative(_message(exc, path), directory)))
            health.backlog = None
            continue
        if 0 < found < SHARD_VERSION:
            report.upgrades.append(Upgrade(relative, found, SHARD_VERSION))
        if health.backlog is not None:
            health.backlog += backlog


def _examine_shard(path: Path, made: bool, thorough: bool) -> tuple[int, int]:
    """The shard's backlog and schema version (0 while its maker has not made it); raises what is
    wrong with it."""
    if not path.exists():
        if made:
            raise ConveyorError(f"{path} is missing: it was deleted or moved, and its messages with it")
        return 0, 0  # its maker has not made it yet
    conn, found = _open_read_only(path, SHARD_VERSION, SHARD_UPGRADES, thorough, must_hold_data=made)
    try:
        if not found:
            return 0, 0  # empty: its maker has not initialised it yet
        backlog = SHARD_QUERIES["backlog" if found >= 3 else "backlog_counted"]  # 3: some sends counted on read
        return int(conn.execute(backlog).fetchone()[0]), found
    finally:
        conn.close()


def _open_read_only(
    path: Path, version: int, upgrades: Mapping[int, str], thorough: bool, *, must_hold_data: bool = True
) -> tuple[sqlite3.Connection, int]:
    """A read-only connection to one of Conveyor's files, after every check, and the file's schema
    version (older than ``version`` only when ``upgrades`` bring it up, as opening it will); raises
    what is wrong."""
    if not path.exists():
        raise ConveyorError(f"{path} is missing")
    check_size_and_log(path)
    logged = Path(f"{path}-wal").exists()
    mode = "ro" if logged else "ro&immutable=1"
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True, timeout=10.0)
    try:
        app_id, found, tables = conn.execute(FILE_QUERIES["identity"]).fetchone()
        if app_id == 0 and not tables:
            if must_hold_data:
                raise ConveyorError(f"{path} is empty (no tables) but held data: its contents are lost")
        elif app_id != APPLICATION_ID:
            raise ConveyorError(f"{path} is a database of another program, not Conveyor's")
        elif found > version:
            raise ConveyorError(f"{path} has schema version {found}; this Conveyor reads {version} (upgrade Conveyor)")
        elif tables and any(step not in upgrades for step in range(found, version)):
            raise ConveyorError(f"{path} has schema version {found}, which this Conveyor cannot upgrade to {version}")
        lines = [line for (line,) in conn.execute(f"PRAGMA {'integrity_check' if thorough else 'quick_check'}")]
        if lines != ["ok"]:
            raise ConveyorError(f"{path} fails SQLite's check: " + "; ".join(lines[:CHECK_LINES]))
    except BaseException:
        conn.close()
        raise
    return conn, int(found)


def _examine_strays(directory: Path, owned: set[str], report: DoctorReport) -> None:
    shards = directory / "shards"
    for path in sorted(shards.glob("*.db")) if shards.is_dir() else []:
        if path.name not in owned:
            report.stray_files.append(
                Problem(
                    str(path.relative_to(directory)),
                    "no queue in the catalog owns this shard file (a process died while creating or deleting "
                    "a queue, or the catalog was restored from an older backup); move it away once you know "
                    "no queue needs it",
                )
            )
    damaged = directory / DAMAGED_DIR
    if damaged.is_dir():
        report.kept_aside = sorted(str(p.relative_to(directory)) for p in damaged.iterdir())


def _examine_snapshot(directory: Path, generation: int) -> list[Problem]:
    """The snapshot's published generation against the catalog's (read with mmapsync's reader,
    which writes nothing when the files exist)."""
    state = directory / "snapshot" / "catalog_state"
    if not state.exists():
        return []  # made on the next open: nothing to report
    try:
        from conveyor.mmapsync import Synchronizer

        reader = Synchronizer(directory / "snapshot" / "catalog", decode=decode)
        try:
            with reader.read() as snapshot:
                published = snapshot.generation
        finally:
            reader.close()
    except (ConveyorError, OSError) as exc:
        return [Problem("snapshot/", f"the catalog snapshot cannot be read ({exc}); " + _SNAPSHOT_ADVICE)]
    if published != generation:
        return [
            Problem(
                "snapshot/",
                f"the catalog snapshot is at generation {published}, the catalog at {generation}; " + _SNAPSHOT_ADVICE,
            )
        ]
    return []


_SNAPSHOT_ADVICE = (
    "nothing is lost: processes read catalog.db meanwhile, and opening the deployment (or its "
    "coordinator, within seconds) rebuilds it"
)


def _message(exc: BaseException, path: Path) -> str:
    if isinstance(exc, sqlite3.Error):
        return translate_error(exc, str(path)).message
    return exc.message if isinstance(exc, ConveyorError) else str(exc)


def _relative(text: str, directory: Path) -> str:
    return text.replace(f"{directory}/", "")
