"""The disk refusing to flush the write-ahead log (fdatasync failing, as on a dying disk): the send
that needed the flush fails with a clear error, every later write to that shard fails too (the log
may have lost pages they would build on), and what was stored before is still there."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import conveyor


def test_failed_flush_fails_the_send_and_every_later_write(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("flushed")
    q.send({"n": 1})

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with monkeypatch.context() as patch:
        patch.setattr(os, "fdatasync", failing)
        with pytest.raises(conveyor.StorageError, match=r"could not flush the write-ahead log.*Input/output error"):
            q.send({"n": 2})
    with pytest.raises(conveyor.StorageError, match="stores nothing more"):
        q.send({"n": 3})
    cv.close()

    cv = conveyor.connect(f"sqlite://{data_dir}")
    bodies = [m.body for m in cv.queue("flushed").peek(10)]
    assert bodies[0] == {"n": 1}
    assert {"n": 3} not in bodies
    cv.close()
