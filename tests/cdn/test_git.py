"""Git sources: tags read with the real ``git`` from a repository made here, a version's tree packed
from the commit its tag named, refusals of transports and of local paths under a policy, and an
update of a git-sourced package through the pipeline on both engines."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

import conveyor
from conveyor import cdn
from conveyor.cdn import git
from conveyor.cdn.errors import IntegrityMismatch, InvalidPackageConfig
from conveyor.cdn.pipeline import DOWNLOAD_WORKFLOW, PUBLISH_WORKFLOW, account_of, download_id, publish_id
from conveyor.egress import EgressPolicy, EgressRefused
from tests.cdn.conftest import bucket_urls, ended, package_config, worker, write_config
from tests.cdn.test_pipeline import versions


class Repository:
    """A git repository in a directory, committed to and tagged with the real git."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.git("init", "--quiet", "--initial-branch=main")

    def git(self, *args: str) -> str:
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t"}
        env |= {"GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"}
        done = subprocess.run(["git", *args], cwd=self.path, env=env, capture_output=True, check=True, text=True)
        return done.stdout.strip()

    def commit(self, files: dict[str, bytes]) -> str:
        for name, data in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_bytes(data)
        self.git("add", "--all")
        self.git("commit", "--quiet", "-m", "change")
        return self.git("rev-parse", "HEAD")


def members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        return {m.name: archive.extractfile(m).read() for m in archive if m.isreg()}  # type: ignore[union-attr]


def test_versions_are_the_semver_tags_by_their_commits(tmp_path: Path) -> None:
    repo = Repository(tmp_path / "repo")
    first = repo.commit({"dist/a.js": b"1"})
    repo.git("tag", "v1.0.0")
    second = repo.commit({"dist/a.js": b"2"})
    repo.git("tag", "-a", "v1.1.0", "-m", "annotated")  # found by the commit it points at
    repo.git("tag", "latest")  # no version
    third = repo.commit({"dist/a.js": b"3"})
    repo.git("tag", "1.1.0")  # beside v1.1.0: the tag without the v is taken
    found = git.GitSource(str(repo.path)).versions()
    assert sorted(found) == ["1.0.0", "1.1.0"]
    assert found["1.0.0"] == git.Dist(f"git+{repo.path}#v1.0.0", f"git-commit:{first}", None)
    assert found["1.1.0"].tarball.endswith("#1.1.0") and found["1.1.0"].integrity == f"git-commit:{third}"
    assert second != third


def test_a_version_is_its_tag_commit_tree_under_package_and_a_moved_tag_is_refused(tmp_path: Path) -> None:
    repo = Repository(tmp_path / "repo")
    repo.commit({"dist/a.js": b"one", "src/b.js": b"two"})
    repo.git("tag", "v1.0.0")
    dist = git.GitSource(repo.path.as_uri()).versions()["1.0.0"]
    packed = members(git.archive(dist.tarball, dist.integrity))
    assert packed == {"package/dist/a.js": b"one", "package/src/b.js": b"two"}
    repo.commit({"dist/a.js": b"changed"})
    repo.git("tag", "--force", "v1.0.0")
    with pytest.raises(IntegrityMismatch, match="names commit"):
        git.archive(dist.tarball, dist.integrity)


@pytest.mark.parametrize(
    "url",
    [
        "ext::sh -c touch% /tmp/pwned",
        "ssh://git@example.com/x.git",
        "git@example.com:x/y.git",
        "relative/path",
        "ftp://x/y",
    ],
)
def test_a_repository_url_git_should_not_read_is_refused(url: str) -> None:
    with pytest.raises(InvalidPackageConfig, match=r"autoupdate\.target"):
        git.check_repository(url, None)


def test_under_a_policy_local_repositories_and_private_hosts_are_refused(tmp_path: Path) -> None:
    policy = EgressPolicy()
    for local in (str(tmp_path), tmp_path.as_uri()):
        with pytest.raises(InvalidPackageConfig, match="operator's only"):
            git.check_repository(local, policy)
    with pytest.raises(EgressRefused):
        git.check_repository("https://10.1.2.3/x.git", policy)
    assert git.check_repository("https://93.184.216.34/x.git", policy) == "https://93.184.216.34/x.git"


def test_a_config_with_a_bad_git_target_is_refused_naming_the_field(cv: conveyor.Conveyor, tmp_path: Path) -> None:
    cdn.init(cv, **bucket_urls(cv))  # type: ignore[arg-type]
    config = package_config("widget", ["*.js"])
    config["autoupdate"] |= {"source": "git", "target": "ext::sh -c id"}
    with pytest.raises(InvalidPackageConfig, match=r"widget\.json: autoupdate\.target: 'ext::sh -c id'"):
        cdn.add(cv, write_config(tmp_path, config))
    config["autoupdate"] |= {"target": str(tmp_path)}
    with pytest.raises(InvalidPackageConfig, match="operator's only"):
        cdn.add(cv, write_config(tmp_path, config), policy=EgressPolicy())


def test_an_update_of_a_git_package_processes_its_tagged_versions(cv: conveyor.Conveyor, tmp_path: Path) -> None:
    repo = Repository(tmp_path / "repo")
    for version in ("1.0.0", "1.1.0"):
        repo.commit({"dist/widget.js": f"var widget = '{version}';".encode(), "README.md": b"# widget"})
        repo.git("tag", f"v{version}")
    cdn.init(cv, **bucket_urls(cv))  # type: ignore[arg-type]
    config = package_config("widget", ["*.js"])
    config["autoupdate"] |= {"source": "git", "target": repo.path.as_uri()}
    cdn.add(cv, write_config(tmp_path, config))
    with worker(cv):
        instance = cdn.update(cv)
        assert ended(cv, cdn.UPDATES_WORKFLOW, instance) == "complete"
        for version in ("1.0.0", "1.1.0"):
            assert ended(cv, DOWNLOAD_WORKFLOW, download_id(account_of(cv), "widget", version)) == "complete"
            assert ended(cv, PUBLISH_WORKFLOW, publish_id(account_of(cv), "widget", version)) == "complete"
    found = versions(cv, "widget")
    assert sorted(found) == ["1.0.0", "1.1.0"]
    assert {v: r.state for v, r in found.items()} == {"1.0.0": "published", "1.1.0": "published"}
    assert {f["dest"] for f in found["1.1.0"].files} >= {"widget.js"}
    assert cv.bucket("cdn").get("widget/1.1.0/widget.js").bytes() == b"var widget = '1.1.0';"
