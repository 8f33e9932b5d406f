"""The package CDN (issue 15), part by part; ``--only`` picks parts (each a function in ``PARTS``).

**processing**: one version of a package whose tarball holds N generated ``.js``/``.css`` files,
through the whole pipeline (update → download → one ProcessingWorkflow per file: minify into a
``.min`` twin, compress both outputs with brotli 11 + gzip 9 in ``conveyor cdn compressor``
processes, wait for the bucket's notification, record) on a fresh SQLite deployment, the
workflows in this process. Against, in the same run, **the limit**: a plain loop calling the same
minifier (:func:`conveyor.cdn.minify.minify`) and compressors (:func:`conveyor.cdn.compression
.compress`) on the same files, one after another. Printed (JSON lines, each with the load):

- files/s of the loop and of the pipeline with one compressor process; the ratio (target ≥ 0.7);
- with two compressor processes: their CPU-seconds per file against one process's (target
  ≤ 1.15, CPU measured from /proc after the processes started), the share of jobs each did
  (target 40–60 %), and the wall clock of both runs.

Each part runs ``--rounds`` rounds (3), the contenders in another order each round; a ratio is
the median of the rounds' ratios, each round's printed with it, and each figure carries the load
average around it (``load1``).

    python benchmarks/bench_cdn.py [--quick] [--rounds N] [--only processing]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import conveyor  # noqa: E402
from conveyor import cdn  # noqa: E402
from conveyor.cdn.compression import COMPRESSOR_METADATA, compress  # noqa: E402
from conveyor.cdn.minify import minify  # noqa: E402
from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, account_of, download_id  # noqa: E402
from harness import emit, quiet_logs, ratio, scratch_directory  # noqa: E402
from tests.cdn.conftest import Registry, build_tarball, package_config  # noqa: E402

CONVEYOR = Path(sys.executable).with_name("conveyor")
WORDS = [f"{a}{b}" for a in ("get", "set", "make", "find", "load", "draw", "read") for b in ("Item", "Node", "Value")]


# -- the files ----------------------------------------------------------------------------------
def generated_js(rng: random.Random, size: int) -> bytes:
    """Library-like JavaScript: functions with long local names, comments and indentation."""
    parts = ["/*! generated library for the benchmark */\n(function (root) {\n  'use strict';\n"]
    n = 0
    while sum(map(len, parts)) < size:
        name, arg = rng.choice(WORDS) + str(n), rng.choice(WORDS).lower()
        parts.append(
            f"  // {name}: returns the {arg} it was given, counted\n"
            f"  function {name}({arg}List, optionalSettings) {{\n"
            f"    var accumulatedTotal = 0;\n"
            f"    for (var index = 0; index < {arg}List.length; index += 1) {{\n"
            f"      accumulatedTotal += {arg}List[index] * {rng.randint(2, 99)};\n"
            f"    }}\n"
            f"    if (optionalSettings && optionalSettings.verbose) {{ console.log('{name}', accumulatedTotal); }}\n"
            f"    return accumulatedTotal;\n  }}\n  root.{name} = {name};\n"
        )
        n += 1
    parts.append("})(this);\n")
    return "".join(parts).encode()


def generated_css(rng: random.Random, size: int) -> bytes:
    parts = []
    n = 0
    while sum(map(len, parts)) < size:
        parts.append(
            f"/* block {n} */\n.component-{n} .{rng.choice(WORDS).lower()} {{\n"
            f"  margin: 0px 0px {rng.randint(1, 9)}px;\n"
            f"  color: #ff0000;\n  background-color: #{rng.randint(0, 0xFFFFFF):06x};\n}}\n"
        )
        n += 1
    return "".join(parts).encode()


def generated_files(count: int) -> dict[str, bytes]:
    rng = random.Random(15)
    files = {}
    for i in range(count):
        if i % 3 == 2:
            files[f"dist/style{i}.css"] = generated_css(rng, 20_000)
        else:
            files[f"dist/lib{i}.js"] = generated_js(rng, 60_000)
    return files


# -- measuring ------------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settled(pids: list[int]) -> None:
    """Wait until the processes have finished starting (their CPU time stops growing)."""
    last = [-1.0] * len(pids)
    while True:
        now = [cpu_seconds(pid) for pid in pids]
        if now == last:
            return
        last = now
        time.sleep(0.5)


def plain_loop(files: dict[str, bytes]) -> float:
    """The limit: minify, compress both outputs, hash them; seconds for all the files."""
    started = time.perf_counter()
    for path, data in files.items():
        outputs = [data, minify(path, data).data]
        for output in outputs:
            hashlib.sha512(output).digest()
            compress(output)
    return time.perf_counter() - started


def pipeline(files: dict[str, bytes], compressors: int) -> dict[str, Any]:
    """The whole pipeline on a fresh deployment with ``compressors`` compressor processes."""
    with scratch_directory("cdn") as root:
        url = f"sqlite://{root / 'data'}"
        registry = Registry()
        registry.publish("bench", "1.0.0", build_tarball(files))
        cv = conveyor.connect(url)
        processes: list[subprocess.Popen[bytes]] = []
        try:
            cdn.init(cv, registry=registry.url)
            (root / "bench.json").write_bytes(orjson.dumps(package_config("bench", ["*"])))
            cdn.add(cv, root / "bench.json")
            for _ in range(compressors):
                log = (root / "compressor.log").open("ab")
                processes.append(
                    subprocess.Popen([str(CONVEYOR), "--url", url, "cdn", "compressor"], stdout=log, stderr=log)
                )
            app = conveyor.App(cv, grace_period=5)
            cdn.add_workflows(app)
            app.start()
            pids = [p.pid for p in processes]
            settled(pids)
            cpu_before = {pid: cpu_seconds(pid) for pid in pids}
            started = time.perf_counter()
            cdn.update(cv)
            instance = download_id(account_of(cv), "bench", "1.0.0")
            while True:
                try:
                    status = cv.workflow(DOWNLOAD_WORKFLOW).get(instance).status().status
                except conveyor.InstanceNotFound:
                    status = "queued"
                if status in ("complete", "errored", "terminated"):
                    break
                time.sleep(0.02)
            wall = time.perf_counter() - started
            cpu = {pid: cpu_seconds(pid) - cpu_before[pid] for pid in pids}
            app.stop()
            if status != "complete":
                raise RuntimeError(
                    f"the version ended {status}: {cv.workflow(DOWNLOAD_WORKFLOW).get(instance).status()}"
                )
            staging = cv.bucket("cdn-staging")
            jobs: collections.Counter[str] = collections.Counter()
            for obj in staging.list(prefix="files/"):
                if obj.key.endswith(".gz"):
                    jobs[staging.head(obj.key).metadata[COMPRESSOR_METADATA].rsplit(":", 1)[1]] += 1
            return {"wall": wall, "cpu": cpu, "jobs": {int(pid): n for pid, n in jobs.items()}}
        finally:
            for process in processes:
                process.terminate()
                process.wait()
            cv.close()
            registry.stop()


def processing(quick: bool, rounds: int) -> None:
    files = generated_files(6 if quick else 60)
    n = len(files)
    runs: dict[str, list[Any]] = {"loop": [], "one": [], "two": []}
    for r in range(rounds):  # each round in another order, so no contender always goes first
        order = ["loop", "one", "two"]
        order = order[r % 3 :] + order[: r % 3]
        for which in order:
            load = os.getloadavg()[0]
            if which == "loop":
                result: Any = {"wall": plain_loop(files)}
            else:
                result = pipeline(files, 1 if which == "one" else 2)
            result["load1"] = round(max(load, os.getloadavg()[0]), 2)
            runs[which].append(result)
            emit(
                "cdn_processing_files_per_s",
                n / result["wall"],
                "files/s",
                n,
                contender={"loop": "plain loop", "one": "pipeline, 1 compressor", "two": "pipeline, 2 compressors"}[
                    which
                ],
                round=r,
                wall_s=round(result["wall"], 2),
                load1=result["load1"],
            )
    loads = [run["load1"] for runs_of in runs.values() for run in runs_of]
    load_range = f"{min(loads)}-{max(loads)}"
    speed = [loop["wall"] / one["wall"] for loop, one in zip(runs["loop"], runs["one"], strict=True)]
    ratio(
        "cdn_processing_pipeline_vs_plain_loop",
        statistics.median(speed),
        1.0,
        n,
        target=0.7,
        rounds=[round(x, 3) for x in speed],
        load1=load_range,
    )
    cpu = [
        (sum(two["cpu"].values()) / n) / (sum(one["cpu"].values()) / n)
        for one, two in zip(runs["one"], runs["two"], strict=True)
    ]
    for which, count in (("one", 1), ("two", 2)):
        per_file = statistics.median(sum(run["cpu"].values()) / n for run in runs[which])
        emit("cdn_compressor_cpu_s_per_file", per_file, "s", n, compressors=count, load1=load_range)
    emit(
        "cdn_compressor_cpu_two_vs_one",
        statistics.median(cpu),
        "ratio",
        n,
        rounds=[round(x, 3) for x in cpu],
        target_at_most=1.15,
        met=statistics.median(cpu) <= 1.15,
        load1=load_range,
    )
    shares = []
    for two in runs["two"]:
        total = sum(two["jobs"].values())
        shares.append(min(two["jobs"].get(pid, 0) for pid in two["cpu"]) / total)
    emit(
        "cdn_compressor_smaller_job_share_two_processes",
        statistics.median(shares),
        "fraction",
        n,
        rounds=[round(x, 3) for x in shares],
        target="0.4-0.6",
        met=all(share >= 0.4 for share in shares),
        load1=load_range,
    )
    emit(
        "cdn_processing_wall_s",
        statistics.median(two["wall"] for two in runs["two"]),
        "s",
        n,
        compressors=2,
        one_compressor_s=round(statistics.median(one["wall"] for one in runs["one"]), 2),
        plain_loop_s=round(statistics.median(loop["wall"] for loop in runs["loop"]), 2),
        load1=load_range,
    )


PARTS: dict[str, Callable[[bool, int], None]] = {"processing": processing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts: {', '.join(PARTS)}")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per part (default 3; 1 with --quick)")
    args = parser.parse_args()
    chosen = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in PARTS]
    if unknown:
        parser.error(f"--only: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    quiet_logs()
    for part in chosen:
        PARTS[part](args.quick, args.rounds or (1 if args.quick else 3))


if __name__ == "__main__":
    main()
