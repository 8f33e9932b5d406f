"""``pip install conveyor`` with no extras: the embedded queues and the CLI work, and each optional
part says which extra it needs. The wheel is built from this tree and installed into a fresh
environment, as a user's pip would install it: a platform wheel with mmapsync's C helper in it, or,
built without a C compiler, a pure one whose embedded queues run on the catalog alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".tools" / "bin" / "uv"  # the Makefile's pinned uv, which `make test` bootstraps
HELPER = f"conveyor/mmapsync/_atomics{sysconfig.get_config_var('EXT_SUFFIX')}"

SCRIPT = """
import importlib.util, sys
import conveyor
from conveyor.extras import MissingExtra

for module in ("starlette", "uvicorn", "prometheus_client", "psycopg", "numpy", "matplotlib"):
    assert importlib.util.find_spec(module) is None, f"{module} is installed without its extra"

cv = conveyor.connect("sqlite://" + sys.argv[1])
queue = cv.create_queue("orders")
queue.send_batch([{"body": {"order": n}} for n in range(5)])
app = conveyor.App(cv)
handled = []

@app.consumer("orders", max_batch_size=5, max_batch_timeout=0.1)
def handle(batch):
    handled.extend(m.body["order"] for m in batch.messages)

assert app.drain(timeout=20), "the queue did not drain"
assert sorted(handled) == [0, 1, 2, 3, 4], handled

def refusal(attempt):
    try:
        attempt()
    except MissingExtra as missing:
        return str(missing)
    raise AssertionError("no MissingExtra")

def import_server():
    import conveyor.server

def feature_store():
    import conveyor.mmapsync
    conveyor.mmapsync.FeatureStore

import conveyor.mmapsync._atomics
assert conveyor.mmapsync._atomics.__file__.startswith(sys.prefix), "the helper is not the installed one"

print(refusal(import_server))
print(refusal(lambda: conveyor.connect("postgresql://127.0.0.1/test")))
print(refusal(feature_store))
"""


def _build_wheel(tmp_path: Path, **env: str) -> tuple[Path, str]:
    """The wheel built from this tree (with ``env`` in the build's environment), and the build's log."""
    assert UV.exists(), f"{UV} is missing: run `make test`, which installs the pinned uv there"
    built = subprocess.run(
        [UV, "build", "--wheel", "--out-dir", tmp_path / "dist", ROOT],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("conveyor-*.whl")
    return wheel, built.stderr


def _core_install(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    subprocess.run([UV, "pip", "install", "--quiet", "--python", venv / "bin" / "python", wheel], check=True)
    return venv / "bin"


def _run_python(bin_dir: Path, script: str, tmp_path: Path) -> str:
    """What ``script`` prints, run by the installed interpreter on a deployment in ``tmp_path``."""
    run = subprocess.run(
        [bin_dir / "python", "-c", script, str(tmp_path / "deployment")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_a_core_install_runs_the_embedded_queues_and_names_the_missing_extras(tmp_path: Path) -> None:
    wheel, _ = _build_wheel(tmp_path)
    assert not wheel.name.endswith("-none-any.whl"), f"{wheel.name} is not a platform wheel"
    assert HELPER in zipfile.ZipFile(wheel).namelist()
    bin_dir = _core_install(tmp_path, wheel)

    server, postgres, features = _run_python(bin_dir, SCRIPT, tmp_path).splitlines()
    assert server.startswith("conveyor.server needs the 'server' extra: pip install 'conveyor[server]'")
    assert "needs the 'postgres' extra: pip install 'conveyor[postgres]'" in postgres
    assert "conveyor[postgres-binary]" in postgres
    assert features.startswith("conveyor.mmapsync.FeatureStore needs the 'features' extra")

    url = ["--url", f"sqlite://{tmp_path / 'deployment'}"]
    listed = subprocess.run([bin_dir / "conveyor", *url, "queues", "list"], capture_output=True, text=True)
    assert listed.returncode == 0 and "orders" in listed.stdout, listed.stderr
    serve = subprocess.run([bin_dir / "conveyor", *url, "serve", "--port", "0"], capture_output=True, text=True)
    assert serve.returncode == 1
    assert serve.stderr.strip() == "error: conveyor serve needs the 'server' extra: pip install 'conveyor[server]'"
    planned = subprocess.run(
        [bin_dir / "conveyor", "plan", "--servers", "21", "--check-seconds", "0.55", "--shape", "19x5x3", "--json"],
        capture_output=True,
        text=True,
    )
    assert planned.returncode == 0 and json.loads(planned.stdout)["peak_concurrency"] == 19, planned.stderr
    plotted = subprocess.run(
        [bin_dir / "conveyor", "plan", "--servers", "21", "--check-seconds", "0.55", "--shape", "0", "--plot", "x.png"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert plotted.returncode == 1 and not (tmp_path / "x.png").exists()
    assert plotted.stderr.startswith("error: conveyor plan --plot needs the 'plot' extra: pip install 'conveyor[plot]'")


WITHOUT_THE_HELPER = """
import sys
import conveyor

try:
    import conveyor.mmapsync
except conveyor.ConveyorError as refused:
    print(type(refused).__name__, refused)
else:
    raise AssertionError("mmapsync imported without its helper")

cv = conveyor.connect("sqlite://" + sys.argv[1])
queue = cv.create_queue("orders")
queue.send_batch([{"body": {"order": n}} for n in range(3)])
queue.add_pull_consumer()
pulled = queue.pull(batch_size=10)
assert sorted(m.body["order"] for m in pulled) == [0, 1, 2], pulled
assert queue.ack(acks=[m.lease_id for m in pulled]).ack_count == 3
assert queue.metrics().backlog_count == 0
"""


def test_without_a_c_compiler_the_wheel_is_pure_and_the_queues_run_without_mmapsync(tmp_path: Path) -> None:
    wheel, log = _build_wheel(tmp_path, CC=str(tmp_path / "no-such-cc"))
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    assert HELPER not in zipfile.ZipFile(wheel).namelist()
    assert "mmapsync's C helper was not built" in log and "no C compiler" in log
    bin_dir = _core_install(tmp_path, wheel)

    refusal = _run_python(bin_dir, WITHOUT_THE_HELPER, tmp_path)
    assert "NativeBuildError conveyor.mmapsync needs its C helper, which was not built" in refusal
    assert "install a C compiler" in refusal
