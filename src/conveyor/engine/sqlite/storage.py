"""Opening Conveyor's SQLite files: settings, format checks, and clear errors for bad storage."""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from conveyor.engine.sqlfile import load_queries
from conveyor.errors import ConveyorError, CorruptStorage, StorageError, StorageFull

log = logging.getLogger("conveyor.engine")

# PRAGMA application_id of every Conveyor file: the bytes 'Conv'.
APPLICATION_ID = 0x436F6E76
FILE_QUERIES = load_queries("conveyor.engine.sqlite", "files.sql")
# How long opening a file waits for other processes that are switching it to WAL.
WAL_SWITCH_TIMEOUT = 60.0
# How long a statement waits for another connection's lock (SQLite's busy timeout).
BUSY_TIMEOUT = 60.0


def translate_error(exc: sqlite3.Error, path: str) -> ConveyorError:
    """A ConveyorError that names the file and what went wrong, chosen by SQLite's result code."""
    text = str(exc)
    # The primary result code is the low byte of the extended one; errors raised by Python's own
    # sqlite3 module (not by SQLite) carry none.
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == sqlite3.SQLITE_FULL or (code == sqlite3.SQLITE_IOERR and _no_space_left(path)):
        return StorageFull(
            f"storage is full writing {path}: {text}; nothing of this write was stored; free space and try "
            "again (purging or deleting a queue works on a full disk)"
        )
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return CorruptStorage(f"{path} is corrupt or not a database: {text}")
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH):
        return StorageError(f"cannot write {path}: {text}")
    return StorageError(f"storage error on {path}: {text}")


def _no_space_left(path: str) -> bool:
    """Whether the file system of ``path`` is full: SQLite reports some writes on a full disk (growing
    the -shm index, say) as an I/O error rather than SQLITE_FULL."""
    try:
        stats = os.statvfs(Path(path).parent)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < 2 * 65536


