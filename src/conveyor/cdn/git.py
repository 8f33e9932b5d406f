"""Git sources (``autoupdate.source: "git"``): a package's versions are its repository's tags, and a
version's files are the tree of its tag's commit.

>>> check_repository("https://github.com/twbs/bootstrap.git", policy)   # at ``cdn add``
>>> tags = GitSource("https://github.com/twbs/bootstrap.git").versions()
>>> tags["5.3.3"]                                                        # the tag, without its "v"
Dist(tarball='git+https://github.com/twbs/bootstrap.git#v5.3.3', integrity='git-commit:6e1f75f...', ...)
>>> data = archive(tags["5.3.3"])        # a gzip'd tar of the commit's tree under package/

A version found by the update check is recorded with its tag and the commit the tag named then
(:class:`~conveyor.cdn.registry.Dist` with ``tarball = "git+URL#TAG"`` and ``integrity =
"git-commit:SHA"``), so the download fetches exactly that commit: a tag moved in between is
refused (``IntegrityMismatch``), as npm's ``dist.integrity`` refuses other bytes. The tree is packed
by ``git archive`` under ``package/``, so :func:`conveyor.cdn.tarball.extract` treats it as an npm
tarball (cdnjs strips a git checkout's first directory as it strips npm's ``package/``).

Git runs as a subprocess with nothing of a repository's choosing: only the ``https``, ``http``
and ``file`` transports (``ext::`` and the rest, which run commands, are refused by git itself
through ``GIT_ALLOW_PROTOCOL``), no system or user configuration (so no filter or hook the machine
configures runs), no prompt for credentials, no submodules, and a time limit. A repository URL a
tenant gives passes the operator's egress policy (:func:`check_repository`); a local path or
``file://`` URL is the operator's alone (refused under a policy).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from conveyor.cdn.errors import IntegrityMismatch, InvalidPackageConfig, RegistryError, UnknownPackage
from conveyor.cdn.registry import MAX_TARBALL_BYTES, Dist, semver_key
from conveyor.egress import EgressPolicy, check_url

PREFIX = "git+"
COMMIT_PREFIX = "git-commit:"
TIMEOUT_SECONDS = 300.0
NETWORK_SCHEMES = ("https", "http")
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?\Z")


def check_repository(url: str, policy: EgressPolicy | None, field: str = "autoupdate.target") -> str:
    """``url`` if it names a repository git may read for this caller: an ``https``/``http`` URL
    that passes ``policy``, or (with no policy: the operator) a ``file://`` URL or an absolute
    path. ``InvalidPackageConfig`` naming ``field`` otherwise."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in NETWORK_SCHEMES:
        if not parts.hostname:
            raise InvalidPackageConfig(f"{field}: {url!r} has no host")
        check_url(url, policy)
        return url
    local = scheme == "file" or (not scheme and url.startswith("/"))
    if local:
        if policy is not None:
            raise InvalidPackageConfig(f"{field}: {url!r}: a local repository is the operator's only")
        return url
    raise InvalidPackageConfig(
        f"{field}: {url!r} is not a git repository URL Conveyor reads: use https://, http://, "
        "or (the operator) file:// or an absolute path"
    )


def _environment() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        GIT_ALLOW_PROTOCOL="https:http:file",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="",
        GIT_LFS_SKIP_SMUDGE="1",
    )
    return env


def _git(args: list[str], *, cwd: Path | None = None, what: str) -> bytes:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=_environment(),
            capture_output=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise RegistryError(f"{what}: git is not installed on this worker") from None
    except subprocess.TimeoutExpired:
        raise RegistryError(f"{what}: git took longer than {TIMEOUT_SECONDS:.0f} s") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise RegistryError(f"{what}: {message[-1] if message else f'git exited with {done.returncode}'}")
    return done.stdout


def version_of(tag: str) -> str | None:
    """The version a tag names (``v1.2.3`` and ``1.2.3`` → ``1.2.3``), or None if it names none."""
    if semver_key(tag) is None:
        return None
    return tag[1:] if tag.startswith("v") else tag


class GitSource:
    """The tags of one repository, read with ``git ls-remote``."""

    def __init__(self, url: str) -> None:
        self.url = url

    def versions(self) -> dict[str, Dist]:
        """``{version: Dist("git+URL#TAG", "git-commit:SHA", None)}`` for every tag that names a
        semver version (an annotated tag by the commit it points at). Where ``v1.0.0`` and
        ``1.0.0`` both exist, the tag without the ``v`` is taken."""
        what = f"repository {self.url}"
        listing = _git(["ls-remote", "--tags", "--", self.url], what=what).decode(errors="replace")
        commits: dict[str, str] = {}
        for line in listing.splitlines():
            sha, _, ref = line.partition("\t")
            if not ref.startswith("refs/tags/") or not _SHA.match(sha):
                continue
            tag = ref[len("refs/tags/") :]
            if tag.endswith("^{}"):
                commits[tag[:-3]] = sha  # the commit an annotated tag points at wins over the tag object
            else:
                commits.setdefault(tag, sha)
        if not listing.strip() and not commits:
            raise UnknownPackage(f"{what}: has no tags")
        found: dict[str, Dist] = {}
        for tag, sha in sorted(commits.items(), key=lambda item: item[0].startswith("v")):
            version = version_of(tag)
            if version is not None and version not in found:
                found[version] = Dist(f"{PREFIX}{self.url}#{tag}", f"{COMMIT_PREFIX}{sha}", None)
        return found


def is_git(dist_tarball: str) -> bool:
    return dist_tarball.startswith(PREFIX)


def archive(tarball: str, integrity: str | None) -> bytes:
    """The tree of the commit a ``git+URL#TAG`` names, as a gzip'd tar under ``package/``; the tag
    must still name the commit ``integrity`` (``git-commit:SHA``) records (``IntegrityMismatch``)."""
    url, _, tag = tarball[len(PREFIX) :].rpartition("#")
    if not url or not tag or not integrity or not integrity.startswith(COMMIT_PREFIX):
        raise IntegrityMismatch(f"{tarball}: a git version needs its tag and its commit ({integrity!r})")
    expected = integrity[len(COMMIT_PREFIX) :]
    what = f"repository {url} tag {tag}"
    with tempfile.TemporaryDirectory(prefix="conveyor-cdn-git-") as scratch:
        checkout = Path(scratch) / "repo"
        clone = ["clone", "--quiet", "--bare", "--depth", "1", "--single-branch", "--branch", tag]
        _git([*clone, "--", url, str(checkout)], what=what)
        commit = _git(["rev-parse", "--verify", "HEAD^{commit}"], cwd=checkout, what=what).decode().strip()
        if commit != expected:
            raise IntegrityMismatch(f"{what}: names commit {commit} now, {expected} when the version was found")
        data = _git(["archive", "--format=tar.gz", "--prefix=package/", commit], cwd=checkout, what=what)
    if len(data) > MAX_TARBALL_BYTES:
        raise RegistryError(f"{what}: its archive is larger than {MAX_TARBALL_BYTES} bytes")
    return data
