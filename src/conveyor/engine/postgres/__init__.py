"""The PostgreSQL engine: one database shared by any number of processes on any number of machines.

It needs the ``postgres`` extra (psycopg and its pool; ``postgres-binary`` for psycopg's prebuilt
wheels): without it, importing the engine raises :class:`conveyor.extras.MissingExtra`, which says so.
"""

from conveyor.extras import require_extra

require_extra("the PostgreSQL engine (conveyor.engine.postgres)", "postgres", ("psycopg", "psycopg_pool"))

from conveyor.engine.postgres.engine import PostgresEngine  # noqa: E402 - after the check naming the extra
from conveyor.engine.postgres.migrate import migrate  # noqa: E402 - after the check naming the extra

__all__ = ["PostgresEngine", "migrate"]