def ensure_directory(path: Path) -> None:
    """Create ``path`` if needed; refuse one that cannot be written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot create the data directory {path}: {exc.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise StorageError(f"the data directory {path} is not writable")


def open_database(
    path: Path,
    schema: str,
    *,
    create: bool = True,
    version: int = 1,
    upgrades: Mapping[int, str] | None = None,
    page_size: int | None = None,
) -> sqlite3.Connection:
    """Open (and, if new, initialise) one of Conveyor's files.

    The file is put in WAL mode with ``synchronous=FULL``: every commit is fsynced before it
    returns (a shard's group committer switches its connection to ``NORMAL`` and flushes the log
    itself). A file that is not SQLite, or a SQLite file some other program made, is refused with
    :class:`CorruptStorage` and left untouched. ``schema`` makes a new file of ``version``; a file of
    an older version is brought up to it by ``upgrades[v]`` (the script from version v to v + 1),
    in the same transaction, so a crash leaves it as it was; one of a newer version is refused.
    ``page_size`` is a new file's (an existing file keeps its own).

    ``create=False`` opens a file that must already hold Conveyor's data (a shard the catalog says
    was made): one that is empty, or shorter than its header says, is :class:`CorruptStorage`, never
    initialised anew, since that would hide the loss of its messages.
    """
    name = str(path)
    if not create and not path.exists():
        raise StorageError(f"{name} does not exist")
    key = str(path.resolve())
    with _files_lock:
        if not _connections_to[key]:
            _refuse_truncated(path, name)
            _refuse_cut_log(path, name)
        _refuse_foreign(path, name)
        try:
            conn = sqlite3.connect(
                name, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT, factory=_TrackedConnection
            )
        except sqlite3.Error as exc:
            raise translate_error(exc, name) from None
        conn.track(key)
    try:
        if not _check_ours(conn, name) and not create:  # before anything writes to it
            raise CorruptStorage(
                f"{name} is empty ({path.stat().st_size} bytes, no tables) but held data before: it was "
                "truncated or its write-ahead log removed, and the messages in it are lost; restore it "
                "(with its -wal) from a backup, or delete the queue with `conveyor queues delete --force`"
            )
        if page_size is not None:
            conn.execute(f"PRAGMA page_size = {int(page_size)}")  # before WAL, which fixes it
        _use_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        # Check again under the write lock: several processes may open a new file at once, and
        # only the first may initialise it (the others must see its schema, not an empty file).
        conn.execute("BEGIN IMMEDIATE")
        if not _check_ours(conn, name):
            for statement in _statements(schema):
                conn.execute(statement)
        _upgrade(conn, name, version, upgrades or {})
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.close()
        raise translate_error(exc, name) from None
    except ConveyorError:
        conn.close()
        raise
    return conn


# The database header (https://sqlite.org/fileformat.html#the_database_header): the page size at
# offset 16, the change counter at 24, the size in pages at 28 (valid while the counter equals the
# "version-valid-for" number at 92).
_HEADER = 100


def _refuse_truncated(path: Path, name: str) -> None:
    """Refuse a file shorter than its header says it is, with no write-ahead log that could hold the
    rest (a checkpoint that died half way leaves the file short, and its log complete)."""
    try:
        size = path.stat().st_size
        if size < _HEADER or _log_has_frames(path):
            return
        with path.open("rb") as file:
            header = file.read(_HEADER)
    except OSError:
        return  # unreadable: SQLite's own open reports it
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if not header.startswith(b"SQLite format 3\0") or header[24:28] != header[92:96] or not pages:
        return  # not a header SQLite trusts for the size: its own checks decide
    if size < pages * page_size:
        raise CorruptStorage(
            f"{name} is truncated: {size} bytes, where its header says {pages} pages of {page_size} bytes "
            f"({pages * page_size} bytes); the data in the missing part is lost; restore the file from a "
            "backup (`conveyor doctor` says what else can be done)"
        )


def _log_has_frames(path: Path) -> bool:
    try:
        return Path(f"{path}-wal").stat().st_size > 32  # more than the log's header
    except OSError:
        return False


# The wal-index (``-shm``, https://sqlite.org/walformat.html): two copies of a 48-byte header in the
# host's byte order (version at 0, isInit at 12, page size at 14, frames in the log at 16, the log's
# salts at 32), then the checkpoint info (frames already copied into the database at 96).
_SHM_HEADER = 136
_WAL_VERSION = 3007000
_WAL_HEADER, _FRAME_HEADER = 32, 24


def _refuse_cut_log(path: Path, name: str) -> None:
    """Refuse a file whose write-ahead log was removed or emptied while it held commits not yet
    copied into the file; warn of one cut short. The ``-shm`` index the last writer left (a killed
    process leaves it behind; a clean close removes both) says how many frames the log held.

    A log cut short is only warned of: after a power failure the index may count frames that never
    reached the disk (leases, which are not flushed), and SQLite recovers the log's intact part."""
    try:
        with open(f"{path}-shm", "rb") as file:
            index = file.read(_SHM_HEADER)
    except OSError:
        return
    if len(index) < _SHM_HEADER or index[:48] != index[48:96] or index[12] != 1:
        return  # no index, or one SQLite would rebuild from the log: nothing to compare against
    if int.from_bytes(index[0:4], sys.byteorder) != _WAL_VERSION:
        return
    page_size = int.from_bytes(index[14:16], sys.byteorder) or 65536
    frames = int.from_bytes(index[16:20], sys.byteorder)
    copied = int.from_bytes(index[96:100], sys.byteorder)
    if frames <= copied:
        return  # everything the log held is in the file already
    wal = Path(f"{path}-wal")
    try:
        size = wal.stat().st_size
        with wal.open("rb") as file:
            salts = file.read(_WAL_HEADER)[16:24]
    except OSError:
        size, salts = 0, b""
    if size < _WAL_HEADER:
        state = f"is {size} bytes" if wal.exists() else "is missing"
        raise CorruptStorage(
            f"the write-ahead log of {name} {state}, where its index says it held {frames - copied} "
            "frames of commits not yet in the file: the messages in them are lost; restore the -wal file "
            "from a backup (`conveyor doctor` says what else can be done)"
        )
    needed = _WAL_HEADER + frames * (_FRAME_HEADER + page_size)
    if salts == index[32:40] and size < needed:  # (other salts: the log restarted, the index is stale)
        log.warning(
            "the write-ahead log of %s is %d bytes, where its index says %d: the commits at its end are "
            "lost (after a power failure, only unflushed leases; if the file was cut, acknowledged sends)",
            name,
            size,
            needed,
        )


# Open connections of this process, by file. The checks above read the file and its -shm with plain
# file handles; closing one drops every POSIX lock this process holds on the file (SQLite's locks
# included, and without its -shm lock another process would reset the index under it). So they run
# only while this process has no connection to the file, under a lock that new connections take too.
_files_lock = threading.Lock()
_connections_to: Counter[str] = Counter()


class _TrackedConnection(sqlite3.Connection):
    """A connection that counts itself in ``_connections_to`` until it is closed."""

    _key: str | None = None

    def track(self, key: str) -> None:
        self._key = key
        _connections_to[key] += 1

    def close(self) -> None:
        with _files_lock:
            if self._key is not None:
                _connections_to[self._key] -= 1
                self._key = None
        super().close()


