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

**serving**: one ~30 KB JavaScript file imported (``cdn import``: its ``.br`` and ``.gz`` made as the
compressor makes them) into a fresh SQLite deployment and served by ``conveyor cdn serve`` with 1
and with 2 processes, against Debian's ``nginx`` (2 worker processes, in the foreground on a free
port, a configuration written here) serving the same three objects copied from the primary bucket
with ``gzip_static`` and ``brotli_static`` (``libnginx-mod-http-brotli-static``); nginx, wrk and
h2load are installed with apt-get when missing. One server runs at a time; each is measured by:

- **peak req/s**: ``wrk -t2 -c64`` (closed loop), ``Accept-Encoding: gzip`` and ``br``; target
  Conveyor ≥ 0.25 × nginx; with it the server's CPU microseconds per request (all its processes,
  from /proc), a steadier figure than req/s when other sessions share the cores;
- **p99 at 1,000 req/s**: ``h2load --h1`` (nghttp2-client, C, a few % of a core at this rate),
  20 connections each at ``--rps 50``, 1 s of warm-up, percentiles from its per-request log (from
  each request's send: a request delayed behind a slow one on its connection is not counted from
  its schedule); target Conveyor ≤ 3 × nginx.

Then **mirror fallback**: the primary bucket on a moto_server of its own, the mirror a bucket of the
deployment; one serving process at the same fixed rate, with its cache (the cached p99), then with
``--cache-mb 0`` (every request reads a bucket): primary up (for reference: moto answers a few
hundred reads a second), primary hanging (SIGSTOP: it accepts connections and answers nothing) and
primary refusing connections (stopped). Target: no 5xx or failed request, p99 ≤ 3 × the cached p99.
Each line carries the server's primary failures and mirror reads from ``/metrics``.

    python benchmarks/bench_cdn.py [--quick] [--rounds N] [--only processing,serving]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import conveyor  # noqa: E402
from conveyor import cdn  # noqa: E402
from conveyor.cdn.compression import COMPRESSOR_METADATA, compress  # noqa: E402
from conveyor.cdn.importer import import_tree  # noqa: E402
from conveyor.cdn.minify import minify  # noqa: E402
from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, account_of, download_id  # noqa: E402
from conveyor.server.testing import free_port  # noqa: E402
from harness import emit, percentile, quiet_logs, ratio, scratch_directory  # noqa: E402
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


# -- serving ---------------------------------------------------------------------------------------
SERVE_NAME, SERVE_VERSION, SERVE_FILE = "benchlib", "1.0.0", "bench.js"
SERVE_PATH = f"/ajax/libs/{SERVE_NAME}/{SERVE_VERSION}/{SERVE_FILE}"
FIXED_RATE = 1000  # req/s of the fixed-rate load
RATE_CLIENTS = 20  # connections sharing it (h2load's --rps is per connection)
BROTLI_MODULE = Path("/usr/lib/nginx/modules/ngx_http_brotli_static_module.so")
DEBIAN_PACKAGES = {
    "nginx": "nginx",
    "wrk": "wrk",
    "h2load": "nghttp2-client",
    "brotli": "libnginx-mod-http-brotli-static",
}


