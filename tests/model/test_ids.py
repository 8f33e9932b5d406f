"""Message ids: a lone send's come from a pool of the OS's randomness, each handed out once, and a
forked child never hands out its parent's."""

from __future__ import annotations

import os
import threading

from conveyor.ids import new_ids


def test_pooled_ids_are_unique_across_threads_and_pool_refills() -> None:
    found: list[str] = []

    def take() -> None:
        found.extend(new_ids(1)[0] for _ in range(2_000))

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(found) == len(set(found)) == 8_000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in found)
    assert len(new_ids(3)) == 3


def test_a_forked_child_does_not_hand_out_its_parents_next_id() -> None:
    new_ids(1)  # the pool is filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, "".join(new_ids(1)[0] for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read()
    ours = "".join(new_ids(1)[0] for _ in range(10))
    assert len(child) == 320
    assert not {child[i : i + 32] for i in range(0, 320, 32)} & {ours[i : i + 32] for i in range(0, 320, 32)}
