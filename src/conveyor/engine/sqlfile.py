"""Named SQL queries kept in ``.sql`` files, readable and reviewable as SQL.

A file holds blocks that each start with a ``-- name: NAME`` line::

    -- name: lease
    UPDATE messages SET ... RETURNING ...;

``load_queries(package, "queries.sql")["lease"]`` is that block's text.
"""

from __future__ import annotations

from importlib import resources

_MARK = "-- name:"


def load_queries(package: str, filename: str) -> dict[str, str]:
    """Every named query in ``filename`` inside ``package``."""
    text = resources.files(package).joinpath(filename).read_text()
    queries: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith(_MARK):
            if name is not None:
                queries[name] = "\n".join(lines).strip()
            name, lines = line[len(_MARK) :].strip(), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        queries[name] = "\n".join(lines).strip()
    return queries


def load_script(package: str, filename: str) -> str:
    """A whole ``.sql`` file, for schemas run with ``executescript``."""
    return resources.files(package).joinpath(filename).read_text()
