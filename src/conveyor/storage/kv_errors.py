"""The refusals of KV namespaces, with Cloudflare's Workers KV codes where it has them."""

from __future__ import annotations

from conveyor.errors import ConveyorError, InvalidRequest


class KVNamespaceNotFound(ConveyorError):
    """No namespace of that id or title in the account (Cloudflare's 10013)."""

    code = 10013
    status = 404


class KVNamespaceExists(ConveyorError):
    """The account already has a namespace of that title (Cloudflare's 10014)."""

    code = 10014
    status = 400


class KVKeyNotFound(ConveyorError):
    """A value or metadata read of a key that is missing or expired (Cloudflare's 10009)."""

    code = 10009
    status = 404


class InvalidKVKey(InvalidRequest):
    """An empty key, one longer than 512 bytes, or ``.``/``..`` (Cloudflare's 10020 and 414)."""

    code = 10020
    status = 414


class KVValueTooLarge(InvalidRequest):
    """A value over 25 MiB (Cloudflare's 413)."""

    code = 10011
    status = 413


class KVMetadataTooLarge(InvalidRequest):
    """Metadata whose JSON is over 1024 bytes, or that is not JSON (Cloudflare's 413)."""

    code = 10023
    status = 413


class InvalidKVExpiration(InvalidRequest):
    """An expiration not at least 60 s ahead, or an ``expiration_ttl`` under 60 (Cloudflare's 10033)."""

    code = 10033
    status = 400


class InvalidKVNamespaceTitle(InvalidRequest):
    """An empty title, or one longer than 512 bytes (Cloudflare's 10019)."""

    code = 10019
    status = 400
