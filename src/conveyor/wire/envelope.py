"""Cloudflare's v4 envelope: ``{"success", "errors", "messages", "result"}``, lists with
``result_info``."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from conveyor.wire.decoding import Shape

T = TypeVar("T")


class Error(Shape):
    code: int
    message: str


class ResultInfo(Shape):
    """A page of a list; ``cursor`` (Workflows' instance lists) reaches the next page, and is
    left out after the last."""

    page: int
    per_page: int
    count: int
    total_count: int
    total_pages: int
    cursor: str | msgspec.UnsetType = msgspec.UNSET


class Envelope(Shape, Generic[T], kw_only=True):
    """A successful answer; ``result_info`` comes with a page of a list."""

    success: bool = True
    errors: list[Error] = []
    messages: list[Any] = []
    result: T
    result_info: ResultInfo | msgspec.UnsetType = msgspec.UNSET


class ErrorEnvelope(Shape, kw_only=True):
    """A refusal: Cloudflare's code and a message saying what was wrong."""

    success: bool = False
    errors: list[Error]
    messages: list[Any] = []
    result: None = None
