"""glibc's malloc is a setting of the whole process: a library call such as ``connect()`` leaves it
as the host process has it, and only Conveyor's own processes (the ``conveyor`` commands, the
benchmarks) or an explicit ``conveyor.keep_freed_memory()`` change it. Each case runs in a process
of its own, since the setting is once per process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

BIN = Path(sys.executable).parent
# The suite's environment might carry the opt-out; these tests are about the default.
ENV = {k: v for k, v in os.environ.items() if k != "CONVEYOR_MALLOC"}


def _python(code: str, cwd: Path) -> str:
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_connect_leaves_the_host_process_malloc_untouched(tmp_path: Path) -> None:
    out = _python(
        """
        import conveyor
        from conveyor import allocator
        with conveyor.connect("sqlite://deployment") as cv:
            cv.create_queue("orders").send_batch([{"body": "x" * 1024} for _ in range(100)])
        print(allocator.is_tuned(), allocator._tuned)
        """,
        tmp_path,
    )
    assert out == "False None"  # never asked, so mallopt was never called


def test_the_documented_call_keeps_freed_memory(tmp_path: Path) -> None:
    out = _python(
        """
        import conveyor
        from conveyor import allocator
        print(conveyor.keep_freed_memory(), allocator.is_tuned())
        """,
        tmp_path,
    )
    assert out == "True True"


def test_conveyor_worker_keeps_freed_memory(tmp_path: Path) -> None:
    # The app module is imported by the worker command after it opted in: it reports what it sees.
    (tmp_path / "probe_app.py").write_text(
        textwrap.dedent(
            """
            import sys
            import conveyor
            from conveyor import allocator
            print("tuned", allocator.is_tuned(), flush=True)
            sys.exit(0)
            """
        )
    )
    run = subprocess.run(
        [BIN / "conveyor", "--url", f"sqlite://{tmp_path / 'deployment'}", "worker", "probe_app:app"],
        cwd=tmp_path,
        env={**ENV, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.stdout.splitlines()[:1] == ["tuned True"], run.stderr
