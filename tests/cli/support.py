"""Helpers shared by the CLI tests."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from conveyor.cli.main import cli

CONVEYOR_BIN = Path(sys.executable).with_name("conveyor")

# Cloudflare's keys; Conveyor may add its own (e.g. shards).
QUEUE_KEYS = {
    "queue_id",
    "queue_name",
    "created_on",
    "modified_on",
    "producers",
    "producers_total_count",
    "consumers",
    "consumers_total_count",
    "settings",
}
PULL_CONSUMER_KEYS = {"consumer_id", "queue_id", "queue_name", "type", "created_on", "dead_letter_queue", "settings"}
# Worker consumers name their script twice, as the REST API does: wrangler reads one, the SDK the other.
WORKER_CONSUMER_KEYS = PULL_CONSUMER_KEYS | {"script_name", "script"}


@dataclass
class Cli:
    """Runs ``conveyor --url sqlite://DIR ...`` in-process."""

    url: str

    def __call__(self, *args: str, input: str | bytes | None = None) -> Result:
        return CliRunner().invoke(cli, ["--url", self.url, *args], input=input, catch_exceptions=False)

    def ok(self, *args: str, input: str | bytes | None = None) -> Result:
        result = self(*args, input=input)
        assert result.exit_code == 0, result.output
        return result

    def json(self, *args: str, input: str | bytes | None = None) -> Any:
        return json.loads(self.ok(*args, "--json", input=input).stdout)

    def fails(self, *args: str, code: int, input: str | bytes | None = None) -> str:
        """Run a command that must be refused: one ``error: ... (code N)`` line on stderr, exit 1."""
        result = self(*args, input=input)
        assert result.exit_code == 1, result.output
        assert result.stdout == ""
        line = result.stderr
        assert line.startswith("error: ") and line.endswith(f"(code {code})\n") and line.count("\n") == 1, line
        return line
