"""Package configs: cdnjs's schema and checker rules, each bad field an error naming it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from conveyor.cdn import InvalidPackageConfig, PackageConfig
from tests.cdn.conftest import package_config


def test_a_cdnjs_config_parses_with_optimization_defaults_and_selects_by_its_globs() -> None:
    config = PackageConfig.parse(
        package_config("jquery", ["*.js", "**/*.{css,map}"], optimization={"css": False}),
        source="packages/j/jquery.json",
    )
    assert (config.name, config.source, config.target) == ("jquery", "npm", "jquery")
    assert dict(config.optimization) == {"js": True, "css": False, "png": True, "jpg": True}
    selected = config.file_map.select(["dist/jquery.js", "dist/sub/a.css", "dist/sub/b.js", "src/core.js"])
    assert selected == {"dist/jquery.js": "jquery.js", "dist/sub/a.css": "sub/a.css"}


def _with(path: list[str | int], value: Any) -> dict[str, Any]:
    config = package_config("jquery", ["*.js"])
    target: Any = config
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return config


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (_with(["name"], "jquery!"), "name"),
        (_with(["keywords"], "jquery"), "keywords"),
        (_with(["repository", "branch"], "main"), "repository.branch"),
        (_with(["colour"], "red"), "colour"),
        (_with(["autoupdate", "fileMap"], []), "autoupdate.fileMap"),
        (_with(["autoupdate", "fileMap", 0, "files"], []), "autoupdate.fileMap[0].files"),
        (_with(["autoupdate", "fileMap", 0, "files"], ["*.js", "[a-"]), "autoupdate.fileMap[0].files[1]"),
        (_with(["autoupdate", "fileMap", 0, "files"], ["{a,b"]), "autoupdate.fileMap[0].files[0]"),
        (_with(["autoupdate", "fileMap", 0, "files"], ["../*.js"]), "autoupdate.fileMap[0].files[0]"),
        (_with(["autoupdate", "source"], "cvs"), "autoupdate.source"),
        (_with(["optimization"], {"js": "yes"}), "optimization.js"),
        (_with(["authors"], [{"email": "a@b.c"}]), "authors[0].name"),
    ],
)
def test_a_bad_field_is_refused_naming_it(config: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidPackageConfig, match="^" + re.escape(f"packages/j/jquery.json: {field}:")):
        PackageConfig.parse(config, source="packages/j/jquery.json")


def test_the_file_must_be_named_after_the_package_under_its_letter() -> None:
    with pytest.raises(InvalidPackageConfig, match="must be the file's name"):
        PackageConfig.parse(package_config("jquery", ["*.js"]), source="packages/j/jq.json")
    with pytest.raises(InvalidPackageConfig, match="belongs in packages/j/"):
        PackageConfig.parse(package_config("jquery", ["*.js"]), source="packages/q/jquery.json")
