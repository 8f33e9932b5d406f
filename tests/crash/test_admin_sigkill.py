"""A process changing the catalog, SIGKILLed at random moments (between a commit and the catalog
snapshot's publication too): every change it finished is there, at most the one in flight is added,
and every process — one that stayed open throughout included — reads the catalog's settings, not a
stale snapshot's, and can send to every queue."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import conveyor
from conveyor.model import QueueSettings

ADMIN = Path(__file__).with_name("crash_admin.py")
KILLS = 12
RUN_STRIDE = 100_000
LIFETIME_SECONDS = (0.0, 0.4)


def run_until_killed(data_dir: Path, first: int, rng: random.Random, log: Path) -> list[int]:
    """Start the admin process, SIGKILL it at a random moment, return the ``k`` it printed."""
    with log.open("wb") as errors:
        process = subprocess.Popen(
            [sys.executable, str(ADMIN), str(data_dir), str(first)], stdout=subprocess.PIPE, stderr=errors
        )
    lines: list[bytes] = []
    first_line = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            first_line.set()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert first_line.wait(timeout=30), f"the admin process changed nothing; see {log}"
        time.sleep(rng.uniform(*LIFETIME_SECONDS))
        assert process.poll() is None, f"the admin process exited by itself ({process.returncode}); see {log}"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        reader.join()
    return [int(line) for line in lines if line.endswith(b"\n")]


def expected_settings(k: int, *, updated: bool) -> QueueSettings:
    return QueueSettings(delivery_delay=k % 100 + updated)


def test_sigkilled_catalog_writer_leaves_every_finished_change_and_no_stale_snapshot(
    tmp_path: Path, rng: random.Random
) -> None:
    data_dir = tmp_path / "data"
    with conveyor.connect(f"sqlite://{data_dir}") as long_lived:
        long_lived.create_queue("q0")
        printed: dict[int, list[int]] = {}
        for run in range(1, KILLS + 1):
            printed[run] = run_until_killed(data_dir, run * RUN_STRIDE, rng, tmp_path / f"admin-{run}.log")

        with conveyor.connect(f"sqlite://{data_dir}") as fresh:
            queues = {q.queue_name: q for q in fresh.list_queues() if q.queue_name != "q0"}
            for info in queues.values():
                assert fresh.engine.queue_settings(info.queue_id) == info.settings, info.queue_name

        # The queues each run changed last: the kill fell after or inside their changes.
        near_kills: list[str] = []
        for run, done in printed.items():
            assert done, f"run {run} finished no change before it was killed"
            created = {int(name[1:]) for name in queues if int(name[1:]) // RUN_STRIDE == run}
            near_kills += [f"q{k}" for k in sorted(created - set(done) | {max(done)})]
            assert set(done) <= created, f"run {run}: finished changes lost"
            assert len(created - set(done)) <= 1, f"run {run}: more queues than the one in flight"
            for k in created:
                settings = queues[f"q{k}"].settings
                if k in done:
                    assert settings == expected_settings(k, updated=True)
                else:
                    assert settings in (expected_settings(k, updated=False), expected_settings(k, updated=True))

        for name, info in queues.items():
            assert long_lived.engine.queue_settings(info.queue_id) == info.settings, name
        for name in near_kills:  # each send opens the queue's shard: a sample keeps file handles few
            queue = long_lived.queue(name)
            queue.send({"to": name}, delay_seconds=0)
            assert [m.body for m in queue.peek()] == [{"to": name}]
    print(f"{KILLS} catalog writers killed; {len(queues)} queues created, each read right by every process")
