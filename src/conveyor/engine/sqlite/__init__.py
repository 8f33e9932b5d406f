"""The embedded engine: one directory, a catalog database and one database file per shard."""

from conveyor.engine.sqlite.engine import SQLiteEngine

__all__ = ["SQLiteEngine"]
