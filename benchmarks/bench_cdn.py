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

    python benchmarks/bench_cdn.py [--quick] [--only processing]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import os
import random
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conveyor
from conveyor import cdn
from conveyor.cdn.compression import COMPRESSOR_METADATA, compress
from conveyor.cdn.minify import minify
from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, account_of, download_id
from conveyor.cdn.tarball import sri
from harness import emit, quiet_logs, ratio, scratch_directory

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


def tarball(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for path, data in files.items():
            info = tarfile.TarInfo(f"package/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


class Registry:
    """One package, one version, on 127.0.0.1: npm's packument and tarball."""

    def __init__(self, name: str, version: str, data: bytes) -> None:
        paths: dict[str, tuple[bytes, str]] = {}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body, kind = paths.get(self.path.lstrip("/"), (b"", ""))
                self.send_response(200 if kind else 404)
                self.send_header("Content-Type", kind or "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        tgz = f"{name}/-/{name}-{version}.tgz"
        dist = {"tarball": f"{self.url}/{tgz}", "integrity": sri(data)}
        packument = {"name": name, "versions": {version: {"name": name, "version": version, "dist": dist}}}
        paths[tgz] = (data, "application/octet-stream")
        paths[name] = (orjson.dumps(packument), "application/json")
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
        registry = Registry("bench", "1.0.0", tarball(files))
        cv = conveyor.connect(url)
        processes: list[subprocess.Popen[bytes]] = []
        try:
            cdn.init(cv, registry=registry.url)
            config = {
                "name": "bench",
                "description": "benchmark package",
                "keywords": ["bench"],
                "repository": {"type": "git", "url": "https://example.com/bench.git"},
                "autoupdate": {"source": "npm", "target": "bench", "fileMap": [{"basePath": "dist", "files": ["*"]}]},
            }
            (root / "bench.json").write_bytes(orjson.dumps(config))
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


def processing(quick: bool) -> None:
    files = generated_files(6 if quick else 60)
    n = len(files)
    loop = plain_loop(files)
    one = pipeline(files, 1)
    two = pipeline(files, 2)
    emit("cdn_processing_plain_loop_files_per_s", n / loop, "files/s", n, wall_s=round(loop, 2))
    emit(
        "cdn_processing_pipeline_files_per_s",
        n / one["wall"],
        "files/s",
        n,
        compressors=1,
        wall_s=round(one["wall"], 2),
    )
    emit(
        "cdn_processing_pipeline_files_per_s",
        n / two["wall"],
        "files/s",
        n,
        compressors=2,
        wall_s=round(two["wall"], 2),
    )
    ratio("cdn_processing_pipeline_vs_plain_loop", loop, one["wall"], n, target=0.7)
    cpu_one = sum(one["cpu"].values()) / n
    cpu_two = sum(two["cpu"].values()) / n
    emit("cdn_compressor_cpu_s_per_file", cpu_one, "s", n, compressors=1)
    emit("cdn_compressor_cpu_s_per_file", cpu_two, "s", n, compressors=2)
    emit(
        "cdn_compressor_cpu_two_vs_one",
        cpu_two / cpu_one,
        "ratio",
        n,
        target_at_most=1.15,
        met=cpu_two / cpu_one <= 1.15,
    )
    shares = sorted(two["jobs"].get(pid, 0) / sum(two["jobs"].values()) for pid in two["cpu"])
    emit(
        "cdn_compressor_job_share_two_processes",
        shares[0],
        "fraction",
        sum(two["jobs"].values()),
        shares=[round(s, 3) for s in shares],
        target="0.4-0.6",
        met=all(0.4 <= s <= 0.6 for s in shares),
    )


PARTS: dict[str, Callable[[bool], None]] = {"processing": processing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts")
    parser.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts: {', '.join(PARTS)}")
    args = parser.parse_args()
    chosen = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in PARTS]
    if unknown:
        parser.error(f"--only: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    quiet_logs()
    for part in chosen:
        PARTS[part](args.quick)


if __name__ == "__main__":
    main()