def open_reader(path: Path, *, timeout: float = BUSY_TIMEOUT) -> sqlite3.Connection:
    """Another connection to ``path``, a file that a connection of this process opened with
    :func:`open_database` (so it is Conveyor's, in WAL mode, at its schema's version): for reads
    only (``query_only``), which in WAL mode run beside the writer and each other. ``timeout``: how
    long it waits in the rare moments a WAL reader must (0: it fails at once with SQLITE_BUSY)."""
    name = str(path)
    with _files_lock:
        try:
            conn = sqlite3.connect(
                name, isolation_level=None, check_same_thread=False, timeout=timeout, factory=_TrackedConnection
            )
        except sqlite3.Error as exc:
            raise translate_error(exc, name) from None
        conn.track(str(path.resolve()))
    try:
        conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as exc:
        conn.close()
        raise translate_error(exc, name) from None
    return conn


def check_size_and_log(path: Path) -> None:
    """The checks :func:`open_database` makes of a file's size and write-ahead log before opening
    it, for a reader that only inspects (``conveyor doctor``): ``CorruptStorage`` if it is cut short."""
    with _files_lock:
        if not _connections_to[str(path.resolve())]:
            _refuse_truncated(path, str(path))
            _refuse_cut_log(path, str(path))


def _upgrade(conn: sqlite3.Connection, name: str, version: int, upgrades: Mapping[int, str]) -> None:
    """Bring the file to ``version`` (inside the caller's transaction), or refuse a newer one."""
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > version:
        raise CorruptStorage(f"{name} has schema version {found}; this Conveyor reads {version}")
    while found < version:
        if found not in upgrades:
            raise CorruptStorage(f"{name} has schema version {found}, which this Conveyor cannot upgrade")
        for statement in _statements(upgrades[found]):
            conn.execute(statement)
        found += 1


def _refuse_foreign(path: Path, name: str) -> None:
    """Refuse another program's file before a writable connection touches it, when a write-ahead log or
    a rollback journal lies beside it: closing a writable connection would checkpoint (and delete)
    that log, or roll back the hot journal, changing the file. A read-only connection reads the log
    and writes nothing back. (With neither beside it the file is complete, and reading it through
    the writable connection changes nothing; a read-only one would leave an empty log behind.)"""
    if not path.exists() or not any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-journal")):
        return
    try:
        probe = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0)
    except sqlite3.Error as exc:
        raise translate_error(exc, name) from None
    try:
        _check_ours(probe, name)
    except sqlite3.Error as exc:
        if exc.sqlite_errorcode == sqlite3.SQLITE_READONLY_ROLLBACK:
            if _journal_of_a_new_file(path):
                return  # a process died making this file: rolling back leaves it empty, as it began
            # Conveyor's files are in WAL mode: any other rollback journal left by a crash is another
            # program's.
            raise CorruptStorage(
                f"{name} is a database of another program, not Conveyor's (with an unfinished transaction)"
            ) from None
        raise translate_error(exc, name) from None
    finally:
        probe.close()


# A rollback journal's header: 8 magic bytes, then big-endian words, the database's size in pages
# before the transaction at offset 16.
_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


def _journal_of_a_new_file(path: Path) -> bool:
    """Whether the hot journal beside ``path`` undoes a file's very first transaction (its size
    before it was 0 pages): what a process killed while switching a new file to WAL leaves. Rolling
    it back loses no one's data."""
    try:
        with open(f"{path}-journal", "rb") as journal:
            header = journal.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[:8] == _JOURNAL_MAGIC and int.from_bytes(header[16:20], "big") == 0


def _check_ours(conn: sqlite3.Connection, name: str) -> bool:
    """True for a Conveyor file, False for an empty one; ``CorruptStorage`` for anything else.

    Both facts come from one statement, so from one snapshot: read apart, another process could
    commit the schema in between, and a file being initialised would look like another program's.
    """
    app_id, _, tables = conn.execute(FILE_QUERIES["identity"]).fetchone()
    if app_id == APPLICATION_ID:
        return True
    if app_id != 0 or tables:
        raise CorruptStorage(f"{name} is a database of another program, not Conveyor's")
    return False


def _statements(script: str) -> list[str]:
    """The statements of ``script``, one by one (``executescript`` would commit our transaction)."""
    out: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending)
            pending = ""
    return out


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retrying while another process holds the file: SQLite answers a journal-mode
    change with "database is locked" at once instead of waiting in its busy handler."""
    deadline = time.monotonic() + WAL_SWITCH_TIMEOUT
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)