def serving_tools() -> dict[str, str]:
    """nginx (with its brotli_static module), wrk and h2load from Debian, installed with apt-get when
    missing, as bench_slurper.py installs rclone."""
    missing = [
        package
        for tool, package in DEBIAN_PACKAGES.items()
        if (not BROTLI_MODULE.exists() if tool == "brotli" else shutil.which(tool) is None)
    ]
    if missing and shutil.which("apt-get") is not None:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        done = subprocess.run(["apt-get", "install", "-y", "-q", *missing], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            print(f"apt-get could not install {missing}:\n{done.stderr[-2000:]}", file=sys.stderr)
    tools = {tool: shutil.which(tool) or "" for tool in ("nginx", "wrk", "h2load")}
    absent = [tool for tool, found in tools.items() if not found] + ([] if BROTLI_MODULE.exists() else ["brotli"])
    if absent:
        raise SystemExit(
            f"serving: missing {', '.join(absent)} (Debian: {', '.join(DEBIAN_PACKAGES[a] for a in absent)})"
        )
    return tools


def serving_tree(root: Path) -> Path:
    """A cdnjs-shaped tree of one ~30 KB library file, for ``cdn import``."""
    tree = root / "tree"
    version = tree / SERVE_NAME / SERVE_VERSION
    version.mkdir(parents=True)
    (version / SERVE_FILE).write_bytes(generated_js(random.Random(30), 30_000))
    return tree


def published_copy(cv: conveyor.Conveyor, into: Path) -> dict[str, int]:
    """The primary bucket's published objects of the file (original, .br, .gz) under nginx's root,
    byte for byte; their sizes."""
    bucket = cv.bucket(cdn_settings(cv).primary_bucket)
    directory = into / "ajax" / "libs" / SERVE_NAME / SERVE_VERSION
    directory.mkdir(parents=True)
    sizes = {}
    for suffix in ("", ".br", ".gz"):
        data = bucket.get(f"{SERVE_NAME}/{SERVE_VERSION}/{SERVE_FILE}{suffix}").bytes()
        (directory / f"{SERVE_FILE}{suffix}").write_bytes(data)
        sizes[suffix.lstrip(".") or "plain"] = len(data)
    return sizes


def cdn_settings(cv: conveyor.Conveyor) -> Any:
    from conveyor.cdn.store import CdnStore

    store = CdnStore.open(cv.deployment)
    try:
        return store.settings(account_of(cv))
    finally:
        store.close()


NGINX_CONF = """daemon off;
worker_processes 2;
{user}
pid {root}/nginx.pid;
error_log {root}/nginx-error.log warn;
load_module {brotli};
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    types {{ application/javascript js; }}
    default_type application/octet-stream;
    charset utf-8;
    charset_types application/javascript;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root {docroot};
        gzip_static on;
        brotli_static on;
        etag on;
        add_header Cache-Control "public, max-age=30672000, immutable";
        add_header Access-Control-Allow-Origin "*";
        add_header Cross-Origin-Resource-Policy "cross-origin";
        add_header Timing-Allow-Origin "*";
        add_header X-Content-Type-Options "nosniff";
        add_header Vary "Accept-Encoding";
    }}
}}
"""


@contextlib.contextmanager
def nginx_server(nginx: str, root: Path, docroot: Path) -> Iterator[str]:
    """Debian's nginx, 2 worker processes, in the foreground on a free port: its base URL."""
    port = free_port()
    conf = root / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""  # its workers must read the scratch directory
    conf.write_text(NGINX_CONF.format(user=user, root=root, brotli=BROTLI_MODULE, port=port, docroot=docroot))
    log = (root / "nginx.out").open("ab")
    process = subprocess.Popen(
        [nginx, "-p", str(root), "-c", str(conf), "-e", str(root / "nginx-error.log")], stdout=log, stderr=log
    )
    try:
        base = answering(f"http://127.0.0.1:{port}", process, root / "nginx-error.log")
        SERVER_PIDS[base] = [process.pid, *map(int, children_of(process.pid))]
        yield base
    finally:
        process.terminate()
        process.wait(30)


@contextlib.contextmanager
def cdn_serve(url: str, root: Path, processes: int, cache_mb: int = 256) -> Iterator[str]:
    """``conveyor cdn serve --processes N`` on a free port: its base URL."""
    port = free_port()
    log_path = root / f"serve-{port}.log"
    command = [str(CONVEYOR), "--url", url, "cdn", "serve", "--port", str(port)]
    command += ["--processes", str(processes), "--cache-mb", str(cache_mb)]
    with log_path.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log)
    try:
        base = answering(f"http://127.0.0.1:{port}", process, log_path)
        if processes > 1:  # the children start after the parent listens: let them settle
            deadline = time.monotonic() + 60
            while len(children_of(process.pid)) < processes - 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            settled([int(pid) for pid in children_of(process.pid)])
        SERVER_PIDS[base] = [process.pid, *map(int, children_of(process.pid))]
        yield base
    finally:
        process.terminate()
        process.wait(30)


