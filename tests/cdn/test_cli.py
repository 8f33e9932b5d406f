"""``conveyor cdn ...`` in-process against a SQLite deployment and a registry-shaped server: init,
add, update --wait, status; every refusal one ``error:`` line naming the problem."""

from __future__ import annotations

from pathlib import Path

from tests.cdn.conftest import Registry, build_tarball, package_config, write_config
from tests.cli.support import Cli


def test_init_add_update_and_status_from_the_command_line(tmp_path: Path, registry: Registry) -> None:
    run = Cli(f"sqlite://{tmp_path / 'data'}")
    assert "has no CDN: run `conveyor cdn init` first" in run.fails("cdn", "status", code=17002)
    settings = run.json("cdn", "init", "--registry", registry.url, "--cron", "*/5 * * * *")
    assert (settings["primary_bucket"], settings["staging_bucket"], settings["cron"]) == (
        "cdn",
        "cdn-staging",
        "*/5 * * * *",
    )
    assert run.json("cdn", "init")["registry"] == registry.url  # again: the CDN as it is

    write_config(tmp_path / "configs", package_config("gadget", ["*.js"]))
    bad = package_config("broken", ["{a,b"])
    write_config(tmp_path / "bad", bad)
    write_config(tmp_path / "bad", package_config("fine", ["*.js"]))
    message = run.fails("cdn", "add", str(tmp_path / "bad"), code=17001)
    assert "autoupdate.fileMap[0].files[0]: glob '{a,b' has an unclosed '{'" in message
    assert run.json("cdn", "status")["packages"] == 0  # one bad config adds none
    assert run.json("cdn", "add", str(tmp_path / "configs")) == {"added": ["gadget"]}

    for version in ("0.9.0", "1.0.0"):
        registry.publish("gadget", version, build_tarball({"dist/gadget.js": version.encode()}))
    result = run.json("cdn", "update", "--wait", "--timeout", "60")
    assert result["started"] == {"gadget": ["0.9.0", "1.0.0"]}
    assert result["versions"] == {"gadget@0.9.0": "published", "gadget@1.0.0": "published"}
    shown = run.json("cdn", "status")
    assert (shown["packages"], shown["versions"]) == (1, {"published": 2})
    assert "no package 'nope'" in run.fails("cdn", "update", "--package", "nope", code=17003)
