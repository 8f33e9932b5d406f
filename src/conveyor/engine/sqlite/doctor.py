"""``conveyor doctor`` for an embedded deployment: every file checked, read-only, and per queue what
is wrong and what to do.

It checks the catalog and every shard in the shard map (the file is there once the map says it was
made; not cut short; Conveyor's application_id and a schema version this Conveyor reads; SQLite's
``quick_check``, or ``integrity_check`` when thorough; its counters readable), files in ``shards/``
that no queue owns, and the catalog snapshot. Nothing is written: files are opened read-only
(``immutable`` when no write-ahead log lies beside them, so not even an empty log is left behind).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from conveyor.engine.sqlite.damaged import DAMAGED_DIR
from conveyor.engine.sqlite.shard import SCHEMA_VERSION as SHARD_VERSION
from conveyor.engine.sqlite.snapshot import decode
from conveyor.engine.sqlite.storage import APPLICATION_ID, check_size_and_log, translate_error
from conveyor.errors import ConveyorError

CATALOG_VERSION = 1
# How many lines of a failed quick_check are reported.
CHECK_LINES = 5

RESTORE_OR_DELETE = (
    "restore the shard file (with its -wal) from a backup, or delete the queue with "
    "`conveyor {account}queues delete --force {name}` (its damaged files are kept in damaged/)"
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
class QueueHealth:
    queue_name: str
    queue_id: str
    shards: int
    backlog: int | None = None  # None when a shard cannot be read
    problems: list[Problem] = field(default_factory=list)

    @property
    def advice(self) -> str | None:
        if not self.problems:
            return None
        account, _, name = self.queue_name.rpartition("/")  # a served queue's name is ACCOUNT/NAME
        return RESTORE_OR_DELETE.format(account=f"--account {account} " if account else "", name=name)


@dataclass
class DoctorReport:
    """What ``conveyor doctor`` found; ``ok`` when nothing is wrong."""

    directory: str
    catalog: list[Problem] = field(default_factory=list)
    queues: list[QueueHealth] = field(default_factory=list)
    snapshot: list[Problem] = field(default_factory=list)
    stray_files: list[Problem] = field(default_factory=list)
    kept_aside: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.catalog or self.snapshot or self.stray_files or any(q.problems for q in self.queues))


def examine(directory: Path, *, thorough: bool = False) -> DoctorReport:
    """Check every file of the deployment in ``directory``.

    >>> report = examine(Path("/var/lib/conveyor"))
    >>> report.ok, [(q.queue_name, q.advice) for q in report.queues if q.problems]
    (False, [('emails', 'restore the shard file (with its -wal) from a backup, or delete ...')])
    """
    report = DoctorReport(str(directory))
    catalog = directory / "catalog.db"
    shard_map: list[tuple[str, str, int, bool]] = []  # queue id, name, shard number, materialized
    generation = -1
    try:
        conn = _open_read_only(catalog, CATALOG_VERSION, thorough)
        try:
            rows = conn.execute(
                "SELECT q.queue_id, q.name, s.shard_no, s.materialized FROM queues q "
                "JOIN shards s USING (queue_id) ORDER BY q.name, s.shard_no"
            ).fetchall()
            shard_map = [(qid, name, number, bool(made)) for qid, name, number, made in rows]
            generation = conn.execute(
                "SELECT coalesce((SELECT value FROM sequences WHERE name = 'catalog_generation'), 0)"
            ).fetchone()[0]
        finally:
            conn.close()
    except (ConveyorError, sqlite3.Error) as exc:
        report.catalog.append(Problem("catalog.db", _relative(_message(exc, catalog), directory)))
        return report  # without the shard map, the shards cannot be told apart from strays
    _examine_queues(directory, shard_map, report, thorough)
    _examine_strays(directory, {f"{qid}.{n}.db" for qid, _, n, _ in shard_map}, report)
    report.snapshot.extend(_examine_snapshot(directory, generation))
    return report


def _examine_queues(
    directory: Path, shard_map: list[tuple[str, str, int, bool]], report: DoctorReport, thorough: bool
) -> None:
    by_id: dict[str, QueueHealth] = {}
    for queue_id, name, number, made in shard_map:
        health = by_id.get(queue_id)
        if health is None:
            health = by_id[queue_id] = QueueHealth(name, queue_id, 0, 0)
            report.queues.append(health)
        health.shards += 1
        path = directory / "shards" / f"{queue_id}.{number}.db"
        relative = str(path.relative_to(directory))
        try:
            backlog = _examine_shard(path, made, thorough)
        except (ConveyorError, sqlite3.Error) as exc:
            health.problems.append(Problem(relative, _relative(_message(exc, path), directory)))
            health.backlog = None
            continue
        if health.backlog is not None:
            health.backlog += backlog


def _examine_shard(path: Path, made: bool, thorough: bool) -> int:
    """The shard's backlog; raises what is wrong with it."""
    if not path.exists():
        if made:
            raise ConveyorError(f"{path} is missing: it was deleted or moved, and its messages with it")
        return 0  # its maker has not made it yet
    conn = _open_read_only(path, SHARD_VERSION, thorough, must_hold_data=made)
    try:
        return int(conn.execute("SELECT backlog_count FROM stats").fetchone()[0])
    finally:
        conn.close()


def _open_read_only(path: Path, version: int, thorough: bool, *, must_hold_data: bool = True) -> sqlite3.Connection:
    """A read-only connection to one of Conveyor's files, after every check; raises what is wrong."""
    if not path.exists():
        raise ConveyorError(f"{path} is missing")
    check_size_and_log(path)
    logged = Path(f"{path}-wal").exists()
    mode = "ro" if logged else "ro&immutable=1"
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True, timeout=10.0)
    try:
        app_id, found, tables = conn.execute(
            "SELECT (SELECT application_id FROM pragma_application_id()), "
            "(SELECT user_version FROM pragma_user_version()), (SELECT count(*) FROM sqlite_schema)"
        ).fetchone()
        if app_id == 0 and not tables:
            if must_hold_data:
                raise ConveyorError(f"{path} is empty (no tables) but held data: its contents are lost")
        elif app_id != APPLICATION_ID:
            raise ConveyorError(f"{path} is a database of another program, not Conveyor's")
        elif found > version:
            raise ConveyorError(f"{path} has schema version {found}; this Conveyor reads {version} (upgrade Conveyor)")
        lines = [line for (line,) in conn.execute(f"PRAGMA {'integrity_check' if thorough else 'quick_check'}")]
        if lines != ["ok"]:
            raise ConveyorError(f"{path} fails SQLite's check: " + "; ".join(lines[:CHECK_LINES]))
    except BaseException:
        conn.close()
        raise
    return conn


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