def children_of(pid: int) -> list[str]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return path.read_text().split() if path.exists() else []


def answering(base: str, process: subprocess.Popen[bytes], log: Path) -> str:
    """Wait until the server answers the benchmark's file with 200 in each encoding."""
    deadline = time.monotonic() + 60
    while True:
        try:
            for encoding in ("br", "gzip", "identity"):
                request = urllib.request.Request(base + SERVE_PATH, headers={"Accept-Encoding": encoding})
                with urllib.request.urlopen(request, timeout=5) as answer:
                    got = answer.headers.get("Content-Encoding") or "identity"
                    if answer.status != 200 or got != encoding:
                        raise RuntimeError(f"{base}: {encoding} answered {answer.status} {got}")
            return base
        except (OSError, urllib.error.URLError):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{base} did not start; see {log}:\n{log.read_text()[-2000:]}") from None
            time.sleep(0.1)


SERVER_PIDS: dict[str, list[int]] = {}  # a running server's base URL → its processes


def wrk_peak(wrk: str, base: str, encoding: str, seconds: int) -> tuple[float, float]:
    """Peak req/s (wrk, 2 threads, 64 connections, closed loop) and the server's CPU microseconds
    per request (all its processes, from /proc) — steadier than req/s on a shared machine."""
    pids = SERVER_PIDS[base]
    cpu_before = sum(cpu_seconds(pid) for pid in pids)
    done = subprocess.run(
        [wrk, "-t2", "-c64", f"-d{seconds}s", "-H", f"Accept-Encoding: {encoding}", base + SERVE_PATH],
        capture_output=True,
        text=True,
        check=True,
    )
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", done.stdout)
    if errors or "Socket errors" in done.stdout:
        raise RuntimeError(f"wrk saw errors on {base}:\n{done.stdout}")
    cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
    found = re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)
    count = re.search(r"(\d+) requests in", done.stdout)
    if found is None or count is None:
        raise RuntimeError(f"wrk's output has no Requests/sec:\n{done.stdout}{done.stderr}")
    return float(found[1]), cpu * 1e6 / int(count[1])


def fixed_rate(
    h2load: str, base: str, encoding: str, seconds: int, root: Path, rate: int = FIXED_RATE
) -> dict[str, Any]:
    """``rate`` req/s for ``seconds`` (h2load over HTTP/1.1, RATE_CLIENTS connections each at
    rate / RATE_CLIENTS req/s): latency percentiles (ms) from its per-request log, the achieved
    rate, and the count of 5xx and failed requests."""
    log = root / "h2load.log"
    log.unlink(missing_ok=True)
    command = [h2load, "--h1", "-c", str(RATE_CLIENTS), "-t", "1", "--rps", str(rate / RATE_CLIENTS)]
    command += ["-D", str(seconds), "--warm-up-time", "1", "-H", f"accept-encoding: {encoding}"]
    command += ["--log-file", str(log), base + SERVE_PATH]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"h2load failed on {base}:\n{done.stdout}{done.stderr}")
    rows = [line.split("\t") for line in log.read_text().splitlines() if line]
    latencies = sorted(int(row[2]) / 1000 for row in rows)
    statuses = collections.Counter(int(row[1]) for row in rows)
    starts = [int(row[0]) for row in rows]
    span = (max(starts) - min(starts)) / 1e6 if len(starts) > 1 else 1.0
    return {
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "max_ms": latencies[-1],
        "achieved_rps": round(len(rows) / span, 1),
        "requests": len(rows),
        "5xx": sum(n for status, n in statuses.items() if status >= 500),
        "failed": statuses.get(-1, 0),
    }


