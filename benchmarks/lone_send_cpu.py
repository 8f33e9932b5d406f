"""CPU time of one lone ``send()`` on tmpfs, against the raw single commit, and against another copy
of the code (A/B), for issue 11.

On tmpfs a flush costs ~1 µs, so what is left of a send is its CPU: the Python layers and the
statements. Thread CPU time (``time.thread_time_ns``) does not count the time the thread waits for
the other tenants of a loaded machine, which wall time does, so the figures hold under load far
better than throughput on disk. Each process sends ``SENDS`` 1 KB messages from one thread, 250 at
a time, taking turns with the raw row (one autocommitted ``INSERT``, WAL, synchronous=FULL) in the
same process; processes of the two codes alternate. One JSON line per process:

    .venv/bin/python benchmarks/lone_send_cpu.py [--pairs 3] [--sends 6000] [--base SRC_DIR] [--disk]

``--base``: the ``src`` directory of the code to compare with (for example a ``git archive`` of
main unpacked somewhere); without it only this worktree's code is measured. ``--disk``: in a
directory on the disk of this checkout instead of tmpfs, for the wall time with the flushes: the
p50 of each call's wall time, the send's against the raw row's of the same process, and the CPU
split into user and system time (``getrusage`` of the thread).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
CHUNK = 250
TMPFS = "/dev/shm"


def child(sends: int, disk: bool) -> dict[str, object]:
    sys.path.insert(0, str(HERE))
    import conveyor
    from harness import body, raw_connection, raw_rows, raw_single_commit

    base = str(HERE) if disk else TMPFS if os.path.isdir(TMPFS) else None
    with tempfile.TemporaryDirectory(prefix="conveyor-lone-cpu-", dir=base) as directory:
        cv = conveyor.connect(f"sqlite://{directory}/cv")
        q = cv.create_queue("lone")
        raw = raw_connection(Path(directory) / "raw.db")
        bodies = [body(i) for i in range(sends)]
        rows = raw_rows(0, sends)
        for b in bodies[:500]:  # warm up: code paths, caches, the log's first pages
            q.send(b)
        for r in rows[:500]:
            raw_single_commit(raw, r)
        send_cpu = send_wall = raw_cpu = raw_wall = 0
        per_send: list[float] = []
        send_calls: list[int] = []
        raw_calls: list[int] = []
        clock, wall = time.thread_time_ns, time.perf_counter_ns
        user = {"send": 0.0, "raw": 0.0}
        system = {"send": 0.0, "raw": 0.0}

        def rusage() -> tuple[float, float]:
            usage = resource.getrusage(resource.RUSAGE_THREAD)
            return usage.ru_utime, usage.ru_stime

        for start in range(0, sends, CHUNK):
            chunk = bodies[start : start + CHUNK]
            u0, s0 = rusage()
            c0, w0 = clock(), wall()
            for b in chunk:
                began = wall()
                q.send(b)
                send_calls.append(wall() - began)
            c1, w1 = clock(), wall()
            u1, s1 = rusage()
            user["send"], system["send"] = user["send"] + u1 - u0, system["send"] + s1 - s0
            send_cpu, send_wall = send_cpu + c1 - c0, send_wall + w1 - w0
            per_send.append((c1 - c0) / len(chunk) / 1e3)
            u0, s0 = rusage()
            c0, w0 = clock(), wall()
            for r in rows[start : start + CHUNK]:
                began = wall()
                raw_single_commit(raw, r)
                raw_calls.append(wall() - began)
            c1, w1 = clock(), wall()
            u1, s1 = rusage()
            user["raw"], system["raw"] = user["raw"] + u1 - u0, system["raw"] + s1 - s0
            raw_cpu, raw_wall = raw_cpu + c1 - c0, raw_wall + w1 - w0
        raw.close()
        cv.close()
    return {
        "send_cpu_us": round(send_cpu / sends / 1e3, 2),
        "send_cpu_us_median_chunk": round(statistics.median(per_send), 2),
        "send_wall_us": round(send_wall / sends / 1e3, 2),
        "raw_cpu_us": round(raw_cpu / sends / 1e3, 2),
        "raw_wall_us": round(raw_wall / sends / 1e3, 2),
        "send_user_us": round(user["send"] / sends * 1e6, 1),
        "send_system_us": round(system["send"] / sends * 1e6, 1),
        "raw_user_us": round(user["raw"] / sends * 1e6, 1),
        "raw_system_us": round(system["raw"] / sends * 1e6, 1),
        "send_p50_us": round(statistics.median(send_calls) / 1e3, 1),
        "raw_p50_us": round(statistics.median(raw_calls) / 1e3, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--sends", type=int, default=6000)
    parser.add_argument("--base", help="src directory of the code to compare with")
    parser.add_argument("--disk", action="store_true", help="on the checkout's disk, not tmpfs")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.sends, args.disk)))
        return
    codes = [("this", str(SRC))] + ([("base", args.base)] if args.base else [])
    for pair in range(args.pairs):
        for name, src in codes if pair % 2 == 0 else codes[::-1]:
            env = dict(os.environ, PYTHONPATH=src)
            done = subprocess.run(
                [sys.executable, __file__, "--child", "--sends", str(args.sends), *(["--disk"] if args.disk else [])],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            result = json.loads(done.stdout)
            result["ratio_cpu_vs_raw"] = round(result["send_cpu_us"] / result["raw_cpu_us"], 2)
            result["ratio_p50_vs_raw"] = round(result["send_p50_us"] / result["raw_p50_us"], 2)
            line = {"code": name, "pair": pair, "load1": round(os.getloadavg()[0], 2), **result}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
