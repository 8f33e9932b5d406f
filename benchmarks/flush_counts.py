"""Flushes per enqueue, counted by the kernel's side: each system's enqueues run under ``strace -c -f``.

Durability is shown, not assumed: a system that returned before its data reached the disk would
show fewer ``fsync``/``fdatasync`` calls per enqueue than one commit each. Every system runs its
enqueues twice in a process of its own under strace, once with ``count`` messages and once with
none, so that what opening and closing costs (schema, checkpoints at close) cancels out:
flushes per enqueue = (flushes with ``count`` - flushes with none) / ``count``.

``python flush_counts.py SYSTEM DIRECTORY COUNT`` is the enqueue-only workload of Conveyor's systems
and the raw baseline (the peers' is ``peer_workloads.py ... enqueue-only``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import conveyor
from harness import body, raw_connection, raw_rows, raw_single_commit

HERE = Path(__file__).resolve().parent
FLUSHES = ("fsync", "fdatasync")
BATCH = 100


def enqueue(system: str, directory: Path, count: int) -> None:
    """Only the enqueue phase of ``bench_peers.py``'s run of ``system``."""
    if system == "raw_single_commit":
        conn = raw_connection(directory / "raw.db")
        for row in raw_rows(0, count):
            raw_single_commit(conn, row)
        conn.close()
        return
    cv = conveyor.connect(f"sqlite://{directory}")
    q = cv.create_queue("peers")
    bodies = [body(i) for i in range(count)]
    if system == "conveyor_send_batch":
        for start in range(0, count, BATCH):
            q.send_batch([{"body": b} for b in bodies[start : start + BATCH]])
    else:
        for b in bodies:
            q.send(b)
    cv.close()


def traced_flushes(command: list[str], env: dict[str, str] | None) -> int:
    """The fsync and fdatasync calls of ``command`` and its threads and children."""
    with tempfile.NamedTemporaryFile(prefix="conveyor-strace-", suffix=".txt") as out:
        trace = ["strace", "-f", "-c", "-e", f"trace={','.join(FLUSHES)}", "-o", out.name, *command]
        subprocess.run(trace, check=True, capture_output=True, env=env, timeout=600)
        summary = Path(out.name).read_text()
    calls = 0
    for line in summary.splitlines():
        fields = line.split()
        if fields and fields[-1] in FLUSHES:
            calls += int(fields[3])
    return calls


def flushes_per_enqueue(
    system: str, count: int, python: Path | None = None, env: dict[str, str] | None = None
) -> float | None:
    """``None`` when strace is not installed (the benchmark then says so instead of a figure)."""
    if shutil.which("strace") is None:
        return None
    totals = []
    for n in (count, 0):
        with tempfile.TemporaryDirectory(prefix=f"conveyor-bench-flush-{system}-") as directory:
            if python is None:
                command = [sys.executable, str(HERE / "flush_counts.py"), system, directory, str(n)]
            else:
                command = [str(python), str(HERE / "peer_workloads.py"), system, directory, str(n), "enqueue-only"]
            totals.append(traced_flushes(command, env))
    return (totals[0] - totals[1]) / count


if __name__ == "__main__":
    enqueue(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