def serving(quick: bool, rounds: int) -> None:
    tools = serving_tools()
    seconds = 3 if quick else 10
    emit_load("cdn_serving")
    with scratch_directory("cdn-serve") as root:
        url = f"sqlite://{root / 'data'}"
        with conveyor.connect(url) as cv:
            cdn.init(cv)
            import_tree(cv, serving_tree(root))
            sizes = published_copy(cv, root / "docroot")
        contenders: dict[str, Callable[[], contextlib.AbstractContextManager[str]]] = {
            "nginx": lambda: nginx_server(tools["nginx"], root, root / "docroot"),
            "conveyor-1": lambda: cdn_serve(url, root, 1),
            "conveyor-2": lambda: cdn_serve(url, root, 2),
        }
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
        for r in range(rounds):
            order = list(contenders)
            order = order[r % 3 :] + order[: r % 3]
            for which in order:
                with contenders[which]() as base:
                    load = os.getloadavg()[0]
                    result: dict[str, Any] = {}
                    for encoding in ("gzip", "br"):
                        result[f"{encoding}_rps"], result[f"{encoding}_cpu_us"] = wrk_peak(
                            tools["wrk"], base, encoding, seconds
                        )
                    result["rate"] = fixed_rate(tools["h2load"], base, "gzip", seconds, root)
                    result["load1"] = round(max(load, os.getloadavg()[0]), 2)
                runs[which].append(result)
                for encoding in ("gzip", "br"):
                    emit(
                        "cdn_serving_peak_rps",
                        result[f"{encoding}_rps"],
                        "req/s",
                        seconds,
                        contender=which,
                        encoding=encoding,
                        bytes=sizes["gz" if encoding == "gzip" else "br"],
                        load_generator="wrk -t2 -c64",
                        server_cpu_us_per_request=round(result[f"{encoding}_cpu_us"], 1),
                        round=r,
                        load1=result["load1"],
                    )
                emit(
                    "cdn_serving_p99_ms_at_fixed_rate",
                    result["rate"]["p99_ms"],
                    "ms",
                    result["rate"]["requests"],
                    contender=which,
                    encoding="gzip",
                    rate=FIXED_RATE,
                    load_generator=f"h2load --h1 -c{RATE_CLIENTS} --rps {FIXED_RATE // RATE_CLIENTS}",
                    **{k: v for k, v in result["rate"].items() if k != "p99_ms"},
                    round=r,
                    load1=result["load1"],
                )
        loads = [run["load1"] for of in runs.values() for run in of]
        load_range = f"{min(loads)}-{max(loads)}"
        for ours in ("conveyor-1", "conveyor-2"):
            for encoding in ("gzip", "br"):
                peak = [
                    o[f"{encoding}_rps"] / n[f"{encoding}_rps"] for o, n in zip(runs[ours], runs["nginx"], strict=True)
                ]
                ratio(
                    "cdn_serving_peak_vs_nginx",
                    statistics.median(peak),
                    1.0,
                    rounds,
                    target=0.25,
                    contender=ours,
                    encoding=encoding,
                    rounds=[round(x, 3) for x in peak],
                    load1=load_range,
                )
            cpu = [o["gzip_cpu_us"] / n["gzip_cpu_us"] for o, n in zip(runs[ours], runs["nginx"], strict=True)]
            emit(
                "cdn_serving_cpu_per_request_vs_nginx",
                statistics.median(cpu),
                "ratio",
                rounds,
                contender=ours,
                encoding="gzip",
                rounds=[round(x, 3) for x in cpu],
                load1=load_range,
            )
            tail = [o["rate"]["p99_ms"] / n["rate"]["p99_ms"] for o, n in zip(runs[ours], runs["nginx"], strict=True)]
            emit(
                "cdn_serving_p99_vs_nginx",
                statistics.median(tail),
                "ratio",
                rounds,
                contender=ours,
                rate=FIXED_RATE,
                rounds=[round(x, 3) for x in tail],
                target_at_most=3.0,
                met=statistics.median(tail) <= 3.0,
                load1=load_range,
            )
    fallback(tools, quick, rounds)


