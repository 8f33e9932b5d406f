"""``pip install conveyor`` with no extras: the embedded queues and the CLI work, and each optional
part says which extra it needs. The wheel is built from this tree and installed into a fresh
environment, as a user's pip would install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".tools" / "bin" / "uv"  # the Makefile's pinned uv, which `make test` bootstraps

SCRIPT = """
import importlib.util, sys
import conveyor
from conveyor.extras import MissingExtra

for module in ("starlette", "uvicorn", "prometheus_client", "psycopg", "numpy"):
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

print(refusal(import_server))
print(refusal(lambda: conveyor.connect("postgresql://127.0.0.1/test")))
print(refusal(feature_store))
"""


def _core_install(tmp_path: Path) -> Path:
    assert UV.exists(), f"{UV} is missing: run `make test`, which installs the pinned uv there"
    subprocess.run([UV, "build", "--wheel", "--quiet", "--out-dir", tmp_path / "dist", ROOT], check=True)
    (wheel,) = (tmp_path / "dist").glob("conveyor-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    subprocess.run([UV, "pip", "install", "--quiet", "--python", venv / "bin" / "python", wheel], check=True)
    return venv / "bin"


def test_a_core_install_runs_the_embedded_queues_and_names_the_missing_extras(tmp_path: Path) -> None:
    bin_dir = _core_install(tmp_path)

    run = subprocess.run(
        [bin_dir / "python", "-c", SCRIPT, str(tmp_path / "deployment")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    server, postgres, features = run.stdout.splitlines()
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
