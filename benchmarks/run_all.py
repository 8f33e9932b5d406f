"""Run every benchmark script (``benchmarks/bench_*.py``), one after another, and pass on their JSON lines.

``make bench`` runs them all at full size; ``run_all.py --quick`` is a smoke run of well under a
minute. The first line describes the machine and its load, since on a shared machine the ratios
are the result and the absolute figures are context. A script that fails is reported on stderr and
the others still run; the exit status says whether all of them succeeded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import emit

HERE = Path(__file__).resolve().parent


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def disk_of(path: str) -> str:
    """The block device under ``path`` and whether the kernel calls it rotational."""
    try:
        device = subprocess.run(
            ["findmnt", "-no", "SOURCE", "--target", path], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    name = Path(device).name
    rotational = Path(f"/sys/block/{name}/queue/rotational")
    kind = (
        {"0": "non-rotational", "1": "rotational"}.get(rotational.read_text().strip(), "")
        if rotational.exists()
        else ""
    )
    return f"{device} {kind}".strip()


def describe_machine() -> None:
    emit(
        "machine",
        float(os.cpu_count() or 0),
        "cores",
        1,
        cpu=cpu_model(),
        scratch_disk=disk_of(tempfile.gettempdir()),
        load_avg=[round(x, 2) for x in os.getloadavg()],
        python=sys.version.split()[0],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts, well under a minute")
    args = parser.parse_args()
    describe_machine()
    failed = []
    for script in sorted(HERE.glob("bench_*.py")):
        command = [sys.executable, str(script), *(["--quick"] if args.quick else [])]
        started = time.perf_counter()
        done = subprocess.run(command, stderr=subprocess.PIPE, text=True)
        if done.returncode == 2 and "unrecognized arguments: --quick" in done.stderr:
            print(f"{script.name}: has no --quick mode; left out of the quick run", file=sys.stderr)
            continue
        if done.returncode != 0:
            failed.append(script.name)
            print(f"{script.name} failed ({done.returncode}):\n{done.stderr}", file=sys.stderr)
        emit("script_seconds", time.perf_counter() - started, "s", 1, script=script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