def fallback(tools: dict[str, str], quick: bool, rounds: int) -> None:
    """The primary bucket on a moto_server of its own, the mirror a bucket of the deployment; one
    serving process with no file cache (every request reads a bucket) against one with its cache,
    at the fixed rate: the primary up, stopped (refusing connections) and hanging (SIGSTOP)."""
    from tests.storage.s3_server import start_s3_server

    seconds = 3 if quick else 10
    with scratch_directory("cdn-fallback") as root:
        url = f"sqlite://{root / 'data'}"
        runs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        for r in range(rounds):
            primary = start_s3_server(root)
            try:
                with conveyor.connect(f"{url}-{r}") as cv:
                    cv.create_bucket(
                        "cdn",
                        url=f"s3://{primary.new_bucket()}/conveyor",
                        endpoint=primary.endpoint,
                        region="us-east-1",
                        access_key_id=primary.access_key_id,
                        secret_access_key=primary.secret_access_key,
                    )
                    cv.create_bucket("cdn-mirror")
                    cdn.init(cv, mirror="cdn-mirror")
                    import_tree(cv, serving_tree(root / f"r{r}"))
                scenarios = [
                    ("cached", 256),
                    ("primary up, no cache", 0),
                    ("primary hanging, no cache", 0),
                    ("primary refusing, no cache", 0),
                ]
                for scenario, cache_mb in scenarios:
                    if scenario.startswith("primary hanging"):  # it accepts connections, answers nothing
                        os.kill(primary.process.pid, signal.SIGSTOP)
                    elif scenario.startswith("primary refusing"):  # its port closed
                        os.kill(primary.process.pid, signal.SIGCONT)
                        primary.stop()
                    with cdn_serve(f"{url}-{r}", root, 1, cache_mb) as base:
                        load = os.getloadavg()[0]
                        result = fixed_rate(tools["h2load"], base, "gzip", seconds, root)
                        result["load1"] = round(max(load, os.getloadavg()[0]), 2)
                        result["metrics"] = fallback_metrics(base)
                    runs[scenario].append(result)
                    emit(
                        "cdn_serving_fallback_p99_ms",
                        result["p99_ms"],
                        "ms",
                        result["requests"],
                        scenario=scenario,
                        rate=FIXED_RATE,
                        **{k: v for k, v in result.items() if k not in ("p99_ms", "load1")},
                        round=r,
                        load1=result["load1"],
                    )
            finally:
                if primary.process.poll() is None:
                    os.kill(primary.process.pid, signal.SIGCONT)
                    primary.stop()
        loads = [run["load1"] for of in runs.values() for run in of]
        for scenario in ("primary hanging, no cache", "primary refusing, no cache"):
            tail = [f["p99_ms"] / c["p99_ms"] for f, c in zip(runs[scenario], runs["cached"], strict=True)]
            no_5xx = all(f["5xx"] == 0 and f["failed"] == 0 for f in runs[scenario])
            emit(
                "cdn_serving_fallback_p99_vs_cached",
                statistics.median(tail),
                "ratio",
                rounds,
                scenario=scenario,
                rounds=[round(x, 3) for x in tail],
                no_5xx=no_5xx,
                target_at_most=3.0,
                met=no_5xx and statistics.median(tail) <= 3.0,
                load1=f"{min(loads)}-{max(loads)}",
            )


def fallback_metrics(base: str) -> dict[str, int]:
    """The serving process's primary failures, mirror reads and 5xx, from /metrics."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    found: dict[str, int] = {}
    for line in text.splitlines():
        for name in ("conveyor_cdn_primary_failures_total", "conveyor_cdn_mirror_reads_total"):
            if line.startswith(name + " "):
                found[name.removeprefix("conveyor_cdn_").removesuffix("_total")] = int(float(line.split()[1]))
    return found


def emit_load(name: str) -> None:
    """The machine's load (as ``uptime`` shows it) before a part."""
    one, five, fifteen = os.getloadavg()
    emit(f"{name}_machine_load", one, "load1", 0, load5=round(five, 2), load15=round(fifteen, 2), cores=os.cpu_count())


PARTS: dict[str, Callable[[bool, int], None]] = {"processing": processing, "serving": serving}


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
