"""The refusals of the package CDN (codes 17001 and up). Each names the field, the file or the limit."""

from __future__ import annotations

from conveyor.errors import ConveyorError, InvalidRequest


class InvalidPackageConfig(InvalidRequest):
    """A package config that breaks cdnjs's schema or checker rules; the message names the file and
    the field (``autoupdate.fileMap[0].files[1]``)."""

    code = 17001


class CdnNotInitialized(ConveyorError):
    """The account has no CDN yet: ``conveyor cdn init`` makes it."""

    code = 17002
    status = 404


class PackageNotFound(ConveyorError):
    """No package config of that name in the account's CDN."""

    code = 17003
    status = 404


class RegistryError(ConveyorError):
    """The registry could not be reached, or answered with an error or a malformed document."""

    code = 17004
    status = 502


class InvalidTarball(InvalidRequest):
    """A tarball that is not a readable gzip'd tar, or has an entry escaping its root."""

    code = 17005


class IntegrityMismatch(InvalidRequest):
    """A tarball whose bytes do not match the registry's ``dist.integrity`` (or ``dist.shasum``)."""

    code = 17006


class UnknownPackage(RegistryError):
    """The registry answered that it has no such package (HTTP 404): not retried."""

    code = 17007
    status = 404


class CdnUnavailable(ConveyorError):
    """The CDN's tables are not reachable through this connection (a server's URL, for now)."""

    code = 17008
    status = 501


class InvalidImportTree(InvalidRequest):
    """A directory ``cdn import`` cannot take: no ``ajax/libs/{name}/{version}/`` packages, a bad
    package name, a ``package.json`` that is not JSON, or a file where a compressed copy goes."""

    code = 17009
