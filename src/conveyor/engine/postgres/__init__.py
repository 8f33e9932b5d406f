"""The PostgreSQL engine: one database shared by any number of processes on any number of machines."""

from conveyor.engine.postgres.engine import PostgresEngine
from conveyor.engine.postgres.migrate import migrate

__all__ = ["PostgresEngine", "migrate"]
