"""Where each lease starts: consumers lease from every shard of a queue, each lease starting one
shard further than the last, so no shard waits behind another.

The counter is shared by every thread of an engine (base.py promises thread safety), so taking a
turn is one step under a lock rather than a read and a write that two threads could interleave.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class Rotation:
    """Each call to :meth:`turn` starts one item further along, whichever thread calls it.

    >>> rotation = Rotation()
    >>> rotation.turn(["a", "b", "c"]), rotation.turn(["a", "b", "c"])
    (['b', 'c', 'a'], ['c', 'a', 'b'])
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns = 0

    def turn(self, items: Sequence[T]) -> list[T]:
        """``items`` rotated to start at the next position."""
        with self._lock:
            self._turns += 1
            start = self._turns % len(items)
        return [*items[start:], *items[:start]]
