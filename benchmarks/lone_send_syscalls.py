"""System calls of lone ``send()`` calls against the raw single commit, counted with strace, for
issue 11: per call, the calls by name and file, the bytes written to the write-ahead log, and the
log's flushes that followed a write past the log's end (an fdatasync that must also commit the
file's new size to the file system's journal). Deterministic where timings on a shared disk are not.

Each side runs in a process of its own under ``strace -f``, in a fresh directory on the disk of
this checkout (not tmpfs), ``--warm`` calls first and then ``--calls`` counted ones; only the
system calls between two markers (``getppid``) around the counted ones are read. One JSON line per
side:

    .venv/bin/python benchmarks/lone_send_syscalls.py [--calls 2500] [--warm 0]

``--warm 0`` counts a fresh shard's first calls, as each round of ``bench_peers.py`` makes them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILE_CALLS = {"pwrite64", "pread64", "fcntl", "fdatasync", "fsync", "ftruncate", "fstat", "write", "read"}
OPEN = re.compile(r'openat\(.*?"([^"]+)".*\)\s+= (\d+)')
CALL = re.compile(r"^\d+\s+(\w+)\((\d+)?(.*)\)\s+= (-?\d+)")
PWRITE = re.compile(r"pwrite64\((\d+), .*, (\d+), (\d+)\)\s+= (\d+)")


def child(side: str, calls: int, warm: int, directory: str) -> None:
    sys.path.insert(0, str(HERE))
    from harness import body, raw_connection, raw_rows, raw_single_commit

    if side == "send":
        import conveyor

        cv = conveyor.connect(f"sqlite://{directory}/cv")
        q = cv.create_queue("lone")
        bodies = [body(i) for i in range(warm + calls)]
        for b in bodies[:warm]:
            q.send(b)
        os.getppid()
        for b in bodies[warm:]:
            q.send(b)
        os.getppid()
        cv.close()
    else:
        raw = raw_connection(Path(directory) / "raw.db")
        rows = raw_rows(0, warm + calls)
        for r in rows[:warm]:
            raw_single_commit(raw, r)
        os.getppid()
        for r in rows[warm:]:
            raw_single_commit(raw, r)
        os.getppid()
        raw.close()


def count(trace: Path, calls: int) -> dict[str, object]:
    lines = trace.read_text().splitlines()
    marks = [i for i, line in enumerate(lines) if "getppid()" in line]
    first, last = marks[-2], marks[-1]
    names: dict[str, str] = {}
    sizes: Counter[str] = Counter()
    counted: Counter[str] = Counter()
    log_bytes = grown_flushes = 0
    grew = False
    for i, line in enumerate(lines[:last]):
        if opened := OPEN.search(line):
            names[opened.group(2)] = opened.group(1).rsplit("/", 1)[-1]
            continue
        if written := PWRITE.search(line):
            name = names.get(written.group(1), "")
            length, offset = int(written.group(2)), int(written.group(3))
            if name.endswith("-wal") and not name.startswith("catalog"):
                grew = grew or offset + length > sizes[name]
                sizes[name] = max(sizes[name], offset + length)
                if i > first:
                    log_bytes += int(written.group(4))
        if i <= first or not (call := CALL.match(line)):
            continue
        name, fd = call.group(1), call.group(2)
        if name in FILE_CALLS and fd is not None:
            target = names.get(fd, fd)
            target = "shard" + target[target.index(".db") :] if ".0.db" in target else target
            counted[f"{name} {target}"] += 1
        else:
            counted[name] += 1
        if name == "fdatasync" and names.get(fd or "", "").endswith("-wal"):
            grown_flushes += grew
            grew = False
    return {
        "per_call": {k: round(v / calls, 3) for k, v in counted.most_common()},
        "log_bytes_per_call": round(log_bytes / calls),
        "log_flushes_after_growth": grown_flushes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2500)
    parser.add_argument("--warm", type=int, default=0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.calls, args.warm, args.dir)
        return
    for side in ("send", "raw"):
        with tempfile.TemporaryDirectory(prefix="conveyor-bench-syscalls-", dir=HERE) as directory:
            trace = Path(directory) / "trace.txt"
            command = [sys.executable, __file__, "--child", side, "--calls", str(args.calls)]
            command += ["--warm", str(args.warm), "--dir", directory]
            subprocess.run(["strace", "-f", "-o", str(trace), *command], check=True)
            line = {"side": side, "calls": args.calls, "warm": args.warm, "load1": round(os.getloadavg()[0], 2)}
            print(json.dumps(line | count(trace, args.calls)), flush=True)


if __name__ == "__main__":
    main()
