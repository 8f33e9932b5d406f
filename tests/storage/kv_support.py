"""Helpers of the KV suite: refusals that must change nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import conveyor
from conveyor.storage.kv_handle import KVNamespace


def contents(kv: KVNamespace) -> list[tuple[str, Any, Any]]:
    """Every live key of ``kv`` with its value and metadata."""
    return [(k.name, *kv.get_with_metadata(k.name)) for k in kv.list()]


def refused(
    kv: KVNamespace,
    error: type[conveyor.ConveyorError],
    code: int,
    action: Callable[..., object],
    *args: Any,
    **kwargs: Any,
) -> str:
    """``action(*args, **kwargs)`` raises exactly ``error`` with ``code`` and leaves ``kv`` as it was."""
    before = contents(kv)
    with pytest.raises(error) as caught:
        action(*args, **kwargs)
    assert type(caught.value) is error
    assert caught.value.code == code
    assert contents(kv) == before
    return str(caught.value)
