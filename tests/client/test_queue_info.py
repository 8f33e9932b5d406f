"""``Queue.info(max_age=...)``: a handle's copy of the queue, read again only once it is older."""

from __future__ import annotations

from pathlib import Path

import conveyor


def test_info_max_age_keeps_a_recent_copy(data_dir: Path) -> None:
    cv = conveyor.connect(f"sqlite://{data_dir}")
    q = cv.create_queue("aged")
    other = cv.queue("aged")
    other.update(delivery_delay=30)
    assert q.info(max_age=60).settings.delivery_delay == 0  # this handle's copy, still recent
    assert q.info().settings.delivery_delay == 30  # read fresh
    other.update(delivery_delay=45)
    assert q.info(max_age=0).settings.delivery_delay == 45
    cv.close()
